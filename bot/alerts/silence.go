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

// GroupSource is the ledger source of the Alertmanager groups' own entries, one per receiver
// and groupKey (groupKeyOf), beside the group's threads in each of the receiver's channels. A
// silence belongs to the group, not to a channel: its claim and record live there, so clicks
// in any channel make one silence, every channel's root renders it, and Unsilence from any
// channel ends it.
const GroupSource = "alertgroup"

// groupEntry is what the group's own entry keeps (ledger.Entry.Data).
type groupEntry struct {
	// GroupLabels are the group's labels, which its silence matches.
	GroupLabels map[string]string `json:"groupLabels,omitempty"`
	// Silence is the group's silence made from chat, if one; SilenceLog is every silence and
	// unsilence, who, from which channel and when (the audit).
	Silence    *silenceState  `json:"silence,omitempty"`
	SilenceLog []silenceEvent `json:"silenceLog,omitempty"`
}

// groupKeyOf is the key of the group's own entry: the receiver (as its channel) and groupKey.
func groupKeyOf(receiver, groupKey string) ledger.Key {
	return ledger.Key{Source: GroupSource, Platform: "alertmanager", Channel: receiver, Subject: groupKey}
}

// silenceState is the group's silence as its entry keeps it.
type silenceState struct {
	// State is "creating" (claimed, the POST under way or its answer lost) or "active".
	State string `json:"state"`
	// Ref is in the silence's comment, so a silence whose creation was not recorded is found.
	Ref   string    `json:"ref"`
	ID    string    `json:"id,omitempty"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
	Until time.Time `json:"until"`
	// Channel is the channel it was made from.
	Channel string `json:"channel,omitempty"`
}

// silenceEvent is one line of the group's silence audit.
type silenceEvent struct {
	At      time.Time `json:"at"`
	By      string    `json:"by"`
	What    string    `json:"what"`
	ID      string    `json:"id,omitempty"`
	Channel string    `json:"channel,omitempty"`
}

// creatingTTL is how long a "creating" claim keeps others off; after it, whoever clicks next
// looks for the silence by its Ref before making one.
const creatingTTL = 30 * time.Second

var errNothing = errors.New("nothing to do")

// Silence makes (s.For > 0) or ends the Alertmanager silence of the group whose thread is
// s.Thread, clicked in channel by who, once however many clicks, channels or replicas: the
// group's entry is claimed by compare-and-set before Alertmanager is called, and the
// silence's ID recorded after; then every channel's root is edited to show it. Who may has
// been decided by the caller (bot's maySilence); a channel that does not see every alert of
// the group may not (group.silenceable), even by a forged click.
func (r *Receiver) Silence(ctx context.Context, who chat.Principal, channel string, s chat.SilenceButton) chat.Outcome {
	if r.o.Silences == nil {
		return chat.Outcome{Notice: "Silencing from chat is not configured (alertmanager.url); nothing was done."}
	}
	e, err := r.o.Store.Get(ctx, s.Thread)
	if err != nil || e.Source != Source || e.Channel != channel {
		return chat.Outcome{Notice: "This is not an alert thread of this channel; nothing was done."}
	}
	var g group
	if err := e.DataInto(&g); err != nil {
		return chat.Outcome{Notice: "Could not read the alert thread; nothing was done: " + err.Error()}
	}
	by := who.Attribution() + " on " + who.Platform
	if !g.silenceable(r.o.ChannelNamespaces[channel]) {
		r.o.Log.Info("audit: silence refused", slog.String("by", by), slog.String("channel", channel), slog.String("thread", e.Name()),
			slog.String("why", "the channel does not see every alert the silence would match"))
		return chat.Outcome{Notice: "This channel answers for one namespace (channels.namespaces), and a silence of this group would mute alerts it does not see: " +
			"the group has alerts of other namespaces, or its labels (Alertmanager's group_by) do not name namespace " + r.o.ChannelNamespaces[channel] +
			", so the silence would match that alert in every namespace. Silence it from a channel that answers for all namespaces. Nothing was done."}
	}
	gk := groupKeyOf(g.Receiver, e.Subject)
	if s.For <= 0 {
		return r.unsilence(ctx, gk, by, channel)
	}
	if g.Status != "firing" {
		return chat.Outcome{Notice: "The group is resolved; nothing was done."}
	}
	now := r.o.Now().UTC()
	var x groupEntry
	var prior *silenceState
	_, err = r.o.Store.Update(ctx, gk, func(ge *ledger.Entry) error {
		x, prior = groupEntry{}, nil
		if err := ge.DataInto(&x); err != nil {
			return err
		}
		switch cur := x.Silence; {
		case cur != nil && cur.State == "active" && cur.Until.After(now):
			return fmt.Errorf("%w: already silenced until %s by %s from channel %s", errNothing, until(cur.Until), cur.By, cur.Channel)
		case cur != nil && cur.State == "creating" && now.Sub(cur.At) < creatingTTL:
			return fmt.Errorf("%w: %s is silencing this group now", errNothing, cur.By)
		case cur != nil && cur.State == "creating":
			prior = cur
		}
		if len(x.GroupLabels) == 0 {
			x.GroupLabels = g.GroupLabels
		}
		x.Silence = &silenceState{State: "creating", Ref: fmt.Sprintf("%s@%d", ge.Name(), now.UnixMilli()), By: by, At: now, Until: now.Add(s.For), Channel: channel}
		return ge.SetData(&x)
	})
	if errors.Is(err, errNothing) {
		return chat.Outcome{Notice: strings.TrimPrefix(err.Error(), errNothing.Error()+": ") + "; nothing was done."}
	}
	if err != nil {
		return chat.Outcome{Notice: "Could not record the silence; nothing was done: " + err.Error()}
	}
	claim := x.Silence
	id := ""
	if prior != nil {
		// An earlier click's POST may have made a silence whose ID was never recorded.
		if id, err = r.findSilence(ctx, prior.Ref); err != nil {
			r.releaseSilence(ctx, gk, claim.Ref)
			return chat.Outcome{Notice: "Could not ask Alertmanager about an unfinished silence; nothing was done: " + err.Error()}
		}
	}
	if id == "" {
		matchers := matchersOf(x.GroupLabels)
		if len(matchers) == 0 {
			r.releaseSilence(ctx, gk, claim.Ref)
			return chat.Outcome{Notice: "The group has no labels to match (group_by: [...]?); nothing was done."}
		}
		id, err = r.createSilence(ctx, matchers, claim, who, channel)
		if err != nil {
			// The claim stays: whoever clicks after creatingTTL looks for it by Ref first.
			return chat.Outcome{Notice: "Alertmanager did not confirm the silence: " + err.Error() + ". Click again in a minute; a silence made meanwhile is found, not made twice."}
		}
	}
	_, err = r.o.Store.Update(ctx, gk, func(ge *ledger.Entry) error {
		var x groupEntry
		if err := ge.DataInto(&x); err != nil {
			return err
		}
		if x.Silence == nil || x.Silence.Ref != claim.Ref {
			return ledger.ErrUnchanged
		}
		x.Silence.State, x.Silence.ID = "active", id
		x.SilenceLog = append(x.SilenceLog, silenceEvent{At: now, By: by, What: "silenced for " + shortDuration(s.For), ID: id, Channel: channel})
		return ge.SetData(&x)
	})
	if err != nil {
		r.o.Log.Error("alertmanager: silence made but not recorded", "silence", id, "group", gk.Name(), "err", err)
	}
	r.o.Metrics.Silences.Inc()
	r.o.Log.Info("audit: alert group silenced", slog.String("by", by), slog.String("channel", channel), slog.String("thread", e.Name()),
		slog.String("group", gk.Name()), slog.String("silence", id), slog.Time("until", claim.Until))
	r.refreshThreads(ctx, g.Receiver, e.Subject, nil, "")
	return chat.Outcome{Notice: fmt.Sprintf("Silenced for %s (until %s): Alertmanager silence %s.", shortDuration(s.For), until(claim.Until), id)}
}

// unsilence expires the group's active silence once, whichever channel it was made from.
func (r *Receiver) unsilence(ctx context.Context, gk ledger.Key, by, channel string) chat.Outcome {
	var cur silenceState
	var labels map[string]string
	_, err := r.o.Store.Update(ctx, gk, func(ge *ledger.Entry) error {
		var x groupEntry
		if err := ge.DataInto(&x); err != nil {
			return err
		}
		if x.Silence == nil || x.Silence.State != "active" {
			return fmt.Errorf("%w: the group is not silenced", errNothing)
		}
		cur, labels = *x.Silence, x.GroupLabels
		x.Silence = nil
		x.SilenceLog = append(x.SilenceLog, silenceEvent{At: r.o.Now().UTC(), By: by, What: "unsilenced", ID: cur.ID, Channel: channel})
		return ge.SetData(&x)
	})
	if errors.Is(err, errNothing) || errors.Is(err, ledger.ErrNotFound) {
		return chat.Outcome{Notice: "The group is not silenced; nothing was done."}
	}
	if err != nil {
		return chat.Outcome{Notice: "Could not record the unsilence; nothing was done: " + err.Error()}
	}
	if err := r.expireSilence(ctx, cur.ID); err != nil {
		r.o.Log.Error("alertmanager: expire silence", "silence", cur.ID, "err", err)
		r.refreshThreads(ctx, gk.Channel, gk.Subject, nil, "")
		return chat.Outcome{Notice: fmt.Sprintf("Alertmanager did not expire silence %s: %v. Expire it there.", cur.ID, err)}
	}
	r.o.Log.Info("audit: alert group unsilenced", slog.String("by", by), slog.String("channel", channel), slog.String("group", gk.Name()), slog.String("silence", cur.ID))
	r.refreshThreads(ctx, gk.Channel, gk.Subject, matchersOf(labels), "")
	return chat.Outcome{Notice: "Unsilenced: Alertmanager silence " + cur.ID + " expired."}
}

// groupSilence is the silence of the group (receiver, groupKey) as its entry keeps it, if
// one. It reads the API server, not the followed copy: a root edited for a silence just
// recorded must show it.
func (r *Receiver) groupSilence(ctx context.Context, receiver, groupKey string) (*silenceState, error) {
	ge, err := r.o.Store.Get(ctx, groupKeyOf(receiver, groupKey).Name())
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var x groupEntry
	if err := ge.DataInto(&x); err != nil {
		return nil, err
	}
	return x.Silence, nil
}

// refreshThreads brings the group's thread in each of the receiver's channels up to its
// group entry: each root is edited (its Revision), line, if one, is added as a reply, and
// with matchers the alerts Alertmanager no longer has (GET /api/v2/alerts with them) are
// marked resolved: a group that resolved while silenced got no notification saying so. A
// channel without a thread of the group is left alone.
func (r *Receiver) refreshThreads(ctx context.Context, receiver, groupKey string, matchers []matcher, line string) {
	var live map[string]bool
	if len(matchers) > 0 {
		var err error
		if live, err = r.liveAlerts(ctx, matchers); err != nil {
			r.o.Log.Warn("alertmanager: read the group's alerts after its silence ended", "err", err)
		}
	}
	for _, ch := range r.o.Receivers[receiver] {
		k := ledger.Key{Source: Source, Platform: ch.Platform, Channel: ch.ID, Subject: groupKey}
		_, err := r.o.Store.Update(ctx, k, func(e *ledger.Entry) error {
			if len(e.Data) == 0 {
				return errNothing // a new entry: the channel has no thread of the group
			}
			var g group
			if err := e.DataInto(&g); err != nil {
				return err
			}
			now := r.o.Now().UTC()
			if live != nil {
				g.resolveMissing(live, now)
			}
			if line != "" {
				g.addLine(line)
			}
			e.Revision++
			e.Pending = true
			e.State, e.Summary = g.Status, rootMessage(&g, "", now).Title
			return e.SetData(&g)
		})
		switch {
		case errors.Is(err, errNothing):
			continue
		case err != nil:
			r.o.Log.Warn("alertmanager: edit a thread for the group's silence", "thread", k.Name(), "err", err)
			continue
		}
		r.worker.Enqueue(k.Name())
	}
}

// liveAlerts are the episodes (alertState.id) of the alerts Alertmanager has that match
// matchers (GET /api/v2/alerts).
func (r *Receiver) liveAlerts(ctx context.Context, matchers []matcher) (map[string]bool, error) {
	q := url.Values{}
	for _, m := range matchers {
		q.Add("filter", fmt.Sprintf("%s=%q", m.Name, m.Value))
	}
	var live []struct {
		Fingerprint string    `json:"fingerprint"`
		StartsAt    time.Time `json:"startsAt"`
	}
	if err := r.am(ctx, http.MethodGet, "/api/v2/alerts?"+q.Encode(), nil, &live); err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, a := range live {
		ids[alertState{Fingerprint: a.Fingerprint, StartsAt: a.StartsAt.UTC()}.id()] = true
	}
	return ids, nil
}

// DefaultSilenceCheck is how often the groups' silences are compared with Alertmanager's.
const DefaultSilenceCheck = time.Minute

// checkSilences ends, in each group's entry, an active silence that ended without a click:
// its time ran out, or someone expired or deleted it in Alertmanager. Every channel's root
// then offers Silence again, each thread says so in one line, and alerts that resolved while
// the group was silenced (Alertmanager sent no notification for them) are marked resolved.
// Every replica may run it: the compare-and-set on the silence's ID makes it happen once.
func (r *Receiver) checkSilences(ctx context.Context) {
	entries, err := r.o.AckStore.ListFollowed(ctx, GroupSource)
	if err != nil {
		if ctx.Err() == nil {
			r.o.Log.Warn("alertmanager: list alert groups for their silences", "err", err)
		}
		return
	}
	for _, e := range entries {
		var x groupEntry
		if e.DataInto(&x) != nil || x.Silence == nil || x.Silence.State != "active" {
			continue
		}
		cur := *x.Silence
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
		_, err := r.o.Store.Update(ctx, e.Key, func(ge *ledger.Entry) error {
			var x groupEntry
			if err := ge.DataInto(&x); err != nil {
				return err
			}
			if x.Silence == nil || x.Silence.State != "active" || x.Silence.ID != cur.ID {
				return ledger.ErrUnchanged
			}
			x.Silence = nil
			x.SilenceLog = append(x.SilenceLog, silenceEvent{At: r.o.Now().UTC(), By: "alertmanager", What: "ended: " + why, ID: cur.ID})
			return ge.SetData(&x)
		})
		if err != nil {
			r.o.Log.Warn("alertmanager: record a silence's end", "silence", cur.ID, "err", err)
			continue
		}
		r.o.Log.Info("audit: alert group silence ended", slog.String("silence", cur.ID), slog.String("group", e.Name()), slog.String("why", why))
		line := fmt.Sprintf("Silence %s (by %s) ended: %s. Alertmanager notifies this group again.", cur.ID, cur.By, why)
		r.refreshThreads(ctx, e.Channel, e.Subject, matchersOf(x.GroupLabels), line)
	}
}

// releaseSilence drops a claim that made nothing.
func (r *Receiver) releaseSilence(ctx context.Context, gk ledger.Key, ref string) {
	_, _ = r.o.Store.Update(ctx, gk, func(ge *ledger.Entry) error {
		var x groupEntry
		if err := ge.DataInto(&x); err != nil {
			return err
		}
		if x.Silence == nil || x.Silence.Ref != ref {
			return ledger.ErrUnchanged
		}
		x.Silence = nil
		return ge.SetData(&x)
	})
}

// matcher is an API v2 matcher.
type matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// matchersOf match a group by its group labels, each equal.
func matchersOf(labels map[string]string) []matcher {
	var out []matcher
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		out = append(out, matcher{Name: k, Value: labels[k], IsEqual: true})
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
