package actions

import (
	"context"
	"fmt"
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
		rec.LockedBy = s.Holder()
	}
	rp, err := repairOf(p.Kind)
	if err != nil {
		return rec, fmt.Errorf("recover %s: %w", p.ID, err)
	}
	v, err := rp.read(ctx, r, &reads{ipam: r.IPAM, lock: s})
	if err != nil {
		return rec, fmt.Errorf("recover %s: %w", p.ID, err)
	}
	for _, it := range p.Items {
		if ok, _ := v.still(p, it); ok {
			rec.Remaining++
		}
	}
	return rec, nil
}
