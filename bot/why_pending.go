package bot

import (
	"context"
	"errors"
	"time"

	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// diagnoseTimeout bounds one diagnosis.
const diagnoseTimeout = 2 * time.Minute

// whyPending answers "/why-pending [ns/]pod | TYPE/NAME | NAME | --all [-n NS] [--cluster C]",
// visible to the channel: a pod's diagnosis, a workload's pods grouped by cause, or every
// stuck pod and failing workload of the namespace. TARGET is read as kubectl reads it
// (triage.ParseTarget); the namespace is -n, else the channel's, else the cluster's, else
// "default". Remediation buttons make plans on the cluster asked about. Under per-user
// authorization (ModeAll) the asker must be allowed to get pods in the namespace (list, for
// --all) before anything is read.
func (b *Bot) whyPending(ctx context.Context, req chat.Request) (chat.Reply, error) {
	c, t, err := b.whyPendingTarget(req)
	if err != nil {
		return chat.Reply{}, err
	}
	t, as, err := b.allowAnswer(ctx, req.Principal, c, t)
	if err != nil {
		return chat.Reply{}, err
	}
	who := ""
	if as != nil {
		who = as.String()
	}
	a, err := b.answer(ctx, c, t, who)
	var two *triage.TwoNamespacesError
	switch {
	case errors.As(err, &two): // "svc/web -n shop" where namespace svc exists
		return chat.Reply{}, userErrorf("%v", err)
	case err != nil:
		return chat.Reply{}, err
	}
	if a.Code() == triage.CodeNamespaceNotFound {
		a = b.withNamespaceNotes(ctx, req.Principal, c, req.Channel, t, a)
	}
	return chat.Reply{Message: AnswerMessage(a, c.Name), Public: true}, nil
}

// Diagnose is the answer /why-pending gives for target t on the cluster named cluster (""
// is the default cluster), for features that post unasked (the Alertmanager receiver): the
// same Answerer, the same sharing of concurrent questions, the same rendering. Nobody asked,
// so it is answered as the bot (no per-user check) and without hints about other
// namespaces; where it is posted decides who sees it (bot/alerts: channels.namespaces).
func (b *Bot) Diagnose(ctx context.Context, cluster string, t triage.Target) (chat.Message, error) {
	r, err := b.DiagnoseResult(ctx, cluster, t)
	return r.Message, err
}

// DiagnoseResult is Diagnose with the answer's primary code and whether it is uncertain, for
// the watch (bot/watch), whose post's state is the code. It is the one call the features that
// post unasked make into the Answerer.
func (b *Bot) DiagnoseResult(ctx context.Context, cluster string, t triage.Target) (watch.Result, error) {
	c, err := b.cluster(cluster)
	if err != nil {
		return watch.Result{}, err
	}
	a, err := b.answer(ctx, c, t, "")
	if err != nil {
		return watch.Result{}, err
	}
	code := a.Code()
	uncertain := code == "" || code == triage.CodeUnknown ||
		a.Pod != nil && (a.Pod.Uncertain || a.Pod.Primary().Uncertain) ||
		a.Workload != nil && (a.Workload.Uncertain || a.Workload.Primary().Uncertain)
	return watch.Result{Code: code, Uncertain: uncertain, Message: AnswerMessage(a, c.Name),
		Nodes: len(nodesOf(a).Nodes) > 0, Logs: len(previousLogsOf(a)) > 0}, nil
}

// answer is c's answer for t, shared by concurrent questions about the same target; who,
// when not empty, is the identity the answer is limited to.
func (b *Bot) answer(ctx context.Context, c *Cluster, t triage.Target, who string) (*triage.Answer, error) {
	if c.Answerer == nil {
		return nil, userErrorf("cluster %s cannot diagnose pods (not configured)", c.Name)
	}
	// Concurrent questions about the same target (an incident channel) share one answer; it
	// must not die with the first asker's context, so it gets its own deadline. An answer
	// limited to what one identity may see is shared only by askers checked as it.
	key := c.Name + "\x00" + t.String()
	if who != "" {
		key += "\x00" + who
	}
	v, err, _ := b.inflight.Do(key, func() (any, error) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout)
		defer cancel()
		return c.Answerer.Answer(dctx, t)
	})
	if err != nil {
		return nil, err
	}
	return v.(*triage.Answer), nil
}

// whyPendingTarget reads the cluster and the target of a /why-pending request.
func (b *Bot) whyPendingTarget(req chat.Request) (*Cluster, triage.Target, error) {
	f, err := parseFlagsAndSwitches(req.Args, []string{"all"}, "cluster", "namespace", "n")
	if err != nil {
		return nil, triage.Target{}, err
	}
	all := f.switches["all"]
	if (!all && len(f.positional) != 1) || (all && len(f.positional) != 0) {
		return nil, triage.Target{}, userErrorf("name one pod or workload, e.g. /why-pending shop/web-7f9c or /why-pending deploy/checkout, or use --all")
	}
	// The target is read before the cluster's health is told: a name no pod can have is
	// refused as such whether or not the cluster answers.
	c, unhealthy := b.cluster(f.values["cluster"])
	if c == nil {
		return nil, triage.Target{}, unhealthy
	}
	ns := firstNonEmpty(f.values["namespace"], f.values["n"], b.channelNS[req.Channel], c.Namespace, "default")
	arg := ""
	if !all {
		arg = f.positional[0]
	}
	t, err := triage.ParseTarget(arg, ns, all)
	if err != nil {
		return nil, triage.Target{}, userErrorf("%v", err)
	}
	if given := firstNonEmpty(f.values["namespace"], f.values["n"]); given != "" {
		if t, err = t.Given(given); err != nil {
			return nil, triage.Target{}, userErrorf("%v", err)
		}
	}
	if unhealthy != nil {
		return nil, triage.Target{}, unhealthy
	}
	return c, t, nil
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

func joinFooter(a, b string) string {
	if a == "" {
		return b
	}
	return a + " · " + b
}
