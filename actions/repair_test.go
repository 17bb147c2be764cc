package actions

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/calico"
)

func TestRegistryCoversEveryKind(t *testing.T) {
	tests := []struct {
		kind        Kind
		verb        string
		destructive bool
	}{
		{KindReleaseLeakedIPs, "release 2 leaked IPs", true},
		{KindReleaseEmptyBlocks, "release 2 empty IPAM blocks", true},
		{KindUnlockDatastore, "unlock the Calico datastore", false},
		{KindReleaseLeakedHandles, "delete 2 leaked IPAM handles", true},
	}
	if len(Kinds) != len(tests) {
		t.Errorf("Kinds = %v, want the %d kinds below", Kinds, len(tests))
	}
	for i, tt := range tests {
		if i < len(Kinds) && Kinds[i] != tt.kind {
			t.Errorf("Kinds[%d] = %s, want %s (the order is stable)", i, Kinds[i], tt.kind)
		}
		if !tt.kind.Valid() || tt.kind.Verb(2) != tt.verb || tt.kind.Destructive() != tt.destructive {
			t.Errorf("%s: valid %v, verb %q, destructive %v; want true, %q, %v", tt.kind, tt.kind.Valid(), tt.kind.Verb(2), tt.kind.Destructive(), tt.verb, tt.destructive)
		}
	}
	if k := Kind("release-everything"); k.Valid() || k.Destructive() || k.Verb(1) != string(k) {
		t.Errorf("an unknown kind is valid %v, destructive %v, verb %q", k.Valid(), k.Destructive(), k.Verb(1))
	}
}

// block is an affine block of node; inUse addresses of its 64 are allocated.
func block(cidr, node string, inUse int) calico.BlockUsage {
	return calico.BlockUsage{CIDR: netip.MustParsePrefix(cidr), Affinity: "host:" + node, Node: node, Total: 64, InUse: inUse, Free: 64 - inUse, Empty: inUse == 0}
}

// utilization assembles blocks as calico.Client.Utilization does: node block counts, the last
// affine block, the empty blocks in CIDR order.
func utilization(blocks ...calico.BlockUsage) *calico.Utilization {
	u := &calico.Utilization{NodeBlocks: map[string]int{}}
	for _, b := range blocks {
		if b.Node != "" {
			u.NodeBlocks[b.Node]++
		}
	}
	pool := calico.PoolUsage{Name: "default", CIDR: netip.MustParsePrefix("10.0.0.0/16")}
	for _, b := range blocks {
		b.NodeBlocks = u.NodeBlocks[b.Node]
		b.LastAffineBlock = b.Node != "" && b.NodeBlocks == 1
		pool.Blocks = append(pool.Blocks, b)
		if b.Empty {
			u.EmptyBlocks = append(u.EmptyBlocks, b)
		}
	}
	u.Pools = []calico.PoolUsage{pool}
	return u
}

func TestEmptyBlocksPlan(t *testing.T) {
	u := utilization(
		block("10.0.0.0/26", "a", 3), block("10.0.0.64/26", "a", 0), // a: one busy, one empty
		block("10.0.0.128/26", "b", 0), block("10.0.0.192/26", "b", 0), // b: all empty
		block("10.0.1.0/26", "c", 0), // c: its only block, empty
		calico.BlockUsage{CIDR: netip.MustParsePrefix("10.0.1.64/26"), Affinity: "virtual:load-balancer", Total: 64, InUse: 1},
	)
	tests := []struct {
		name     string
		plan     Plan
		items    []Item
		excluded []Skip
	}{
		{
			name:  "cluster-wide, every node keeps an affine block",
			plan:  Plan{},
			items: []Item{{Target: "10.0.0.64/26", Node: "a"}, {Target: "10.0.0.192/26", Node: "b"}},
			excluded: []Skip{
				{Target: "10.0.0.128/26", Reason: "every block of b is empty: this one is kept"},
				{Target: "10.0.1.0/26", Reason: "the last affine block of c"},
			},
		},
		{
			name:  "one node",
			plan:  Plan{Node: "b"},
			items: []Item{{Target: "10.0.0.192/26", Node: "b"}},
			excluded: []Skip{
				{Target: "10.0.0.128/26", Reason: "every block of b is empty: this one is kept"},
			},
		},
		{
			name: "the last block allowed: every empty block",
			plan: Plan{AllowLastBlock: true},
			items: []Item{{Target: "10.0.0.64/26", Node: "a"}, {Target: "10.0.0.128/26", Node: "b"},
				{Target: "10.0.0.192/26", Node: "b"}, {Target: "10.0.1.0/26", Node: "c"}},
		},
		{
			name:  "named blocks: the releasable one, and why the others stay",
			plan:  Plan{Blocks: []string{"10.0.0.64/26", "10.0.0.0/26", "10.0.1.0/26", "10.0.1.64/26", "10.9.0.0/26"}},
			items: []Item{{Target: "10.0.0.64/26", Node: "a"}},
			excluded: []Skip{
				{Target: "10.0.1.0/26", Reason: "the last affine block of c"},
				{Target: "10.0.0.0/26", Reason: "3 of its 64 addresses are allocated"},
				{Target: "10.0.1.64/26", Reason: "not affine to a node (virtual:load-balancer)"},
				{Target: "10.9.0.0/26", Reason: "no such block"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &blocksView{u: u}
			if diff := cmp.Diff(tt.items, v.items(tt.plan)); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.excluded, v.excluded(tt.plan)); diff != "" {
				t.Errorf("excluded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareSkipsWhatChanged(t *testing.T) {
	// Planned on a: 10.0.0.64/26. Since then a's other block emptied too, b's first block was
	// released (so b's last one is now kept) and c got a second empty block.
	planned := Plan{Items: []Item{{Target: "10.0.0.64/26", Node: "a"}, {Target: "10.0.0.192/26", Node: "b"}, {Target: "10.0.2.0/26", Node: "d"}}}
	now := &blocksView{u: utilization(
		block("10.0.0.0/26", "a", 0), block("10.0.0.64/26", "a", 0),
		block("10.0.0.192/26", "b", 0),
		block("10.0.1.0/26", "c", 0), block("10.0.1.128/26", "c", 0),
		block("10.0.2.0/26", "d", 5),
	)}
	var res Result
	got := compare(planned, now, &res)
	if diff := cmp.Diff([]Item{{Target: "10.0.0.64/26", Node: "a"}}, got); diff != "" {
		t.Errorf("still as planned (-want +got):\n%s", diff)
	}
	want := []Skip{{Target: "10.0.0.192/26", Reason: "now its node's last block (kept)"}, {Target: "10.0.2.0/26", Reason: "no longer empty, or gone"}}
	if diff := cmp.Diff(want, res.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if res.NewSince != 1 {
		t.Errorf("new since the plan = %d, want 1 (c's second block; a's first is kept)", res.NewSince)
	}
}
