package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/triage"
)

// TestPostLife walks one post through its states: what each step changes (a new root
// revision, a reply) and what it leaves alone (the same code again, a second reminder within
// the interval, anything while snoozed).
func TestPostLife(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	wl := Workload{Cluster: "prod", Kind: triage.KindDeployment, Namespace: "shop", Name: "checkout"}
	cpu := Result{Code: triage.CodeInsufficientCPU, Message: chat.Message{Title: "cpu"}}
	img := Result{Code: "image-not-found", Message: chat.Message{Title: "image"}}
	unsure := Result{Code: triage.CodeUnknown, Uncertain: true}
	const remind = time.Hour
	var d post
	if d.update(wl, t0, unsure, t0, remind) {
		t.Fatal("an uncertain answer started a post")
	}
	step := func(name string, ok, wantOK, wantBump bool, wantReplies int) {
		t.Helper()
		if ok != wantOK || d.bump != wantBump || len(d.Replies) != wantReplies {
			t.Errorf("%s: changed %v bump %v replies %d; want %v %v %d", name, ok, d.bump, len(d.Replies), wantOK, wantBump, wantReplies)
		}
		d.bump = false
	}
	step("first post", d.update(wl, t0, cpu, t0, remind), true, true, 0)
	step("same code, new text", d.update(wl, t0, Result{Code: cpu.Code, Message: chat.Message{Title: "other"}}, t0.Add(time.Minute), remind), false, false, 0)
	step("uncertain later", d.update(wl, t0, unsure, t0.Add(2*time.Minute), remind), false, false, 0)
	step("new code", d.update(wl, t0, img, t0.Add(3*time.Minute), remind), true, true, 1)
	step("reminder", d.update(wl, t0, img, t0.Add(61*time.Minute), remind), true, false, 2)
	step("no second reminder", d.update(wl, t0, img, t0.Add(90*time.Minute), remind), false, false, 2)
	d.Snooze = &snooze{Until: t0.Add(3 * time.Hour), By: "slack:U0BOB"}
	step("snoozed", d.update(wl, t0, cpu, t0.Add(2*time.Hour), remind), false, false, 2)
	step("snooze ended", d.update(wl, t0, cpu, t0.Add(3*time.Hour), remind), true, true, 3)
	if d.Snooze != nil || d.Code != cpu.Code || d.Replies[2].Text != "The snooze ended; still stuck after 3.0 h: insufficient-cpu." {
		t.Errorf("after the snooze: %+v, reply %q", d.Snooze, d.Replies[2].Text)
	}
	step("recovered", d.recover(t0.Add(200*time.Minute), endRecovered), true, true, 4)
	step("recovered again", d.recover(t0.Add(201*time.Minute), endDeleted), false, false, 4)
	if d.Replies[3].Text != "Recovered after 3.3 h." {
		t.Errorf("recovery line = %q", d.Replies[3].Text)
	}
	step("stuck again", d.update(wl, t0.Add(5*time.Hour), cpu, t0.Add(5*time.Hour), remind), true, true, 5)
	d.Snooze = &snooze{UntilRecovered: true, By: "slack:U0BOB"}
	step("recovered while snoozed: an edit, no line", d.recover(t0.Add(6*time.Hour), endRecovered), true, true, 5)
	if m := rootMessage(&d, "watch-x"); m.Title != "Recovered after 60 min · deploy/checkout -n shop" || len(m.Buttons) != 0 {
		t.Errorf("recovered root = %q, %d buttons", m.Title, len(m.Buttons))
	}
	step("stuck again", d.update(wl, t0.Add(7*time.Hour), cpu, t0.Add(7*time.Hour), remind), true, true, 6)
	step("deleted", d.recover(t0.Add(7*time.Hour+12*time.Minute), endDeleted), true, true, 7)
	if got := d.Replies[6].Text; got != "deploy/checkout -n shop was deleted after 12 min stuck (last cause insufficient-cpu); it did not recover." {
		t.Errorf("deleted line = %q", got)
	}
	m := rootMessage(&d, "watch-x")
	if m.Title != "Deleted while stuck · deploy/checkout -n shop" || m.Severity == chat.SeverityOK || strings.Contains(m.Sections[0].Text, "Recovered") {
		t.Errorf("deleted root = %q (%v): %q", m.Title, m.Severity, m.Sections[0].Text)
	}
	if replySeverity(&d, d.Replies[6]) == chat.SeverityOK {
		t.Error("the deletion line is shown as a recovery (green)")
	}
	step("created again, stuck", d.update(wl, t0.Add(8*time.Hour), cpu, t0.Add(8*time.Hour), remind), true, true, 8)
	if d.End != endRecovered {
		t.Errorf("a new episode keeps End %q", d.End)
	}
	step("scaled to zero", d.recover(t0.Add(9*time.Hour), endNoPods), true, true, 9)
	if m := rootMessage(&d, "watch-x"); m.Title != "No pods left while stuck · deploy/checkout -n shop" || m.Severity == chat.SeverityOK {
		t.Errorf("scaled-to-zero root = %q (%v)", m.Title, m.Severity)
	}
	// A pod stuck Terminating that is deleted at last: that is the fix, said as such.
	var g post
	pod := Workload{Cluster: "prod", Kind: triage.KindPod, Namespace: "shop", Name: "draining"}
	g.update(pod, t0, Result{Code: triage.CodeFinalizerBlocking, Message: chat.Message{Title: "fin"}}, t0, remind)
	g.recover(t0.Add(5*time.Minute), endDeleted)
	if m := rootMessage(&g, "watch-y"); m.Title != "Gone after 5 min stuck Terminating · draining -n shop" || m.Severity != chat.SeverityOK ||
		g.Replies[0].Text != "Gone after 5 min stuck Terminating (last cause finalizer-blocking)." || replySeverity(&g, g.Replies[0]) != chat.SeverityOK {
		t.Errorf("gone while Terminating: root %q (%v), reply %q", m.Title, m.Severity, g.Replies[0].Text)
	}
}

