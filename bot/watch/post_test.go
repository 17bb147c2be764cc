package watch

import (
	"testing"
	"time"

	"github.com/whypending/whypending/chat"
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
	step("recovered", d.recover(t0.Add(200*time.Minute)), true, true, 4)
	step("recovered again", d.recover(t0.Add(201*time.Minute)), false, false, 4)
	if d.Replies[3].Text != "Recovered after 3.3 h." {
		t.Errorf("recovery line = %q", d.Replies[3].Text)
	}
	step("stuck again", d.update(wl, t0.Add(5*time.Hour), cpu, t0.Add(5*time.Hour), remind), true, true, 5)
	d.Snooze = &snooze{UntilRecovered: true, By: "slack:U0BOB"}
	step("recovered while snoozed: an edit, no line", d.recover(t0.Add(6*time.Hour)), true, true, 5)
	if m := rootMessage(&d, "watch-x"); m.Title != "Recovered after 60 min · deploy/checkout -n shop" || len(m.Buttons) != 0 {
		t.Errorf("recovered root = %q, %d buttons", m.Title, len(m.Buttons))
	}
}
