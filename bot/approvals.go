package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/whypending/whypending/actions"
)

// Executor runs an approved plan on one cluster. actions.Runner implements it.
type Executor interface {
	Execute(ctx context.Context, approved actions.Approved) (actions.Result, error)
}

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
	Principal Principal
}

// Outcome is what a click leads to, for the adapter to show.
type Outcome struct {
	// Update, when set, replaces the message that holds the clicked button (the plan
	// message after a decision). Nil leaves it alone.
	Update *Message
	// Notice, when not empty, is shown to the clicker only (a refusal, "already approved").
	Notice string
	// Post, when set, is a new message to post in the channel (a plan made from a
	// "Release N leaked IPs" button).
	Post *Reply
}

// Approvals runs the approval workflow: it stores plans, enforces the policy, claims a plan
// for execution by compare-and-set (so it runs at most once across clicks and replicas),
// executes it and records every transition.
type Approvals struct {
	store     Store
	policy    Policy
	directory Directory
	executors map[string]Executor
	audit     *Auditor
	now       func() time.Time
	log       *slog.Logger
	lockNote  string
}

// ApprovalsOptions configures NewApprovals.
type ApprovalsOptions struct {
	// Store keeps the records (required).
	Store Store
	// Policy is who may approve and how long plans wait.
	Policy Policy
	// Directory resolves Policy.Groups; nil means group approvers never match.
	Directory Directory
	// Executors maps a cluster name to what runs plans there.
	Executors map[string]Executor
	// Audit records transitions (nil: NewAuditor(Log, nil)).
	Audit *Auditor
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log receives operational errors (nil: slog.Default()).
	Log *slog.Logger
	// LockNote is shown on plan messages to say how the datastore lock is used, e.g.
	// "The Calico datastore is locked while IPs are released (new pods wait)."
	LockNote string
}

