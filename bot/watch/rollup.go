package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
	"github.com/whypending/whypending/triage"
)

// RollupSource is the ledger source of the per-channel roll-up message; its subject is
// rollupSubject.
const (
	RollupSource  = "rollup"
	rollupSubject = "watch"
)

// RateWindow is the window of the per-channel rate limit (Options.MaxPosts).
const RateWindow = 10 * time.Minute

// RollupEvery is how often the roll-up messages are brought up to date: a mass event edits
// each a few times, not once per workload.
const RollupEvery = 5 * time.Second

// maxRollupLines bounds the workloads the roll-up names one by one.
const maxRollupLines = 40

// rollup is what the roll-up entry of one channel keeps: the channel's budget of new posts
// and the stuck workloads not posted on their own.
type rollup struct {
	// Posts are when the channel's new posts of the last RateWindow were made.
	Posts []time.Time `json:"posts,omitempty"`
	// Held are stuck workloads with a sure cause past the rate limit; Unclear those whose
	// answer is uncertain or unknown. Neither is posted on its own while it stays stuck.
	Held    []Item `json:"held,omitempty"`
	Unclear []Item `json:"unclear,omitempty"`
	// Most is the most workloads the roll-up has listed at once.
	Most int `json:"most,omitempty"`
}

// Item is a stuck workload a roll-up lists: its primary code and since when it is stuck.
type Item struct {
	Workload Workload    `json:"workload"`
	Code     triage.Code `json:"code"`
	Since    time.Time   `json:"since"`
}

// Unclear returns the stuck workloads whose answer is uncertain or unknown, as the roll-up
// entries of every channel in the ledger list them (so any replica reads what the poster
// recorded): each workload once, oldest first. It is what the daily digest lists.
func (w *Watcher) Unclear(ctx context.Context) ([]Item, error) {
	entries, err := w.o.Store.List(ctx, RollupSource, false)
	if err != nil {
		return nil, fmt.Errorf("list the watch's roll-ups: %w", err)
	}
	var out []Item
	for _, e := range entries {
		var r rollup
		if err := e.DataInto(&r); err != nil {
			return nil, fmt.Errorf("roll-up %s: %w", e.Name(), err)
		}
		for _, it := range r.Unclear {
			if !slices.ContainsFunc(out, func(x Item) bool { return x.Workload == it.Workload }) {
				out = append(out, it)
			}
		}
	}
	sortBySince(out)
	return out, nil
}

func sortBySince(items []Item) {
	sort.SliceStable(items, func(i, j int) bool { return items[i].Since.Before(items[j].Since) })
}

// Lines are one line per item, oldest first, at most most of them and then "… and N more":
// the command that shows it, its code and since when.
func Lines(items []Item, most int) []string {
	items = slices.Clone(items)
	sortBySince(items)
	var lines []string
	for i, it := range items {
		if i == most {
			lines = append(lines, fmt.Sprintf("… and %d more", len(items)-i))
			break
		}
		lines = append(lines, fmt.Sprintf("`/why-pending %s`: %s (since %s)", it.Workload.String(), it.Code, it.Since.UTC().Format("15:04 MST")))
	}
	return lines
}

func (r *rollup) holds(wl Workload) bool {
	has := func(it Item) bool { return it.Workload == wl }
	return slices.ContainsFunc(r.Held, has) || slices.ContainsFunc(r.Unclear, has)
}

func (r *rollup) drop(wl Workload) bool {
	n := len(r.Held) + len(r.Unclear)
	has := func(it Item) bool { return it.Workload == wl }
	r.Held = slices.DeleteFunc(r.Held, has)
	r.Unclear = slices.DeleteFunc(r.Unclear, has)
	return len(r.Held)+len(r.Unclear) != n
}

func rollupKey(ch Channel) ledger.Key {
	return ledger.Key{Source: RollupSource, Platform: ch.Platform, Channel: ch.ID, Subject: rollupSubject}
}

