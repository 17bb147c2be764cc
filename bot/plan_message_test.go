package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/approval"
)

func TestPlanMessage(t *testing.T) {
	plan := testPlan(actions.KindReleaseLeakedIPs, 3)
	plan.ExpiresAt = testT0.Add(15 * time.Minute)
	policy := approval.Policy{TwoPersonRule: true}
	result := &actions.Result{Planned: 3, Done: 2, NewSince: 2, Remaining: 2, Locked: true,
		StartedAt: testT0, FinishedAt: testT0.Add(1500 * time.Millisecond),
		Skipped: []actions.Skip{{Target: "172.16.0.2", Reason: "now in use by Workload(shop/web-1)"}}}
	tests := []struct {
		name        string
		approval    approval.Record
		wantTitle   string
		wantText    []string
		wantButtons []string
	}{
		{
			name:      "a pending plan shows what would change, the expiry and Approve / Deny",
			approval:  approval.Record{Plan: plan, State: approval.StatePending, RequestedBy: alice},
			wantTitle: "Approval needed: release 3 leaked IPs on prod",
			wantText: []string{"Requested by", "alice", "12:15:00Z (in 15m0s)", "What would change",
				"The requester cannot approve their own plan.", "The Calico datastore is locked"},
			wantButtons: []string{"approve", "deny"},
		},
		{
			name:      "a finished plan says what changed since approval and what remains",
			approval:  approval.Record{Plan: plan, State: approval.StateSucceeded, RequestedBy: alice, DecidedBy: &bob, Result: result},
			wantTitle: "Done: released 2 of 3 leaked IPs on prod",
			wantText: []string{"Approved by", "bob", "Changed since approval",
				"172.16.0.2: now in use by Workload(shop/web-1) (left alone)",
				"2 eligible items appeared after the plan was made; they were not touched.",
				"2 leaked IPs remain.", "locked for 2s and is unlocked again"},
		},
		{
			name:      "a failed plan explains a foreign lock without the raw error",
			approval:  approval.Record{Plan: plan, State: approval.StateFailed, RequestedBy: alice, DecidedBy: &bob, Error: "lock datastore: held by calicoctl", FailureCode: "datastore-locked"},
			wantTitle: "Failed: release 3 leaked IPs on prod",
			wantText:  []string{"locked by someone else, so nothing was changed"},
		},
		{
			name:      "a denied plan names who denied it",
			approval:  approval.Record{Plan: plan, State: approval.StateDenied, RequestedBy: alice, DecidedBy: &bob},
			wantTitle: "Denied: release 3 leaked IPs on prod",
			wantText:  []string{"Denied by", "bob", "Nothing was changed."},
		},
		{
			name:      "an expired plan says nothing ran",
			approval:  approval.Record{Plan: plan, State: approval.StateExpired, RequestedBy: alice},
			wantTitle: "Expired: release 3 leaked IPs on prod",
			wantText:  []string{"Nobody decided before 12:15:00Z; nothing was changed."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := PlanMessage(&tt.approval, testT0, policy, "The Calico datastore is locked while it runs.")
			if m.Title != tt.wantTitle {
				t.Errorf("title = %q, want %q", m.Title, tt.wantTitle)
			}
			text := renderedText(m)
			for _, s := range m.Sections {
				for _, f := range s.Fields {
					text += "\n" + f.Name + " " + f.Value
				}
			}
			for _, w := range tt.wantText {
				if !strings.Contains(text, w) {
					t.Errorf("message lacks %q:\n%s", w, text)
				}
			}
			if strings.Contains(text, "held by calicoctl") {
				t.Errorf("message shows the raw error")
			}
			var got []string
			for _, b := range m.Buttons {
				got = append(got, b.ActionID)
				if b.Value != plan.ID {
					t.Errorf("button %s value = %q, want the plan ID", b.ActionID, b.Value)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.wantButtons, ",") {
				t.Errorf("buttons = %v, want %v", got, tt.wantButtons)
			}
			if len(m.Buttons) > 0 && m.Buttons[0].Confirm == nil {
				t.Errorf("Approve has no confirm dialog")
			}
		})
	}
}

func TestPlanPreview(t *testing.T) {
	plan := testPlan(actions.KindReleaseEmptyBlocks, 0)
	plan.Items = []actions.Item{{Target: "10.0.0.64/26", Node: "worker-1"}}
	plan.Total = 1
	plan.RequestedBy = "cli:alice"
	plan.Excluded = []actions.Skip{{Target: "10.0.1.0/26", Reason: "the last affine block of worker-2"}}
	m := PlanPreview(plan)
	if m.Title != "Plan: release 1 empty IPAM block on prod" || m.Severity != "warning" || len(m.Buttons) != 0 {
		t.Errorf("preview %q (%s) with %d buttons, want the plan's title, a warning and no buttons", m.Title, m.Severity, len(m.Buttons))
	}
	text := renderedText(m)
	for _, s := range m.Sections {
		if s.Table != nil {
			for _, row := range s.Table.Rows {
				text += "\n" + strings.Join(row, " ")
			}
		}
	}
	for _, w := range []string{"What would change", "10.0.0.64/26 worker-1", "Left alone", "10.0.1.0/26: the last affine block of worker-2",
		"plan " + plan.ID + " · fingerprint " + plan.Fingerprint} {
		if !strings.Contains(text, w) {
			t.Errorf("preview lacks %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, "Approv") || strings.Contains(text, "Expires") {
		t.Errorf("preview speaks of an approval:\n%s", text)
	}
}
