package bot

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// TestFollowupMessage: each follow-up renders its part of the answer as /why-pending does
// (events as evidence lines, the node table, the previous log as a code block with long lines
// cut, each container once), and says so when the answer has none.
func TestFollowupMessage(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	long := make([]byte, 2*maxLogLineRunes)
	for i := range long {
		long[i] = 'x'
	}
	logEv := triage.Evidence{Object: "Pod shop/web", Field: triage.PreviousLogField("app"), Message: "starting\n" + string(long)}
	crashing := &triage.Answer{Pod: &triage.Diagnosis{
		Pod: triage.PodRef{Namespace: "shop", Name: "web"}, CollectedAt: now,
		Events: []triage.Event{{Type: "Warning", Reason: "BackOff", Message: "Back-off restarting failed container app", Count: 4,
			LastSeen: now.Add(-time.Minute), FieldPath: "spec.containers{app}"}},
		Findings: []triage.Finding{
			{Code: triage.CodeAppError, Evidence: []triage.Evidence{logEv}},
			{Code: triage.CodeContainerExitsImmediately, Evidence: []triage.Evidence{logEv}},
		},
	}}
	pending := &triage.Answer{Workload: &triage.WorkloadDiagnosis{
		Workload: triage.WorkloadRef{Kind: triage.KindDeployment, Namespace: "shop", Name: "checkout"}, CollectedAt: now,
		Findings: []triage.Finding{{Code: triage.CodeInsufficientCPU, Nodes: []triage.NodeVerdict{
			{Node: "a", Reasons: []triage.NodeReason{{Code: triage.CodeInsufficientCPU, Message: "Insufficient cpu"}}}}}},
	}}
	tests := []struct {
		name     string
		a        *triage.Answer
		what     string
		want     []chat.Section
		nodes    bool
		previous int
	}{
		{name: "events of a pod are its events, like kubectl describe", a: crashing, what: chat.FollowupEvents, previous: 1,
			want: []chat.Section{{Heading: "Pod shop/web", Lines: []string{"Warning BackOff (x4, last 60s ago) spec.containers{app}: Back-off restarting failed container app"}}}},
		{name: "the previous log is a code block, each line cut, each container once", a: crashing, what: chat.FollowupLogs, previous: 1,
			want: []chat.Section{{Heading: "Pod shop/web, container app (previous)", Code: "starting\n" + chat.Cut(string(long), maxLogLineRunes)}}},
		{name: "a crash-looping pod has no node table", a: crashing, what: chat.FollowupNodes, previous: 1,
			want: []chat.Section{{Text: "The answer now has no per-node table: no pod of it waits to be scheduled."}}},
		{name: "a Pending workload's node table", a: pending, what: chat.FollowupNodes, nodes: true,
			want: []chat.Section{{Table: &chat.Table{Columns: []string{"NODE", "FITS", "WHY NOT"}, Rows: [][]string{{"a", "no", "Insufficient cpu"}}}}}},
		{name: "a Pending workload has no previous log", a: pending, what: chat.FollowupLogs, nodes: true,
			want: []chat.Section{{Text: "The answer now has no previous container's log: no container of it crashed or was restarted lately."}}},
		{name: "no events left", a: pending, what: chat.FollowupEvents, nodes: true,
			want: []chat.Section{{Text: "No events: Kubernetes keeps events for an hour by default, and none are left about it."}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := FollowupMessage(tt.a, tt.what, "subject")
			if diff := cmp.Diff(tt.want, m.Sections); diff != "" {
				t.Errorf("FollowupMessage(%s) sections (-want +got):\n%s", tt.what, diff)
			}
			if got := len(nodesOf(tt.a).Nodes) > 0; got != tt.nodes {
				t.Errorf("has a node table = %v, want %v", got, tt.nodes)
			}
			if got := len(previousLogsOf(tt.a)); got != tt.previous {
				t.Errorf("previous logs = %d, want %d", got, tt.previous)
			}
		})
	}
}
