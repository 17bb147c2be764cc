package actions

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/whypending/whypending/calico"
)

// IPAM is what the actions read and write through; *calico.Client implements it.
type IPAM interface {
	Check(ctx context.Context, opts calico.CheckOptions) (*calico.CheckResult, error)
	Utilization(ctx context.Context) (*calico.Utilization, error)
	ReleaseIPs(ctx context.Context, allocs []calico.Allocation, opts calico.ReleaseOptions) (*calico.ReleaseResult, error)
	ReleaseEmptyBlocks(ctx context.Context, cidrs []netip.Prefix, opts calico.BlockReleaseOptions) (*calico.BlockReleaseResult, error)
	Lock(ctx context.Context, opts calico.LockOptions) (*calico.Lock, error)
	LockStatus(ctx context.Context) (*calico.LockStatus, error)
	ForceUnlock(ctx context.Context) error
	UnlockMarker(ctx context.Context, m calico.LockMarker) (bool, error)
}

var _ IPAM = (*calico.Client)(nil)

// LockPolicy says whether Execute takes the Calico datastore lock around its writes.
type LockPolicy string

const (
	// LockAlways locks ClusterInformation (datastoreReady=false) for the re-check and the
	// writes, like calicoctl's lock / check / release / unlock workflow. New pods wait while
	// it is held; Execute always unlocks.
	LockAlways LockPolicy = "always"
	// LockNever relies on the per-allocation checks alone (handle, sequence number, fresh
	// pod reads right before each block write) and never blocks pod starts.
	LockNever LockPolicy = "never"
)

// Runner plans and executes actions on one cluster. Executions on one Runner are serialised
// (one datastore lock at a time).
type Runner struct {
	// Cluster is the configured cluster name written into plans.
	Cluster string
	// IPAM is the cluster's Calico client.
	IPAM IPAM
	// LockPolicy defaults to LockAlways.
	LockPolicy LockPolicy
	// LockTTL bounds the lock and the locked part of an execution (default 2 minutes).
	LockTTL time.Duration
	// LockOwner names the lock holder in the ClusterInformation marker, stable across
	// restarts so calico.Client.RecoverLocks can undo a lock a crash left behind (default
	// "whypending-bot").
	LockOwner string
	// HandleGracePeriod keeps leaked IPAMHandles younger than this out of plans and
	// executions (zero: calico.DefaultHandleGracePeriod; negative: none): the CNI plugin
	// writes a handle before its block, so a young unreferenced handle may be an allocation in
	// flight.
	HandleGracePeriod time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu sync.Mutex
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Plan makes a dry-run plan of kind from a fresh read of the cluster. The plan's ID is new;
// RequestedBy and ExpiresAt are left for the approval workflow.
func (r *Runner) Plan(ctx context.Context, kind Kind, opts PlanOptions) (Plan, error) {
	p := Plan{ID: NewID(), Kind: kind, Cluster: r.Cluster, Node: opts.Node, CreatedAt: r.now().UTC()}
	var err error
	switch kind {
	case KindReleaseLeakedIPs:
		err = r.planLeakedIPs(ctx, &p)
	case KindReleaseEmptyBlocks:
		err = r.planEmptyBlocks(ctx, &p)
	case KindUnlockDatastore:
		err = r.planUnlock(ctx, &p)
	case KindReleaseLeakedHandles:
		err = r.planLeakedHandles(ctx, &p)
	default:
		return Plan{}, fmt.Errorf("plan %q: %w", kind, ErrUnknownKind)
	}
	if err != nil {
		return Plan{}, err
	}
	if len(p.Items) > MaxItems {
		p.Items = p.Items[:MaxItems]
	}
	p.Fingerprint = Fingerprint(p.Kind, p.Cluster, p.Items)
	return p, nil
}

// inScope reports whether an item on node belongs to plan p.
func (p Plan) inScope(node string) bool {
	return p.Node == "" || p.Node == node
}

// Execute runs an approved plan: it refuses an approval given after the plan expired, takes
// the datastore lock (LockAlways), re-reads the cluster, changes only the planned items that
// are still eligible, unlocks, and checks again. Result.Skipped says which items changed
// since the plan; Result.Remaining what the check afterwards still finds. A Result is
// returned with the error when some work was done.
func (r *Runner) Execute(ctx context.Context, ap Approved) (Result, error) {
	p := ap.Plan
	res := Result{PlanID: p.ID, Kind: p.Kind, Planned: len(p.Items), Remaining: -1, StartedAt: r.now().UTC()}
	if !p.ExpiresAt.IsZero() && !ap.At.Before(p.ExpiresAt) {
		return res, fmt.Errorf("execute %s: approved at %s, expired at %s: %w", p.ID,
			ap.At.UTC().Format(time.RFC3339), p.ExpiresAt.UTC().Format(time.RFC3339), ErrApprovalExpired)
	}
	if p.Cluster != r.Cluster {
		return res, fmt.Errorf("execute %s: plan is for cluster %q, runner for %q", p.ID, p.Cluster, r.Cluster)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	switch p.Kind {
	case KindReleaseLeakedIPs:
		err = r.withLock(ctx, p, &res, func(ctx context.Context) error { return r.releaseLeakedIPs(ctx, p, &res) })
		if err == nil {
			res.Remaining = r.countLeaked(ctx, p)
		}
	case KindReleaseEmptyBlocks:
		err = r.withLock(ctx, p, &res, func(ctx context.Context) error { return r.releaseEmptyBlocks(ctx, p, &res) })
		if err == nil {
			res.Remaining = r.countEmptyBlocks(ctx, p)
		}
	case KindReleaseLeakedHandles:
		err = r.withLock(ctx, p, &res, func(ctx context.Context) error { return r.releaseLeakedHandles(ctx, p, &res) })
		if err == nil {
			res.Remaining = r.countLeakedHandles(ctx)
		}
	case KindUnlockDatastore:
		err = r.unlock(ctx, p, &res)
	default:
		err = fmt.Errorf("execute %s: %q: %w", p.ID, p.Kind, ErrUnknownKind)
	}
	res.FinishedAt = r.now().UTC()
	return res, err
}

// withLock runs f under the datastore lock when the policy asks for it, bounded by LockTTL,
// and always unlocks.
func (r *Runner) withLock(ctx context.Context, p Plan, res *Result, f func(context.Context) error) (err error) {
	if r.LockPolicy == LockNever {
		return f(ctx)
	}
	ttl := r.LockTTL
	if ttl <= 0 {
		ttl = 2 * time.Minute
	}
	lock, err := r.IPAM.Lock(ctx, calico.LockOptions{Owner: r.lockOwner(), Operation: lockOperation(p), TTL: ttl})
	if errors.Is(err, calico.ErrDatastoreLocked) {
		return fmt.Errorf("%w: %w", ErrDatastoreLocked, err)
	}
	if err != nil {
		return fmt.Errorf("lock calico datastore: %w", err)
	}
	res.Locked = true
	defer func() {
		if uerr := lock.Unlock(ctx); uerr != nil && err == nil {
			err = fmt.Errorf("unlock calico datastore: %w", uerr)
		}
	}()
	lctx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	return f(lctx)
}

// lockOwner is LockOwner or its default.
func (r *Runner) lockOwner() string {
	if r.LockOwner == "" {
		return "whypending-bot"
	}
	return r.LockOwner
}

// lockOperation is the Operation of the lock marker an execution of p writes: how Recover
// finds the lock of a plan whose execution died.
func lockOperation(p Plan) string { return string(p.Kind) + " " + p.ID }
