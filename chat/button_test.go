package chat

import (
	"testing"
	"time"
)

// TestPlanButtonRoundTrip: what PlanButton writes, ParsePlanButton reads back, including the
// bare "plan:" action ID Discord sends and a value with the keys in another order.
func TestPlanButtonRoundTrip(t *testing.T) {
	p := PlanButton{Kind: "release-empty-blocks", Cluster: "prod", Node: "w-1"}
	b := p.Button("Release 2 empty blocks on w-1", StylePrimary)
	if b.ActionID != "plan:release-empty-blocks" || b.Value != "release-empty-blocks;cluster=prod;node=w-1" {
		t.Fatalf("button = %+v", b)
	}
	for _, tt := range []struct{ actionID, value string }{
		{b.ActionID, b.Value},
		{ActionPlanPrefix, b.Value},
		{b.ActionID, "release-empty-blocks;node=w-1;cluster=prod;extra=1"},
		{b.ActionID, ";cluster=prod;node=w-1"},
	} {
		got, ok := ParsePlanButton(tt.actionID, tt.value)
		if !ok || got != p {
			t.Errorf("ParsePlanButton(%q, %q) = %+v, %v; want %+v", tt.actionID, tt.value, got, ok, p)
		}
	}
	if _, ok := ParsePlanButton(ActionApprove, "rr-1"); ok {
		t.Error("an Approve button parsed as a plan button")
	}
	if _, ok := ParsePlanButton(ActionPlanPrefix, ""); ok {
		t.Error("a plan button without a kind parsed")
	}
}

func TestSilenceButtonRoundTrip(t *testing.T) {
	for _, s := range []SilenceButton{{Thread: "alert-0123456789abcdef0123", For: time.Hour}, {Thread: "alert-0123456789abcdef0123", For: 24 * time.Hour}, {Thread: "alert-x"}} {
		b := s.Button("x", StyleDefault)
		got, ok := ParseSilenceButton(b.ActionID, b.Value)
		if !ok || got != s {
			t.Errorf("ParseSilenceButton(%q, %q) = %+v %v, want %+v", b.ActionID, b.Value, got, ok, s)
		}
	}
	for _, bad := range [][2]string{{"silence:soon", "alert-x"}, {"silence:-1h", "alert-x"}, {"silence:1h", ""}, {"approve", "alert-x"}} {
		if _, ok := ParseSilenceButton(bad[0], bad[1]); ok {
			t.Errorf("ParseSilenceButton(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestSnoozeButtonRoundTrip(t *testing.T) {
	for _, s := range []SnoozeButton{{Thread: "watch-0123456789abcdef0123", For: time.Hour}, {Thread: "watch-x", For: 24 * time.Hour}, {Thread: "watch-x", UntilRecovered: true}} {
		b := s.Button("x")
		got, ok := ParseSnoozeButton(b.ActionID, b.Value)
		if !ok || got != s {
			t.Errorf("ParseSnoozeButton(%q, %q) = %+v %v, want %+v", b.ActionID, b.Value, got, ok, s)
		}
	}
	for _, bad := range [][2]string{{"snooze:soon", "watch-x"}, {"snooze:-1h", "watch-x"}, {"snooze:1h", ""}, {"silence:1h", "watch-x"}} {
		if _, ok := ParseSnoozeButton(bad[0], bad[1]); ok {
			t.Errorf("ParseSnoozeButton(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestFollowupButtonRoundTrip(t *testing.T) {
	for _, what := range []string{FollowupEvents, FollowupNodes, FollowupLogs, FollowupRecheck} {
		f := FollowupButton{Thread: "watch-0123456789abcdef0123", What: what}
		b := f.Button("x")
		got, ok := ParseFollowupButton(b.ActionID, b.Value)
		if !ok || got != f {
			t.Errorf("ParseFollowupButton(%q, %q) = %+v %v, want %+v", b.ActionID, b.Value, got, ok, f)
		}
	}
	for _, bad := range [][2]string{{"followup:restart", "watch-x"}, {"followup:events", ""}, {"snooze:1h", "watch-x"}} {
		if _, ok := ParseFollowupButton(bad[0], bad[1]); ok {
			t.Errorf("ParseFollowupButton(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