// TestPostUnwatched: a post whose workload is opted out while it is stuck is ended as no
// longer watched, saying where the opt-out is and what was last known, never that it
// recovered or was deleted; one line; nothing after it; the opt-out removed and the workload
// stuck again is a new episode.
func TestPostUnwatched(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	wl := Workload{Cluster: "prod", Kind: triage.KindDeployment, Namespace: "shop", Name: "checkout"}
	img := Result{Code: "image-not-found", Message: chat.Message{Title: "image"}}
	const remind = time.Hour
	annotation := "`whypending.io/watch: \"false\"`"
	tests := []struct {
		name      string
		o         optOut
		wantReply string
	}{
		{"the namespace annotated", optOut{Where: optOutNamespace, Names: []string{"shop"}},
			"No longer watched: " + annotation + " on namespace shop (last seen stuck 23 min with image-not-found)."},
		{"the workload annotated", optOut{Where: optOutWorkload, Names: []string{"deploy/checkout"}},
			"No longer watched: " + annotation + " on deploy/checkout (last seen stuck 23 min with image-not-found)."},
		{"its stuck pods annotated", optOut{Where: optOutPod, Names: []string{"checkout-1", "checkout-2"}},
			"No longer watched: " + annotation + " on pods checkout-1, checkout-2 (last seen stuck 23 min with image-not-found)."},
		{"the namespace excluded", optOut{Where: optOutExcluded, Names: []string{"shop"}},
			"No longer watched: namespace shop is in watch.excludeNamespaces (last seen stuck 23 min with image-not-found)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d post
			d.update(wl, t0, img, t0, remind)
			d.bump = false
			if !d.unwatch(t0.Add(23*time.Minute), tt.o) || !d.bump || len(d.Replies) != 1 || d.Replies[0].Text != tt.wantReply {
				t.Fatalf("unwatch: bump %v, replies %+v; want one reply %q", d.bump, d.Replies, tt.wantReply)
			}
			if replySeverity(&d, d.Replies[0]) == chat.SeverityOK {
				t.Error("the unwatched line is shown as a recovery (green)")
			}
			m := rootMessage(&d, "watch-x")
			text := m.Title + " " + m.Sections[0].Text
			if m.Title != "No longer watched · deploy/checkout -n shop" || m.Severity == chat.SeverityOK || len(m.Buttons) != 0 ||
				!strings.Contains(text, strings.TrimSuffix(tt.wantReply, ").")) || strings.Contains(text, "Recovered") || strings.Contains(text, "deleted") {
				t.Errorf("unwatched root = %q (%v, %d buttons): %q", m.Title, m.Severity, len(m.Buttons), m.Sections[0].Text)
			}
			d.bump = false
			if d.unwatch(t0.Add(24*time.Minute), tt.o) || d.recover(t0.Add(25*time.Minute), endDeleted) || d.bump {
				t.Error("an unwatched post was ended again")
			}
			if d.update(wl, t0, img, t0.Add(30*time.Minute), remind); d.State != stateStuck || d.End != endRecovered || d.Unwatched != nil ||
				len(d.Replies) != 2 || d.Replies[1].Text != "Watched again; still stuck: image-not-found." {
				t.Errorf("watched again: state %q end %q unwatched %v replies %+v; want it open again, one line that does not say it recovered", d.State, d.End, d.Unwatched, d.Replies)
			}
		})
	}
	// Snoozed: the root says so, no line is posted (as for a recovery while snoozed), and the
	// snooze outlives the opt-out: it did not recover, so watched again it stays quiet.
	for _, sn := range []snooze{{UntilRecovered: true, By: "slack:U0BOB"}, {Until: t0.Add(24 * time.Hour), By: "slack:U0BOB"}} {
		var d post
		d.update(wl, t0, img, t0, remind)
		d.Snooze = &sn
		if !d.unwatch(t0.Add(time.Minute), optOut{Where: optOutNamespace, Names: []string{"shop"}}) || len(d.Replies) != 0 || !d.bump {
			t.Errorf("unwatched while snoozed (%s): replies %+v, bump %v; want an edit, no line", &sn, d.Replies, d.bump)
		}
		d.bump = false
		if !d.update(wl, t0, img, t0.Add(2*time.Minute), remind) || d.State != stateStuck || d.Snooze == nil || len(d.Replies) != 0 {
			t.Errorf("watched again while snoozed (%s): state %q snooze %v replies %+v; want open, still snoozed, no line", &sn, d.State, d.Snooze, d.Replies)
		}
		if d.update(wl, t0, img, t0.Add(63*time.Minute), remind) || len(d.Replies) != 0 {
			t.Errorf("snoozed (%s) after being watched again: replies %+v at +63 min; want none", &sn, d.Replies)
		}
	}
	// A timed snooze that ran out while it was not watched: watched again, one line, and no
	// second "the snooze ended" line after it.
	var d post
	d.update(wl, t0, img, t0, remind)
	d.Snooze = &snooze{Until: t0.Add(10 * time.Minute), By: "slack:U0BOB"}
	d.unwatch(t0.Add(time.Minute), optOut{Where: optOutWorkload, Names: []string{"deploy/checkout"}})
	d.update(wl, t0, img, t0.Add(20*time.Minute), remind)
	d.update(wl, t0, img, t0.Add(21*time.Minute), remind)
	if d.Snooze != nil || len(d.Replies) != 1 || d.Replies[0].Text != "Watched again; still stuck: image-not-found." {
		t.Errorf("watched again after the snooze ran out: snooze %v replies %+v; want one line", d.Snooze, d.Replies)
	}
}

// TestPostEntryState: the entry's state (the State column of `kubectl get notifications`)
// says how an episode ended, so a deleted or unwatched workload's post is not listed as
// recovered.
func TestPostEntryState(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	wl := Workload{Cluster: "prod", Kind: triage.KindDeployment, Namespace: "shop", Name: "checkout"}
	cpu := Result{Code: triage.CodeInsufficientCPU, Message: chat.Message{Title: "cpu"}}
	for _, end := range []string{endRecovered, endDeleted, endNoPods} {
		var d post
		d.update(wl, t0, cpu, t0, time.Hour)
		var e ledger.Entry
		if err := d.save(&e); err != nil || e.State != stateStuck {
			t.Fatalf("stuck: entry state %q (%v), want %q", e.State, err, stateStuck)
		}
		d.recover(t0.Add(time.Minute), end)
		if err := d.save(&e); err != nil {
			t.Fatal(err)
		}
		want := end
		if end == endRecovered {
			want = stateRecovered
		}
		if e.State != want {
			t.Errorf("ended %q: entry state %q, want %q", end, e.State, want)
		}
	}
}
