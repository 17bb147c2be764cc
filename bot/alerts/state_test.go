package alerts

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending/chat"
)

func hookOf(alerts ...Alert) *Webhook {
	return &Webhook{Version: "4", GroupKey: `{}:{alertname="KubePodCrashLooping"}`, Receiver: "team", Status: "firing",
		GroupLabels: map[string]string{"alertname": "KubePodCrashLooping"}, Alerts: alerts}
}

func crashAlert(pod, status string, start time.Time) Alert {
	a := Alert{Status: status, Labels: map[string]string{"alertname": "KubePodCrashLooping", "namespace": "shop", "pod": pod},
		StartsAt: start, Fingerprint: "fp-" + pod}
	if status == "resolved" {
		a.EndsAt = start.Add(10 * time.Minute)
	}
	return a
}

// TestMerge walks one group's life: the first notification, a redelivery and a repeat
// (nothing new), a join (one reply), a late older notification (ignored), a reminder once per
// interval, and the resolve (one reply, the group resolved with how long it fired).
func TestMerge(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var g group
	merge := func(at time.Duration, alerts ...Alert) (bool, bool) {
		return g.merge(hookOf(alerts...), t0.Add(at), "cluster", "", time.Minute, time.Hour)
	}
	a := crashAlert("web-1", "firing", t0)
	if changed, _ := merge(0, a); !changed || len(g.Replies) != 1 || g.Replies[0].Alert == "" {
		t.Fatalf("first: changed %v, replies %+v, want one diagnosis", changed, g.Replies)
	}
	if changed, news := merge(5*time.Second, a); changed || news {
		t.Errorf("redelivery: changed %v news %v, want neither", changed, news)
	}
	if changed, news := merge(5*time.Minute, a); !changed || news || len(g.Replies) != 1 {
		t.Errorf("repeat after 5m: changed %v news %v (%d replies), want only last seen moved", changed, news, len(g.Replies))
	}
	b := crashAlert("web-2", "firing", t0.Add(time.Minute))
	if changed, news := merge(6*time.Minute, a, b); !changed || !news || len(g.Replies) != 2 || !g.Replies[1].Joined {
		t.Fatalf("join: changed %v news %v replies %+v, want one joining diagnosis", changed, news, g.Replies)
	}
	// A notification without web-2 (silenced, inhibited, or an older one delivered late):
	// web-2 no longer fires there; the next notification that has it brings it back.
	if _, news := merge(6*time.Minute+time.Second, a); !news || len(g.Alerts) != 2 || !g.Alerts[1].Gone || g.Status != "firing" {
		t.Errorf("a notification without web-2: news %v, alerts %+v", news, g.Alerts)
	}
	if _, news := merge(6*time.Minute+2*time.Second, a, b); !news || g.Alerts[1].Gone || g.firing() != 2 ||
		!strings.HasPrefix(g.Replies[3].Text, "Back in the group's notifications") {
		t.Fatalf("web-2 back: news %v, replies %+v", news, g.Replies)
	}
	g.Replies = g.Replies[:2]
	if _, news := merge(70*time.Minute, a, b); !news || !strings.HasPrefix(g.Replies[2].Text, "Still firing: 2 alerts") {
		t.Errorf("after the remind interval: news %v replies %+v, want one reminder", news, g.Replies)
	}
	if _, news := merge(80*time.Minute, a, b); news {
		t.Errorf("a second reminder within the interval")
	}
	ra, rb := crashAlert("web-1", "resolved", t0), crashAlert("web-2", "resolved", t0.Add(time.Minute))
	if _, news := merge(90*time.Minute, ra, rb); !news || g.Status != "resolved" || len(g.Replies) != 4 {
		t.Fatalf("resolve: news %v status %s replies %+v", news, g.Status, g.Replies)
	}
	if !strings.HasPrefix(g.Replies[3].Text, "All resolved: the group fired for 11m") {
		t.Errorf("resolve reply = %q", g.Replies[3].Text)
	}
	if _, news := merge(91*time.Minute, a, b); news || g.Status != "resolved" {
		t.Errorf("a late firing notification of resolved episodes: news %v status %s", news, g.Status)
	}
	if m := rootMessage(&g, "", time.Now()); !strings.HasPrefix(m.Title, "Resolved: KubePodCrashLooping (fired for 11m") {
		t.Errorf("root title = %q", m.Title)
	}
}

