package triage

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// boundNeverStarted is a Pending pod bound to node-1 two minutes before clock0 that the
// kubelet never reported on (no container statuses), with the scheduler's FailedScheduling
// event from before the binding.
func boundNeverStarted() (*corev1.Pod, Event) {
	p := testPod(onNode("node-1"))
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(clock0.Add(-2 * time.Minute)),
	}}}
	stale := warning("FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.", 4, 3*time.Minute)
	stale.Source = "default-scheduler"
	return p, stale
}

// TestBoundPodTheKubeletNeverReported: the answer names the node and the kubelet, shows the
// node's Ready condition, and does not present the pre-binding FailedScheduling as current.
func TestBoundPodTheKubeletNeverReported(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ready bool
		want  string
	}{
		{"node Ready", true, "reports Ready"},
		{"node NotReady", false, "is Ready=Unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, stale := boundNeverStarted()
			s := testSnapshot(pod, stale)
			s.Nodes = []*corev1.Node{testNode("node-1", tc.ready, "v1.37.2")}
			d := Evaluate(s)
			f := d.Findings[0]
			if f.Code != CodeUnknown || !d.Uncertain {
				t.Fatalf("codes = %v uncertain %v, want unknown, uncertain", codesOf(d.Findings), d.Uncertain)
			}
			for _, want := range []string{"bound to node node-1 2m ago", "kubelet there has not reported it", tc.want} {
				if !strings.Contains(f.Summary, want) {
					t.Errorf("summary lacks %q: %s", want, f.Summary)
				}
			}
			if !hasField(f, "status.conditions[Ready]") {
				t.Errorf("no Ready condition in the evidence: %+v", f.Evidence)
			}
			for _, e := range f.Evidence {
				if strings.Contains(e.Message, "0/3 nodes are available") {
					t.Errorf("a FailedScheduling from before the binding is shown as current evidence: %+v", e)
				}
				if e.Reason == "FailedScheduling" && !strings.Contains(e.Message, "before the pod was bound") {
					t.Errorf("FailedScheduling evidence not marked as before the binding: %+v", e)
				}
			}
			if !slicesContain(f.Fix, "journalctl -u kubelet") {
				t.Errorf("no kubelet log fix: %q", f.Fix)
			}
		})
	}
}

// TestBoundPodWithKubeletEventsIsNotNeverStarted: once the kubelet has written an event
// after the binding, the pod is not "never reported".
func TestBoundPodWithKubeletEventsIsNotNeverStarted(t *testing.T) {
	pod, stale := boundNeverStarted()
	pulling := ev("Normal", "Pulling", "app", `Pulling image "nginx"`, 1, time.Minute)
	pulling.Source = "kubelet"
	if _, ok := boundNotStartedFinding(testSnapshot(pod, stale, pulling)); ok {
		t.Error("a pod the kubelet has reported on is called never reported")
	}
}
