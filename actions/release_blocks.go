package actions

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/whypending/whypending/calico"
)

// emptyBlocks is KindReleaseEmptyBlocks: release empty affine blocks and their affinities,
// keeping every node's last affine block (unless the plan allows it).
type emptyBlocks struct{}

func (emptyBlocks) verb(n int) string {
	return fmt.Sprintf("release %d empty IPAM %s", n, plural(n, "block", "blocks"))
}
func (emptyBlocks) destructive() bool { return true }
func (emptyBlocks) locks() bool       { return true }

// writes: the affinity to pendingDeletion, the block soft-deleted and deleted, then the
// affinity soft-deleted and deleted (calico.Client.ReleaseEmptyBlocks).
func (emptyBlocks) writes() []Write {
	return []Write{{"update", calico.ResourceAffinities}, {"delete", calico.ResourceAffinities},
		{"update", calico.ResourceBlocks}, {"delete", calico.ResourceBlocks}}
}
func (emptyBlocks) validate(Plan) error {
	return nil
}

func (emptyBlocks) read(ctx context.Context, _ *Runner, rd *reads) (view, error) {
	u, err := rd.Utilization(ctx)
	if err != nil {
		return nil, err
	}
	return &blocksView{u: u}, nil
}

// blocksView is a utilization read.
type blocksView struct {
	u     *calico.Utilization
	rules map[bool]*blockRule // by allowLast, built on first use
}

// blockRule sorts the empty blocks of a utilization into those that can go and those kept.
type blockRule struct {
	releasable []calico.BlockUsage // sorted by CIDR
	byCIDR     map[string]string   // releasable CIDR -> its node
	kept       map[string]string   // empty block CIDR -> why it stays
}

// rule applies Calico's GC rule to the empty blocks: never release a node's last affine block
// (unless allowLast); when all of a node's blocks are empty, the first by CIDR is kept.
func (v *blocksView) rule(allowLast bool) *blockRule {
	if r := v.rules[allowLast]; r != nil {
		return r
	}
	emptyByNode := map[string]int{}
	for _, b := range v.u.EmptyBlocks {
		emptyByNode[b.Node]++
	}
	r := &blockRule{byCIDR: map[string]string{}, kept: map[string]string{}}
	keptOne := map[string]bool{}
	for _, b := range v.u.EmptyBlocks { // sorted by CIDR
		switch {
		case allowLast:
		case b.LastAffineBlock:
			r.kept[b.CIDR.String()] = "the last affine block of " + b.Node
			continue
		case emptyByNode[b.Node] >= v.u.NodeBlocks[b.Node] && !keptOne[b.Node]:
			keptOne[b.Node] = true
			r.kept[b.CIDR.String()] = "every block of " + b.Node + " is empty: this one is kept"
			continue
		}
		r.releasable = append(r.releasable, b)
		r.byCIDR[b.CIDR.String()] = b.Node
	}
	if v.rules == nil {
		v.rules = map[bool]*blockRule{}
	}
	v.rules[allowLast] = r
	return r
}

func (v *blocksView) items(p Plan) []Item {
	var out []Item
	for _, b := range v.rule(p.AllowLastBlock).releasable {
		if p.blockInScope(b) {
			out = append(out, Item{Target: b.CIDR.String(), Node: b.Node})
		}
	}
	return out
}

// excluded are the empty blocks in the plan's scope that stay (a node's last), then the named
// blocks that are not empty affine blocks.
func (v *blocksView) excluded(p Plan) []Skip {
	kept := v.rule(p.AllowLastBlock).kept
	var out []Skip
	for _, b := range v.u.EmptyBlocks {
		if why, ok := kept[b.CIDR.String()]; ok && p.blockInScope(b) {
			out = append(out, Skip{Target: b.CIDR.String(), Reason: why})
		}
	}
	if len(p.Blocks) == 0 {
		return out
	}
	all := map[string]calico.BlockUsage{}
	for _, pool := range v.u.Pools {
		for _, b := range pool.Blocks {
			all[b.CIDR.String()] = b
		}
	}
	for _, c := range p.Blocks {
		b, ok := all[c]
		switch {
		case !ok:
			out = append(out, Skip{Target: c, Reason: "no such block"})
		case b.Node == "":
			out = append(out, Skip{Target: c, Reason: "not affine to a node (" + cmp.Or(b.Affinity, "no affinity") + ")"})
		case !b.Empty:
			out = append(out, Skip{Target: c, Reason: fmt.Sprintf("%d of its %d addresses are allocated", b.InUse, b.Total)})
		case !p.inScope(b.Node):
			out = append(out, Skip{Target: c, Reason: "affine to " + b.Node + ", not " + p.Node})
		}
	}
	return out
}

func (*blocksView) basis() string { return "" }

func (v *blocksView) still(p Plan, it Item) (bool, string) {
	r := v.rule(p.AllowLastBlock)
	node, ok := r.byCIDR[it.Target]
	switch {
	case ok && node == it.Node:
		return true, ""
	case ok:
		return false, "now affine to " + node
	case r.kept[it.Target] != "":
		return false, "now its node's last block (kept)"
	}
	return false, "no longer empty, or gone"
}

// apply releases the items' blocks. calico.Client.ReleaseEmptyBlocks checks each block again,
// live, right before it writes.
func (v *blocksView) apply(ctx context.Context, r *Runner, p Plan, items []Item, res *Result) error {
	cidrs := make([]netip.Prefix, 0, len(items))
	for _, it := range items {
		c, err := netip.ParsePrefix(it.Target)
		if err != nil {
			res.Skipped = append(res.Skipped, Skip{Target: it.Target, Reason: "not a block CIDR"})
			continue
		}
		cidrs = append(cidrs, c)
	}
	br, err := r.IPAM.ReleaseEmptyBlocks(ctx, cidrs, calico.BlockReleaseOptions{AllowLastBlock: p.AllowLastBlock})
	if br != nil {
		res.Done = len(br.Released)
		for _, s := range br.Skipped {
			res.Skipped = append(res.Skipped, Skip{Target: s.CIDR, Reason: s.Reason})
		}
		res.Writes.Blocks += br.Writes
	}
	if err != nil {
		return fmt.Errorf("release empty blocks: %w", err)
	}
	return nil
}

// blockInScope reports whether block b belongs to plan p (its node, its named blocks).
func (p Plan) blockInScope(b calico.BlockUsage) bool {
	return p.inScope(b.Node) && (len(p.Blocks) == 0 || slices.Contains(p.Blocks, b.CIDR.String()))
}
