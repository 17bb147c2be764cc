package triage

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// unschedulableCondition gives pod the PodScheduled condition the scheduler writes with msg.
func unschedulableCondition(pod *corev1.Pod, msg string) *corev1.Pod {
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg,
	})
	return pod
}

func TestPartialAnswer(t *testing.T) {
	const msg = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
	forbidden := errors.New(`nodes is forbidden: User "alice" cannot list resource "nodes"`)
	refused := []RefusedRead{
		{Verb: "list", Resource: "events", Namespace: "shop", Message: "events is forbidden"},
		{Verb: "list", Resource: "nodes", Message: "nodes is forbidden"},
		{Verb: "list", Resource: "pods", Message: "pods is forbidden"},
	}
	tests := []struct {
		name        string
		snap        func() *Snapshot
		wantCode    Code
		wantPartial bool
	}{
		{"events and nodes refused: the code comes from the PodScheduled condition", func() *Snapshot {
			s := snap(unschedulableCondition(podRequesting("web", "cpu=500m"), msg), nil, nil)
			s.EventsErr, s.NodesErr, s.Refused = forbidden, forbidden, refused
			return s
		}, CodeInsufficientCPU, true},
		{"without the condition nothing can be judged: unknown, still partial", func() *Snapshot {
			s := snap(podRequesting("web", "cpu=500m"), nil, nil)
			s.EventsErr, s.NodesErr, s.Refused = forbidden, forbidden, refused
			return s
		}, CodeUnknown, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(tt.snap())
			if got := d.Primary().Code; got != tt.wantCode {
				t.Errorf("primary code = %q, want %q", got, tt.wantCode)
			}
			if d.Partial != tt.wantPartial {
				t.Errorf("Partial = %t, want %t", d.Partial, tt.wantPartial)
			}
			if !tt.wantPartial {
				return
			}
			if len(d.Refused) != len(refused) {
				t.Errorf("Refused = %+v, want the %d refused reads", d.Refused, len(refused))
			}
			var lines []string
			for _, e := range d.Primary().Evidence {
				lines = append(lines, e.Field+": "+e.Message)
			}
			evidence := strings.Join(lines, "\n")
			for _, want := range []string{"events: forbidden (list in namespace shop)", "nodes: forbidden (list cluster-wide)", "pods: forbidden (list in all namespaces)"} {
				if !strings.Contains(evidence, want) {
					t.Errorf("evidence = %q, want %q", lines, want)
				}
			}
			if tt.wantCode == CodeInsufficientCPU && !strings.Contains(evidence, "status.conditions[PodScheduled]: "+msg) {
				t.Errorf("evidence = %q, want the condition's message", lines)
			}
			wantFix := []string{"kubectl auth can-i list events -n shop", "kubectl auth can-i list nodes", "kubectl auth can-i list pods --all-namespaces",
				"kubectl create clusterrole whypending-read --verb=list --resource=events,nodes,pods"}
			fix := strings.Join(d.Primary().Fix, "\n")
			for _, want := range wantFix {
				if !strings.Contains(fix, want) {
					t.Errorf("fix = %q, want %q", d.Primary().Fix, want)
				}
			}
			if !strings.Contains(d.Summary, "Partial answer: the API server refused 3 reads") {
				t.Errorf("summary = %q, want it to say the answer is partial", d.Summary)
			}
		})
	}
}

func TestRefusedReadCanI(t *testing.T) {
	tests := []struct {
		r    RefusedRead
		want string
	}{
		{RefusedRead{Verb: "list", Resource: "events", Namespace: "shop"}, "kubectl auth can-i list events -n shop"},
		{RefusedRead{Verb: "list", Resource: "nodes"}, "kubectl auth can-i list nodes"},
		{RefusedRead{Verb: "list", Resource: "pods"}, "kubectl auth can-i list pods --all-namespaces"},
		{RefusedRead{Verb: "get", Resource: "pods/log", Namespace: "shop"}, "kubectl auth can-i get pods --subresource=log -n shop"},
		{RefusedRead{Verb: "list", Resource: "storageclasses.storage.k8s.io"}, "kubectl auth can-i list storageclasses.storage.k8s.io"},
	}
	for _, tt := range tests {
		if got := tt.r.canI(); got != tt.want {
			t.Errorf("%+v.canI() = %q, want %q", tt.r, got, tt.want)
		}
	}
}
