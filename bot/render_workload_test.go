package bot

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending/triage"
)

// TestWorkloadMessage checks the order of a workload answer (cause, one line per group, then
// each group's representative in full and its other pods in one line each) and that a cause
// restated from the largest group is not shown twice.
func TestWorkloadMessage(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rep := &triage.Diagnosis{Pod: triage.PodRef{Namespace: "shop", Name: "checkout-a"}, State: "Pending", Summary: "No node has 1500m cpu free.",
		Findings: []triage.Finding{{Code: triage.CodeInsufficientCPU, Summary: "No node has 1500m cpu free.", Fix: []string{"kubectl describe node node-1"},
			Evidence: []triage.Evidence{{Reason: "FailedScheduling", Message: "0/3 nodes are available: 3 Insufficient cpu.", Count: 3, LastSeen: now}}}}, CollectedAt: now}
	healthy := &triage.Diagnosis{Pod: triage.PodRef{Namespace: "shop", Name: "checkout-e"}, State: "Running", Summary: "The pod is not stuck.",
		Findings: []triage.Finding{{Code: triage.CodePodHealthy, Severity: triage.SeverityInfo, Summary: "The pod is not stuck."}}, CollectedAt: now}
	five := int32(5)
	wd := &triage.WorkloadDiagnosis{
		Workload: triage.WorkloadRef{Kind: triage.KindDeployment, Namespace: "shop", Name: "checkout", UID: "u"},
		Summary:  "4 of 5 pods Pending: insufficient-cpu; 1 Running and Ready. No node has 1500m cpu free.",
		Desired:  &five, Ready: 1, Pods: 5, CollectedAt: now,
		Findings: []triage.Finding{{Code: triage.CodeInsufficientCPU, Summary: "4 of 5 pods Pending", Fix: rep.Findings[0].Fix,
			Evidence: []triage.Evidence{{Object: "Pod shop/checkout-a", Message: "No node has 1500m cpu free."}}}},
		Groups: []triage.PodGroup{
			{Code: triage.CodeInsufficientCPU, Label: "4 of 5 pods Pending: insufficient-cpu", Diagnosis: rep, Pods: []triage.PodLine{
				{Name: "checkout-a", State: "Pending", Summary: rep.Summary}, {Name: "checkout-b", State: "Pending", Summary: rep.Summary},
				{Name: "checkout-c", State: "Pending", Summary: rep.Summary}, {Name: "checkout-d", State: "Pending", Summary: "Something else."}}},
			{Code: triage.CodePodHealthy, Label: "1 Running and Ready", Diagnosis: healthy, Pods: []triage.PodLine{{Name: "checkout-e", State: "Running", Node: "node-1"}}},
		},
	}
	m := AnswerMessage(&triage.Answer{Workload: wd, Notes: []string{"No pod is named checkout, so this is Deployment checkout."}}, "")
	if m.Title != "Deployment shop/checkout: insufficient-cpu" || m.Severity != "blocker" {
		t.Errorf("title %q severity %q", m.Title, m.Severity)
	}
	var headings []string
	for _, s := range m.Sections {
		headings = append(headings, s.Heading)
	}
	want := []string{"Note", "Cause", "Pods by cause",
		"4 of 5 pods Pending: insufficient-cpu — pod checkout-a", "Evidence", "Fix", "The group's other pods",
		"1 Running and Ready — pod checkout-e"}
	if !slices.Equal(headings, want) {
		t.Errorf("sections = %q, want %q (the restated cause's evidence and fix once, under its group)", headings, want)
	}
	others := m.Sections[6].Lines
	if wantLines := []string{"checkout-b (Pending): the same cause", "checkout-c (Pending): the same cause", "checkout-d (Pending): Something else."}; !slices.Equal(others, wantLines) {
		t.Errorf("other pods = %q, want %q", others, wantLines)
	}
	if f := m.Sections[1].Fields; len(f) != 2 || f[1].Value != "1 of 5 pods (wants 5)" {
		t.Errorf("cause fields = %+v", f)
	}
	if !strings.Contains(m.Footer, "code insufficient-cpu") {
		t.Errorf("footer = %q", m.Footer)
	}
}

// TestSweepMessageCountsPodsNotCreated checks that the title counts the pods a refused
// controller never created next to the stuck ones, so the causes' pods add up.
func TestSweepMessageCountsPodsNotCreated(t *testing.T) {
	d := &triage.NamespaceDiagnosis{Namespace: "psa", Stuck: 0, Missing: 2, Workloads: 2, Failing: 2, Causes: []triage.SweepCause{
		{Code: triage.CodePodSecurityViolation, Pods: 2, Items: []triage.SweepItem{{Kind: triage.KindDeployment, Name: "priv", Pods: []string{}, Count: 2, Summary: "refused"}}},
		{Code: triage.CodeDaemonSetUnplaced, Pods: 0, Items: []triage.SweepItem{{Kind: triage.KindDaemonSet, Name: "agent", Pods: []string{}, Summary: "no node"}}},
	}}
	m := SweepMessage(d)
	if m.Title != "Namespace psa: 0 stuck pods and 2 not created, 2 causes" {
		t.Errorf("title = %q", m.Title)
	}
	if h := m.Sections[2].Heading; h != "daemonset-unplaced: 1 workload, no pods" {
		t.Errorf("heading = %q", h)
	}
}
