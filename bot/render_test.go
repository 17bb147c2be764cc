package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

func TestDiagnosisMessage(t *testing.T) {
	now := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	leak := triage.ActionRef{Kind: "release-leaked-ips", Label: "Release 181 leaked IPs"}
	d := &triage.Diagnosis{
		Pod:         triage.PodRef{Namespace: "shop", Name: "web"},
		State:       "Pending",
		CollectedAt: now,
		Findings: []triage.Finding{{
			Code:     triage.CodeInsufficientCPU,
			Severity: triage.SeverityBlocker,
			Summary:  "No node has 500m cpu free.",
			Evidence: []triage.Evidence{
				{Object: "Pod shop/web", Reason: "FailedScheduling", Message: "0/2 nodes are available: 2 Insufficient cpu.", Count: 3, LastSeen: now.Add(-90 * time.Second)},
				{Object: "Node b", Field: "status.allocatable.cpu", Message: "200m free"},
				{Object: "Pod shop/web", Field: "spec.containers[app].resources.requests.cpu", Message: "500m"},
			},
			Fix:     []string{"kubectl describe node a"},
			Actions: []triage.ActionRef{leak},
			Nodes: []triage.NodeVerdict{
				{Node: "b", Reasons: []triage.NodeReason{{Code: triage.CodeInsufficientCPU, Message: "Insufficient cpu"}}},
				{Node: "a", Reasons: []triage.NodeReason{{Code: triage.CodeInsufficientCPU, Message: "Insufficient cpu"}, {Code: triage.CodeUntoleratedTaint, Message: "taint x:NoSchedule"}}},
			},
		}, {
			Code: triage.CodeCalicoIPAMLeaks, Severity: triage.SeverityWarning, Summary: "181 leaked.",
			Actions: []triage.ActionRef{leak},
		}},
	}
	m := DiagnosisMessage(d, "")

	t.Run("title names pod, state and primary code", func(t *testing.T) {
		if got, want := m.Title, "shop/web is Pending: insufficient-cpu"; got != want {
			t.Errorf("Title = %q, want %q", got, want)
		}
	})
	t.Run("node table lists every reason, sorted by node", func(t *testing.T) {
		var table *chat.Table
		for _, s := range m.Sections {
			if s.Table != nil {
				table = s.Table
			}
		}
		want := &chat.Table{Columns: []string{"NODE", "FITS", "WHY NOT"}, Rows: [][]string{
			{"a", "no", "Insufficient cpu; taint x:NoSchedule"},
			{"b", "no", "Insufficient cpu"},
		}}
		if diff := cmp.Diff(want, table); diff != "" {
			t.Errorf("node table (-want +got):\n%s", diff)
		}
	})
	t.Run("evidence leaves per-node facts to the table and names other objects", func(t *testing.T) {
		var lines []string
		for _, s := range m.Sections {
			if s.Heading == "Evidence" {
				lines = s.Lines
			}
		}
		want := []string{
			"FailedScheduling (x3, last 90s ago): 0/2 nodes are available: 2 Insufficient cpu.",
			"spec.containers[app].resources.requests.cpu: 500m",
		}
		if diff := cmp.Diff(want, lines); diff != "" {
			t.Errorf("evidence (-want +got):\n%s", diff)
		}
	})
	t.Run("a repair offered twice becomes one button", func(t *testing.T) {
		want := []chat.Button{{ActionID: "plan:release-leaked-ips", Label: "Release 181 leaked IPs", Value: "release-leaked-ips", Style: "primary"}}
		if diff := cmp.Diff(want, m.Buttons); diff != "" {
			t.Errorf("buttons (-want +got):\n%s", diff)
		}
	})
}

func TestNodeTableIsCapped(t *testing.T) {
	var nodes []triage.NodeVerdict
	for i := 0; i < maxTableRows+5; i++ {
		nodes = append(nodes, triage.NodeVerdict{Node: strings.Repeat("n", i+1)})
	}
	tb := nodeTable(nodes, "")
	if got, want := len(tb.Rows), maxTableRows+1; got != want {
		t.Fatalf("rows = %d, want %d", got, want)
	}
	if got, want := tb.Rows[maxTableRows][0], "and 5 more nodes"; got != want {
		t.Errorf("last row = %q, want %q", got, want)
	}
}

// TestUncertainIsSaid: an uncertain diagnosis says so in its title and before its cause.
func TestUncertainIsSaid(t *testing.T) {
	d := &triage.Diagnosis{
		Pod: triage.PodRef{Namespace: "shop", Name: "train"}, State: "Pending", Uncertain: true,
		Findings: []triage.Finding{{Code: triage.CodeUnknown, Severity: triage.SeverityBlocker, Uncertain: true,
			Summary: "The scheduler rejects all 2 nodes for a reason whypending does not model."}},
	}
	m := DiagnosisMessage(d, "")
	if !strings.HasSuffix(m.Title, "unknown (uncertain)") {
		t.Errorf("title = %q, want it to end in \"unknown (uncertain)\"", m.Title)
	}
	if !strings.HasPrefix(m.Sections[0].Text, "Uncertain: ") {
		t.Errorf("cause = %q, want it to start with \"Uncertain: \"", m.Sections[0].Text)
	}
}
