package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// Answerer answers why-pending questions about a pod, a workload or a whole namespace
// (fleet.Cluster does, with collect.Answer over its collector). See AnswererFunc.
type Answerer interface {
	Answer(ctx context.Context, t triage.Target) (*triage.Answer, error)
}

// AnswererFunc adapts a function to Answerer.
type AnswererFunc func(ctx context.Context, t triage.Target) (*triage.Answer, error)

// Answer calls f.
func (f AnswererFunc) Answer(ctx context.Context, t triage.Target) (*triage.Answer, error) {
	return f(ctx, t)
}

// IPAM is the read side of Calico IPAM that /ipam check and /ipam blocks show.
// fleet.Cluster, *calico.Client and *calico.Cache implement it.
type IPAM interface {
	Check(ctx context.Context, opts calico.CheckOptions) (*calico.CheckResult, error)
	Utilization(ctx context.Context) (*calico.Utilization, error)
}

// Planner makes plans (dry runs) on one cluster. fleet.Cluster and actions.Runner implement it.
type Planner interface {
	Plan(ctx context.Context, kind actions.Kind, opts actions.PlanOptions) (actions.Plan, error)
}

// Cluster is one configured cluster as the commands see it. Nil parts disable the commands
// that need them.
type Cluster struct {
	// Name is the configured name users pass with --cluster.
	Name string
	// Namespace is the default namespace for "/why-pending pod" ("" means "default").
	Namespace string
	// Answerer answers /why-pending about pods, workloads (TYPE/NAME, a bare workload name) and
	// namespaces (--all).
	Answerer Answerer
	// IPAM answers /ipam check and /ipam blocks.
	IPAM IPAM
	// Planner makes plans for /ipam release-ips|release-blocks|release-handles|unlock and plan buttons.
	Planner Planner
	// Executor runs approved plans. An Executor that also implements Recoverer lets the bot
	// clean up after a plan whose executing process died (see approval.Workflow.RecoverInterrupted).
	Executor approval.Executor
	// Access names the permissions behind the IPAM commands, for per-user authorization
	// (Options.Authorizer); required when it checks changes.
	Access Access
	// Health, when set, returns nil while the cluster can be used, else why not: a
	// *UnavailableError naming the cluster and its API server's error (see
	// ClusterUnavailable). Commands for an unavailable cluster are answered with that one
	// line, approvals of its plans wait, and the digest skips it and says so. Nil means
	// always available.
	Health func() error
}

// health is c.Health(), or nil when c has none.
func (c *Cluster) health() error {
	if c.Health == nil {
		return nil
	}
	return c.Health()
}

