package alerts

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// group is what the ledger entry of one group and channel keeps (ledger.Entry.Data).
type group struct {
	Receiver    string            `json:"receiver"`
	GroupLabels map[string]string `json:"groupLabels,omitempty"`
	ExternalURL string            `json:"externalURL,omitempty"`
	// Status is the group's status in the last notification: firing or resolved.
	Status string `json:"status"`
	// Alerts are the group's alerts, one per fingerprint and startsAt, in the order they
	// first arrived.
	Alerts []alertState `json:"alerts"`
	// Truncated is the last notification's truncatedAlerts.
	Truncated int `json:"truncated,omitempty"`
	// Untracked counts the last notification's firing alerts past maxTracked: counted, not
	// kept one by one.
	Untracked int `json:"untracked,omitempty"`
	// Replies are the thread's replies in the order they are posted (appended; the oldest
	// posted ones are pruned past maxReplies). Seq numbers the next change reply's key.
	Replies []reply `json:"replies"`
	Seq     int     `json:"seq,omitempty"`
	// FirstAt is when the group was first seen firing; ResolvedAt when it last resolved.
	FirstAt    time.Time `json:"firstAt"`
	ResolvedAt time.Time `json:"resolvedAt,omitzero"`
	// LastSeen is the time of the last notification; Shown the LastSeen the root shows.
	LastSeen time.Time `json:"lastSeen"`
	// RemindedAt is when the last reminder reply was added (or the thread started).
	RemindedAt time.Time `json:"remindedAt"`
	// Silence is the group's Alertmanager silence made from chat, if one, as the group's own
	// entry keeps it (groupEntry): filled in when the root is rendered, never stored here, since
	// one silence serves the group's threads in every channel.
	Silence *silenceState `json:"-"`
}

// alertState is one firing episode of one alert.
type alertState struct {
	Fingerprint  string            `json:"fingerprint"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Summary      string            `json:"summary,omitempty"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
	// Object is what the labels name; nil when they name none.
	Object *Object `json:"object,omitempty"`
	// Hidden says the alert is for a namespace the channel may not see.
	Hidden bool `json:"hidden,omitempty"`
	// Gone says the episode was marked resolved because a later untruncated notification of
	// the group no longer had it (silenced, inhibited, or its resolve never sent), not
	// because Alertmanager said it resolved.
	Gone bool `json:"gone,omitempty"`
}

// The caps that keep one group's ledger entry well under etcd's request size (1.5 MiB by
// default) however large or flappy the group: an alert kept is about 1 KiB.
const (
	// maxTracked is how many alerts are kept one by one; the rest are counted (Untracked).
	maxTracked = 200
	// maxReplies is how many replies are kept; the oldest posted ones are pruned.
	maxReplies = 100
	// maxDiagnoses is how many diagnosis replies one notification adds; the rest are one line.
	maxDiagnoses = 20
)

// id is the alert's episode: fingerprint and startsAt.
func (a alertState) id() string {
	return a.Fingerprint + "-" + strconv.FormatInt(a.StartsAt.UnixMilli(), 36)
}

func (a alertState) name() string {
	if a.Object != nil && !a.Hidden {
		return a.Labels["alertname"] + " " + a.Object.String()
	}
	return a.Labels["alertname"]
}

// reply is one reply of the thread: a diagnosis of an alert, or a line saying what changed.
type reply struct {
	Key string `json:"key"`
	// Alert is the id of the alert a diagnosis is about.
	Alert string `json:"alert,omitempty"`
	// Joined says the alert joined a group already posted; Again that it fired after the
	// group had resolved.
	Joined bool `json:"joined,omitempty"`
	Again  bool `json:"again,omitempty"`
	// Text is a change's line.
	Text string `json:"text,omitempty"`
}

