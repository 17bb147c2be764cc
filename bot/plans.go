package bot

import (
	"context"
	"time"

	"github.com/whypending/whypending/chat"
)

// plans is the approval workflow as the bot shows it: the workflow decides and keeps the
// records; plans renders each record it returns as the plan message (PlanMessage).
type plans struct {
	*Approvals
	policy   Policy
	lockNote string // how the datastore lock is used, on every plan message
	now      func() time.Time
}

// newPlans starts the workflow o configures.
func newPlans(o ApprovalsOptions) *plans {
	p := &plans{Approvals: NewApprovals(o), policy: o.Policy, now: o.Now}
	if p.now == nil {
		p.now = time.Now
	}
	return p
}

// Message renders the plan message for a record in its current state.
func (p *plans) Message(a *Approval) chat.Message {
	return PlanMessage(a, p.now(), p.policy, p.lockNote)
}

// Decide applies one click (Approvals.Decide); progress gets the "running" plan message, and
// the outcome the plan message of the record the decision left, if any.
func (p *plans) Decide(ctx context.Context, d Decision, progress func(context.Context, chat.Message)) chat.Outcome {
	var running func(context.Context, *Approval)
	if progress != nil {
		running = func(ctx context.Context, a *Approval) { progress(ctx, p.Message(a)) }
	}
	r := p.Approvals.Decide(ctx, d, running)
	out := chat.Outcome{Notice: r.Notice}
	if r.Record != nil {
		m := p.Message(r.Record)
		out.Update = &m
	}
	return out
}

// RunSweeper keeps plan records truthful (Approvals.RunSweeper), calling notify with each
// changed record and its plan message so the adapter can update the posted plan.
func (p *plans) RunSweeper(ctx context.Context, every time.Duration, notify func(context.Context, *Approval, chat.Message)) {
	p.Approvals.RunSweeper(ctx, every, func(ctx context.Context, a *Approval) {
		if notify != nil {
			notify(ctx, a, p.Message(a))
		}
	})
}
