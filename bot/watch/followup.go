package watch

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/whypending/whypending/chat"
)

// followupButtons are the root's read-only follow-up buttons: Events, Nodes when the answer
// has a per-node table, Logs when it has a previous container's log, and Re-check now.
func followupButtons(d *post, thread string) []chat.Button {
	bs := []chat.Button{chat.FollowupButton{Thread: thread, What: chat.FollowupEvents}.Button("Events")}
	if d.Nodes {
		bs = append(bs, chat.FollowupButton{Thread: thread, What: chat.FollowupNodes}.Button("Nodes"))
	}
	if d.Logs {
		bs = append(bs, chat.FollowupButton{Thread: thread, What: chat.FollowupLogs}.Button("Logs"))
	}
	return append(bs, chat.FollowupButton{Thread: thread, What: chat.FollowupRecheck}.Button("Re-check now"))
}

// Recheck records a Re-check click by who on the post named thread, res being the workload's
// answer now (the bot diagnosed it for who, bot.Bot.Click): by compare-and-set on the post's
// entry, so that two clicks cannot both record one change, a new sure primary code edits the
// root and gets one reply saying what changed (as the watch's own diagnoses do); anything
// else gets one reply, "Still <code>, checked by <who>.". The thread is delivered by the
// leader's worker (this replica's when it leads).
func (w *Watcher) Recheck(ctx context.Context, who chat.Principal, thread string, res Result) chat.Outcome {
	notice, changed := w.changeOpen(ctx, thread, "re-check", func(d *post) string {
		if !res.Uncertain && res.Code != "" && res.Code != d.Code {
			notice := fmt.Sprintf("Re-checked: the cause changed from %s to %s; the post is edited.", d.Code, res.Code)
			d.changeCause(res)
			return notice
		}
		line := fmt.Sprintf("Still %s, checked by %s.", d.Code, who.Display())
		if res.Code != d.Code {
			line = fmt.Sprintf("Still %s, checked by %s (the answer now, %s, is not sure).", d.Code, who.Display(), res.Code)
		}
		d.addReply(line)
		return "Re-checked: " + line
	})
	if changed {
		w.o.Log.InfoContext(ctx, "watch post re-checked", slog.String("user", who.ID), slog.String("platform", who.Platform),
			slog.String("thread", thread), slog.String("code", string(res.Code)))
	}
	return chat.Outcome{Notice: notice}
}
