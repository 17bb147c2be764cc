package actions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/internal/clock"
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
	// APIGroup is the group/version Calico objects are read and written in
	// ("crd.projectcalico.org/v1"), for Runner.Access.
	APIGroup() string
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
	// LockTTL bounds the lock and the locked part of an execution (default 2 minutes): the
	// writes stop a little before the lock's deadline (5 s, or a tenth of a shorter TTL).
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
	// OnLock and OnUnlock, when set, are called as soon as an execution has taken the
	// datastore lock (with its marker) and has released it; OnUnlockRetry when an unlock
	// failed and is tried again after wait. The CLI prints them as they happen. They must not
	// block.
	OnLock        func(calico.LockMarker)
	OnUnlock      func()
	OnUnlockRetry func(err error, wait time.Duration)
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

// Plan makes a dry-run plan of kind from a fresh read of the cluster (or opts.Check or
// opts.Report). The plan's ID is new; RequestedBy and ExpiresAt are left for the approval
// workflow.
func (r *Runner) Plan(ctx context.Context, kind Kind, opts PlanOptions) (Plan, error) {
	rp, err := repairOf(kind)
	if err != nil {
		return Plan{}, fmt.Errorf("plan %w", err)
	}
	p := Plan{ID: NewID(), Kind: kind, Cluster: r.Cluster, Node: opts.Node, AllowLastBlock: opts.AllowLastBlock, CreatedAt: r.now().UTC()}
	for _, b := range opts.Blocks {
		if c := b.String(); !slices.Contains(p.Blocks, c) {
			p.Blocks = append(p.Blocks, c)
		}
	}
	if err := rp.validate(p); err != nil {
		return Plan{}, err
	}
	v, err := rp.read(ctx, r, &reads{ipam: r.IPAM, check: opts.Check, report: opts.Report})
	if err != nil {
		return Plan{}, err
	}
	p.Items, p.Excluded, p.Basis = v.items(p), v.excluded(p), v.basis()
	if c, ok := v.(cautioned); ok {
		p.Warning, p.SecondApprover = c.caution(r)
	}
	if rp.locks() {
		s, err := r.IPAM.LockStatus(ctx)
		if err != nil {
			return Plan{}, fmt.Errorf("read the datastore lock: %w", err)
		}
		if !s.Ready {
			p.Warning = "The Calico datastore is locked by " + lockHolder(s) + ": this repair cannot run until it is unlocked. " + inspectLock
		}
	}
	p.Total = len(p.Items)
	limit := cmp.Or(opts.Limit, MaxItems)
	if limit > 0 && len(p.Items) > limit {
		p.Items = p.Items[:limit]
	}
	if limit > 0 && len(p.Excluded) > limit {
		p.Excluded = p.Excluded[:limit]
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
	res, err := r.ExecuteAll(ctx, ap)
	return res[0], err
}

// ExecuteAll runs approved plans one after the other as one execution, as Execute runs one:
// one datastore lock around all of them, one fresh read shared by the plans that read the
// same thing (an IPAM check, the utilization), and one check afterwards. The CLI's
// `ipam release-ips` runs its leaked-IPs and leaked-handles plans so. The plans must agree on
// the lock (unlock-datastore runs alone). It returns one Result per plan, in order; the
// error is the first failure, after which the later plans are not run.
func (r *Runner) ExecuteAll(ctx context.Context, aps ...Approved) ([]Result, error) {
	start := r.now().UTC()
	results := make([]Result, len(aps))
	repairs := make([]repair, len(aps))
	for i, ap := range aps {
		p := ap.Plan
		results[i] = Result{PlanID: p.ID, Kind: p.Kind, Planned: len(p.Items), Remaining: -1, StartedAt: start}
	}
	finish := func(err error) ([]Result, error) {
		for i := range results {
			results[i].FinishedAt = r.now().UTC()
		}
		return results, err
	}
	if len(aps) == 0 {
		return results, nil
	}
	for i, ap := range aps {
		p := ap.Plan
		if !p.ExpiresAt.IsZero() && !ap.At.Before(p.ExpiresAt) {
			return finish(fmt.Errorf("execute %s: approved at %s, expired at %s: %w", p.ID,
				ap.At.UTC().Format(time.RFC3339), p.ExpiresAt.UTC().Format(time.RFC3339), ErrApprovalExpired))
		}
		if p.Cluster != r.Cluster {
			return finish(fmt.Errorf("execute %s: plan is for cluster %q, runner for %q", p.ID, p.Cluster, r.Cluster))
		}
		rp, err := repairOf(p.Kind)
		if err != nil {
			return finish(fmt.Errorf("execute %s: %w", p.ID, err))
		}
		if i > 0 && rp.locks() != repairs[0].locks() {
			return finish(fmt.Errorf("execute %s: %s and %s cannot run as one execution (one takes the datastore lock, the other does not)", p.ID, aps[0].Plan.Kind, p.Kind))
		}
		repairs[i] = rp
	}
	plans := make([]Plan, len(aps))
	for i, ap := range aps {
		plans[i] = ap.Plan
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	locked, err := r.withLock(ctx, plans, repairs[0].locks(), func(ctx context.Context) error {
		rd := &reads{ipam: r.IPAM, again: true}
		checked := !repairs[0].locks() || r.LockPolicy != LockNever // holding this run's lock, or an unlock
		for i, p := range plans {
			v, err := repairs[i].read(ctx, r, rd)
			if err != nil {
				return err
			}
			if items := compare(p, v, &results[i]); len(items) > 0 {
				// Without this run's own lock, anyone else's lock forbids the writes: checked
				// right before the first one.
				if !checked {
					if err := r.refuseLocked(ctx); err != nil {
						return err
					}
					checked = true
				}
				if err := v.apply(ctx, r, p, items, &results[i]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	for i := range results {
		results[i].Locked = locked
	}
	if err != nil {
		return finish(err)
	}
	// The check afterwards: what a plan made now would still find.
	rd := &reads{ipam: r.IPAM}
	for i, p := range plans {
		if v, err := repairs[i].read(ctx, r, rd); err == nil {
			results[i].Remaining = len(v.items(p))
		}
	}
	return finish(nil)
}

// withLock runs f under the datastore lock when lock is set and the policy asks for it, and
// always unlocks; f's context ends a little before the lock's deadline. locked reports whether
// the lock was taken. An unlock that fails is part of the error, whatever f returned.
func (r *Runner) withLock(ctx context.Context, plans []Plan, lock bool, f func(context.Context) error) (locked bool, err error) {
	if !lock || r.LockPolicy == LockNever {
		return false, f(ctx)
	}
	ttl := r.LockTTL
	if ttl <= 0 {
		ttl = 2 * time.Minute
	}
	l, err := r.IPAM.Lock(ctx, calico.LockOptions{Owner: r.lockOwner(), Operation: lockOperation(plans...), TTL: ttl})
	if errors.Is(err, calico.ErrDatastoreLocked) {
		return false, fmt.Errorf("%w: %w", ErrDatastoreLocked, err)
	}
	if err != nil {
		return false, fmt.Errorf("lock calico datastore: %w", err)
	}
	if r.OnLock != nil {
		r.OnLock(l.Marker())
	}
	defer func() {
		if uerr := r.unlock(ctx, l); uerr != nil {
			err = errors.Join(err, fmt.Errorf("unlock calico datastore: %w", uerr))
			return
		}
		if r.OnUnlock != nil {
			r.OnUnlock()
		}
	}()
	lctx, cancel := context.WithDeadline(ctx, l.Marker().Deadline.Add(-min(5*time.Second, ttl/10)))
	defer cancel()
	return true, f(lctx)
}

// Back-off between attempts to release a datastore lock whose unlock failed.
const (
	unlockRetryMin = time.Second
	unlockRetryMax = 10 * time.Second
)

// unlock releases l. An unlock that fails (the API server or etcd stopped answering in the
// middle of a repair) is tried again with back-off until the lock's deadline, whatever ctx
// says: a lock left behind makes every new pod of the cluster fail. A lock that another owner
// replaced meanwhile (calico.ErrLockLost) is left alone. When the deadline passes first, the
// error wraps ErrLeftLocked.
func (r *Runner) unlock(ctx context.Context, l *calico.Lock) error {
	ctx = context.WithoutCancel(ctx)
	deadline := l.Marker().Deadline
	wait := unlockRetryMin
	for {
		err := l.Unlock(ctx)
		if err == nil || errors.Is(err, calico.ErrLockLost) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w until its deadline %s passed: %w", ErrLeftLocked, deadline.UTC().Format(time.RFC3339), err)
		}
		wait = min(wait, left)
		if r.OnUnlockRetry != nil {
			r.OnUnlockRetry(err, wait)
		}
		_ = clock.Sleep(ctx, wait)
		wait = min(2*wait, unlockRetryMax)
	}
}

// lockOwner is LockOwner or its default.
func (r *Runner) lockOwner() string {
	if r.LockOwner == "" {
		return "whypending-bot"
	}
	return r.LockOwner
}

// lockOperation is the Operation of the lock marker an execution of plans writes: how Recover
// finds the lock of a plan whose execution died.
func lockOperation(plans ...Plan) string {
	ops := make([]string, len(plans))
	for i, p := range plans {
		ops[i] = string(p.Kind) + " " + p.ID
	}
	return strings.Join(ops, ", ")
}

// inspectLock says how to look at a datastore lock.
const inspectLock = "Inspect it with: whypending ipam check (or kubectl get clusterinformations.crd.projectcalico.org default -o yaml)."

// refuseLocked returns an error wrapping ErrDatastoreLocked, naming the holder, when the
// datastore is locked: a repair that runs without taking the lock itself (LockNever) must not
// write while anyone else holds it.
func (r *Runner) refuseLocked(ctx context.Context) error {
	s, err := r.IPAM.LockStatus(ctx)
	if err != nil {
		return fmt.Errorf("read the datastore lock before the writes: %w", err)
	}
	if s.Ready {
		return nil
	}
	return fmt.Errorf("%w: the Calico datastore is locked by %s, so nothing was changed; the repair cannot run until it is unlocked. %s",
		ErrDatastoreLocked, lockHolder(s), inspectLock)
}

// lockHolder names who holds a lock: the marker's owner and since when, or that it carries no
// whypending marker, with the field manager that set datastoreReady and when.
func lockHolder(s *calico.LockStatus) string {
	if m := s.Marker; m != nil {
		return fmt.Sprintf("%s (%s, since %s, until %s)", m.Owner, m.Operation,
			m.Acquired.UTC().Format(time.DateTime+"Z"), m.Deadline.UTC().Format(time.DateTime+"Z"))
	}
	h := "a lock with no whypending marker"
	if s.SetBy != "" {
		h += fmt.Sprintf(" (set by %q", s.SetBy)
		if !s.SetAt.IsZero() {
			h += " at " + s.SetAt.UTC().Format(time.DateTime+"Z")
		}
		h += ")"
	}
	return h + ", which may be calicoctl or a Calico upgrade"
}
