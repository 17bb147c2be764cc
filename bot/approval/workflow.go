package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/proc"
)

// Executor runs an approved plan on one cluster. fleet.Cluster and actions.Runner implement it.
type Executor interface {
	Execute(ctx context.Context, approved actions.Approved) (actions.Result, error)
}

// Recoverer cleans up after a plan whose executing process died: it releases the datastore
// lock that execution took and counts what is left to do, and never re-runs anything.
// fleet.Cluster and actions.Runner implement it; an Executor may implement it too.
type Recoverer interface {
	Recover(ctx context.Context, p actions.Plan) (actions.Recovery, error)
}

// Heartbeat timing defaults (Options.HeartbeatInterval and StaleAfter).
const (
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultStaleAfter        = time.Minute
)

// Result is what a decision leads to, for the bot to show.
type Result struct {
	// Record, when set, is the plan's record after the decision: the bot renders the plan
	// message from it and replaces the message that holds the clicked button. Nil leaves
	// the message alone.
	Record *Record
	// Notice, when not empty, is shown to the clicker only (a refusal, "already approved").
	Notice string
}

// MaxRefusals bounds the refusal records kept in one plan's history, so that repeated
// clicks cannot grow a RemediationRequest without limit; later refusals are only logged.
const MaxRefusals = 20

// Verdict is what a click on a plan message asks for.
type Verdict string

const (
	// VerdictApprove asks to run the plan.
	VerdictApprove Verdict = "approve"
	// VerdictDeny asks to refuse (or, from the requester, withdraw) the plan.
	VerdictDeny Verdict = "deny"
)

// Decision is one click on a plan's Approve or Deny button.
type Decision struct {
	// PlanID is the button's value.
	PlanID string
	// Verdict is the button.
	Verdict Verdict
	// Principal is who clicked.
	Principal chat.Principal
	// Refusal, when set, refuses the click whatever the policy says, and is why (for the
	// clicker and the audit): the adapter knows the click cannot count as a decision (a
	// Discord click in a direct message carries no roles).
	Refusal string
}

// Workflow runs the approval workflow: it stores plans, enforces the policy, claims a plan
// for execution by compare-and-set (so it runs at most once across clicks and replicas),
// executes it and records every transition.
type Workflow struct {
	store          Store
	policy         Policy
	directories    map[string]Directory
	executors      map[string]Executor
	clusterHealth  func(cluster string) error
	authorize      func(ctx context.Context, who chat.Principal, cluster string, kind actions.Kind, what string) (*authz.Identity, error)
	audit          *Auditor
	now            func() time.Time
	log            *slog.Logger
	heartbeatEvery time.Duration
	staleAfter     time.Duration
	process        proc.Identity
}

// Options configures New.
type Options struct {
	// Store keeps the records (required).
	Store Store
	// Policy is who may approve and how long plans wait.
	Policy Policy
	// Directories resolve Policy group approvers per platform (Slack user groups); a platform
	// without one matches groups only through Principal.Groups.
	Directories map[string]Directory
	// Executors maps a cluster name to what runs plans there.
	Executors map[string]Executor
	// Audit records transitions (nil: NewAuditor(Log, nil)).
	Audit *Auditor
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log receives operational errors (nil: slog.Default()).
	Log *slog.Logger
	// ClusterHealth reports whether a cluster can be used now (see Cluster.Health); nil
	// means always. Approving a plan for an unavailable cluster claims nothing: the plan
	// stays pending.
	ClusterHealth func(cluster string) error
	// Authorize, when set, checks who against the Kubernetes RBAC of cluster for a repair of
	// kind (the permissions its execution uses) and returns the identity checked as; a refusal
	// is an *authz.Refusal, any other error means it could not be decided. what names the
	// action for the audit ("plan release-leaked-ips", "approve rr-…"). The requester is
	// checked in Request; an approver, and anyone but the requester who denies, in Decide,
	// after the approver lists and the two-person rule: RBAC only narrows them. Nil checks
	// nothing (per-user authorization off).
	Authorize func(ctx context.Context, who chat.Principal, cluster string, kind actions.Kind, what string) (*authz.Identity, error)
	// HeartbeatInterval is how often the process executing a plan renews its heartbeat
	// (default DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
	// StaleAfter is how old a Running plan's heartbeat may get before another process
	// recovers the plan as Interrupted (default DefaultStaleAfter); keep it several
	// HeartbeatIntervals.
	StaleAfter time.Duration
	// Process identifies this bot process in heartbeats (zero: proc.Self()).
	Process proc.Identity
}

