package watch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
	"github.com/whypending/whypending/triage"
)

// The states of a post (ledger.Entry.State and post.State).
const (
	stateStuck     = "stuck"
	stateRecovered = "recovered"
)

// How an episode ended (post.End): the workload recovered, was deleted, or kept no pods
// (scaled to zero), or a pod stuck Terminating is gone at last, or the watch stopped
// following it while it was stuck (opted out: post.Unwatched says where). Only endRecovered
// and endGone are a recovery; the others never say so.
const (
	endRecovered = ""
	endDeleted   = "deleted"
	endNoPods    = "no-pods"
	endGone      = "gone" // deleted while stuck Terminating: going away was the fix
	endUnwatched = "unwatched"
)

// Where an opt-out is (optOut.Where).
const (
	optOutPod       = "pod"       // the annotation on the pod (or, for a workload, on each of its stuck pods)
	optOutWorkload  = "workload"  // the annotation on the workload
	optOutNamespace = "namespace" // the annotation on the namespace
	optOutExcluded  = "excluded"  // the namespace is in watch.excludeNamespaces
)

// optOut is what took a workload out of the watch while its post was open: where the opt-out
// is (optOutPod, optOutWorkload, optOutNamespace, optOutExcluded) and the objects it is on
// (the pods' names, the workload's, the namespace's).
type optOut struct {
	Where string   `json:"where"`
	Names []string `json:"names,omitempty"`
}

// String says where the opt-out is, in words: "`whypending.io/watch: "false"` on namespace
// shop", "namespace batch is in watch.excludeNamespaces".
func (o optOut) String() string {
	names := strings.Join(o.Names, ", ")
	annotation := "`" + OptOut + `: "false"` + "`"
	switch o.Where {
	case optOutExcluded:
		return fmt.Sprintf("namespace %s is in watch.excludeNamespaces", names)
	case optOutNamespace:
		return fmt.Sprintf("%s on namespace %s", annotation, names)
	case optOutPod:
		return fmt.Sprintf("%s on %s %s", annotation, plural(len(o.Names), "pod", "pods"), names)
	}
	return fmt.Sprintf("%s on %s", annotation, names)
}

// post is what the ledger entry of one workload and channel keeps (ledger.Entry.Data): the
// post's state is its primary code, never its text.
type post struct {
	Workload Workload    `json:"workload"`
	State    string      `json:"state"`
	Code     triage.Code `json:"code"`
	// Since is when the workload's first pod became stuck in this episode; RecoveredAt
	// when it recovered.
	Since       time.Time `json:"since"`
	RecoveredAt time.Time `json:"recoveredAt,omitzero"`
	// End says how the episode ended (endRecovered, endDeleted, endNoPods, endGone,
	// endUnwatched) once State is stateRecovered; Unwatched where the opt-out that ended it
	// is (End endUnwatched only).
	End       string  `json:"end,omitempty"`
	Unwatched *optOut `json:"unwatched,omitempty"`
	// RemindedAt is when the last reminder reply was added (or the episode started).
	RemindedAt time.Time `json:"remindedAt"`
	// Message is the /why-pending answer the root shows; Nodes and Logs say it has a per-node
	// table and a previous container's log (Result), for the follow-up buttons.
	Message chat.Message `json:"message"`
	Nodes   bool         `json:"nodes,omitempty"`
	Logs    bool         `json:"logs,omitempty"`
	// Replies are the thread's replies, in order (append only); Seq numbers the next.
	Replies []reply `json:"replies,omitempty"`
	Seq     int     `json:"seq,omitempty"`
	// Snooze is the post's snooze, if one; SnoozeLog every snooze, who and when (the audit).
	Snooze    *snooze       `json:"snooze,omitempty"`
	SnoozeLog []snoozeEvent `json:"snoozeLog,omitempty"`

	bump bool // the root must change (a new revision)
}

// reply is one line in the thread.
type reply struct {
	Key  string `json:"key"`
	Text string `json:"text"`
}

// maxReplies bounds the replies kept; the oldest posted ones are pruned past it.
const maxReplies = 50

