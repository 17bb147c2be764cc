package actions

import (
	"context"
	"fmt"
	"time"

	"github.com/whypending/whypending/calico"
)

// leakedHandles is KindReleaseLeakedHandles: delete the IPAMHandles no block allocation
// references, each only while its resourceVersion is the one the plan saw.
type leakedHandles struct{}

func (leakedHandles) verb(n int) string {
	return fmt.Sprintf("delete %d leaked IPAM %s", n, plural(n, "handle", "handles"))
}
func (leakedHandles) destructive() bool { return true }
func (leakedHandles) locks() bool       { return true }

// writes: each handle deleted (with UID and resourceVersion preconditions).
func (leakedHandles) writes() []Write { return []Write{{"delete", calico.ResourceHandles}} }

func (leakedHandles) validate(p Plan) error {
	switch {
	case p.Node != "":
		return fmt.Errorf("plan %s: handles belong to no node; plan it cluster-wide", p.Kind)
	case len(p.Blocks) > 0 || p.AllowLastBlock:
		return fmt.Errorf("plan %s: blocks and the last block apply to %s only", p.Kind, KindReleaseEmptyBlocks)
	}
	return nil
}

func (leakedHandles) read(ctx context.Context, r *Runner, rd *reads) (view, error) {
	v := &handlesView{grace: r.handleGrace(), now: r.now()}
	if rep := rd.report; rep != nil {
		v.leaked, v.basisOf = rep.LeakedHandles, "report of ClusterInformation rv "+rep.ClusterInfoRevision
		return v, nil
	}
	check, err := rd.Check(ctx)
	if err != nil {
		return nil, err
	}
	v.leaked, v.basisOf = check.LeakedHandles, "ClusterInformation rv "+check.Report.ClusterInfoRevision
	return v, nil
}

// handleGrace is HandleGracePeriod or its default (negative: none).
func (r *Runner) handleGrace() time.Duration {
	if r.HandleGracePeriod == 0 {
		return calico.DefaultHandleGracePeriod
	}
	return r.HandleGracePeriod
}

// handlesView is a check's leaked IPAMHandles (or a report's).
type handlesView struct {
	leaked  []calico.HandleInfo
	grace   time.Duration
	now     time.Time
	basisOf string

	byID map[string]calico.HandleInfo // old enough, by ID; built on first use
}

// young reports whether h is younger than the grace period: the CNI plugin writes a handle
// before its block, so a young unreferenced handle may be an allocation in flight. A handle
// read from a report has no creation time and is never young.
func (v *handlesView) young(h calico.HandleInfo) bool {
	c := h.Created()
	return v.grace > 0 && !c.IsZero() && v.now.Sub(c) < v.grace
}

func (v *handlesView) items(Plan) []Item {
	var out []Item
	for _, h := range v.leaked {
		if !v.young(h) {
			out = append(out, Item{Target: h.ID, Handle: h.ID, Revision: h.Revision})
		}
	}
	return out
}

func (v *handlesView) excluded(Plan) []Skip {
	var out []Skip
	for _, h := range v.leaked {
		if v.young(h) {
			out = append(out, Skip{Target: h.ID, Reason: fmt.Sprintf("younger than %s: maybe an allocation in flight", v.grace)})
		}
	}
	return out
}

func (v *handlesView) basis() string { return v.basisOf }

// current returns the leaked handle id if it is old enough.
func (v *handlesView) current(id string) (calico.HandleInfo, bool) {
	if v.byID == nil {
		v.byID = map[string]calico.HandleInfo{}
		for _, h := range v.leaked {
			if !v.young(h) {
				v.byID[h.ID] = h
			}
		}
	}
	h, ok := v.byID[id]
	return h, ok
}

func (v *handlesView) still(_ Plan, it Item) (bool, string) {
	cur, ok := v.current(it.Target)
	switch {
	case !ok:
		return false, "no longer leaked (deleted, or an allocation references it again)"
	case cur.Revision != it.Revision:
		return false, "changed since the plan (resourceVersion " + cur.Revision + ", plan saw " + it.Revision + ")"
	}
	return true, ""
}

// apply deletes the items' handles. calico.Client.ReleaseIPs re-reads every block right before
// the deletes and keeps any handle a block references; each delete carries UID and
// resourceVersion preconditions.
func (v *handlesView) apply(ctx context.Context, r *Runner, _ Plan, items []Item, res *Result) error {
	release := make([]calico.HandleInfo, 0, len(items))
	for _, it := range items {
		h, _ := v.current(it.Target)
		release = append(release, h)
	}
	rr, err := r.IPAM.ReleaseIPs(ctx, nil, calico.ReleaseOptions{Handles: release, HandleGracePeriod: v.grace})
	if rr != nil {
		res.Done = rr.HandlesDeleted
		for _, s := range rr.SkippedHandles {
			res.Skipped = append(res.Skipped, Skip{Target: s.ID, Reason: s.Reason})
		}
		for _, s := range rr.HandleErrors {
			res.Skipped = append(res.Skipped, Skip{Target: s.ID, Reason: "the delete failed; the next check reports it again"})
		}
		res.Writes.add(rr)
	}
	if err != nil {
		return fmt.Errorf("delete leaked handles: %w", err)
	}
	return nil
}