// admit decides whether wl, stuck with res, gets a post of its own in ch: not when its answer
// is uncertain, nor past the channel's rate limit, nor when the roll-up lists it already
// (until it recovers). A post admitted takes one from the channel's budget, recorded in the
// roll-up entry before the post's entry is written (a crash between the two loses a slot,
// never posts over the limit).
func (w *Watcher) admit(ctx context.Context, ch Channel, wl Workload, since time.Time, res Result, now time.Time) (bool, error) {
	admitted := false
	_, err := w.o.Store.UpdateFromCopy(ctx, rollupKey(ch), func(e *ledger.Entry) error {
		admitted = false
		var r rollup
		if err := e.DataInto(&r); err != nil {
			return err
		}
		if r.holds(wl) {
			return ledger.ErrUnchanged
		}
		it := Item{Workload: wl, Code: res.Code, Since: since}
		r.Posts = slices.DeleteFunc(r.Posts, func(t time.Time) bool { return now.Sub(t) >= RateWindow })
		switch {
		case res.Uncertain:
			r.Unclear = append(r.Unclear, it)
		case len(r.Posts) < w.o.MaxPosts:
			r.Posts = append(r.Posts, now)
			admitted = true
			return e.SetData(&r) // the budget only: the roll-up message does not change
		default:
			r.Held = append(r.Held, it)
			w.o.Metrics.Suppressed.Inc()
		}
		r.Most = max(r.Most, len(r.Held)+len(r.Unclear))
		e.Revision++
		e.Pending = true
		e.State = "listing"
		e.Summary = fmt.Sprintf("%d held back, %d without a clear cause", len(r.Held), len(r.Unclear))
		return e.SetData(&r)
	})
	if errors.Is(err, ledger.ErrUnchanged) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !admitted {
		w.mu.Lock()
		if w.written != nil {
			w.written[rollupKey(ch).Name()] = true // it lists wl now (unwatched reads this)
		}
		w.mu.Unlock()
	}
	// Not enqueued: the roll-up worker's resync (RollupEvery) coalesces a burst into a few
	// edits.
	return admitted, nil
}

// release takes wl out of ch's roll-up (it recovered, was deleted or scaled to zero).
func (w *Watcher) release(ctx context.Context, ch Channel, wl Workload) error {
	k := rollupKey(ch)
	_, err := w.o.Store.UpdateFromCopy(ctx, k, func(e *ledger.Entry) error {
		var r rollup
		if err := e.DataInto(&r); err != nil {
			return err
		}
		if !r.drop(wl) {
			return ledger.ErrUnchanged
		}
		if _, posted := e.Messages[ledger.RootKey]; posted {
			e.Revision++
			e.Pending = true
		}
		e.Summary = fmt.Sprintf("%d held back, %d without a clear cause", len(r.Held), len(r.Unclear))
		return e.SetData(&r)
	})
	if errors.Is(err, ledger.ErrUnchanged) || errors.Is(err, ledger.ErrNotFound) {
		return nil // not listed, or no roll-up (nothing is made for it)
	}
	return err // delivered on the roll-up worker's resync, as in admit
}

// renderRollup is the roll-up's thread: one root, edited as it grows and shrinks.
func (w *Watcher) renderRollup(e *ledger.Entry) thread.Thread {
	var r rollup
	if err := e.DataInto(&r); err != nil {
		w.o.Log.Error("watch: unreadable roll-up", "name", e.Name(), "err", err)
	}
	return thread.Thread{Root: thread.Message{Key: ledger.RootKey, Render: func(context.Context) (chat.Message, error) {
		if _, posted := e.Messages[ledger.RootKey]; posted {
			w.o.Metrics.Edits.Inc()
		} else {
			w.o.Metrics.Posts.Inc()
		}
		return rollupMessage(&r, w.o.MaxPosts), nil
	}}}
}

// rollupMessage lists the workloads held back by the rate limit and counts those without a
// clear cause, with the command that shows them.
func rollupMessage(r *rollup, maxPosts int) chat.Message {
	n := len(r.Held) + len(r.Unclear)
	if n == 0 {
		return chat.Message{Title: "No more stuck workloads held back", Severity: chat.SeverityOK,
			Sections: []chat.Section{{Text: fmt.Sprintf("Every workload this message listed (up to %d at once) recovered, was deleted or got its own post.", r.Most)}},
			Footer:   "watched by whypending"}
	}
	m := chat.Message{Title: fmt.Sprintf("%d more stuck %s", n, plural(n, "workload", "workloads")), Severity: chat.SeverityWarning,
		Footer: "watched by whypending · edited as it changes"}
	if len(r.Held) > 0 {
		lines := Lines(r.Held, maxRollupLines)
		m.Sections = append(m.Sections, chat.Section{
			Heading: fmt.Sprintf("Past the limit of %d new posts per channel per %s", maxPosts, "10 minutes"), Lines: lines})
	}
	if len(r.Unclear) > 0 {
		var nss []string
		for _, it := range r.Unclear {
			cmd := "`/why-pending -n " + it.Workload.Namespace + " --all`"
			if !slices.Contains(nss, cmd) {
				nss = append(nss, cmd)
			}
		}
		m.Sections = append(m.Sections, chat.Section{Text: fmt.Sprintf("%d more stuck %s without a clear cause: %s",
			len(r.Unclear), plural(len(r.Unclear), "workload", "workloads"), strings.Join(nss, ", "))})
	}
	return m
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// deliverRollup is the roll-up worker's Reconciler.
func (w *Watcher) deliverRollup(ctx context.Context, e *ledger.Entry) error {
	return deliver(ctx, w.o.Store, w.o.Platforms, e, w.renderRollup)
}