// setAnswer makes res the answer the root shows.
func (d *post) setAnswer(res Result) {
	d.Code, d.Message, d.Nodes, d.Logs = res.Code, res.Message, res.Nodes, res.Logs
}

// changeCause records a new primary code (res's): one reply says what changed, the root shows
// res. The watch's own diagnoses and a Re-check click both change a cause this way.
func (d *post) changeCause(res Result) {
	d.addReply(fmt.Sprintf("The cause changed: %s → %s.", d.Code, res.Code))
	d.setAnswer(res)
	d.bump = true
}

func (d *post) addReply(text string) {
	d.Seq++
	d.Replies = append(d.Replies, reply{Key: fmt.Sprintf("r%d", d.Seq), Text: text})
}

// update is what res, seen at now, changes in the post of wl: the first post, a new cause
// (one reply), stuck again after a recovery (one reply), a reminder (one reply). It returns
// false when the post already says it all; a text that changed under the same code changes
// nothing. An uncertain answer is never posted on its own: it starts no post and does not
// replace a sure cause.
func (d *post) update(wl Workload, since time.Time, res Result, now time.Time, remindAfter time.Duration) bool {
	if d.State == stateStuck && d.Snooze != nil {
		if d.Snooze.active(now) {
			return false // snoozed: nothing is posted
		}
		// The snooze ended with the workload still stuck: one reply, the root brought up to
		// the cause now.
		d.SnoozeLog = append(d.SnoozeLog, snoozeEvent{By: d.Snooze.By, At: now, What: "ended"})
		d.Snooze = nil
		if !res.Uncertain && res.Code != d.Code {
			d.setAnswer(res)
		}
		d.addReply(fmt.Sprintf("The snooze ended; still stuck after %s: %s.", roundDuration(now.Sub(d.Since)), d.Code))
		d.RemindedAt = now
		d.bump = true
		return true
	}
	switch {
	case d.State == "":
		if res.Uncertain {
			return false
		}
		*d = post{Workload: wl, State: stateStuck, Since: since, RemindedAt: now}
		d.setAnswer(res)
	case d.endedUnwatched():
		// Watched again (the opt-out removed) and still stuck: it never recovered, and a
		// snooze from before the opt-out still holds (kept by unwatch).
		if res.Uncertain {
			return false
		}
		d.State, d.Since, d.RecoveredAt, d.End, d.Unwatched = stateStuck, since, time.Time{}, endRecovered, nil
		d.setAnswer(res)
		if d.Snooze != nil && !d.Snooze.active(now) {
			d.SnoozeLog = append(d.SnoozeLog, snoozeEvent{By: d.Snooze.By, At: now, What: "ended"})
			d.Snooze = nil
		}
		if !d.Snooze.active(now) {
			d.addReply(fmt.Sprintf("Watched again; still stuck: %s.", res.Code))
			d.RemindedAt = now
		}
	case d.State == stateRecovered:
		if res.Uncertain {
			return false
		}
		d.State, d.Since, d.RecoveredAt, d.End, d.Unwatched, d.RemindedAt = stateStuck, since, time.Time{}, endRecovered, nil, now
		d.setAnswer(res)
		d.addReply(fmt.Sprintf("Stuck again: %s.", res.Code))
	case !res.Uncertain && d.Code != res.Code:
		d.changeCause(res)
	case now.Sub(d.RemindedAt) >= remindAfter:
		d.addReply(fmt.Sprintf("Still stuck after %s: %s.", roundDuration(now.Sub(d.Since)), d.Code))
		d.RemindedAt = now
		return true // a reply only: the root stays as it is
	default:
		return false
	}
	d.bump = true
	return true
}

// unwatch marks an open post ended at now because the watch no longer follows its workload
// (o says where the opt-out is); false when it is not open. The workload may well still be
// stuck: the post says what was last known, never that it recovered. A later episode, once
// the opt-out is removed, is "Watched again; still stuck" (update), under the snooze it had.
func (d *post) unwatch(now time.Time, o optOut) bool {
	if d.State != stateStuck {
		return false
	}
	d.Unwatched = &o
	return d.recover(now, endUnwatched)
}