// New returns a Workflow.
func New(o Options) *Workflow {
	a := &Workflow{
		store: o.Store, policy: o.Policy, directories: o.Directories, executors: o.Executors,
		clusterHealth: o.ClusterHealth, authorize: o.Authorize, audit: o.Audit, now: o.Now, log: o.Log,
		heartbeatEvery: durationOr(o.HeartbeatInterval, DefaultHeartbeatInterval),
		staleAfter:     durationOr(o.StaleAfter, DefaultStaleAfter),
		process:        o.Process,
	}
	if a.process == (proc.Identity{}) {
		a.process = proc.Self()
	}
	if a.clusterHealth == nil {
		a.clusterHealth = func(string) error { return nil }
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.audit == nil {
		a.audit = NewAuditor(a.log, nil)
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

// Request stores plan as pending (setting its expiry from the policy and RequestedBy from
// who), records "requested" and returns the record. With Options.Authorize, who must be
// allowed the repair first: a refusal is returned as the *authz.Refusal, and nothing is
// stored.
func (ap *Workflow) Request(ctx context.Context, plan actions.Plan, who chat.Principal, channel string) (*Record, error) {
	var as *authz.Identity
	if ap.authorize != nil {
		var err error
		if as, err = ap.authorize(ctx, who, plan.Cluster, plan.Kind, "plan "+string(plan.Kind)); err != nil {
			return nil, err
		}
	}
	now := ap.now().UTC()
	plan.RequestedBy = who.String()
	if plan.CreatedAt.IsZero() {
		plan.CreatedAt = now
	}
	plan.ExpiresAt = now.Add(ap.policy.expiry())
	a := &Record{Plan: plan, State: StatePending, RequestedBy: who, RequestedAs: as, Channel: channel}
	rec := AuditRecord{Time: now, Event: AuditRequested, Actor: who.String(), As: as,
		Detail: fmt.Sprintf("items=%d total=%d", len(plan.Items), plan.Total)}
	a.History = append(a.History, rec)
	if err := ap.store.Create(ctx, a); err != nil {
		return nil, fmt.Errorf("store plan %s: %w", plan.ID, err)
	}
	ap.audit.emit(ctx, a, a.History)
	return a, nil
}

// Attach records where the adapter posted the plan message (see Record.MessageRef).
func (ap *Workflow) Attach(ctx context.Context, planID, ref string) error {
	_, err := ap.mutate(ctx, planID, func(a *Record) error {
		a.MessageRef = ref
		return nil
	})
	return err
}

// Get returns the record for planID.
func (ap *Workflow) Get(ctx context.Context, planID string) (*Record, error) {
	return ap.store.Get(ctx, planID)
}

// errStop aborts a mutate without writing; the carried outcome is returned to the clicker.
type errStop struct{ outcome Result }

// Error implements error.
func (e *errStop) Error() string { return "decision stopped: " + e.outcome.Notice }

// mutate reads the record, applies change and writes it back with compare-and-set,
// re-reading and re-applying on ErrConflict (like client-go's RetryOnConflict). Audit
// records change appended are logged after the write succeeds.
func (ap *Workflow) mutate(ctx context.Context, id string, change func(*Record) error) (*Record, error) {
	const attempts = 10
	for i := 0; ; i++ {
		a, err := ap.store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		n := len(a.History)
		if err := change(a); err != nil {
			return a, err
		}
		err = ap.store.Update(ctx, a)
		if err == nil {
			ap.audit.emit(ctx, a, a.History[n:])
			return a, nil
		}
		if !errors.Is(err, ErrConflict) || i+1 >= attempts {
			return nil, err
		}
	}
}

// Decide applies one click. Refusals (not an approver, self-approval under the two-person
// rule, an expired plan, a plan already decided) change nothing and come back as a Notice;
// all but the last are recorded in the plan's history and the audit log (see refuse). An
// approval is
// claimed with compare-and-set (Pending -> Running), so only one click on one replica runs
// the plan; progress is called with the "running" message before execution starts, and the
// returned Result carries the final record. Execution uses ctx: the adapter passes a
// context that outlives the platform's request.
func (ap *Workflow) Decide(ctx context.Context, d Decision, progress func(context.Context, *Record)) Result {
	a, err := ap.store.Get(ctx, d.PlanID)
	if errors.Is(err, ErrNotFound) {
		return Result{Notice: "That plan no longer exists; nothing was changed."}
	}
	if err != nil {
		return ap.internalError(ctx, "read plan "+d.PlanID, err)
	}
	if a.State == StateExpired {
		return ap.refuse(ctx, a.Plan.ID, refusal(ap.now().UTC(), d.Principal, d.Verdict, expiredWhy(a.Plan)), alreadyDecided(a))
	}
	if a.State != StatePending {
		return Result{Notice: alreadyDecided(a)}
	}
	if d.Refusal != "" {
		return ap.refuse(ctx, a.Plan.ID, refusal(ap.now().UTC(), d.Principal, d.Verdict, d.Refusal), d.Refusal+" Nothing was changed.")
	}
	now := ap.now().UTC()
	if a.Plan.Expired(now) {
		return ap.expire(ctx, a.Plan.ID, d)
	}
	switch d.Verdict {
	case VerdictDeny:
		return ap.deny(ctx, a, d.Principal)
	case VerdictApprove:
		return ap.approve(ctx, a, d.Principal, progress)
	}
	return Result{Notice: fmt.Sprintf("Unknown decision %q; nothing was changed.", d.Verdict)}
}

// alreadyDecided is the notice for a click on a decided plan.
func alreadyDecided(a *Record) string {
	switch a.State {
	case StateRunning, StateSucceeded, StateFailed:
		by := "someone"
		if a.DecidedBy != nil {
			by = a.DecidedBy.Display()
		}
		return fmt.Sprintf("This plan was already approved by %s (%s); it runs only once.", by, a.State)
	case StateDenied:
		return "This plan was denied; nothing was changed."
	case StateExpired:
		return "This plan expired; nothing was changed. Ask for a fresh plan."
	case StateInterrupted:
		return "This plan was interrupted (the bot stopped while running it) and is never re-run; make a fresh plan to finish the job."
	}
	return fmt.Sprintf("This plan is %s; nothing was changed.", a.State)
}

// expiredWhy is the refusal reason for a click on an expired plan.
func expiredWhy(p actions.Plan) string {
	return "the plan expired at " + p.ExpiresAt.UTC().Format(time.RFC3339)
}

// expire marks a pending plan past its expiry Expired, and records the click d that found
// it so as refused.
func (ap *Workflow) expire(ctx context.Context, id string, d Decision) Result {
	a, err := ap.mutate(ctx, id, func(a *Record) error {
		if a.State != StatePending {
			return &errStop{Result{Notice: alreadyDecided(a)}}
		}
		now := ap.now().UTC()
		a.State = StateExpired
		a.History = append(a.History, AuditRecord{Time: now, Event: AuditExpired},
			refusal(now, d.Principal, d.Verdict, expiredWhy(a.Plan)))
		return nil
	})
	if out, stopped := stopOutcome(err); stopped {
		return out
	}
	if err != nil {
		return ap.internalError(ctx, "expire plan "+id, err)
	}
	return Result{Record: a, Notice: "This plan expired; nothing was changed. Ask for a fresh plan."}
}

// refusal is the audit record of a refused click.
func refusal(at time.Time, who chat.Principal, v Verdict, why string) AuditRecord {
	return AuditRecord{Time: at, Event: AuditRefused, Actor: who.String(), Detail: string(v) + " refused: " + why}
}

// refuse records the refusal rec of a click on plan id in the plan's history
// (compare-and-set, whatever the plan's state) and in the audit log, and returns notice for
// the clicker. After MaxRefusals records in one plan, refusals are only logged. A refusal
// that cannot be written is still logged, and still refused.
func (ap *Workflow) refuse(ctx context.Context, id string, rec AuditRecord, notice string) Result {
	a, err := ap.mutate(ctx, id, func(a *Record) error {
		n := 0
		for _, r := range a.History {
			if r.Event == AuditRefused {
				n++
			}
		}
		if n >= MaxRefusals {
			return &errStop{}
		}
		a.History = append(a.History, rec)
		return nil
	})
	if _, stopped := stopOutcome(err); stopped {
		ap.audit.emit(ctx, a, []AuditRecord{rec}) // over the limit: log only
	} else if err != nil {
		ap.log.WarnContext(ctx, "approval refused (not recorded in the plan's history)", slog.Bool("audit", true),
			slog.String("plan", id), slog.String("actor", rec.Actor), slog.Time("at", rec.Time),
			slog.String("detail", rec.Detail), slog.Any("err", err))
	}
	return Result{Notice: notice}
}

func stopOutcome(err error) (Result, bool) {
	var stop *errStop
	if errors.As(err, &stop) {
		return stop.outcome, true
	}
	return Result{}, false
}

func (ap *Workflow) deny(ctx context.Context, a *Record, who chat.Principal) Result {
	if !who.Same(a.RequestedBy) {
		ok, _, err := ap.policy.isApprover(ctx, ap.directories, who)
		if err != nil {
			return ap.internalError(ctx, "check approver", err)
		}
		if !ok {
			return ap.refuse(ctx, a.Plan.ID, refusal(ap.now().UTC(), who, VerdictDeny, "not an approver or the requester"),
				"Only approvers ("+ap.policy.approverList(who.Platform)+") or the requester can deny this plan; nothing was changed.")
		}
	}
	var as *authz.Identity
	if !who.Same(a.RequestedBy) {
		var out Result
		var ok bool
		if as, out, ok = ap.allowed(ctx, a, who, VerdictDeny); !ok {
			return out
		}
	}
	id := a.Plan.ID
	a, err := ap.mutate(ctx, id, func(a *Record) error {
		if a.State != StatePending {
			return &errStop{Result{Notice: alreadyDecided(a)}}
		}
		now := ap.now().UTC()
		a.State, a.DecidedBy, a.DecidedAs, a.DecidedAt = StateDenied, &who, as, now
		a.History = append(a.History, AuditRecord{Time: now, Event: AuditDenied, Actor: who.String(), As: as})
		return nil
	})
	if out, stopped := stopOutcome(err); stopped {
		return out
	}
	if err != nil {
		return ap.internalError(ctx, "deny plan "+id, err)
	}
	return Result{Record: a}
}

func (ap *Workflow) approve(ctx context.Context, a *Record, who chat.Principal, progress func(context.Context, *Record)) Result {
	ok, via, err := ap.policy.isApprover(ctx, ap.directories, who)
	if err != nil {
		return ap.internalError(ctx, "check approver", err)
	}
	if !ok {
		return ap.refuse(ctx, a.Plan.ID, refusal(ap.now().UTC(), who, VerdictApprove, "not an approver"),
			"Only approvers ("+ap.policy.approverList(who.Platform)+") can approve this plan; nothing was changed.")
	}
	if ap.policy.TwoPersonRule && a.Plan.Kind.Destructive() && who.Same(a.RequestedBy) {
		return ap.refuse(ctx, a.Plan.ID, refusal(ap.now().UTC(), who, VerdictApprove, "self-approval of a destructive plan (two-person rule)"),
			"You requested this plan; another approver must approve it (two-person rule). Nothing was changed.")
	}
	if a.Plan.SecondApprover && who.Same(a.RequestedBy) {
		return ap.refuse(ctx, a.Plan.ID, refusal(ap.now().UTC(), who, VerdictApprove, "self-approval of a plan that needs a second person"),
			"You requested this plan; another approver must approve it, whatever the two-person rule says: "+a.Plan.Warning+" Nothing was changed.")
	}
	as, out, ok := ap.allowed(ctx, a, who, VerdictApprove)
	if !ok {
		return out
	}
	exec, ok := ap.executors[a.Plan.Cluster]
	if !ok {
		return Result{Notice: fmt.Sprintf("Cluster %q is not configured on this bot; nothing was changed.", a.Plan.Cluster)}
	}
	if err := ap.clusterHealth(a.Plan.Cluster); err != nil {
		var ue *chat.UnavailableError
		text := fmt.Sprintf("Cluster %s is unavailable.", a.Plan.Cluster)
		if errors.As(err, &ue) {
			text = ue.Text
		}
		return Result{Notice: fmt.Sprintf("%s The plan stays pending until %s; approve it again once the cluster is back. Nothing was changed.",
			text, a.Plan.ExpiresAt.UTC().Format("15:04:05Z"))}
	}
	var approvedAt time.Time
	id := a.Plan.ID
	a, err = ap.mutate(ctx, id, func(a *Record) error {
		if a.State != StatePending {
			return &errStop{Result{Notice: alreadyDecided(a)}}
		}
		now := ap.now().UTC()
		if a.Plan.Expired(now) {
			return &errStop{Result{Notice: "This plan expired; nothing was changed. Ask for a fresh plan."}}
		}
		approvedAt = now
		a.State, a.DecidedBy, a.DecidedAs, a.DecidedAt = StateRunning, &who, as, now
		a.Heartbeat = &Heartbeat{Process: ap.process, Time: now}
		a.History = append(a.History,
			AuditRecord{Time: now, Event: AuditApproved, Actor: who.String(), Detail: "approver by " + via, As: as},
			AuditRecord{Time: now, Event: AuditStarted})
		return nil
	})
	if out, stopped := stopOutcome(err); stopped {
		return out
	}
	if err != nil {
		return ap.internalError(ctx, "claim plan "+id, err)
	}
	if progress != nil {
		progress(ctx, a)
	}

	ectx, cancelExec := context.WithCancel(ctx)
	stopHeartbeat := ap.heartbeat(ectx, id, cancelExec)
	res, execErr := exec.Execute(ectx, actions.Approved{Plan: a.Plan, By: who.String(), At: approvedAt})
	stopHeartbeat()
	cancelExec()
	a, err = ap.mutate(context.WithoutCancel(ctx), id, func(a *Record) error {
		now := ap.now().UTC()
		if res.PlanID != "" {
			r := res
			a.Result = &r
		}
		if a.State != StateRunning {
			// Another process recovered the plan as Interrupted while this one still ran
			// (its heartbeats did not get through); the record keeps that state and gets
			// what this run really did.
			ev, detail := AuditFinished, resultCounts(res)
			if execErr != nil {
				ev, detail = AuditFailed, execErr.Error()
			}
			a.History = append(a.History, AuditRecord{Time: now, Event: ev,
				Detail: detail + " (reported after the plan was marked " + string(a.State) + ")"})
			return nil
		}
		if execErr != nil {
			a.State, a.Error, a.FailureCode = StateFailed, execErr.Error(), failureCode(execErr)
			a.History = append(a.History, AuditRecord{Time: now, Event: AuditFailed, Detail: execErr.Error()})
			return nil
		}
		a.State = StateSucceeded
		a.History = append(a.History, AuditRecord{Time: now, Event: AuditFinished, Detail: resultCounts(res)})
		return nil
	})
	if err != nil {
		ref := chat.ErrorRef()
		ap.log.ErrorContext(ctx, "record result of plan", slog.String("plan", id), slog.String("ref", ref),
			slog.Any("err", err), slog.Any("execErr", execErr), slog.String("counts", resultCounts(res)))
		return Result{Notice: fmt.Sprintf("The plan ran (%s) but its result could not be recorded; RemediationRequest %s still says Running. The bot's log has the details under ref %s.", resultCounts(res), id, ref)}
	}
	return Result{Record: a}
}

// allowed checks who's verdict on plan a against Kubernetes RBAC (Options.Authorize): it
// returns the identity checked as, or false and the outcome for the clicker: a refusal
// recorded in the plan's history with the identity and the denied permission, or the error
// that kept it from being decided.
func (ap *Workflow) allowed(ctx context.Context, a *Record, who chat.Principal, v Verdict) (*authz.Identity, Result, bool) {
	if ap.authorize == nil {
		return nil, Result{}, true
	}
	as, err := ap.authorize(ctx, who, a.Plan.Cluster, a.Plan.Kind, string(v)+" "+a.Plan.ID)
	var ref *authz.Refusal
	switch {
	case errors.As(err, &ref):
		why := "not mapped to a Kubernetes user or group"
		if ref.Denied != nil {
			why = "Kubernetes RBAC denies " + authz.Describe(*ref.Denied) + " on cluster " + ref.Cluster
		}
		rec := refusal(ap.now().UTC(), who, v, why)
		rec.As, rec.Denied = ref.As, ref.Denied
		return nil, ap.refuse(ctx, a.Plan.ID, rec, ref.Text), false
	case err != nil:
		return nil, ap.internalError(ctx, "check "+who.String()+" against Kubernetes RBAC", err), false
	}
	return as, Result{}, true
}

// failureCode classifies an execution error for Record.FailureCode.
func failureCode(err error) string {
	switch {
	case errors.Is(err, actions.ErrDatastoreLocked):
		return "datastore-locked"
	case errors.Is(err, actions.ErrApprovalExpired):
		return "approval-expired"
	}
	var ue *chat.UnavailableError
	if errors.As(err, &ue) {
		return "cluster-unavailable"
	}
	return "error"
}

// heartbeat renews the heartbeat of the Running plan id every HeartbeatInterval until the
// returned stop is called or ctx is done. When the record is no longer this process's
// Running plan (another process recovered it as Interrupted), it calls cancel, so the
// execution stops.
func (ap *Workflow) heartbeat(ctx context.Context, id string, cancel context.CancelFunc) (stop func()) {
	hctx, hcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ap.heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			_, err := ap.mutate(hctx, id, func(a *Record) error {
				if a.State != StateRunning || a.Heartbeat == nil || !a.Heartbeat.Process.Same(ap.process) {
					return &errStop{}
				}
				a.Heartbeat.Time = ap.now().UTC()
				return nil
			})
			if _, stopped := stopOutcome(err); stopped {
				ap.log.WarnContext(ctx, "plan was taken over while running (marked Interrupted); stopping its execution", slog.String("plan", id))
				cancel()
				return
			}
			if err != nil && hctx.Err() == nil {
				ap.log.WarnContext(ctx, "renew plan heartbeat", slog.String("plan", id), slog.Any("err", err))
			}
		}
	}()
	return func() {
		hcancel()
		<-done
	}
}

// resultCounts is the audit detail for a finished execution.
func resultCounts(r actions.Result) string {
	return fmt.Sprintf("done=%d skipped=%d new=%d remaining=%d", r.Done, len(r.Skipped), r.NewSince, r.Remaining)
}

// ExpireDue moves every pending plan past its expiry to Expired and returns the updated
// records, so the caller can update their messages (see Record.MessageRef).
func (ap *Workflow) ExpireDue(ctx context.Context) ([]*Record, error) {
	pending, err := ap.store.List(ctx, StatePending)
	if err != nil {
		return nil, fmt.Errorf("list pending plans: %w", err)
	}
	var out []*Record
	for _, p := range pending {
		if !p.Plan.Expired(ap.now()) {
			continue
		}
		a, err := ap.mutate(ctx, p.Plan.ID, func(a *Record) error {
			if a.State != StatePending {
				return &errStop{}
			}
			a.State = StateExpired
			a.History = append(a.History, AuditRecord{Time: ap.now().UTC(), Event: AuditExpired})
			return nil
		})
		if _, stopped := stopOutcome(err); stopped {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("expire plan %s: %w", p.Plan.ID, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// internalError logs err with a short reference and returns a notice that shows only the
// reference (users never see raw error text); an *UnavailableError is shown as its text.
func (ap *Workflow) internalError(ctx context.Context, what string, err error) Result {
	var ue *chat.UnavailableError
	if errors.As(err, &ue) {
		return Result{Notice: ue.Text + " Nothing was decided."}
	}
	ref := chat.ErrorRef()
	ap.log.ErrorContext(ctx, what, slog.String("ref", ref), slog.Any("err", err))
	return Result{Notice: fmt.Sprintf("Something went wrong (%s); nothing was decided. The bot's log has the details under ref %s.", what, ref)}
}

// RunSweeper keeps plan records truthful until ctx is done: at once and then every interval,
// it expires pending plans past their expiry (ExpireDue) and recovers Running plans whose
// executing process died (RecoverInterrupted), calling notify with each changed record and
// so the bot can update the posted plan message. Several replicas may run it:
// compare-and-set makes each transition happen once.
func (ap *Workflow) RunSweeper(ctx context.Context, every time.Duration, notify func(context.Context, *Record)) {
	t := time.NewTicker(every)
	defer t.Stop()
	// An unavailable store cluster is logged when it goes down, not at every sweep.
	var unavailable *chat.UnavailableError
	quiet := func(err error) bool { return err == nil || ctx.Err() != nil || errors.As(err, &unavailable) }
	for {
		expired, err := ap.ExpireDue(ctx)
		if !quiet(err) {
			ap.log.WarnContext(ctx, "expire plans", slog.Any("err", err))
		}
		interrupted, err := ap.RecoverInterrupted(ctx)
		if !quiet(err) {
			ap.log.WarnContext(ctx, "recover interrupted plans", slog.Any("err", err))
		}
		for _, a := range append(expired, interrupted...) {
			if notify != nil {
				notify(ctx, a)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// IsApprover reports whether who is an approver under the policy (directly, or through a
// group; via says which), for decisions other than plans that the approval policy governs
// (a silence from chat).
func (w *Workflow) IsApprover(ctx context.Context, who chat.Principal) (ok bool, via string, err error) {
	return w.policy.isApprover(ctx, w.directories, who)
}
