package bot

import (
	"context"
	"errors"
	"log/slog"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// Access names the permissions behind a cluster's IPAM commands, for per-user authorization
// (Options.Authorizer): the bot asks the cluster's API server whether the person may do them.
// fleet.Cluster implements it.
type Access interface {
	// RepairAccess lists the permissions an execution of kind uses (actions.Runner.Access).
	RepairAccess(kind actions.Kind) ([]authorizationv1.ResourceAttributes, error)
	// CheckAccess is the permission behind /ipam check and /ipam blocks
	// (calico.Client.CheckAccess).
	CheckAccess() (authorizationv1.ResourceAttributes, error)
}

// The checks below are the bot's only calls into per-user authorization: the commands and
// the plan buttons call allowAnswer, allowIPAMRead and allowRepair before they read or plan
// anything; the approval workflow calls allowRepair for every decision (approval.Options
// .Authorize); a refusal is an *authz.Refusal, which the Router and the click handler show
// to the person only.

// allowAnswer checks that who may see an answer about t on c (authz.Reads): get pods in the
// namespace, list pods for --all. It returns t as the answer may use it, and the identity
// checked as (nil when the mode does not check reads): what the answer says of other
// namespaces (close pod and workload names, another reading of the argument) is then limited
// to namespaces that identity may get pods in.
func (b *Bot) allowAnswer(ctx context.Context, who chat.Principal, c *Cluster, t triage.Target) (triage.Target, *authz.Identity, error) {
	verb := "get"
	if t.All {
		verb = "list"
	}
	as, err := b.authz.Allow(ctx, authz.Request{Who: who, Scope: authz.Reads, Cluster: c.Name, What: "/why-pending " + t.String(),
		Permissions: []authorizationv1.ResourceAttributes{authz.InNamespace(verb, "", "pods", t.Namespace)}})
	if err != nil || as == nil {
		return t, nil, err
	}
	visible := func(ctx context.Context, namespace string) bool {
		return namespace == t.Namespace || b.authz.Visible(ctx, who, c.Name, namespace)
	}
	if o := t.OtherReading; o != nil && !visible(ctx, o.Namespace) {
		t.OtherReading = nil
	}
	t.Visible = visible
	return t, as, nil
}

// allowIPAMRead checks that who may see /ipam check or /ipam blocks of c (authz.Reads).
func (b *Bot) allowIPAMRead(ctx context.Context, who chat.Principal, c *Cluster, sub string) error {
	if !b.authz.Mode().Checks(authz.Reads) {
		return nil
	}
	if c.Access == nil {
		return userErrorf("cluster %s cannot check permissions (not configured)", c.Name)
	}
	p, err := c.Access.CheckAccess()
	if err != nil {
		return ipamError(c, "check "+sub+" permissions", err)
	}
	_, err = b.authz.Allow(ctx, authz.Request{Who: who, Scope: authz.Reads, Cluster: c.Name, What: "/ipam " + sub,
		Permissions: []authorizationv1.ResourceAttributes{p}})
	return err
}

// allowRepair checks that who may run a repair of kind on the cluster named cluster
// (authz.Changes): every permission its execution uses. what names the action for the audit.
// It returns the identity checked as (nil when the mode does not check changes).
func (b *Bot) allowRepair(ctx context.Context, who chat.Principal, cluster string, kind actions.Kind, what string) (*authz.Identity, error) {
	if !b.authz.Mode().Checks(authz.Changes) {
		return nil, nil
	}
	c, err := b.cluster(cluster)
	var unavailable *chat.UnavailableError
	if err != nil && !errors.As(err, &unavailable) {
		return nil, err
	}
	if c.Access == nil {
		return nil, userErrorf("cluster %s cannot check permissions (not configured)", c.Name)
	}
	perms, err := c.Access.RepairAccess(kind)
	if err != nil {
		return nil, ipamError(c, "list the permissions of "+string(kind), err)
	}
	return b.authz.Allow(ctx, authz.Request{Who: who, Scope: authz.Changes, Cluster: c.Name, What: what, Permissions: perms})
}

// refusalMessage is what a refused person sees (only they: a Reply that is not Public, a
// click's Notice).
func refusalMessage(r *authz.Refusal) chat.Message {
	return chat.Message{Title: "Not allowed", Severity: chat.SeverityInfo, Sections: []chat.Section{{Text: r.Text}}}
}

var _ chat.Admitter = (*Bot)(nil)

// Admit implements chat.Admitter: it runs the authorization checks of req (the handler runs
// them again, from the cache) and returns the reply of a refusal, nil when req may go on or
// is no command that checks anything. A check that did not finish before ctx ended is a reply
// too, asking to try again: the adapter must not let the command through to be answered in
// public.
func (b *Bot) Admit(ctx context.Context, req chat.Request) *chat.Reply {
	if b.authz == nil {
		return nil
	}
	var err error
	switch req.Command {
	case "why-pending":
		var c *Cluster
		var t triage.Target
		if c, t, err = b.whyPendingTarget(req); err == nil {
			_, _, err = b.allowAnswer(ctx, req.Principal, c, t)
		}
	case "ipam":
		var ip ipamRequest
		if ip, err = parseIPAM(req); err != nil {
			break
		}
		if ip.kind != "" {
			_, err = b.allowRepair(ctx, req.Principal, ip.cluster, ip.kind, "plan "+string(ip.kind))
			break
		}
		var c *Cluster
		if c, err = b.cluster(ip.cluster); err == nil {
			err = b.allowIPAMRead(ctx, req.Principal, c, ip.sub)
		}
	}
	var ref *authz.Refusal
	var failed *authz.CheckError
	switch {
	case errors.As(err, &ref):
		return &chat.Reply{Message: refusalMessage(ref)}
	case ctx.Err() != nil:
		return &chat.Reply{Message: chat.Message{Title: "Checking what Kubernetes RBAC allows you took too long; nothing was done. Please try again in a moment.",
			Severity: chat.SeverityWarning}}
	case errors.As(err, &failed):
		b.log.WarnContext(ctx, "authorization check failed", slog.String("command", req.Command),
			slog.String("user", req.Principal.String()), slog.Any("err", err))
		return &chat.Reply{Message: checkFailedMessage(failed)}
	}
	return nil
}

// checkFailedMessage is what a person sees when what RBAC allows them could not be checked
// (only they, like a refusal).
func checkFailedMessage(e *authz.CheckError) chat.Message {
	return chat.Message{Title: "Could not check your permissions", Severity: chat.SeverityWarning, Sections: []chat.Section{{Text: e.Text()}}}
}
