package actions

import (
	"context"
	"fmt"

	"github.com/whypending/whypending/calico"
)

// Recovery is what Recover found and did for a plan whose execution stopped without
// recording a result (the bot process executing it died).
type Recovery struct {
	// Planned is len(Plan.Items).
	Planned int `json:"planned"`
	// Remaining counts the planned items a fresh read still finds exactly as planned (same
	// address, handle and sequence number; same block, still releasable; same handle
	// resourceVersion; the same lock): the work the interrupted run had not done. The other
	// Planned-Remaining items were done by it, or changed since by someone else.
	Remaining int `json:"remaining"`
	// Unlocked reports that the datastore lock the interrupted run took (its marker names the
	// plan) was still held, and Recover released it.
	Unlocked bool `json:"unlocked,omitempty"`
	// LockedBy is not empty when the datastore is still locked after Recover, by someone
	// else (another plan, calicoctl, a migration); it says who. Recover leaves such a lock
	// alone.
	LockedBy string `json:"lockedBy,omitempty"`
}

// Done is how many planned items are no longer as planned.
func (r Recovery) Done() int { return r.Planned - r.Remaining }

// Recover cleans up after an execution of p that died part way: it releases the Calico
// datastore lock that execution took, if it is still held (matched by the lock marker's owner
// and operation, compare-and-set), and counts what is left to do. It writes nothing else and
// never runs the plan again: a fresh plan finishes the job. It is safe to call more than once.
func (r *Runner) Recover(ctx context.Context, p Plan) (Recovery, error) {
	rec := Recovery{Planned: len(p.Items)}
	if p.Cluster != r.Cluster {
		return rec, fmt.Errorf("recover %s: plan is for cluster %q, runner for %q", p.ID, p.Cluster, r.Cluster)
	}
	s, err := r.IPAM.LockStatus(ctx)
	if err != nil {
		return rec, fmt.Errorf("recover %s: read calico datastore lock: %w", p.ID, err)
	}
	if !s.Ready && s.Marker != nil && s.Marker.Owner == r.lockOwner() && s.Marker.Operation == lockOperation(p) {
		if rec.Unlocked, err = r.IPAM.UnlockMarker(ctx, *s.Marker); err != nil {
			return rec, fmt.Errorf("recover %s: %w", p.ID, err)
		}
		if s, err = r.IPAM.LockStatus(ctx); err != nil {
			return rec, fmt.Errorf("recover %s: read calico datastore lock: %w", p.ID, err)
		}
	}
	if !s.Ready {
		rec.LockedBy = lockHolder(s)
	}
	if rec.Remaining, err = r.stillPlanned(ctx, p, s); err != nil {
		return rec, fmt.Errorf("recover %s: %w", p.ID, err)
	}
	return rec, nil
}

// stillPlanned counts the items of p that a fresh read finds exactly as planned; s is the
// current lock status.
func (r *Runner) stillPlanned(ctx context.Context, p Plan, s *calico.LockStatus) (int, error) {
	n := 0
	switch p.Kind {
	case KindReleaseLeakedIPs:
		check, err := r.IPAM.Check(ctx, calico.CheckOptions{})
		if err != nil {
			return 0, fmt.Errorf("check calico ipam: %w", err)
		}
		leaked := map[string]calico.Allocation{}
		for _, a := range check.LeakedIPs {
			leaked[a.IP] = a
		}
		for _, it := range p.Items {
			if a, ok := leaked[it.Target]; ok && a.Handle == it.Handle && seq(a) == it.SequenceNumber {
				n++
			}
		}
	case KindReleaseEmptyBlocks:
		u, err := r.IPAM.Utilization(ctx)
		if err != nil {
			return 0, fmt.Errorf("read calico ipam utilization: %w", err)
		}
		releasable := map[string]string{}
		for _, b := range releasableBlocks(u, Plan{}) {
			releasable[b.CIDR.String()] = b.Node
		}
		for _, it := range p.Items {
			if node, ok := releasable[it.Target]; ok && node == it.Node {
				n++
			}
		}
	case KindReleaseLeakedHandles:
		check, err := r.IPAM.Check(ctx, calico.CheckOptions{})
		if err != nil {
			return 0, fmt.Errorf("check calico ipam: %w", err)
		}
		leaked := map[string]string{}
		for _, h := range check.LeakedHandles {
			leaked[h.ID] = h.Revision
		}
		for _, it := range p.Items {
			if rv, ok := leaked[it.Target]; ok && rv == it.Revision {
				n++
			}
		}
	case KindUnlockDatastore:
		if !s.Ready && len(p.Items) > 0 && lockHolder(s) == p.Items[0].Owner {
			n = 1
		}
	default:
		return 0, fmt.Errorf("%q: %w", p.Kind, ErrUnknownKind)
	}
	return n, nil
}
