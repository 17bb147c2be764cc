package collect

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/calico"
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