// merge is what a notification changes in g. It returns changed when the root must say
// something new (an alert joined or resolved, the group resolved or fired again, a reminder
// is due, or the "last seen" time moved by at least seenEvery), and news when a new reply
// was added; a notification that is the same as the last (a redelivery, a repeat_interval
// re-send) changes neither, bar "last seen".
func (g *group) merge(w *Webhook, now time.Time, clusterLabel, channelNS string, seenEvery, remindEvery time.Duration) (changed, news bool) {
	first := len(g.Alerts) == 0 && g.Untracked == 0
	wasResolved := g.Status == "resolved"
	if first {
		g.Receiver, g.GroupLabels, g.FirstAt, g.RemindedAt = w.Receiver, w.GroupLabels, now, now
	}
	g.ExternalURL, g.Truncated = w.ExternalURL, w.TruncatedAlerts
	var resolved, revived, same []string
	grew := false
	diagnosed, undiagnosed := 0, 0
	in := map[string]bool{}
	index := map[string]int{}
	untracked := 0
	for i, a := range g.Alerts {
		index[a.id()] = i
	}
	for _, x := range w.Alerts {
		a := alertState{Fingerprint: x.Fingerprint, StartsAt: x.StartsAt.UTC(), Status: x.Status, Labels: x.Labels,
			Summary: firstOf(x.Annotations["summary"], x.Annotations["description"], x.Annotations["message"]), GeneratorURL: x.GeneratorURL}
		if !x.EndsAt.IsZero() && x.Status == "resolved" {
			a.EndsAt = x.EndsAt.UTC()
		}
		a.Hidden = hiddenFrom(x.Labels, channelNS)
		if o, ok := ObjectOf(x.Labels, clusterLabel); ok {
			a.Object = &o
		}
		id := a.id()
		in[id] = true
		i, known := index[id]
		switch {
		case !known:
			if len(g.Alerts) >= maxTracked {
				if !g.pruneResolved() {
					if a.Status == "firing" {
						untracked++
					}
					continue
				}
				clear(index)
				for j, b := range g.Alerts {
					index[b.id()] = j
				}
			}
			grew = grew || !first
			index[id] = len(g.Alerts)
			g.Alerts = append(g.Alerts, a)
			switch {
			case a.Hidden || a.Object == nil:
				// Hidden alerts are counted in the root; unmapped ones listed there.
			case a.Status == "resolved":
				// Over before it was first seen (the bot was down, or it joined resolved): the
				// root lists it as resolved; an answer about the object now (healthy, or gone)
				// would read as the cause of an alert that no longer fires.
			case g.diagnosing(*a.Object, id):
				// The object is diagnosed in the thread already, for another alert firing now
				// (two containers of one pod, KubePodCrashLooping and KubePodNotReady of one
				// pod): a second diagnosis would be the same answer again. A joining one gets
				// a line; in the first notification the root lists it.
				if !first {
					same = append(same, a.name()+containerOf(a.Labels))
				}
			case diagnosed < maxDiagnoses:
				// A joining alert's one reply is its diagnosis, titled as joining.
				diagnosed++
				// After a resolve it says the group fires again, in the same one reply.
				g.Replies = append(g.Replies, reply{Key: "alert-" + a.id(), Alert: a.id(), Joined: !first && !wasResolved, Again: !first && wasResolved})
				news = news || !first
			default:
				undiagnosed++
			}
		case g.Alerts[i].Status == "firing" && a.Status == "resolved":
			// An episode resolves once; a "firing" for one already resolved is an older
			// notification delivered late (a retry, another replica) and changes nothing.
			g.Alerts[i].Status, g.Alerts[i].EndsAt, g.Alerts[i].Gone = a.Status, a.EndsAt, false
			resolved = append(resolved, a.name()+" after "+since(a.StartsAt, a.EndsAt, now))
		case g.Alerts[i].Gone && a.Status == "firing":
			// Back in the group's notifications (an unsilence, or a late older delivery).
			g.Alerts[i].Status, g.Alerts[i].EndsAt, g.Alerts[i].Gone = "firing", time.Time{}, false
			revived = append(revived, a.name())
		case g.Alerts[i].Gone && a.Status == "resolved":
			g.Alerts[i].Gone, g.Alerts[i].EndsAt = false, a.EndsAt
		}
	}
	// Alertmanager sends every alert of the group in each notification, bar muted ones: an
	// alert missing from an untruncated one no longer fires there.
	grew = grew || untracked > g.Untracked
	g.Untracked = untracked
	var gone []string
	if !first && w.TruncatedAlerts == 0 {
		gone = g.markGone(in, now)
	}
	// The group's status is its alerts': resolved once every episode is, so a late delivery
	// of an older notification cannot turn it back to firing.
	g.Status = "resolved"
	if g.firing() > 0 || g.Untracked > 0 && w.Status == "firing" {
		g.Status = "firing"
	}
	switch {
	case g.Status == "resolved" && !wasResolved:
		g.ResolvedAt = now
	case g.Status == "firing" && wasResolved:
		g.ResolvedAt = time.Time{}
	}
	var lines []string
	if len(resolved) > 0 {
		lines = append(lines, "Resolved: "+strings.Join(resolved, ", "))
	}
	if len(gone) > 0 {
		lines = append(lines, "No longer in the group's notifications (silenced, inhibited or resolved unsent): "+strings.Join(gone, ", "))
	}
	if len(revived) > 0 && !(g.Status == "firing" && wasResolved) {
		lines = append(lines, "Back in the group's notifications: "+strings.Join(revived, ", "))
	}
	if len(same) > 0 {
		lines = append(lines, "Joined, for an object diagnosed above: "+strings.Join(same, ", "))
	}
	if undiagnosed > 0 {
		lines = append(lines, fmt.Sprintf("… and %d more not diagnosed here: /why-pending%s --all", undiagnosed, nsFlag(channelNS, g)))
	}
	switch {
	case g.Status == "resolved" && !wasResolved && !first:
		lines = append([]string{"All resolved: the group fired for " + g.fired(now) + "."}, lines...)
	case g.Status == "firing" && wasResolved && !first && diagnosed == 0:
		lines = append([]string{"The group fires again."}, lines...)
	}
	if len(lines) == 0 && !first && g.Status == "firing" && remindEvery > 0 && now.Sub(g.RemindedAt) >= remindEvery {
		lines = append(lines, fmt.Sprintf("Still firing: %d %s, for %s.", g.firing()+g.Untracked, plural(g.firing()+g.Untracked, "alert"), g.fired(now)))
		g.RemindedAt = now
	}
	seenMoved := now.Sub(g.LastSeen) >= seenEvery
	g.LastSeen = now
	if len(lines) > 0 && (!first || undiagnosed > 0) {
		g.Replies = append(g.Replies, reply{Key: fmt.Sprintf("change-%d", len(g.Replies)+g.Seq), Text: strings.Join(lines, "\n")})
		news = true
	}
	return first || news || grew || len(gone) > 0 || seenMoved, news
}

