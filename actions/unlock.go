package actions

import (
	"context"
	"fmt"

	"github.com/whypending/whypending/calico"
)

// unlockTarget is the Item.Target of an unlock plan.
const unlockTarget = "ClusterInformation default"

// unlockDatastore is KindUnlockDatastore: set ClusterInformation default spec.datastoreReady
// back to true, only while the lock is the one the plan saw.
type unlockDatastore struct{}

func (unlockDatastore) verb(int) string   { return "unlock the Calico datastore" }
func (unlockDatastore) destructive() bool { return false }
func (unlockDatastore) locks() bool       { return false }

// writes: ClusterInformation datastoreReady back to true.
func (unlockDatastore) writes() []Write { return []Write{lockWrite} }

func (unlockDatastore) validate(p Plan) error {
	if p.Node != "" || len(p.Blocks) > 0 || p.AllowLastBlock {
		return fmt.Errorf("plan %s: the datastore lock is cluster-wide; it takes no node or blocks", p.Kind)
	}
	return nil
}

func (unlockDatastore) read(ctx context.Context, _ *Runner, rd *reads) (view, error) {
	s, err := rd.LockStatus(ctx)
	if err != nil {
		return nil, err
	}
	return lockView{s}, nil
}

// lockView is the datastore lock as read.
type lockView struct{ s *calico.LockStatus }

func (v lockView) items(Plan) []Item {
	if v.s.Ready {
		return nil
	}
	return []Item{{Target: unlockTarget, Owner: lockHolder(v.s)}}
}

func (lockView) excluded(Plan) []Skip { return nil }
func (v lockView) basis() string      { return "ClusterInformation rv " + v.s.Revision }

func (v lockView) still(_ Plan, it Item) (bool, string) {
	switch {
	case v.s.Ready:
		return false, "already unlocked"
	case lockHolder(v.s) != it.Owner:
		return false, "the lock changed since the plan; now held by " + lockHolder(v.s)
	}
	return true, ""
}

// apply clears the lock.
func (lockView) apply(ctx context.Context, r *Runner, _ Plan, _ []Item, res *Result) error {
	if err := r.IPAM.ForceUnlock(ctx); err != nil {
		res.Remaining = 1
		return fmt.Errorf("unlock calico datastore: %w", err)
	}
	res.Done = 1
	return nil
}

// lockHolder describes who holds the lock, from its marker.
func lockHolder(s *calico.LockStatus) string {
	if s.Marker == nil {
		return "unknown (no whypending marker: calicoctl or a migration)"
	}
	return fmt.Sprintf("%s (%s, since %s)", s.Marker.Owner, s.Marker.Operation, s.Marker.Acquired.UTC().Format("2006-01-02 15:04:05Z"))
}
