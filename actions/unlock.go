package actions

import (
	"context"
	"fmt"

	"github.com/whypending/whypending/calico"
)

// unlockTarget is the Item.Target of an unlock plan.
const unlockTarget = "ClusterInformation default"

// lockHolder describes who holds the lock, from its marker.
func lockHolder(s *calico.LockStatus) string {
	if s.Marker == nil {
		return "unknown (no whypending marker: calicoctl or a migration)"
	}
	return fmt.Sprintf("%s (%s, since %s)", s.Marker.Owner, s.Marker.Operation, s.Marker.Acquired.UTC().Format("2006-01-02 15:04:05Z"))
}

// planUnlock plans to unlock a locked datastore; an unlocked one gives an empty plan.
func (r *Runner) planUnlock(ctx context.Context, p *Plan) error {
	s, err := r.IPAM.LockStatus(ctx)
	if err != nil {
		return fmt.Errorf("read calico datastore lock: %w", err)
	}
	p.Basis = "ClusterInformation rv " + s.Revision
	if s.Ready {
		return nil
	}
	p.Items = []Item{{Target: unlockTarget, Owner: lockHolder(s)}}
	p.Total = 1
	return nil
}

// unlock clears the lock if it is still the one the plan saw.
func (r *Runner) unlock(ctx context.Context, p Plan, res *Result) error {
	s, err := r.IPAM.LockStatus(ctx)
	if err != nil {
		return fmt.Errorf("read calico datastore lock: %w", err)
	}
	res.Remaining = 0
	switch {
	case s.Ready:
		res.Skipped = append(res.Skipped, Skip{Target: unlockTarget, Reason: "already unlocked"})
		return nil
	case len(p.Items) == 0 || lockHolder(s) != p.Items[0].Owner:
		res.Skipped = append(res.Skipped, Skip{Target: unlockTarget, Reason: "the lock changed since the plan; now held by " + lockHolder(s)})
		res.Remaining = 1
		return nil
	}
	if err := r.IPAM.ForceUnlock(ctx); err != nil {
		res.Remaining = 1
		return fmt.Errorf("unlock calico datastore: %w", err)
	}
	res.Done = 1
	return nil
}
