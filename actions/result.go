package actions

import (
	"errors"
	"time"

	"github.com/whypending/whypending/calico"
)

// ErrApprovalExpired is returned by Execute for a plan whose ExpiresAt has passed: approve a
// fresh plan instead. Callers check it with errors.Is.
var ErrApprovalExpired = errors.New("plan approval expired")

// ErrUnknownKind is returned for a Kind outside Kinds.
var ErrUnknownKind = errors.New("unknown action kind")

// ErrDatastoreLocked is returned when the lock policy asks for the Calico datastore lock and
// someone else already holds it (ClusterInformation datastoreReady is false and the lock is
// not ours): nothing was changed.
var ErrDatastoreLocked = errors.New("calico datastore is locked by someone else")

// ErrLeftLocked is wrapped by an Execute error when the datastore lock the execution took
// could not be released by the lock's deadline (the API server did not answer): the datastore
// is still locked, and no pod of the cluster can get an address until it is unlocked.
var ErrLeftLocked = errors.New("the calico datastore is still locked")

// Result is what Execute did.
type Result struct {
	// PlanID is the executed plan's ID.
	PlanID string `json:"planID"`
	// Kind is the executed plan's kind.
	Kind Kind `json:"kind"`
	// Planned is len(Plan.Items) at approval.
	Planned int `json:"planned"`
	// Done is how many items were changed (IPs released, blocks released, lock cleared).
	Done int `json:"done"`
	// Skipped lists planned items left alone because they changed since the plan was made
	// (re-allocated, now in use, already released, no longer empty).
	Skipped []Skip `json:"skipped,omitempty"`
	// NewSince counts eligible items found at execution that were not in the plan; they are
	// left for a later plan.
	NewSince int `json:"newSince,omitempty"`
	// Remaining is, after the write, how many eligible items a fresh check still finds
	// (0 when the repair is complete); -1 when verification could not run.
	Remaining int `json:"remaining"`
	// Unconfirmed counts items whose write was sent but whose answer never came back (the
	// API server stopped): they may or may not have been changed; a check afterwards tells.
	Unconfirmed int `json:"unconfirmed,omitempty"`
	// Locked reports whether the datastore was locked during the write (lock policy).
	Locked bool `json:"locked,omitempty"`
	// Writes counts the write requests the execution sent.
	Writes Writes `json:"writes"`
	// Leftovers are objects the execution had to leave for a later repair, and why: an
	// IPAMHandle whose decrement failed after its block write (the next check reports it
	// as a leaked handle).
	Leftovers []Skip `json:"leftovers,omitempty"`
	// StartedAt and FinishedAt bound the execution.
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
}

// Skip is a planned item that Execute did not touch, and why.
type Skip struct {
	// Target is the item's Target.
	Target string `json:"target"`
	// Reason is a short phrase, e.g. "now in use by shop/web-1", "re-allocated since the plan".
	Reason string `json:"reason"`
}

// Changed reports whether anything differed between the plan and the state at execution.
func (r Result) Changed() bool { return len(r.Skipped) > 0 || r.NewSince > 0 }

// Writes are the write requests (updates and deletes, compare-and-set retries included) an
// execution sent, and what became of the IPAMHandles it touched.
type Writes struct {
	// Blocks counts writes to IPAMBlocks and BlockAffinities.
	Blocks int64 `json:"blocks,omitempty"`
	// Handles counts writes to IPAMHandles.
	Handles int64 `json:"handles,omitempty"`
	// HandlesDeleted and HandlesDecremented count the IPAMHandle objects deleted (their
	// count reached zero, or they were leaked) and decremented.
	HandlesDeleted     int `json:"handlesDeleted,omitempty"`
	HandlesDecremented int `json:"handlesDecremented,omitempty"`
}

// add counts what calico.Client.ReleaseIPs wrote.
func (w *Writes) add(rr *calico.ReleaseResult) {
	w.Blocks += rr.BlockWrites
	w.Handles += rr.HandleWrites
	w.HandlesDeleted += rr.HandlesDeleted
	w.HandlesDecremented += rr.HandlesUpdated
}