// Options configures New.
type Options struct {
	// Clusters are the configured clusters; the first is the default for commands without
	// --cluster. Names must be unique.
	Clusters []*Cluster
	// Store keeps approval records (nil: a new MemoryStore).
	Store approval.Store
	// Policy is the approval policy.
	Policy approval.Policy
	// Authorizer checks each person against the Kubernetes RBAC of the cluster concerned
	// before an answer (authz.ModeAll), a plan and a decision on a plan (authz.ModeApprovals
	// and ModeAll); nil checks nothing (authz.ModeOff). Policy still applies first.
	Authorizer *authz.Authorizer
	// Directories resolve approver groups, per platform (Slack user groups); a platform
	// without one matches groups only through Principal.Groups (Discord roles).
	Directories map[string]approval.Directory
	// LockNote is shown on destructive plans to say how the datastore lock is used.
	LockNote string
	// AllowedChannels limits commands to these channel IDs, per platform (a platform without
	// an entry: every channel).
	AllowedChannels map[string][]string
	// ChannelNamespaces maps a channel ID to the namespace /why-pending asks about in that
	// channel when no -n is given (before the cluster's Namespace).
	ChannelNamespaces map[string]string
	// SilencePolicy says who may silence an alert group from chat: SilenceApprovers (the
	// default) or SilenceChannel.
	SilencePolicy string
	// Metrics may be nil.
	Metrics *Metrics
	// Log is the operational log (nil: slog.Default()).
	Log *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Bot is the platform-neutral core adapters talk to: commands in, messages out, clicks to
// decisions.
type Bot struct {
	router    *Router
	approvals *plans
	authz     *authz.Authorizer // nil: per-user authorization off
	clusters  []*Cluster
	log       *slog.Logger
	inflight  singleflight.Group // diagnoses in progress, by cluster and target
	// channelNS maps a channel ID to its default namespace (Options.ChannelNamespaces).
	channelNS map[string]string
	// watch are the watch's posts (SetWatch), for their Snooze and follow-up buttons;
	// maySnooze says who may snooze, mayFollowUp who may follow up.
	watch WatchPosts
	// silencer makes Alertmanager silences (SetSilencer); silencePolicy says who may.
	silencer        Silencer
	silencePolicy   string
	allowedChannels map[string][]string
}

// New builds a Bot with the /why-pending, /ipam and /whypending commands registered.
func New(o Options) *Bot {
	if o.Store == nil {
		o.Store = approval.NewMemoryStore()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	executors := map[string]approval.Executor{}
	byName := map[string]*Cluster{}
	for _, c := range o.Clusters {
		if c.Executor != nil {
			executors[c.Name] = c.Executor
		}
		byName[c.Name] = c
	}
	health := func(name string) error {
		if c, ok := byName[name]; ok {
			return c.health()
		}
		return nil
	}
	b := &Bot{
		router:    NewRouter(RouterOptions{AllowedChannels: o.AllowedChannels, Metrics: o.Metrics, Log: o.Log}),
		authz:     o.Authorizer,
		clusters:  o.Clusters,
		log:       o.Log,
		channelNS: o.ChannelNamespaces,

		silencePolicy: o.SilencePolicy, allowedChannels: o.AllowedChannels,
	}
	ao := approval.Options{
		Store: o.Store, Policy: o.Policy, Directories: o.Directories, Executors: executors,
		Audit: approval.NewAuditor(o.Log, o.Metrics.approvalTransitions()), Now: o.Now, Log: o.Log,
		ClusterHealth: health,
	}
	if b.authz.Mode().Checks(authz.Changes) {
		ao.Authorize = b.allowRepair
	}
	b.approvals = newPlans(ao)
	b.approvals.lockNote = o.LockNote
	b.router.Handle(Command{Name: "why-pending", Usage: "[ns/]pod | TYPE/NAME | NAME | --all [-n NS] [--cluster C]",
		Summary: "explain why a pod is stuck (Pending, ContainerCreating, CrashLoopBackOff, …), why a workload's pods are (deploy/NAME, sts/, ds/, job/, cj/, rs/; a bare name no pod has is a workload), or list everything stuck in the namespace (--all)"}, b.whyPending)
	b.router.Handle(Command{Name: "ipam", Usage: "check|blocks|release-ips|release-blocks|release-handles|unlock [--cluster C] [--node N]",
		Summary: "check Calico IPAM, or plan a repair that an approver runs"}, b.ipam)
	b.router.Handle(Command{Name: "whypending", Usage: "help",
		Summary: "show this help"}, b.help)
	return b
}

var _ chat.Core = (*Bot)(nil)

// Command answers a slash command.
func (b *Bot) Command(ctx context.Context, req chat.Request) chat.Reply {
	return b.router.Serve(ctx, req)
}

// Commands lists the registered commands.
func (b *Bot) Commands() []Command { return b.router.Commands() }

// RunSweeper keeps plan records truthful until ctx is done (approval.Workflow.RunSweeper): every
// interval it expires pending plans past their expiry and recovers Running plans whose
// executing process died, calling notify with each changed record and its plan message so the
// adapter can update the posted plan.
func (b *Bot) RunSweeper(ctx context.Context, every time.Duration, notify func(context.Context, *approval.Record, chat.Message)) {
	b.approvals.RunSweeper(ctx, every, notify)
}

// Attach records where the adapter posted a plan message.
func (b *Bot) Attach(ctx context.Context, planID, ref string) error {
	return b.approvals.Attach(ctx, planID, ref)
}

// Click handles a button click: Approve / Deny go to the approval workflow (progress gets
// the "running" message), "plan:<kind>" makes a plan and asks for its approval, Snooze and
// the follow-ups (Events, Nodes, Logs, Re-check now) act on a watch post.
func (b *Bot) Click(ctx context.Context, c chat.Click, progress func(context.Context, chat.Message)) chat.Outcome {
	switch {
	case c.ActionID == chat.ActionApprove:
		return b.approvals.Decide(ctx, approval.Decision{PlanID: c.Value, Verdict: approval.VerdictApprove, Principal: c.Principal, Refusal: c.Refusal}, progress)
	case c.ActionID == chat.ActionDeny:
		return b.approvals.Decide(ctx, approval.Decision{PlanID: c.Value, Verdict: approval.VerdictDeny, Principal: c.Principal, Refusal: c.Refusal}, progress)
	case c.Refusal != "":
		return chat.Outcome{Notice: c.Refusal + " Nothing was done."}
	case strings.HasPrefix(c.ActionID, chat.ActionSilencePrefix) || c.ActionID == chat.ActionUnsilence:
		s, ok := chat.ParseSilenceButton(c.ActionID, c.Value)
		if !ok {
			return chat.Outcome{Notice: "Malformed silence button; nothing was done."}
		}
		return b.silence(ctx, c, s)
	case strings.HasPrefix(c.ActionID, chat.ActionSnoozePrefix):
		s, ok := chat.ParseSnoozeButton(c.ActionID, c.Value)
		if !ok {
			return chat.Outcome{Notice: "Malformed snooze button; nothing was done."}
		}
		return b.snooze(ctx, c, s)
	case strings.HasPrefix(c.ActionID, chat.ActionFollowupPrefix):
		f, ok := chat.ParseFollowupButton(c.ActionID, c.Value)
		if !ok {
			return chat.Outcome{Notice: "Malformed follow-up button; nothing was done."}
		}
		return b.followup(ctx, c, f)
	case strings.HasPrefix(c.ActionID, chat.ActionPlanPrefix):
		p, _ := chat.ParsePlanButton(c.ActionID, c.Value)
		req := chat.Request{Principal: c.Principal, Channel: c.Channel, Command: "ipam"}
		reply, err := b.plan(ctx, req, actions.Kind(p.Kind), p.Cluster, actions.PlanOptions{Node: p.Node})
		if err != nil {
			return chat.Outcome{Notice: b.errorNotice(ctx, "make a plan", err)}
		}
		if reply.PlanID == "" {
			return chat.Outcome{Notice: reply.Message.Title}
		}
		return chat.Outcome{Post: &reply}
	}
	return chat.Outcome{Notice: fmt.Sprintf("Unknown button %q; nothing was done.", c.ActionID)}
}

// errorNotice turns an error into text for the clicker: a UserError or UnavailableError as
// it is, anything else as a log reference.
func (b *Bot) errorNotice(ctx context.Context, what string, err error) string {
	var ue *chat.UserError
	if errors.As(err, &ue) {
		return ue.Text
	}
	var refusal *authz.Refusal
	if errors.As(err, &refusal) {
		return refusal.Text
	}
	var unavailable *chat.UnavailableError
	if errors.As(err, &unavailable) {
		return unavailable.Text + " Nothing was changed."
	}
	ref := chat.ErrorRef()
	b.log.ErrorContext(ctx, what, slog.String("ref", ref), slog.Any("err", err))
	return "Could not " + what + "; nothing was changed. The bot's log has the details under ref " + ref + "."
}

// cluster finds a configured cluster by name; "" means the default (first) one. An
// unavailable cluster is an *UnavailableError (see Cluster.Health).
func (b *Bot) cluster(name string) (*Cluster, error) {
	if len(b.clusters) == 0 {
		return nil, userErrorf("no cluster is configured")
	}
	if name == "" {
		return b.clusters[0], b.clusters[0].health()
	}
	var names []string
	for _, c := range b.clusters {
		if c.Name == name {
			return c, c.health()
		}
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return nil, userErrorf("unknown cluster %q (configured: %s)", name, strings.Join(names, ", "))
}
