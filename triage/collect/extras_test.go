package collect

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

func TestIPAMStateFrom(t *testing.T) {
	b := func(cidr, node string, empty bool) calico.BlockUsage {
		return calico.BlockUsage{CIDR: netip.MustParsePrefix(cidr), Node: node, Empty: empty}
	}
	u := &calico.Utilization{
		MaxBlocksPerHost: 4, StrictAffinity: true,
		NodeBlocks: map[string]int{"worker-1": 2, "worker-2": 1},
		Pools: []calico.PoolUsage{
			{Name: "default", CIDR: netip.MustParsePrefix("172.24.0.0/24"), BlockSize: 26, Total: 256, InUse: 129,
				Blocks: []calico.BlockUsage{b("172.24.0.0/26", "worker-1", false), b("172.24.0.64/26", "worker-1", true), b("172.24.0.128/26", "worker-2", false)}},
			{Name: "orphaned", CIDR: netip.MustParsePrefix("0.0.0.0/0")},
		},
		EmptyBlocks: []calico.BlockUsage{b("172.24.0.64/26", "worker-1", true)},
	}
	check := &calico.CheckResult{LeakedIPs: []calico.Allocation{
		{IP: "172.24.0.5", Block: "172.24.0.0/26", Node: "gone-node"},
		{IP: "172.24.0.130", Block: "172.24.0.128/26"},
	}}
	ready := true
	got := ipamStateFrom(u, check, &ready)
	want := &triage.IPAMState{
		DatastoreReady: &ready, StrictAffinity: true, MaxBlocksPerHost: 4,
		Pools:             []triage.PoolUsage{{Name: "default", CIDR: "172.24.0.0/24", BlockSize: 26, Total: 256, InUse: 129}},
		NodeBlocks:        map[string]int{"worker-1": 2, "worker-2": 1},
		LeaksChecked:      true,
		LeakedIPs:         2,
		LeakedIPsByNode:   map[string]int{"worker-1": 1, "worker-2": 1},
		EmptyBlocks:       1,
		EmptyBlocksByNode: map[string]int{"worker-1": 1},
		EmptyBlockCIDRs:   map[string][]string{"worker-1": {"172.24.0.64/26"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ipamStateFrom() mismatch (-want +got):\n%s", diff)
	}
}

func TestSplitLogLines(t *testing.T) {
	raw := []byte(strings.Repeat("line\n", 30) + "last\n")
	got := splitLogLines(raw, 20)
	if len(got) != 20 || got[19] != "last" {
		t.Errorf("splitLogLines() = %d lines ending %q, want 20 ending \"last\"", len(got), got[len(got)-1])
	}
}

// TestCollectExtras loads scenarios into the real control plane and checks what collectExtras
// adds: IPAM state through package calico (counts from the scenario notes), calico-node pods,
// and a previous-log read that fails (no kubelet) recorded with its reason.
func TestCollectExtras(t *testing.T) {
	tests := []struct {
		scenario string
		check    func(t *testing.T, s *triage.Snapshot)
	}{
		{"seed-ipam-leaked", func(t *testing.T, s *triage.Snapshot) {
			if s.IPAM == nil {
				t.Fatalf("IPAM = nil (err %v), want state", s.IPAMErr)
			}
			if s.IPAM.LeakedIPs != 181 || s.IPAM.LeakedIPsByNode["worker-2"] != 128 {
				t.Errorf("LeakedIPs = %d (worker-2 %d), want 181 (worker-2 128)", s.IPAM.LeakedIPs, s.IPAM.LeakedIPsByNode["worker-2"])
			}
			if len(s.IPAM.Pools) != 1 || s.IPAM.Pools[0].InUse != 256 || s.IPAM.Pools[0].Total != 256 {
				t.Errorf("Pools = %+v, want one pool 256/256", s.IPAM.Pools)
			}
			if len(s.CalicoNodePods) != 1 || s.CalicoNodePods[0].Spec.NodeName != "worker-1" {
				t.Errorf("CalicoNodePods = %d pods, want worker-1's calico-node", len(s.CalicoNodePods))
			}
		}},
		{"seed-block-limit", func(t *testing.T, s *triage.Snapshot) {
			if s.IPAM == nil {
				t.Fatalf("IPAM = nil (err %v), want state", s.IPAMErr)
			}
			got := []int{s.IPAM.MaxBlocksPerHost, s.IPAM.NodeBlocks["worker-1"], s.IPAM.EmptyBlocksByNode["worker-1"], s.IPAM.LeakedIPs}
			if want := []int{4, 4, 1, 86}; !cmp.Equal(got, want) {
				t.Errorf("maxBlocksPerHost, worker-1 blocks, worker-1 empty blocks, leaked = %v, want %v", got, want)
			}
		}},
		{"case-42", func(t *testing.T, s *triage.Snapshot) {
			lt, ok := s.PreviousLogs["manager"]
			if !ok || lt.Err == nil {
				t.Errorf("PreviousLogs[manager] = %+v (present %t), want a read error (the test cluster has no kubelet)", lt, ok)
			}
			if s.IPAM != nil || s.CalicoNodePods != nil {
				t.Errorf("a crash-looping pod read IPAM (%v) or calico-node pods (%d); want neither", s.IPAM != nil, len(s.CalicoNodePods))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			t.Parallel()
			c := testcluster.Start(t, testenv.Options{})
			sc := testcluster.Load(t, c, tt.scenario)
			ns, name, _ := strings.Cut(sc.Expected.Pod, "/")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			s, err := New(c.Client).WithCalico(c.Config).Collect(ctx, ns, name)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}