// endedUnwatched says whether the post's last episode ended with its workload opted out.
func (d *post) endedUnwatched() bool { return d.State == stateRecovered && d.End == endUnwatched }

// recover marks an open post ended at now (false when it is not open): end says how
// (endRecovered, endDeleted, endNoPods; endUnwatched through unwatch).
func (d *post) recover(now time.Time, end string) bool {
	if d.State != stateStuck {
		return false
	}
	if end == endDeleted && d.Code.Terminating() {
		end = endGone // the pod would not go away; now it has
	}
	d.State, d.RecoveredAt, d.End = stateRecovered, now, end
	if d.Snooze != nil && end == endUnwatched {
		// Not recovered, only out of sight: the snooze is kept for when it is watched again
		// (update); while it holds, the root is edited and no line is posted.
		if d.Snooze.active(now) {
			d.bump = true
			return true
		}
	} else if d.Snooze != nil {
		// A snoozed workload that recovers: the root says so (an edit), no line is posted.
		d.SnoozeLog = append(d.SnoozeLog, snoozeEvent{By: d.Snooze.By, At: now, What: "cleared: " + d.ended()})
		quiet := d.Snooze.active(now)
		d.Snooze = nil
		if quiet {
			d.bump = true
			return true
		}
	}
	stuck := roundDuration(now.Sub(d.Since))
	switch end {
	case endDeleted:
		d.addReply(fmt.Sprintf("%s was deleted after %s stuck (last cause %s); it did not recover.", d.Workload.String(), stuck, d.Code))
	case endNoPods:
		d.addReply(fmt.Sprintf("%s has no pods now (scaled to zero?) after %s stuck (last cause %s); it did not recover.", d.Workload.String(), stuck, d.Code))
	case endGone:
		d.addReply(fmt.Sprintf("Gone after %s stuck Terminating (last cause %s).", stuck, d.Code))
	case endUnwatched:
		d.addReply(fmt.Sprintf("No longer watched: %s (last seen stuck %s with %s).", d.optOut(), stuck, d.Code))
	default:
		d.addReply(fmt.Sprintf("Recovered after %s.", stuck))
	}
	d.bump = true
	return true
}

// ended is how the episode ended, in a word or two.
func (d *post) ended() string {
	switch d.End {
	case endDeleted:
		return "deleted"
	case endNoPods:
		return "no pods"
	case endGone:
		return "gone"
	case endUnwatched:
		return "no longer watched"
	}
	return "recovered"
}

// optOut is where the opt-out that ended the episode is (a post written before it was
// recorded says nothing of where).
func (d *post) optOut() optOut {
	if d.Unwatched == nil {
		return optOut{Where: optOutWorkload, Names: []string{d.Workload.String()}}
	}
	return *d.Unwatched
}

// save writes d into e: a new revision of the root when the root must change, pending.
func (d *post) save(e *ledger.Entry) error {
	if d.bump {
		e.Revision++
	}
	d.bump = false
	e.Pending = true
	e.Cluster = d.Workload.Cluster
	e.State = d.State
	if d.State == stateRecovered && d.End != endRecovered {
		// What `kubectl get notifications` shows: an episode that ended otherwise says how
		// (deleted, no-pods, gone, unwatched), not "recovered".
		e.State = d.End
	}
	e.Summary = string(d.Code) + ": " + d.Workload.String()
	if len(d.Replies) > maxReplies {
		keep := d.Replies[:0]
		for i, r := range d.Replies {
			if _, posted := e.Messages[r.Key]; posted && i < len(d.Replies)-maxReplies {
				delete(e.Messages, r.Key)
				continue
			}
			keep = append(keep, r)
		}
		d.Replies = keep
	}
	return e.SetData(d)
}

// roundDuration is d in whole minutes ("23 min"), or seconds under a minute.
func roundDuration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	if d < 3*time.Hour {
		return fmt.Sprintf("%d min", int(d.Minutes()))
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}