// NewApprovals returns an Approvals.
func NewApprovals(o ApprovalsOptions) *Approvals {
	a := &Approvals{
		store: o.Store, policy: o.Policy, directory: o.Directory, executors: o.Executors,
		audit: o.Audit, now: o.Now, log: o.Log, lockNote: o.LockNote,
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
// who), records "requested" and returns the record.
func (ap *Approvals) Request(ctx context.Context, plan actions.Plan, who Principal, channel string) (*Approval, error) {
	now := ap.now().UTC()
	plan.RequestedBy = who.String()
	if plan.CreatedAt.IsZero() {
		plan.CreatedAt = now
	}
	plan.ExpiresAt = now.Add(ap.policy.expiry())
	a := &Approval{Plan: plan, State: StatePending, RequestedBy: who, Channel: channel}
	rec := AuditRecord{Time: now, Event: AuditRequested, Actor: who.String(),
		Detail: fmt.Sprintf("items=%d total=%d", len(plan.Items), plan.Total)}
	a.History = append(a.History, rec)
	if err := ap.store.Create(ctx, a); err != nil {
		return nil, fmt.Errorf("store plan %s: %w", plan.ID, err)
	}
	ap.audit.emit(ctx, a, a.History)
	return a, nil
}

// Attach records where the adapter posted the plan message (see Approval.MessageRef).
func (ap *Approvals) Attach(ctx context.Context, planID, ref string) error {
	_, err := ap.mutate(ctx, planID, func(a *Approval) error {
		a.MessageRef = ref
		return nil
	})
	return err
}

// Get returns the record for planID.
func (ap *Approvals) Get(ctx context.Context, planID string) (*Approval, error) {
	return ap.store.Get(ctx, planID)
}

// Message renders the plan message for a record in its current state.
func (ap *Approvals) Message(a *Approval) Message {
	return PlanMessage(a, ap.now(), ap.policy, ap.lockNote)
}

// errStop aborts a mutate without writing; the carried outcome is returned to the clicker.
type errStop struct{ outcome Outcome }

// Error implements error.
func (e *errStop) Error() string { return "decision stopped: " + e.outcome.Notice }

// mutate reads the record, applies change and writes it back with compare-and-set,
// re-reading and re-applying on ErrConflict (like client-go's RetryOnConflict). Audit
// records change appended are logged after the write succeeds.
func (ap *Approvals) mutate(ctx context.Context, id string, change func(*Approval) error) (*Approval, error) {
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
// rule, a plan already decided) change nothing and come back as a Notice. An approval is
// claimed with compare-and-set (Pending -> Running), so only one click on one replica runs
// the plan; progress is called with the "running" message before execution starts, and the
// returned Outcome carries the final message. Execution uses ctx: the adapter passes a
// context that outlives the platform's request.
func (ap *Approvals) Decide(ctx context.Context, d Decision, progress func(context.Context, Message)) Outcome {
	a, err := ap.store.Get(ctx, d.PlanID)
	if errors.Is(err, ErrNotFound) {
		return Outcome{Notice: "That plan no longer exists; nothing was changed."}
	}
	if err != nil {
		return ap.internalError(ctx, "read plan "+d.PlanID, err)
	}
	if a.State != StatePending {
		return Outcome{Notice: alreadyDecided(a)}
	}
	now := ap.now().UTC()
	if a.Plan.Expired(now) {
		return ap.expire(ctx, a.Plan.ID, d.Principal)
	}
	switch d.Verdict {
	case VerdictDeny:
		return ap.deny(ctx, a, d.Principal)
	case VerdictApprove:
		return ap.approve(ctx, a, d.Principal, progress)
	}
	return Outcome{Notice: fmt.Sprintf("Unknown decision %q; nothing was changed.", d.Verdict)}
}

// alreadyDecided is the notice for a click on a decided plan.
func alreadyDecided(a *Approval) string {
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
	}
	return fmt.Sprintf("This plan is %s; nothing was changed.", a.State)
}

func (ap *Approvals) expire(ctx context.Context, id string, who Principal) Outcome {
	a, err := ap.mutate(ctx, id, func(a *Approval) error {
		if a.State != StatePending {
			return &errStop{Outcome{Notice: alreadyDecided(a)}}
		}
		a.State = StateExpired
		a.History = append(a.History, AuditRecord{Time: ap.now().UTC(), Event: AuditExpired})
		return nil
	})
	if out, stopped := stopOutcome(err); stopped {
		return out
	}
	if err != nil {
		return ap.internalError(ctx, "expire plan "+id, err)
	}
	msg := ap.Message(a)
	return Outcome{Update: &msg, Notice: "This plan expired; nothing was changed. Ask for a fresh plan."}
}

func stopOutcome(err error) (Outcome, bool) {
	var stop *errStop
	if errors.As(err, &stop) {
		return stop.outcome, true
	}
	return Outcome{}, false
}

func (ap *Approvals) deny(ctx context.Context, a *Approval, who Principal) Outcome {
	if !who.Same(a.RequestedBy) {
		ok, err := ap.policy.isApprover(ctx, ap.directory, who)
		if err != nil {
			return ap.internalError(ctx, "check approver", err)
		}
		if !ok {
			return Outcome{Notice: "Only approvers (" + ap.policy.approverList() + ") or the requester can deny this plan; nothing was changed."}
		}
	}
	id := a.Plan.ID
	a, err := ap.mutate(ctx, id, func(a *Approval) error {
		if a.State != StatePending {
			return &errStop{Outcome{Notice: alreadyDecided(a)}}
		}
		now := ap.now().UTC()
		a.State, a.DecidedBy, a.DecidedAt = StateDenied, &who, now
		a.History = append(a.History, AuditRecord{Time: now, Event: AuditDenied, Actor: who.String()})
		return nil
	})
	if out, stopped := stopOutcome(err); stopped {
		return out
	}
	if err != nil {
		return ap.internalError(ctx, "deny plan "+id, err)
	}
	msg := ap.Message(a)
	return Outcome{Update: &msg}
}

func (ap *Approvals) approve(ctx context.Context, a *Approval, who Principal, progress func(context.Context, Message)) Outcome {
	ok, err := ap.policy.isApprover(ctx, ap.directory, who)
	if err != nil {
		return ap.internalError(ctx, "check approver", err)
	}
	if !ok {
		return Outcome{Notice: "Only approvers (" + ap.policy.approverList() + ") can approve this plan; nothing was changed."}
	}
	if ap.policy.TwoPersonRule && a.Plan.Kind.Destructive() && who.Same(a.RequestedBy) {
		return Outcome{Notice: "You requested this plan; another approver must approve it (two-person rule). Nothing was changed."}
	}
	exec, ok := ap.executors[a.Plan.Cluster]
	if !ok {
		return Outcome{Notice: fmt.Sprintf("Cluster %q is not configured on this bot; nothing was changed.", a.Plan.Cluster)}
	}
	var approvedAt time.Time
	id := a.Plan.ID
	a, err = ap.mutate(ctx, id, func(a *Approval) error {
		if a.State != StatePending {
			return &errStop{Outcome{Notice: alreadyDecided(a)}}
		}
		now := ap.now().UTC()
		if a.Plan.Expired(now) {
			return &errStop{Outcome{Notice: "This plan expired; nothing was changed. Ask for a fresh plan."}}
		}
		approvedAt = now
		a.State, a.DecidedBy, a.DecidedAt = StateRunning, &who, now
		a.History = append(a.History,
			AuditRecord{Time: now, Event: AuditApproved, Actor: who.String()},
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
		progress(ctx, ap.Message(a))
	}

	res, execErr := exec.Execute(ctx, actions.Approved{Plan: a.Plan, By: who.String(), At: approvedAt})
	a, err = ap.mutate(context.WithoutCancel(ctx), id, func(a *Approval) error {
		now := ap.now().UTC()
		if res.PlanID != "" {
			r := res
			a.Result = &r
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
		ref := errorRef()
		ap.log.ErrorContext(ctx, "record result of plan", slog.String("plan", id), slog.String("ref", ref),
			slog.Any("err", err), slog.Any("execErr", execErr), slog.String("counts", resultCounts(res)))
		return Outcome{Notice: fmt.Sprintf("The plan ran (%s) but its result could not be recorded; RemediationRequest %s still says Running. The bot's log has the details under ref %s.", resultCounts(res), id, ref)}
	}
	msg := ap.Message(a)
	return Outcome{Update: &msg}
}

// failureCode classifies an execution error for Approval.FailureCode.
func failureCode(err error) string {
	switch {
	case errors.Is(err, actions.ErrDatastoreLocked):
		return "datastore-locked"
	case errors.Is(err, actions.ErrApprovalExpired):
		return "approval-expired"
	}
	return "error"
}

// resultCounts is the audit detail for a finished execution.
func resultCounts(r actions.Result) string {
	return fmt.Sprintf("done=%d skipped=%d new=%d remaining=%d", r.Done, len(r.Skipped), r.NewSince, r.Remaining)
}

// ExpireDue moves every pending plan past its expiry to Expired and returns the updated
// records, so the caller can update their messages (see Approval.MessageRef).
func (ap *Approvals) ExpireDue(ctx context.Context) ([]*Approval, error) {
	pending, err := ap.store.ListPending(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pending plans: %w", err)
	}
	var out []*Approval
	for _, p := range pending {
		if !p.Plan.Expired(ap.now()) {
			continue
		}
		a, err := ap.mutate(ctx, p.Plan.ID, func(a *Approval) error {
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
// reference (users never see raw error text).
func (ap *Approvals) internalError(ctx context.Context, what string, err error) Outcome {
	ref := errorRef()
	ap.log.ErrorContext(ctx, what, slog.String("ref", ref), slog.Any("err", err))
	return Outcome{Notice: fmt.Sprintf("Something went wrong (%s); nothing was decided. The bot's log has the details under ref %s.", what, ref)}
}

// RunExpiry expires due plans every interval until ctx is done, calling notify with each
// newly expired record and its message so the adapter can update the posted plan. Several
// replicas may run it: compare-and-set makes each plan expire once.
func (ap *Approvals) RunExpiry(ctx context.Context, every time.Duration, notify func(context.Context, *Approval, Message)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		expired, err := ap.ExpireDue(ctx)
		if err != nil {
			ap.log.WarnContext(ctx, "expire plans", slog.Any("err", err))
		}
		for _, a := range expired {
			if notify != nil {
				notify(ctx, a, ap.Message(a))
			}
		}
	}
}
