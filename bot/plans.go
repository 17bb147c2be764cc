package bot

import (
	"context"
	"time"

	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/chat"
)

// plans is the approval workflow as the bot shows it: the workflow decides and keeps the
// records; plans renders each record it returns as the plan message (PlanMessage).
type plans struct {
	*approval.Workflow
	policy   approval.Policy
	lockNote string // how the datastore lock is used, on every plan message
	now      func() time.Time
}

// newPlans starts the workflow o configures.
func newPlans(o approval.Options) *plans {
	p := &plans{Workflow: approval.New(o), policy: o.Policy, now: o.Now}
	if p.now == nil {
		p.now = time.Now
	}
	return p
}

// Message renders the plan message for a record in its current state.
func (p *plans) Message(a *approval.Record) chat.Message {
	return PlanMessage(a, p.now(), p.policy, p.lockNote)
}

// Decide applies one click (approval.Workflow.Decide); progress gets the "running" plan message, and
// the outcome the plan message of the record the decision left, if any.
func (p *plans) Decide(ctx context.Context, d approval.Decision, progress func(context.Context, chat.Message)) chat.Outcome {
	var running func(context.Context, *approval.Record)
	if progress != nil {
		running = func(ctx context.Context, a *approval.Record) { progress(ctx, p.Message(a)) }
	}
	r := p.Workflow.Decide(ctx, d, running)
	out := chat.Outcome{Notice: r.Notice}
	if r.Record != nil {
		m := p.Message(r.Record)
		out.Update, out.UpdateRef = &m, r.Record.MessageRef
	}
	return out
}

// RunSweeper keeps plan records truthful (approval.Workflow.RunSweeper), calling notify with each
// changed record and its plan message so the adapter can update the posted plan.
func (p *plans) RunSweeper(ctx context.Context, every time.Duration, notify func(context.Context, *approval.Record, chat.Message)) {
	p.Workflow.RunSweeper(ctx, every, func(ctx context.Context, a *approval.Record) {
		if notify != nil {
			notify(ctx, a, p.Message(a))
		}
	})
}
