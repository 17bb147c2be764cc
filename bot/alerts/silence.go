package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/ledger"
)

// SilenceDurations are the Silence buttons on a firing group's root.
var SilenceDurations = []time.Duration{time.Hour, 4 * time.Hour, 24 * time.Hour}

// Silences is where silences are made: Alertmanager's API v2.
type Silences struct {
	// URL is Alertmanager's base URL (http://alertmanager.monitoring:9093).
	URL string
	// Token, when set, is sent as a bearer token.
	Token string
	// Client (nil: a client with a 10 s timeout).
	Client *http.Client
}

// silenceState is the group's silence as the thread keeps it.
type silenceState struct {
	// State is "creating" (claimed, the POST under way or its answer lost) or "active".
	State string `json:"state"`
	// Ref is in the silence's comment, so a silence whose creation was not recorded is found.
	Ref   string    `json:"ref"`
	ID    string    `json:"id,omitempty"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
	Until time.Time `json:"until"`
}

// silenceEvent is one line of the thread's silence audit.
type silenceEvent struct {
	At   time.Time `json:"at"`
	By   string    `json:"by"`
	What string    `json:"what"`
	ID   string    `json:"id,omitempty"`
}

// creatingTTL is how long a "creating" claim keeps others off; after it, whoever clicks next
// looks for the silence by its Ref before making one.
const creatingTTL = 30 * time.Second

var errNothing = errors.New("nothing to do")

// Silence makes (s.For > 0) or ends the Alertmanager silence of the group whose thread is
// s.Thread, clicked in channel by who, once however many clicks or replicas: the thread's
// entry is claimed by compare-and-set before Alertmanager is called, and the silence's ID
// recorded after. Who may has been decided by the caller (bot's maySilence).
func (r *Receiver) Silence(ctx context.Context, who chat.Principal, channel string, s chat.SilenceButton) chat.Outcome {
	if r.o.Silences == nil {
		return chat.Outcome{Notice: "Silencing from chat is not configured (alertmanager.url); nothing was done."}
	}
	e, err := r.o.Store.Get(ctx, s.Thread)
	if err != nil || e.Source != Source || e.Channel != channel {
		return chat.Outcome{Notice: "This is not an alert thread of this channel; nothing was done."}
	}
	by := who.Attribution() + " on " + who.Platform
	if s.For <= 0 {
		return r.unsilence(ctx, e.Key, by)
	}
	now := r.o.Now().UTC()
	var g group
	var prior *silenceState
	_, err = r.o.Store.Update(ctx, e.Key, func(e *ledger.Entry) error {
		g = group{}
		if err := e.DataInto(&g); err != nil {
			return err
		}
		switch cur := g.Silence; {
		case g.Status != "firing":
			return fmt.Errorf("%w: the group is resolved", errNothing)
		case cur != nil && cur.State == "active" && cur.Until.After(now):
			return fmt.Errorf("%w: already silenced until %s by %s", errNothing, cur.Until.Format("15:04 MST"), cur.By)
		case cur != nil && cur.State == "creating" && now.Sub(cur.At) < creatingTTL:
			return fmt.Errorf("%w: %s is silencing this group now", errNothing, cur.By)
		case cur != nil && cur.State == "creating":
			prior = cur
		}
		g.Silence = &silenceState{State: "creating", Ref: fmt.Sprintf("%s@%d", e.Name(), now.UnixMilli()), By: by, At: now, Until: now.Add(s.For)}
		return e.SetData(&g)
	})
	if errors.Is(err, errNothing) {
		return chat.Outcome{Notice: strings.TrimPrefix(err.Error(), errNothing.Error()+": ") + "; nothing was done."}
	}
	if err != nil {
		return chat.Outcome{Notice: "Could not record the silence; nothing was done: " + err.Error()}
	}
	claim := g.Silence
	id := ""
	if prior != nil {
		// An earlier click's POST may have made a silence whose ID was never recorded.
		if id, err = r.findSilence(ctx, prior.Ref); err != nil {
			r.releaseSilence(ctx, e.Key, claim.Ref)
			return chat.Outcome{Notice: "Could not ask Alertmanager about an unfinished silence; nothing was done: " + err.Error()}
		}
	}
	if id == "" {
		matchers := g.matchers()
		if len(matchers) == 0 {
			r.releaseSilence(ctx, e.Key, claim.Ref)
			return chat.Outcome{Notice: "The group has no labels to match (group_by: [...]?); nothing was done."}
		}
		id, err = r.createSilence(ctx, matchers, claim, who, channel)
		if err != nil {
			// The claim stays: whoever clicks after creatingTTL looks for it by Ref first.
			return chat.Outcome{Notice: "Alertmanager did not confirm the silence: " + err.Error() + ". Click again in a minute; a silence made meanwhile is found, not made twice."}
		}
	}
	_, err = r.o.Store.Update(ctx, e.Key, func(e *ledger.Entry) error {
		var g group
		if err := e.DataInto(&g); err != nil {
			return err
		}
		if g.Silence == nil || g.Silence.Ref != claim.Ref {
			return ledger.ErrUnchanged
		}
		g.Silence.State, g.Silence.ID = "active", id
		g.SilenceLog = append(g.SilenceLog, silenceEvent{At: now, By: by, What: "silenced for " + shortDuration(s.For), ID: id})
		e.Revision++
		e.Pending = true
		return e.SetData(&g)
	})
	if err != nil {
		r.o.Log.Error("alertmanager: silence made but not recorded", "silence", id, "thread", e.Name(), "err", err)
	}
	r.o.Metrics.Silences.Inc()
	r.o.Log.Info("audit: alert group silenced", slog.String("by", by), slog.String("channel", channel), slog.String("thread", e.Name()),
		slog.String("silence", id), slog.Time("until", claim.Until))
	r.worker.Enqueue(e.Name())
	return chat.Outcome{Notice: fmt.Sprintf("Silenced for %s (until %s): Alertmanager silence %s.", shortDuration(s.For), claim.Until.Format("15:04 MST"), id)}
}

// unsilence expires the group's active silence once.
func (r *Receiver) unsilence(ctx context.Context, k ledger.Key, by string) chat.Outcome {
	var cur silenceState
	_, err := r.o.Store.Update(ctx, k, func(e *ledger.Entry) error {
		var g group
		if err := e.DataInto(&g); err != nil {
			return err
		}
		if g.Silence == nil || g.Silence.State != "active" {
			return fmt.Errorf("%w: the group is not silenced", errNothing)
		}
		cur = *g.Silence
		g.Silence = nil
		g.SilenceLog = append(g.SilenceLog, silenceEvent{At: r.o.Now().UTC(), By: by, What: "unsilenced", ID: cur.ID})
		e.Revision++
		e.Pending = true
		return e.SetData(&g)
	})
	if errors.Is(err, errNothing) {
		return chat.Outcome{Notice: "The group is not silenced; nothing was done."}
	}
	if err != nil {
		return chat.Outcome{Notice: "Could not record the unsilence; nothing was done: " + err.Error()}
	}
	if err := r.expireSilence(ctx, cur.ID); err != nil {
		r.o.Log.Error("alertmanager: expire silence", "silence", cur.ID, "err", err)
		return chat.Outcome{Notice: fmt.Sprintf("Alertmanager did not expire silence %s: %v. Expire it there.", cur.ID, err)}
	}
	r.o.Log.Info("audit: alert group unsilenced", slog.String("by", by), slog.String("silence", cur.ID))
	if err := r.resolveGone(ctx, k); err != nil {
		r.o.Log.Warn("alertmanager: read the group's alerts after unsilence", "err", err)
	}
	r.worker.Enqueue(k.Name())
	return chat.Outcome{Notice: "Unsilenced: Alertmanager silence " + cur.ID + " expired."}
}

// resolveGone reads the group's alerts from Alertmanager (GET /api/v2/alerts with the group's
// matchers) and marks resolved the firing ones it no longer has: a group that resolved while
// silenced got no notification saying so.
func (r *Receiver) resolveGone(ctx context.Context, k ledger.Key) error {
	e, err := r.o.Store.Get(ctx, k.Name())
	if err != nil {
		return err
	}
	var g group
	if err := e.DataInto(&g); err != nil {
		return err
	}
	q := url.Values{}
	for _, m := range g.matchers() {
		q.Add("filter", fmt.Sprintf("%s=%q", m.Name, m.Value))
	}
	var live []struct {
		Fingerprint string    `json:"fingerprint"`
		StartsAt    time.Time `json:"startsAt"`
	}
	if err := r.am(ctx, http.MethodGet, "/api/v2/alerts?"+q.Encode(), nil, &live); err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, a := range live {
		ids[alertState{Fingerprint: a.Fingerprint, StartsAt: a.StartsAt.UTC()}.id()] = true
	}
	_, err = r.o.Store.Update(ctx, k, func(e *ledger.Entry) error {
		var g group
		if err := e.DataInto(&g); err != nil {
			return err
		}
		now := r.o.Now().UTC()
		if !g.resolveMissing(ids, now) {
			return ledger.ErrUnchanged
		}
		e.Revision++
		e.Pending = true
		e.State, e.Summary = g.Status, rootMessage(&g, "", now).Title
		return e.SetData(&g)
	})
	return err
}

// DefaultSilenceCheck is how often threads' silences are compared with Alertmanager's.
const DefaultSilenceCheck = time.Minute

// checkSilences ends, in each thread of this source, an active silence that ended without a
// click there: its time ran out, or someone expired or deleted it in Alertmanager. The root
// then offers Silence again, the thread says so in one line, and alerts that resolved while
// the group was silenced (Alertmanager sent no notification for them) are marked resolved.
// Every replica may run it: the compare-and-set on the silence's ID makes it happen once.
func (r *Receiver) checkSilences(ctx context.Context) {
	entries, err := r.o.AckStore.ListFollowed(ctx, Source)
	if err != nil {
		if ctx.Err() == nil {
			r.o.Log.Warn("alertmanager: list alert threads for their silences", "err", err)
		}
		return
	}
	for _, e := range entries {
		var g group
		if e.DataInto(&g) != nil || g.Silence == nil || g.Silence.State != "active" {
			continue
		}
		cur := *g.Silence
		why := "its time ran out"
		if cur.Until.After(r.o.Now()) {
			var live struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			}
			err := r.am(ctx, http.MethodGet, "/api/v2/silence/"+url.PathEscape(cur.ID), nil, &live)
			var se statusError
			switch {
			case errors.As(err, &se) && se == http.StatusNotFound:
				why = "it is no longer in Alertmanager"
			case err != nil:
				r.o.Log.Warn("alertmanager: read silence", "silence", cur.ID, "err", err)
				continue
			case live.Status.State == "expired":
				why = "it was expired in Alertmanager"
			default:
				continue
			}
		}
		_, err := r.o.Store.Update(ctx, e.Key, func(e *ledger.Entry) error {
			var g group
			if err := e.DataInto(&g); err != nil {
				return err
			}
			if g.Silence == nil || g.Silence.State != "active" || g.Silence.ID != cur.ID {
				return ledger.ErrUnchanged
			}
			g.endSilence(r.o.Now().UTC(), why)
			e.Revision++
			e.Pending = true
			return e.SetData(&g)
		})
		if err != nil {
			r.o.Log.Warn("alertmanager: record a silence's end", "silence", cur.ID, "err", err)
			continue
		}
		r.o.Log.Info("audit: alert group silence ended", slog.String("silence", cur.ID), slog.String("thread", e.Name()), slog.String("why", why))
		if err := r.resolveGone(ctx, e.Key); err != nil {
			r.o.Log.Warn("alertmanager: read the group's alerts after its silence ended", "err", err)
		}
		r.worker.Enqueue(e.Name())
	}
}

// releaseSilence drops a claim that made nothing.
func (r *Receiver) releaseSilence(ctx context.Context, k ledger.Key, ref string) {
	_, _ = r.o.Store.Update(ctx, k, func(e *ledger.Entry) error {
		var g group
		if err := e.DataInto(&g); err != nil {
			return err
		}
		if g.Silence == nil || g.Silence.Ref != ref {
			return ledger.ErrUnchanged
		}
		g.Silence = nil
		return e.SetData(&g)
	})
}

// matcher is an API v2 matcher.
type matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// matchers match the group: its group labels, each equal.
func (g *group) matchers() []matcher {
	var out []matcher
	for _, k := range slices.Sorted(maps.Keys(g.GroupLabels)) {
		out = append(out, matcher{Name: k, Value: g.GroupLabels[k], IsEqual: true})
	}
	return out
}

func (r *Receiver) createSilence(ctx context.Context, m []matcher, c *silenceState, who chat.Principal, channel string) (string, error) {
	body, _ := json.Marshal(map[string]any{
		"matchers": m, "startsAt": c.At, "endsAt": c.Until, "createdBy": who.Attribution() + " via whypending " + who.Platform,
		"comment": fmt.Sprintf("Silenced from %s channel %s with whypending [%s]", who.Platform, channel, c.Ref),
	})
	var out struct {
		SilenceID string `json:"silenceID"`
	}
	if err := r.am(ctx, http.MethodPost, "/api/v2/silences", body, &out); err != nil {
		return "", err
	}
	return out.SilenceID, nil
}

// findSilence returns the ID of the silence whose comment carries ref, if any.
func (r *Receiver) findSilence(ctx context.Context, ref string) (string, error) {
	var all []struct {
		ID      string `json:"id"`
		Comment string `json:"comment"`
	}
	if err := r.am(ctx, http.MethodGet, "/api/v2/silences", nil, &all); err != nil {
		return "", err
	}
	for _, s := range all {
		if strings.Contains(s.Comment, "["+ref+"]") {
			return s.ID, nil
		}
	}
	return "", nil
}

func (r *Receiver) expireSilence(ctx context.Context, id string) error {
	err := r.am(ctx, http.MethodDelete, "/api/v2/silence/"+url.PathEscape(id), nil, nil)
	var se statusError
	if errors.As(err, &se) && se == http.StatusNotFound {
		return nil // expired already
	}
	return err
}

type statusError int

func (e statusError) Error() string { return fmt.Sprintf("Alertmanager answered %d", int(e)) }

// am calls Alertmanager's API v2.
func (r *Receiver) am(ctx context.Context, method, path string, body []byte, out any) error {
	s := r.o.Silences
	client := s.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(s.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		if resp.StatusCode == http.StatusNotFound {
			return statusError(resp.StatusCode)
		}
		return fmt.Errorf("%w: %s", statusError(resp.StatusCode), strings.TrimSpace(chat.Cut(string(raw), 200)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}