// diagnosing says whether an alert of g other than the one with id, firing now, is about
// object o and has its diagnosis among the replies.
func (g *group) diagnosing(o Object, id string) bool {
	for _, b := range g.Alerts {
		if b.Status != "firing" || b.Gone || b.Hidden || b.Object == nil || *b.Object != o || b.id() == id {
			continue
		}
		if slices.ContainsFunc(g.Replies, func(r reply) bool { return r.Alert == b.id() }) {
			return true
		}
	}
	return false
}

// containerOf is " (container NAME)" when labels name a container, else "".
func containerOf(labels map[string]string) string {
	if c := labels["container"]; c != "" {
		return " (container " + c + ")"
	}
	return ""
}

// markGone resolves the firing episodes of g not in the notification's ids and returns their
// names.
func (g *group) markGone(ids map[string]bool, now time.Time) []string {
	var out []string
	for i := range g.Alerts {
		a := &g.Alerts[i]
		if a.Status != "firing" || ids[a.id()] {
			continue
		}
		a.Status, a.EndsAt, a.Gone = "resolved", now, true
		out = append(out, a.name())
	}
	return out
}

// resolveMissing marks gone the firing episodes not in ids (what Alertmanager still has) and
// adds one reply saying so; false when none was.
func (g *group) resolveMissing(ids map[string]bool, now time.Time) bool {
	gone := g.markGone(ids, now)
	if len(gone) == 0 {
		return false
	}
	lines := []string{"No longer in Alertmanager: " + strings.Join(gone, ", ")}
	if g.firing() == 0 && g.Untracked == 0 {
		g.Status, g.ResolvedAt = "resolved", now
		lines = append([]string{"All resolved: the group fired for " + g.fired(now) + "."}, lines...)
	}
	g.Replies = append(g.Replies, reply{Key: fmt.Sprintf("change-%d", len(g.Replies)+g.Seq), Text: strings.Join(lines, "\n")})
	return true
}

