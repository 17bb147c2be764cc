package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// WatchPosts are the watch's posts as their buttons reach them (bot/watch.Watcher).
type WatchPosts interface {
	// Subject is the workload of the post named thread.
	Subject(ctx context.Context, thread string) (watch.Workload, error)
	// Snooze records the snooze of s.Thread by who and says what happened.
	Snooze(ctx context.Context, who chat.Principal, channel string, s chat.SnoozeButton) chat.Outcome
	// Recheck records who's re-check of the post named thread, res being the workload's
	// answer now: an edit and one reply when the cause changed, else one reply.
	Recheck(ctx context.Context, who chat.Principal, thread string, res watch.Result) chat.Outcome
}

// SetWatch connects the Snooze and follow-up buttons to p (set once, before serving).
func (b *Bot) SetWatch(p WatchPosts) { b.watch = p }

// watchSubject is the workload of the watch post named thread, for a click on it; else the
// notice that says why nothing was done.
func (b *Bot) watchSubject(ctx context.Context, thread string) (watch.Workload, string) {
	if b.watch == nil {
		return watch.Workload{}, "The watch is not running here (watch.enabled); nothing was done."
	}
	wl, err := b.watch.Subject(ctx, thread)
	if err != nil {
		return watch.Workload{}, "That post is not a watch post this bot knows; nothing was done."
	}
	return wl, ""
}

// snooze handles a Snooze click.
func (b *Bot) snooze(ctx context.Context, c chat.Click, s chat.SnoozeButton) chat.Outcome {
	wl, notice := b.watchSubject(ctx, s.Thread)
	if notice != "" {
		return chat.Outcome{Notice: notice}
	}
	if err := b.maySnooze(ctx, c.Principal, c.Channel, wl); err != nil {
		b.log.InfoContext(ctx, "audit: snooze refused", slog.String("user", c.Principal.ID), slog.String("platform", c.Principal.Platform),
			slog.String("channel", c.Channel), slog.String("thread", s.Thread), slog.String("why", err.Error()))
		var r *authz.Refusal
		if errors.As(err, &r) {
			return chat.Outcome{Notice: r.Text}
		}
		return chat.Outcome{Notice: err.Error() + " Nothing was done."}
	}
	return b.watch.Snooze(ctx, c.Principal, c.Channel, s)
}

// workloadResources are the RBAC group and resource of each workload kind.
var workloadResources = map[triage.Kind][2]string{
	triage.KindPod: {"", "pods"}, triage.KindDeployment: {"apps", "deployments"}, triage.KindReplicaSet: {"apps", "replicasets"},
	triage.KindStatefulSet: {"apps", "statefulsets"}, triage.KindDaemonSet: {"apps", "daemonsets"}, triage.KindJob: {"batch", "jobs"},
}

// maySnooze is the one decision of who may snooze a watch post: anyone in a channel the bot
// answers in (channels.allowed) and, when per-user authorization checks changes, allowed by
// Kubernetes RBAC to update the workload (a person who may change it may mute it).
func (b *Bot) maySnooze(ctx context.Context, who chat.Principal, channel string, wl watch.Workload) error {
	if allowed := b.allowedChannels[who.Platform]; len(allowed) > 0 && !slices.Contains(allowed, channel) {
		return fmt.Errorf("snoozes are made from the channels the bot answers in")
	}
	res, ok := workloadResources[wl.Kind]
	if !ok {
		return fmt.Errorf("cannot tell who may snooze a %s", wl.Kind)
	}
	_, err := b.authz.Allow(ctx, authz.Request{Who: who, Scope: authz.Changes, Cluster: wl.Cluster, What: "snooze " + wl.String(),
		Permissions: []authorizationv1.ResourceAttributes{authz.InNamespace("update", res[0], res[1], wl.Namespace)}})
	return err
}
