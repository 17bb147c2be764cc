package actions

import (
	"context"
	"fmt"
	"time"

	"github.com/whypending/whypending/calico"
)

// handleGrace is HandleGracePeriod or its default (negative: none).
func (r *Runner) handleGrace() time.Duration {
	if r.HandleGracePeriod == 0 {
		return calico.DefaultHandleGracePeriod
	}
	return r.HandleGracePeriod
}

// leakedHandles are the leaked IPAMHandles of a fresh check that are older than the grace
// period: a younger unreferenced handle may be an allocation in flight (the CNI plugin writes
// the handle before the block).
func (r *Runner) leakedHandles(res *calico.CheckResult) []calico.HandleInfo {
	grace, now := r.handleGrace(), r.now()
	var out []calico.HandleInfo
	for _, h := range res.LeakedHandles {
		if c := h.Created(); grace > 0 && !c.IsZero() && now.Sub(c) < grace {
			continue
		}
		out = append(out, h)
	}
	return out
}

// planLeakedHandles fills p with the leaked handles a fresh check finds.
func (r *Runner) planLeakedHandles(ctx context.Context, p *Plan) error {
	if p.Node != "" {
		return fmt.Errorf("plan %s: handles belong to no node; plan it cluster-wide", p.Kind)
	}
	res, err := r.IPAM.Check(ctx, calico.CheckOptions{})
	if err != nil {
		return fmt.Errorf("check calico ipam: %w", err)
	}
	for _, h := range r.leakedHandles(res) {
		p.Items = append(p.Items, Item{Target: h.ID, Handle: h.ID, Revision: h.Revision})
	}
	p.Total = len(p.Items)
	p.Basis = "ClusterInformation rv " + res.Report.ClusterInfoRevision
	return nil
}

// releaseLeakedHandles re-checks and deletes the planned handles that are still leaked with
// the resourceVersion the plan saw. calico.Client.ReleaseIPs re-reads every block right before
// the deletes and keeps any handle a block references; each delete carries UID and
// resourceVersion preconditions.
func (r *Runner) releaseLeakedHandles(ctx context.Context, p Plan, res *Result) error {
	check, err := r.IPAM.Check(ctx, calico.CheckOptions{})
	if err != nil {
		return fmt.Errorf("re-check calico ipam: %w", err)
	}
	leaked := map[string]calico.HandleInfo{}
	for _, h := range r.leakedHandles(check) {
		leaked[h.ID] = h
	}
	planned := map[string]bool{}
	var release []calico.HandleInfo
	for _, it := range p.Items {
		planned[it.Target] = true
		cur, ok := leaked[it.Target]
		switch {
		case !ok:
			res.Skipped = append(res.Skipped, Skip{Target: it.Target, Reason: "no longer leaked (deleted, or an allocation references it again)"})
		case cur.Revision != it.Revision:
			res.Skipped = append(res.Skipped, Skip{Target: it.Target, Reason: "changed since the plan (resourceVersion " + cur.Revision + ", plan saw " + it.Revision + ")"})
		default:
			release = append(release, cur)
		}
	}
	for id := range leaked {
		if !planned[id] {
			res.NewSince++
		}
	}
	if len(release) == 0 {
		return nil
	}
	rr, err := r.IPAM.ReleaseIPs(ctx, nil, calico.ReleaseOptions{Handles: release, HandleGracePeriod: r.handleGrace()})
	if rr != nil {
		res.Done = rr.HandlesDeleted
		for _, s := range rr.SkippedHandles {
			res.Skipped = append(res.Skipped, Skip{Target: s.ID, Reason: s.Reason})
		}
		for _, s := range rr.HandleErrors {
			res.Skipped = append(res.Skipped, Skip{Target: s.ID, Reason: "the delete failed; the next check reports it again"})
		}
	}
	if err != nil {
		return fmt.Errorf("delete leaked handles: %w", err)
	}
	return nil
}

// countLeakedHandles is the verification: how many leaked handles past the grace period a
// fresh check finds (-1 on error).
func (r *Runner) countLeakedHandles(ctx context.Context) int {
	res, err := r.IPAM.Check(ctx, calico.CheckOptions{})
	if err != nil {
		return -1
	}
	return len(r.leakedHandles(res))
}
