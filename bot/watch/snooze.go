package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/ledger"
)

// snooze is a post's snooze: nothing is posted about the workload while it lasts.
type snooze struct {
	// Until is when it ends; zero with UntilRecovered.
	Until          time.Time `json:"until,omitzero"`
	UntilRecovered bool      `json:"untilRecovered,omitempty"`
	// By is who snoozed it ("slack:U0BOB"), At when.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// snoozeEvent is one line of a post's snooze audit.
type snoozeEvent struct {
	By     string    `json:"by"`
	At     time.Time `json:"at"`
	What   string    `json:"what"` // "snoozed 1h0m0s", "snoozed until recovered", "ended", "cleared: recovered"
	Within string    `json:"channel,omitempty"`
}

// active says the snooze holds at now.
func (s *snooze) active(now time.Time) bool {
	return s != nil && (s.UntilRecovered || now.Before(s.Until))
}

func (s *snooze) String() string {
	if s.UntilRecovered {
		return "until it recovers"
	}
	return "until " + s.Until.UTC().Format("Jan 2 15:04 MST")
}

// Subject is the workload of the post named thread, for deciding who may snooze it.
func (w *Watcher) Subject(ctx context.Context, thread string) (Workload, error) {
	e, err := w.o.Store.Get(ctx, thread)
	if err != nil {
		return Workload{}, err
	}
	var d post
	if err := e.DataInto(&d); err != nil {
		return Workload{}, err
	}
	if e.Source != Source {
		return Workload{}, fmt.Errorf("notification %s is not a watch post", thread)
	}
	return d.Workload, nil
}

// Snooze snoozes the post named s.Thread for who (already allowed, bot.maySnooze): recorded
// in the post's entry with who and when (the audit), the root edited to say so. A second
// click changes the snooze; its audit line says so.
func (w *Watcher) Snooze(ctx context.Context, who chat.Principal, channel string, s chat.SnoozeButton) chat.Outcome {
	now := w.o.Now()
	by := who.Platform + ":" + who.ID
	sn := &snooze{By: by, At: now, UntilRecovered: s.UntilRecovered}
	what := "snoozed until recovered"
	if !s.UntilRecovered {
		sn.Until = now.Add(s.For)
		what = "snoozed " + s.For.String()
	}
	notice, changed := w.changeOpen(ctx, s.Thread, "snooze", func(d *post) string {
		d.Snooze = sn
		d.SnoozeLog = append(d.SnoozeLog, snoozeEvent{By: by, At: now, What: what, Within: channel})
		if len(d.SnoozeLog) > maxReplies {
			d.SnoozeLog = d.SnoozeLog[len(d.SnoozeLog)-maxReplies:]
		}
		d.bump = true
		return fmt.Sprintf("Snoozed %s %s: nothing more is posted about it until then.", d.Workload.String(), sn.String())
	})
	if changed {
		w.o.Metrics.Snoozed.Inc()
		w.o.Log.InfoContext(ctx, "audit: watch post snoozed", slog.String("user", who.ID), slog.String("platform", who.Platform),
			slog.String("channel", channel), slog.String("thread", s.Thread), slog.String("what", what))
	}
	return chat.Outcome{Notice: notice}
}

// changeOpen applies fn to the open post named thread (a click on it: what is "snooze",
// "re-check") by compare-and-set and queues its delivery; fn returns the clicker's notice. It
// returns that notice, or why nothing was done, and whether the post was changed.
func (w *Watcher) changeOpen(ctx context.Context, thread, what string, fn func(d *post) string) (notice string, changed bool) {
	e, err := w.o.Store.Get(ctx, thread)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return "That post is gone; nothing was done.", false
	case err != nil:
		return "Could not read the post; nothing was done: " + err.Error(), false
	case e.Source != Source:
		return "That post is not a watch post this bot knows; nothing was done.", false
	}
	e, err = w.o.Store.Update(ctx, e.Key, func(e *ledger.Entry) error {
		var d post
		if err := e.DataInto(&d); err != nil {
			return err
		}
		if d.State != stateStuck {
			notice = fmt.Sprintf("%s recovered already; nothing to %s.", d.Workload.String(), what)
			return ledger.ErrUnchanged
		}
		notice = fn(&d)
		return d.save(e)
	})
	if errors.Is(err, ledger.ErrUnchanged) {
		return notice, false
	}
	if err != nil {
		return fmt.Sprintf("Could not record the %s; nothing was done: %s", what, err.Error()), false
	}
	w.enqueue(e)
	return notice, true
}

// snoozeButtons are the root's Snooze buttons.
func snoozeButtons(thread string) []chat.Button {
	return []chat.Button{
		chat.SnoozeButton{Thread: thread, For: time.Hour}.Button("Snooze 1 h"),
		chat.SnoozeButton{Thread: thread, For: 24 * time.Hour}.Button("Snooze 1 day"),
		chat.SnoozeButton{Thread: thread, UntilRecovered: true}.Button("Snooze until it recovers"),
	}
}