// render is what the thread of e shows.
func (w *Watcher) render(e *ledger.Entry) thread.Thread {
	var d post
	if err := e.DataInto(&d); err != nil {
		w.o.Log.Error("watch: unreadable notification", "name", e.Name(), "err", err)
	}
	th := thread.Thread{Root: thread.Message{Key: ledger.RootKey, Render: func(context.Context) (chat.Message, error) {
		if _, posted := e.Messages[ledger.RootKey]; posted {
			w.o.Metrics.Edits.Inc()
		} else {
			w.o.Metrics.Posts.Inc()
		}
		return rootMessage(&d, e.Name()), nil
	}}}
	for _, r := range d.Replies {
		th.Replies = append(th.Replies, thread.Message{Key: r.Key, Render: func(context.Context) (chat.Message, error) {
			w.o.Metrics.Posts.Inc()
			return chat.Message{Title: r.Text, Severity: replySeverity(&d, r)}, nil
		}})
	}
	return th
}

func replySeverity(d *post, r reply) chat.Severity {
	if len(d.Replies) > 0 && d.Replies[len(d.Replies)-1].Key == r.Key && d.State == stateRecovered && (d.End == endRecovered || d.End == endGone) {
		return chat.SeverityOK
	}
	return chat.SeverityInfo
}

// rootMessage is the root: the /why-pending answer while stuck, "Recovered after N min"
// once it recovered ("Deleted while stuck", "No pods left while stuck", "No longer watched"
// when it ended so).
func rootMessage(d *post, name string) chat.Message {
	m := d.Message
	m.Buttons = nil
	lead := fmt.Sprintf("Stuck since %s (%s) · watched by whypending", d.Since.UTC().Format("15:04 MST"), d.Code)
	if d.Snooze != nil {
		lead += fmt.Sprintf(" · snoozed %s by %s", d.Snooze.String(), d.Snooze.By)
	} else if d.State == stateStuck {
		m.Buttons = snoozeButtons(name)
	}
	if d.State == stateStuck {
		m.Buttons = append(m.Buttons, followupButtons(d, name)...)
	}
	if d.State == stateRecovered {
		span := fmt.Sprintf("Was stuck from %s to %s; last cause %s.", d.Since.UTC().Format("15:04"), d.RecoveredAt.UTC().Format("15:04 MST"), d.Code)
		title, sev, next := fmt.Sprintf("Recovered after %s · %s", roundDuration(d.RecoveredAt.Sub(d.Since)), d.Workload.String()),
			chat.SeverityOK, " Ask again: /why-pending "+d.Workload.String()
		switch d.End {
		case endDeleted:
			title, sev, next = fmt.Sprintf("Deleted while stuck · %s", d.Workload.String()), chat.SeverityInfo, " It was deleted; it did not recover."
		case endNoPods:
			title, sev = fmt.Sprintf("No pods left while stuck · %s", d.Workload.String()), chat.SeverityInfo
			next = " It has no pods now (scaled to zero?); it did not recover." + next
		case endGone:
			title = fmt.Sprintf("Gone after %s stuck Terminating · %s", roundDuration(d.RecoveredAt.Sub(d.Since)), d.Workload.String())
			next = ""
		case endUnwatched:
			title, sev = fmt.Sprintf("No longer watched · %s", d.Workload.String()), chat.SeverityInfo
			span = fmt.Sprintf("No longer watched: %s (last seen stuck %s with %s, from %s to %s).",
				d.optOut(), roundDuration(d.RecoveredAt.Sub(d.Since)), d.Code, d.Since.UTC().Format("15:04"), d.RecoveredAt.UTC().Format("15:04 MST"))
			next = " It may still be stuck; nothing more is posted about it while it is not watched." + next
		}
		return chat.Message{Title: title, Severity: sev, Sections: []chat.Section{{Text: span + next}}, Footer: d.Message.Footer}
	}
	m.Footer = lead + footerTail(d.Message.Footer)
	return m
}

func footerTail(f string) string {
	if f == "" {
		return ""
	}
	return " · " + f
}
