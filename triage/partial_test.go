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

// TestFailedReadsArePartial: a read that timed out or failed (not refused) makes the answer
// partial like a refused one: listed with why it failed, a health check and a retry as fix,
// no permission to grant; and a rule that finds no event says the events could not be read
// instead of "no event is left".
func TestFailedReadsArePartial(t *testing.T) {
	timedOut := errors.New(`list events for pod shop/web: Get "https://k8s/api/v1/namespaces/shop/events": context deadline exceeded`)
	failed := []RefusedRead{
		{Verb: "list", Resource: "events", Namespace: "shop", Message: timedOut.Error(), Failure: ReadTimedOut, WaitedSeconds: 30},
		{Verb: "list", Resource: "nodes", Message: "the server is currently unable to handle the request", Failure: ReadFailed, WaitedSeconds: 1},
	}
	s := testSnapshot(testPod(pending("ImagePullBackOff", `Back-off pulling image "registry.example.com/shop/app:1.0"`)))
	s.EventsErr, s.NodesErr, s.Refused = timedOut, errors.New("list nodes: unavailable"), failed
	d := Evaluate(s)
	p := d.Primary()
	if p.Code != CodeImagePullFailed || !p.Uncertain || !d.Partial {
		t.Fatalf("primary = %s uncertain %t, partial %t; want %s, uncertain, partial", p.Code, p.Uncertain, d.Partial, CodeImagePullFailed)
	}
	if strings.Contains(p.Summary, "no event") || strings.Contains(p.Summary, "expire") {
		t.Errorf("summary claims the events are gone: %q", p.Summary)
	}
	for _, want := range []string{"which could not be read (timed out after 30s)",
		"Partial answer: 2 reads failed (list events in namespace shop: timed out after 30s, list nodes cluster-wide: failed after 1s: the server is currently unable to handle the request)"} {
		if !strings.Contains(p.Summary, want) {
			t.Errorf("summary = %q, want %q", p.Summary, want)
		}
	}
	var evidence []string
	for _, e := range p.Evidence {
		evidence = append(evidence, e.Message)
	}
	for _, want := range []string{"events: timed out after 30s (list in namespace shop)", "nodes: failed after 1s: the server is currently unable to handle the request (list cluster-wide)"} {
		if !slicesContain(evidence, want) {
			t.Errorf("evidence = %q, want %q", evidence, want)
		}
	}
	fix := strings.Join(p.Fix, "\n")
	for _, want := range []string{"kubectl get --raw='/readyz?verbose'", "kubectl get events -n shop --request-timeout=2m", "kubectl get nodes --request-timeout=2m"} {
		if !strings.Contains(fix, want) {
			t.Errorf("fix = %q, want %q", p.Fix, want)
		}
	}
	if strings.Contains(fix, "can-i") || strings.Contains(fix, "clusterrole") {
		t.Errorf("fix grants permissions for reads that were not refused: %q", p.Fix)
	}
}

// TestUnreadEventsAreNotAbsentEvents: each rule that says "no event" when it finds none says
// instead that the events could not be read when their read failed.
func TestUnreadEventsAreNotAbsentEvents(t *testing.T) {
	timedOut := []RefusedRead{{Verb: "list", Resource: "events", Namespace: "default", Failure: ReadTimedOut, WaitedSeconds: 30}}
	unread := func(s *Snapshot) *Snapshot {
		s.EventsErr, s.Refused = errors.New("list events: timed out"), timedOut
		return s
	}
	bound := testPod(onNode("node-1"))
	bound.Status = corev1.PodStatus{Phase: corev1.PodPending}
	tests := []struct {
		name string
		snap *Snapshot
		rule func(*Snapshot) []Finding
	}{
		{"image pull back-off", unread(testSnapshot(testPod(pending("ImagePullBackOff", `Back-off pulling image "x:1"`)))), imageRules},
		{"bound, never started", unread(testSnapshot(bound, nil...)), func(s *Snapshot) []Finding {
			f, ok := boundNotStartedFinding(s)
			if !ok {
				return nil
			}
			return []Finding{f}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := tt.rule(tt.snap)
			if len(fs) == 0 {
				t.Fatal("no finding")
			}
			sum := fs[0].Summary
			if !strings.Contains(sum, "could not be read (timed out after 30s)") || strings.Contains(sum, "no event") || strings.Contains(sum, "no kubelet event") || strings.Contains(sum, "expire") {
				t.Errorf("summary = %q, want it to say the events could not be read, and claim none is missing", sum)
			}
		})
	}
}

// TestUnreadPodsAreNotAbsentPods: a Deployment whose ReplicaSets (or pods) could not be listed
// is not said to have no pods, nor is its controller blamed: its pods are unknown.
func TestUnreadPodsAreNotAbsentPods(t *testing.T) {
	ws := deploymentWS(5)
	ws.ReplicaSets, ws.Pods = nil, nil
	ws.Refused = []RefusedRead{{Verb: "list", Resource: "replicasets.apps", Namespace: "shop", Failure: ReadTimedOut, WaitedSeconds: 5}}
	d := EvaluateWorkload(ws)
	sum := d.Summary
	for _, f := range d.Findings {
		sum += " " + f.Summary
	}
	if !strings.Contains(sum, "its pods could not be read (list replicasets.apps: timed out after 5s)") || strings.Contains(sum, "has none") || strings.Contains(sum, "controller-manager") {
		t.Errorf("answer = %q, want its pods unknown, never 'has none' or the controller blamed", sum)
	}
	if !d.Partial || !d.Uncertain {
		t.Errorf("partial %v, uncertain %v; want both", d.Partial, d.Uncertain)
	}
}