// hiddenFrom says a channel answered for channelNS ("": every namespace) may not see an alert
// with labels: the namespace label decides, whether or not the labels name an object
// (KubeQuotaExceeded has only namespace).
func hiddenFrom(labels map[string]string, channelNS string) bool {
	return channelNS != "" && labels["namespace"] != "" && labels["namespace"] != channelNS
}

// seesNone says a channel answered for channelNS sees none of the delivery's alerts.
func seesNone(h *Webhook, channelNS string) bool {
	for _, a := range h.Alerts {
		if !hiddenFrom(a.Labels, channelNS) {
			return false
		}
	}
	return true
}

// silenceable says the thread's channel, answered for channelNS, may silence the group: it
// sees every alert of it, and the group's labels pin its namespace. A silence matches the
// group's labels, so one made from a channel that cannot see an alert (hidden, or not kept
// one by one) would mute that alert too, and one whose labels do not name the namespace
// (group_by: [alertname]) would mute the same alert in every namespace, now and later.
func (g *group) silenceable(channelNS string) bool {
	if channelNS == "" {
		return true
	}
	if g.GroupLabels["namespace"] != channelNS || g.Untracked > 0 || g.Truncated > 0 {
		return false
	}
	for _, a := range g.Alerts {
		if a.Hidden {
			return false
		}
	}
	return true
}

// addLine adds one reply saying what changed.
func (g *group) addLine(text string) {
	g.Replies = append(g.Replies, reply{Key: fmt.Sprintf("change-%d", len(g.Replies)+g.Seq), Text: text})
}

// pruneResolved drops the oldest resolved episode to make room; false when none is resolved.
func (g *group) pruneResolved() bool {
	for i, a := range g.Alerts {
		if a.Status == "resolved" {
			g.Alerts = slices.Delete(g.Alerts, i, i+1)
			return true
		}
	}
	return false
}

// prune drops the oldest posted replies past maxReplies (and their posted marks), so a
// flapping group's entry stays bounded; Seq keeps the change keys unique.
func (g *group) prune(posted map[string]bool, drop func(key string)) {
	for len(g.Replies) > maxReplies && posted[g.Replies[0].Key] {
		drop(g.Replies[0].Key)
		g.Replies = g.Replies[1:]
		g.Seq++
	}
}

// nsFlag is " -n NS" for the group's namespace, when the channel's or all alerts' is one.
func nsFlag(channelNS string, g *group) string {
	if channelNS != "" {
		return " -n " + channelNS
	}
	ns := ""
	for _, a := range g.Alerts {
		if a.Object == nil {
			continue
		}
		if ns != "" && a.Object.Namespace != ns {
			return ""
		}
		ns = a.Object.Namespace
	}
	if ns == "" {
		return ""
	}
	return " -n " + ns
}

// fired is how long the group's last episode fired: the union of its alerts' spans (startsAt
// to endsAt; to now while one fires or the group does) that ends last, so an episode that
// resolved before the alerts firing now does not count.
func (g *group) fired(now time.Time) string {
	type span struct{ start, end time.Time }
	spans := make([]span, 0, len(g.Alerts))
	for _, a := range g.Alerts {
		end := a.EndsAt
		if a.Status == "firing" || end.IsZero() {
			end = now
		}
		spans = append(spans, span{a.StartsAt, end})
	}
	if len(spans) == 0 {
		return since(now, now, now)
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	last := spans[0]
	for _, sp := range spans[1:] {
		if sp.start.After(last.end) {
			last = sp // a gap: a new episode
			continue
		}
		if sp.end.After(last.end) {
			last.end = sp.end
		}
	}
	return since(last.start, last.end, now)
}

func (g *group) find(id string) int {
	for i, a := range g.Alerts {
		if a.id() == id {
			return i
		}
	}
	return -1
}

func (g *group) alert(id string) *alertState {
	if i := g.find(id); i >= 0 {
		return &g.Alerts[i]
	}
	return nil
}

func (g *group) firing() int {
	n := 0
	for _, a := range g.Alerts {
		if a.Status == "firing" {
			n++
		}
	}
	return n
}

// since is how long from start to end (or to now, when end is zero), rounded for people.
func since(start, end, now time.Time) string {
	if end.IsZero() {
		end = now
	}
	return shortDuration(end.Sub(start))
}

// shortDuration is d as Go writes it, without the zero tail: "45s", "23m", "1h23m", "4h".
func shortDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	s := strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func firstOf(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}