// TestMergeHidden: an alert for a namespace the channel is not for gets no reply and is
// counted, not listed; an alert naming no object is listed and not diagnosed.
func TestMergeHidden(t *testing.T) {
	var g group
	other := crashAlert("db-0", "firing", time.Now())
	other.Labels["namespace"] = "payments"
	bare := Alert{Status: "firing", Labels: map[string]string{"alertname": "Watchdog"}, StartsAt: time.Now(), Fingerprint: "w"}
	g.merge(hookOf(crashAlert("web-1", "firing", time.Now()), other, bare), time.Now(), "cluster", "shop", time.Minute, 0)
	if len(g.Replies) != 1 {
		t.Fatalf("replies = %+v, want the shop pod's only (the bare alert is listed in the root)", g.Replies)
	}
	m := rootMessage(&g, "", time.Now())
	text := m.Title
	for _, s := range m.Sections {
		text += "\n" + s.Text + "\n" + strings.Join(s.Lines, "\n")
	}
	for _, want := range []string{"shop/pod/web-1", "Watchdog (names no Kubernetes object: not diagnosed)", "1 alert is for a namespace this channel does not answer for"} {
		if !strings.Contains(text, want) {
			t.Errorf("root lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "payments") || strings.Contains(text, "db-0") {
		t.Errorf("root shows the other namespace's alert:\n%s", text)
	}
}

// TestMergeGone is the tester's repro: a and b fire, then a notification has only b (a was
// silenced, or its resolve never came), then b resolves: the group resolves.
func TestMergeGone(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var g group
	merge := func(at time.Duration, w *Webhook) (bool, bool) {
		return g.merge(w, t0.Add(at), "cluster", "", time.Minute, time.Hour)
	}
	a, b := crashAlert("a", "firing", t0), crashAlert("b", "firing", t0)
	merge(0, hookOf(a, b))
	if _, news := merge(time.Minute, hookOf(b)); !news || g.Status != "firing" || g.firing() != 1 ||
		!strings.Contains(g.Replies[len(g.Replies)-1].Text, "No longer in the group's notifications") {
		t.Fatalf("only b: news %v, status %s, replies %+v", news, g.Status, g.Replies)
	}
	if m := rootMessage(&g, "", t0); !strings.Contains(m.Sections[0].Fields[0].Value, "1 no longer in the notifications") {
		t.Errorf("root status = %q", m.Sections[0].Fields[0].Value)
	}
	rb := crashAlert("b", "resolved", t0)
	rh := hookOf(rb)
	rh.Status = "resolved"
	if _, news := merge(20*time.Minute, rh); !news || g.Status != "resolved" || g.firing() != 0 {
		t.Fatalf("b resolved: news %v, status %s, alerts %+v", news, g.Status, g.Alerts)
	}
	// A truncated notification proves nothing about the alerts left out.
	var h group
	h.merge(hookOf(a, b), t0, "cluster", "", time.Minute, 0)
	tr := hookOf(b)
	tr.TruncatedAlerts = 1
	h.merge(tr, t0.Add(time.Minute), "cluster", "", time.Minute, 0)
	if h.firing() != 2 {
		t.Errorf("a truncated notification resolved alerts: %+v", h.Alerts)
	}
}

// TestMergeNamespaceLabel: an alert with a namespace label but no object label is hidden
// from a channel of another namespace (its summary too).
func TestMergeNamespaceLabel(t *testing.T) {
	var g group
	quota := Alert{Status: "firing", Labels: map[string]string{"alertname": "KubeQuotaExceeded", "namespace": "payments"},
		Annotations: map[string]string{"summary": "payments quota 95% used"}, StartsAt: time.Now(), Fingerprint: "q"}
	g.merge(hookOf(crashAlert("web-1", "firing", time.Now()), quota), time.Now(), "cluster", "shop", time.Minute, 0)
	m := rootMessage(&g, "", time.Now())
	text := m.Title
	for _, s := range m.Sections {
		text += "\n" + s.Text + "\n" + strings.Join(s.Lines, "\n")
	}
	if strings.Contains(text, "payments") || strings.Contains(text, "KubeQuotaExceeded") {
		t.Errorf("root shows the payments alert:\n%s", text)
	}
	if !strings.Contains(text, "1 alert is for a namespace this channel does not answer for") {
		t.Errorf("root does not count the hidden alert:\n%s", text)
	}
}

func TestObjectOf(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   string
		ok     bool
	}{
		{map[string]string{"namespace": "shop", "pod": "web-1", "deployment": "web"}, "shop/pod/web-1", true},
		{map[string]string{"namespace": "shop", "deployment": "web"}, "shop/deploy/web", true},
		{map[string]string{"namespace": "shop", "statefulset": "db"}, "shop/sts/db", true},
		{map[string]string{"namespace": "shop", "daemonset": "agent"}, "shop/ds/agent", true},
		{map[string]string{"namespace": "shop", "job_name": "backup-1"}, "shop/job/backup-1", true},
		{map[string]string{"namespace": "shop", "cronjob": "backup"}, "shop/cj/backup", true},
		{map[string]string{"pod": "web-1"}, "", false},
		{map[string]string{"namespace": "shop"}, "", false},
	} {
		o, ok := ObjectOf(c.labels, "cluster")
		if ok != c.ok || (ok && o.String() != c.want) {
			t.Errorf("ObjectOf(%v) = %v %v, want %q %v", c.labels, o, ok, c.want, c.ok)
		}
	}
}

// TestMergeCaps: a group of 3000 alerts keeps maxTracked one by one (the rest counted) and an
// entry well under 1 MiB; one notification adds at most maxDiagnoses diagnoses plus one line
// for the rest; a flapping group's kept replies stay bounded once posted.
func TestMergeCaps(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var alerts []Alert
	for i := range 3000 {
		a := crashAlert(fmt.Sprintf("web-%d", i), "firing", t0)
		a.Annotations = map[string]string{"summary": strings.Repeat("x", 600)}
		alerts = append(alerts, a)
	}
	var g group
	g.merge(hookOf(alerts...), t0, "cluster", "", time.Minute, 0)
	if len(g.Alerts) != maxTracked || g.Untracked != 3000-maxTracked || g.Status != "firing" {
		t.Fatalf("tracked %d, untracked %d, status %s", len(g.Alerts), g.Untracked, g.Status)
	}
	if changed, news := g.merge(hookOf(alerts...), t0.Add(time.Second), "cluster", "", time.Minute, 0); changed || news || g.Untracked != 3000-maxTracked {
		t.Errorf("redelivery of the large group: changed %v news %v untracked %d", changed, news, g.Untracked)
	}
	diag := 0
	for _, r := range g.Replies {
		if r.Alert != "" {
			diag++
		}
	}
	if diag != maxDiagnoses || len(g.Replies) != maxDiagnoses+1 || !strings.Contains(g.Replies[maxDiagnoses].Text, "and 180 more not diagnosed here: /why-pending -n shop --all") {
		t.Errorf("%d diagnoses, replies %+v", diag, g.Replies[len(g.Replies)-1])
	}
	if m := rootMessage(&g, "", t0); !strings.HasPrefix(m.Title, "Firing: KubePodCrashLooping (3000 alerts)") {
		t.Errorf("root title = %q", m.Title)
	}
	b, _ := json.Marshal(&g)
	if len(b) > 512<<10 {
		t.Errorf("entry data is %d bytes, want well under 1 MiB", len(b))
	}
	// Flapping: fire and resolve one alert 300 times, marking every reply posted.
	var f group
	posted := map[string]bool{}
	for i := range 300 {
		at := t0.Add(time.Duration(i) * time.Hour)
		a := crashAlert("flap", "firing", at)
		f.merge(hookOf(a), at, "cluster", "", time.Minute, 0)
		r := crashAlert("flap", "resolved", at)
		rh := hookOf(r)
		rh.Status = "resolved"
		f.merge(rh, at.Add(10*time.Minute), "cluster", "", time.Minute, 0)
		for _, rp := range f.Replies {
			posted[rp.Key] = true
		}
		f.prune(posted, func(k string) { delete(posted, k) })
	}
	keys := map[string]bool{}
	for _, rp := range f.Replies {
		if keys[rp.Key] {
			t.Fatalf("reply key %s twice", rp.Key)
		}
		keys[rp.Key] = true
	}
	if len(f.Alerts) > maxTracked || len(f.Replies) > maxReplies || len(posted) > maxReplies {
		t.Errorf("flapping: %d alerts, %d replies, %d posted marks", len(f.Alerts), len(f.Replies), len(posted))
	}
}

// TestMergeFiresAgain: a new episode after the group resolved is one reply, its diagnosis
// titled as the group firing again.
func TestMergeFiresAgain(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var g group
	g.merge(hookOf(crashAlert("web-1", "firing", t0)), t0, "cluster", "", time.Minute, 0)
	g.merge(hookOf(crashAlert("web-1", "resolved", t0)), t0.Add(10*time.Minute), "cluster", "", time.Minute, 0)
	n := len(g.Replies)
	if _, news := g.merge(hookOf(crashAlert("web-1", "firing", t0.Add(time.Hour))), t0.Add(time.Hour), "cluster", "", time.Minute, 0); !news ||
		len(g.Replies) != n+1 || !g.Replies[n].Again || g.Replies[n].Joined || g.Status != "firing" {
		t.Errorf("re-fire: news %v, replies %+v", news, g.Replies[n:])
	}
}

// TestResolveMissing: after an unsilence, the alerts Alertmanager no longer has are resolved,
// and the group with them.
func TestResolveMissing(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var g group
	a, b := crashAlert("a", "firing", t0), crashAlert("b", "firing", t0)
	g.merge(hookOf(a, b), t0, "cluster", "", time.Minute, 0)
	still := map[string]bool{g.Alerts[1].id(): true}
	if !g.resolveMissing(still, t0.Add(time.Hour)) || g.Status != "firing" || g.firing() != 1 {
		t.Fatalf("a gone: status %s, firing %d", g.Status, g.firing())
	}
	if g.resolveMissing(still, t0.Add(time.Hour)) {
		t.Errorf("a second read changed something")
	}
	if !g.resolveMissing(map[string]bool{}, t0.Add(2*time.Hour)) || g.Status != "resolved" ||
		!strings.HasPrefix(g.Replies[len(g.Replies)-1].Text, "All resolved") {
		t.Errorf("all gone: status %s, replies %+v", g.Status, g.Replies)
	}
}

// TestMergeFirstResolved: a group first seen resolved (the bot was down while it fired) is
// listed as resolved in the root, and gets no diagnosis reply: the object now (healthy, or
// gone) is not the cause of an alert that no longer fires. A firing one in the same
// notification is diagnosed.
func TestMergeFirstResolved(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var g group
	h := hookOf(crashAlert("web-1", "resolved", t0))
	h.Status = "resolved"
	if changed, _ := g.merge(h, t0.Add(20*time.Minute), "cluster", "", time.Minute, time.Hour); !changed || len(g.Replies) != 0 || g.Status != "resolved" {
		t.Fatalf("first seen resolved: changed %v, status %s, replies %+v; want resolved, no reply", changed, g.Status, g.Replies)
	}
	if m := rootMessage(&g, "", t0.Add(20*time.Minute)); !strings.Contains(shownText(m), "web-1") || !strings.Contains(shownText(m), "resolved after 10m") {
		t.Errorf("root = %s, want web-1 listed as resolved after 10m", shownText(m))
	}
	g.merge(hookOf(crashAlert("web-1", "resolved", t0), crashAlert("web-2", "firing", t0)), t0.Add(21*time.Minute), "cluster", "", time.Minute, time.Hour)
	if len(g.Replies) != 1 || len(g.Alerts) != 2 || g.Replies[0].Alert != g.Alerts[1].id() {
		t.Errorf("a firing alert joining: replies %+v, want web-2's diagnosis", g.Replies)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", 10 * time.Minute: "10m", 83 * time.Minute: "1h23m",
		4 * time.Hour: "4h", 24 * time.Hour: "24h", 90*time.Minute + 40*time.Second: "1h31m",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func shownText(m chat.Message) string {
	s := m.Title
	for _, sec := range m.Sections {
		s += "\n" + sec.Text + "\n" + strings.Join(sec.Lines, "\n")
	}
	return s
}

// TestSilenceNeedsEveryAlert: a channel answered for one namespace gets Silence buttons on a
// group's root only when it sees every alert of the group and the group's labels pin that
// namespace (a silence matches the group's labels, so it would mute the others too, or the
// same alert in every namespace), and a delivery none of whose alerts it sees is one it gets
// no root for.
func TestSilenceNeedsEveryAlert(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	in := func(ns, pod string) Alert {
		a := crashAlert(pod, "firing", t0)
		a.Labels["namespace"] = ns
		return a
	}
	for _, c := range []struct {
		name      string
		channelNS string
		groupNS   string // the group's namespace label ("": grouped by alertname only)
		alerts    []Alert
		untracked int
		buttons   bool
		seesNone  bool
	}{
		{"a channel of every namespace silences any group", "", "", []Alert{in("shop", "web-1"), in("other", "db-1")}, 0, true, false},
		{"a group of the channel's namespace", "shop", "shop", []Alert{in("shop", "web-1"), in("shop", "web-2")}, 0, true, false},
		{"all in the namespace, grouped by alertname only", "shop", "", []Alert{in("shop", "web-1"), in("shop", "web-2")}, 0, false, false},
		{"a group partly in another namespace", "shop", "", []Alert{in("shop", "web-1"), in("other", "db-1")}, 0, false, false},
		{"a group all in another namespace", "shop", "other", []Alert{in("other", "db-1")}, 0, false, true},
		{"alerts counted, not kept, may be anywhere", "shop", "shop", []Alert{in("shop", "web-1")}, 3, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var g group
			h := hookOf(c.alerts...)
			if c.groupNS != "" {
				h.GroupLabels = map[string]string{"alertname": "KubePodCrashLooping", "namespace": c.groupNS}
			}
			g.merge(h, t0, "", c.channelNS, time.Minute, 0)
			g.Untracked = c.untracked
			if got := len(silenceButtons(&g, "alert-x", c.channelNS, t0)) > 0; got != c.buttons {
				t.Errorf("Silence buttons = %v, want %v", got, c.buttons)
			}
			if got := g.silenceable(c.channelNS); got != c.buttons {
				t.Errorf("silenceable(%q) = %v, want %v", c.channelNS, got, c.buttons)
			}
			if got := seesNone(hookOf(c.alerts...), c.channelNS); got != c.seesNone {
				t.Errorf("seesNone(%q) = %v, want %v", c.channelNS, got, c.seesNone)
			}
		})
	}
}

// TestSilenceShowsTheDate: a silence's end is shown with its date, in the root and in the
// click's answer: 24 hours on is not today.
func TestSilenceShowsTheDate(t *testing.T) {
	end := time.Date(2026, 12, 3, 16, 20, 0, 0, time.UTC)
	if got, want := until(end), "2026-12-03 16:20 UTC"; got != want {
		t.Errorf("until(%v) = %q, want %q", end, got, want)
	}
	g := group{Status: "firing", Silence: &silenceState{State: "active", ID: "s1", By: "U0BOB on slack", Until: end, Channel: "C0TWO"}}
	if m := shownText(rootMessage(&g, "", end.Add(-time.Hour))); !strings.Contains(m, "until 2026-12-03 16:20 UTC by U0BOB on slack from channel C0TWO (silence s1)") {
		t.Errorf("root = %s, want the silence's end with its date, who and the channel", m)
	}
}

// TestStillFiringCountsThisEpisode: a group whose alert resolved and fires again hours later
// is reminded, and told resolved, with how long it fired this time, not since its first
// episode.
func TestStillFiringCountsThisEpisode(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var g group
	merge := func(at time.Duration, alerts ...Alert) {
		g.merge(hookOf(alerts...), t0.Add(at), "cluster", "", time.Minute, time.Hour)
	}
	merge(0, crashAlert("web-1", "firing", t0))
	merge(10*time.Minute, crashAlert("web-1", "resolved", t0))
	again := crashAlert("web-1", "firing", t0.Add(3*time.Hour))
	merge(3*time.Hour, again)
	n := len(g.Replies)
	merge(3*time.Hour+61*time.Minute, again)
	if len(g.Replies) != n+1 || g.Replies[n].Text != "Still firing: 1 alert, for 1h1m." {
		t.Fatalf("replies after the remind interval = %+v, want one \"Still firing: 1 alert, for 1h1m.\"", g.Replies[n:])
	}
	resolved := again
	resolved.Status, resolved.EndsAt = "resolved", t0.Add(4*time.Hour+10*time.Minute)
	merge(4*time.Hour+11*time.Minute, resolved)
	if last := g.Replies[len(g.Replies)-1].Text; !strings.HasPrefix(last, "All resolved: the group fired for 1h10m.") {
		t.Errorf("resolve reply = %q, want the second episode's 1h10m", last)
	}
	if m := rootMessage(&g, "", time.Now()); !strings.HasPrefix(m.Title, "Resolved: KubePodCrashLooping (fired for 1h10m") {
		t.Errorf("root title = %q", m.Title)
	}
}

// TestMergeOneDiagnosisPerObject: two alerts about one pod (its two containers crash-looping,
// or KubePodNotReady beside KubePodCrashLooping) get one diagnosis, in the first notification
// and when the second joins later (then one line says so); once the diagnosed alert has
// resolved, a new alert about the pod is diagnosed again.
func TestMergeOneDiagnosisPerObject(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	container := func(a Alert, name string) Alert {
		a.Labels = map[string]string{"alertname": a.Labels["alertname"], "namespace": "shop", "pod": a.Labels["pod"], "container": name}
		a.Fingerprint += "-" + name
		return a
	}
	diagnoses := func(g *group) (n int) {
		for _, r := range g.Replies {
			if r.Alert != "" {
				n++
			}
		}
		return n
	}

	var g group
	app, sidecar := container(crashAlert("web-1", "firing", t0), "app"), container(crashAlert("web-1", "firing", t0), "sidecar")
	g.merge(hookOf(app, sidecar), t0, "cluster", "", time.Minute, time.Hour)
	if n := diagnoses(&g); n != 1 || len(g.Replies) != 1 || len(g.Alerts) != 2 {
		t.Fatalf("two containers of one pod in the first notification: %d diagnoses, replies %+v, %d alerts; want one diagnosis, both alerts kept", n, g.Replies, len(g.Alerts))
	}

	g = group{}
	g.merge(hookOf(app), t0, "cluster", "", time.Minute, time.Hour)
	notReady := Alert{Status: "firing", Labels: map[string]string{"alertname": "KubePodNotReady", "namespace": "shop", "pod": "web-1"},
		StartsAt: t0.Add(time.Minute), Fingerprint: "fp-notready"}
	changed, news := g.merge(hookOf(app, notReady), t0.Add(2*time.Minute), "cluster", "", time.Minute, time.Hour)
	if n := diagnoses(&g); !changed || !news || n != 1 || len(g.Replies) != 2 ||
		g.Replies[1].Text != "Joined, for an object diagnosed above: KubePodNotReady shop/pod/web-1" {
		t.Fatalf("KubePodNotReady joins for the diagnosed pod: changed %v news %v, %d diagnoses, replies %+v; want one line, no second diagnosis", changed, news, n, g.Replies)
	}
	if changed, news := g.merge(hookOf(app, notReady), t0.Add(2*time.Minute+time.Second), "cluster", "", time.Minute, time.Hour); changed || news {
		t.Errorf("its redelivery: changed %v news %v, want neither", changed, news)
	}

	// The diagnosed alert resolves; another about the pod joins: the pod is diagnosed again
	// (the first answer is about an alert no longer firing).
	resolvedApp := app
	resolvedApp.Status, resolvedApp.EndsAt = "resolved", t0.Add(3*time.Minute)
	g.merge(hookOf(resolvedApp, notReady), t0.Add(3*time.Minute), "cluster", "", time.Minute, time.Hour)
	g.merge(hookOf(resolvedApp, notReady, sidecar), t0.Add(4*time.Minute), "cluster", "", time.Minute, time.Hour)
	if n := diagnoses(&g); n != 2 {
		t.Errorf("the sidecar's alert after the diagnosed one resolved: %d diagnoses, replies %+v; want a second", n, g.Replies)
	}
}
