package alerts

import (
	"fmt"
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
	// Replies are the thread's replies in the order they are posted (append only).
	Replies []reply `json:"replies"`
	// FirstAt is when the group was first seen firing; ResolvedAt when it last resolved.
	FirstAt    time.Time `json:"firstAt"`
	ResolvedAt time.Time `json:"resolvedAt,omitzero"`
	// LastSeen is the time of the last notification; Shown the LastSeen the root shows.
	LastSeen time.Time `json:"lastSeen"`
	// RemindedAt is when the last reminder reply was added (or the thread started).
	RemindedAt time.Time `json:"remindedAt"`
	// Silence is the group's Alertmanager silence made from chat, if one; SilenceLog is
	// every silence and unsilence, who and when (the audit).
	Silence    *silenceState  `json:"silence,omitempty"`
	SilenceLog []silenceEvent `json:"silenceLog,omitempty"`
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
}

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
	// Joined says the alert joined a group already posted.
	Joined bool `json:"joined,omitempty"`
	// Text is a change's line.
	Text string `json:"text,omitempty"`
}

// merge is what a notification changes in g. It returns changed when the root must say
// something new (an alert joined or resolved, the group resolved or fired again, a reminder
// is due, or the "last seen" time moved by at least seenEvery), and news when a new reply
// was added; a notification that is the same as the last (a redelivery, a repeat_interval
// re-send) changes neither, bar "last seen".
func (g *group) merge(w *Webhook, now time.Time, clusterLabel, channelNS string, seenEvery, remindEvery time.Duration) (changed, news bool) {
	first := len(g.Alerts) == 0
	if first {
		g.Receiver, g.GroupLabels, g.FirstAt, g.RemindedAt = w.Receiver, w.GroupLabels, now, now
	}
	g.ExternalURL, g.Truncated = w.ExternalURL, w.TruncatedAlerts
	var resolved []string
	grew := false
	for _, in := range w.Alerts {
		a := alertState{Fingerprint: in.Fingerprint, StartsAt: in.StartsAt.UTC(), Status: in.Status, Labels: in.Labels,
			Summary: firstOf(in.Annotations["summary"], in.Annotations["description"], in.Annotations["message"]), GeneratorURL: in.GeneratorURL}
		if !in.EndsAt.IsZero() && in.Status == "resolved" {
			a.EndsAt = in.EndsAt.UTC()
		}
		if o, ok := ObjectOf(in.Labels, clusterLabel); ok {
			a.Object = &o
			a.Hidden = channelNS != "" && o.Namespace != channelNS
		}
		i := g.find(a.id())
		switch {
		case i < 0:
			grew = grew || !first
			g.Alerts = append(g.Alerts, a)
			if !a.Hidden {
				// A joining alert's one reply is its diagnosis, titled as joining.
				g.Replies = append(g.Replies, reply{Key: "alert-" + a.id(), Alert: a.id(), Joined: !first})
				news = news || !first
			}
		case g.Alerts[i].Status == "firing" && a.Status == "resolved":
			// An episode resolves once; a "firing" for one already resolved is an older
			// notification delivered late (a retry, another replica) and changes nothing.
			g.Alerts[i].Status, g.Alerts[i].EndsAt = a.Status, a.EndsAt
			resolved = append(resolved, a.name()+" after "+since(a.StartsAt, a.EndsAt, now))
		}
	}
	// The group's status is its alerts': resolved once every episode is, so a late delivery
	// of an older notification cannot turn it back to firing.
	wasResolved := g.Status == "resolved"
	g.Status = "resolved"
	if g.firing() > 0 {
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
	switch {
	case g.Status == "resolved" && !wasResolved && !first:
		lines = append([]string{"All resolved: the group fired for " + g.fired(now) + "."}, lines...)
	case g.Status == "firing" && wasResolved:
		lines = append([]string{"The group fires again."}, lines...)
	}
	if len(lines) == 0 && !first && g.Status == "firing" && remindEvery > 0 && now.Sub(g.RemindedAt) >= remindEvery {
		lines = append(lines, fmt.Sprintf("Still firing: %d %s, for %s.", g.firing(), plural(g.firing(), "alert"), g.fired(now)))
		g.RemindedAt = now
	}
	seenMoved := now.Sub(g.LastSeen) >= seenEvery
	g.LastSeen = now
	if len(lines) > 0 && !first {
		g.Replies = append(g.Replies, reply{Key: fmt.Sprintf("change-%d", len(g.Replies)), Text: strings.Join(lines, "\n")})
		news = true
	}
	return first || news || grew || seenMoved, news
}

// fired is how long the group has fired: from its earliest alert's startsAt to the last
// endsAt once resolved, else to now.
func (g *group) fired(now time.Time) string {
	var start, end time.Time
	for _, a := range g.Alerts {
		if start.IsZero() || a.StartsAt.Before(start) {
			start = a.StartsAt
		}
		if a.EndsAt.After(end) {
			end = a.EndsAt
		}
	}
	if g.Status == "firing" || end.IsZero() {
		end = now
	}
	return since(start, end, now)
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
	if d := end.Sub(start); d < time.Minute {
		return d.Round(time.Second).String()
	} else {
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
}

func firstOf(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}
