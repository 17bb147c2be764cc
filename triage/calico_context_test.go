package triage

import "testing"

func TestCalicoContextRules(t *testing.T) {
	tests := []struct {
		name    string
		ipam    *IPAMState
		want    []Code
		actions []string
	}{
		{"no IPAM state read", nil, nil, nil},
		{"clean IPAM", &IPAMState{MaxBlocksPerHost: 20, LeaksChecked: true}, nil, nil},
		{"leaks and empty blocks", &IPAMState{
			MaxBlocksPerHost: 4, LeaksChecked: true, LeakedIPs: 86, LeakedIPsByNode: map[string]int{"worker-1": 86},
			EmptyBlocks: 1, EmptyBlocksByNode: map[string]int{"worker-1": 1}, NodeBlocks: map[string]int{"worker-1": 4},
		}, []Code{CodeCalicoIPAMLeaks, CodeCalicoIPAMEmptyBlocks}, []string{actionReleaseLeakedIPs, actionReleaseEmptyBlocks}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(testPod())
			s.IPAM = tt.ipam
			got := checkCodes(t, calicoContextRules, s, tt.want...)
			for i, f := range got {
				if f.Severity == SeverityBlocker || len(f.Actions) != 1 || f.Actions[0].Kind != tt.actions[i] {
					t.Errorf("%s: severity %s, actions %v; want context with action %s", f.Code, f.Severity, f.Actions, tt.actions[i])
				}
				if !looksFirst(f.Fix) {
					t.Errorf("%s fix acts before it looks: %q", f.Code, f.Fix)
				}
				if f.Code == CodeCalicoIPAMLeaks {
					// whypending's release and calicoctl's do the same: one choice, said first.
					checkBefore(t, f.Fix, "one of the two, not both", "whypending ipam release-ips")
					checkBefore(t, f.Fix, "whypending ipam release-ips", "calicoctl datastore migrate lock")
				}
			}
		})
	}
}
