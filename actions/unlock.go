package actions

import (
	"context"
	"fmt"
	"time"

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
	return []Item{{Target: unlockTarget, Owner: v.s.Holder()}}
}

// caution warns when the lock is not r's own: one without a whypending marker may be held by
// calicoctl (ipam release, datastore migrate) or a Calico upgrade at work, and one with
// another owner's marker by a repair still running. Either needs a second person.
func (v lockView) caution(r *Runner) (string, bool) {
	switch m := v.s.Marker; {
	case v.s.Ready:
		return "", false
	case m == nil:
		return "This lock carries no whypending marker (" + v.s.Holder() + "): it may belong to calicoctl " +
			"(ipam release, datastore migrate) or a Calico upgrade in progress, and lifting it under them can " +
			"corrupt IPAM. Ask who locked it first. Another approver must approve.", true
	case m.Owner != r.lockOwner():
		return fmt.Sprintf("This lock is not this bot's: %s holds it for %s since %s, until %s, and may still be at work. "+
			"Ask them first. Another approver must approve.", m.Owner, m.Operation,
			m.Acquired.UTC().Format(time.DateTime+"Z"), m.Deadline.UTC().Format(time.DateTime+"Z")), true
	}
	return "", false
}

func (lockView) excluded(Plan) []Skip { return nil }
func (v lockView) basis() string      { return "ClusterInformation rv " + v.s.Revision }

func (v lockView) still(_ Plan, it Item) (bool, string) {
	switch {
	case v.s.Ready:
		return false, "already unlocked"
	case v.s.Holder() != it.Owner:
		return false, "the lock changed since the plan; now held by " + v.s.Holder()
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
