package alerts

import (
	"strings"
	"testing"
	"time"
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
	if _, news := merge(6*time.Minute+time.Second, a); news || len(g.Alerts) != 2 {
		t.Errorf("an older notification: news %v, %d alerts", news, len(g.Alerts))
	}
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
	if len(g.Replies) != 2 {
		t.Fatalf("replies = %+v, want the shop pod's and the bare alert's", g.Replies)
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
