package actions

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/whypending/whypending/calico"
)

// releasableBlocks are the empty affine blocks in the plan's scope that can go while every
// node keeps at least one affine block (Calico's GC rule: never release a node's last
// block). When all of a node's blocks are empty, the first by CIDR is kept.
func releasableBlocks(u *calico.Utilization, p Plan) []calico.BlockUsage {
	emptyByNode := map[string]int{}
	for _, b := range u.EmptyBlocks {
		emptyByNode[b.Node]++
	}
	kept := map[string]bool{}
	var out []calico.BlockUsage
	for _, b := range u.EmptyBlocks { // sorted by CIDR
		if b.LastAffineBlock {
			continue
		}
		if emptyByNode[b.Node] >= u.NodeBlocks[b.Node] && !kept[b.Node] {
			kept[b.Node] = true // every block of the node is empty: keep one
			continue
		}
		if p.inScope(b.Node) {
			out = append(out, b)
		}
	}
	return out
}

// planEmptyBlocks fills p with the empty blocks that can be released.
func (r *Runner) planEmptyBlocks(ctx context.Context, p *Plan) error {
	u, err := r.IPAM.Utilization(ctx)
	if err != nil {
		return fmt.Errorf("read calico ipam utilization: %w", err)
	}
	blocks := releasableBlocks(u, *p)
	for _, b := range blocks {
		p.Items = append(p.Items, Item{Target: b.CIDR.String(), Node: b.Node})
	}
	p.Total = len(blocks)
	return nil
}

// releaseEmptyBlocks re-reads utilization and releases the planned blocks that are still
// empty and not their node's last.
func (r *Runner) releaseEmptyBlocks(ctx context.Context, p Plan, res *Result) error {
	u, err := r.IPAM.Utilization(ctx)
	if err != nil {
		return fmt.Errorf("re-read calico ipam utilization: %w", err)
	}
	now := map[string]calico.BlockUsage{}
	for _, b := range releasableBlocks(u, Plan{}) {
		now[b.CIDR.String()] = b
	}
	empty := map[string]calico.BlockUsage{}
	for _, b := range u.EmptyBlocks {
		empty[b.CIDR.String()] = b
	}
	planned := map[string]bool{}
	var cidrs []netip.Prefix
	for _, it := range p.Items {
		planned[it.Target] = true
		b, ok := now[it.Target]
		switch {
		case ok && b.Node == it.Node:
			cidrs = append(cidrs, b.CIDR)
		case ok:
			res.Skipped = append(res.Skipped, Skip{Target: it.Target, Reason: "now affine to " + b.Node})
		case empty[it.Target].CIDR.IsValid():
			res.Skipped = append(res.Skipped, Skip{Target: it.Target, Reason: "now its node's last block (kept)"})
		default:
			res.Skipped = append(res.Skipped, Skip{Target: it.Target, Reason: "no longer empty, or gone"})
		}
	}
	for c, b := range now {
		if !planned[c] && p.inScope(b.Node) {
			res.NewSince++
		}
	}
	if len(cidrs) == 0 {
		return nil
	}
	br, err := r.IPAM.ReleaseEmptyBlocks(ctx, cidrs, calico.BlockReleaseOptions{})
	if br != nil {
		res.Done = len(br.Released)
		for _, s := range br.Skipped {
			res.Skipped = append(res.Skipped, Skip{Target: s.CIDR, Reason: s.Reason})
		}
	}
	if err != nil {
		return fmt.Errorf("release empty blocks: %w", err)
	}
	return nil
}

// countEmptyBlocks is the verification: how many releasable empty blocks in the plan's
// scope remain (-1 on error).
func (r *Runner) countEmptyBlocks(ctx context.Context, p Plan) int {
	u, err := r.IPAM.Utilization(ctx)
	if err != nil {
		return -1
	}
	return len(releasableBlocks(u, p))
}
