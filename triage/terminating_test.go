package triage

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTerminatingRules(t *testing.T) {
	pvcPod := func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		st := status(p, "app")
		st.Ready, st.State = false, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}
	}
	withVolumeInUse := func(s *Snapshot) *Snapshot {
		s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data": {Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}}
		s.PVs = map[string]*corev1.PersistentVolume{"pv-1": {Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}}}}}
		s.Nodes[0].Status.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/ebs.csi.aws.com^vol-1"}
		return s
	}
	tests := []struct {
		name string
		snap *Snapshot
		want []Code
	}{
		{"a pod that is not deleted is not terminating", testSnapshot(testPod(finalizers("example.com/x"))), nil},
		{"a deleted pod with a finalizer is blocked by it", testSnapshot(testPod(deleted(10*time.Minute), finalizers("example.com/cleanup"))), []Code{CodeFinalizerBlocking}},
		{"a deleted pod on an unreachable node waits for its kubelet", func() *Snapshot {
			s := testSnapshot(testPod(deleted(time.Minute)))
			s.Nodes[0] = testNode("node-1", false, "v1.37.2")
			return s
		}(), []Code{CodeNodeUnreachableTerminating}},
		{"finalizers and an unreachable node are both reported, finalizer first", func() *Snapshot {
			s := testSnapshot(testPod(deleted(time.Minute), finalizers("example.com/cleanup")))
			s.Nodes[0] = testNode("node-1", false, "v1.37.2")
			return s
		}(), []Code{CodeFinalizerBlocking, CodeNodeUnreachableTerminating}},
		{"a NodeLost pod is left to the node-lost rule", func() *Snapshot {
			s := testSnapshot(testPod(deleted(time.Minute), statusReason(nodeLostReason, "Node node-1 is unresponsive", corev1.PodRunning)))
			s.Nodes[0] = testNode("node-1", false, "v1.37.2")
			return s
		}(), nil},
		{"stopped containers with the volume still in use on a Ready node", withVolumeInUse(testSnapshot(testPod(deleted(40*time.Minute), pvcPod))), []Code{CodeVolumeTeardownStuck}},
		{"an unmount failure event is enough", testSnapshot(testPod(deleted(5*time.Minute), pvcPod), warning("FailedUnmount", `UnmountVolume.TearDown failed for volume "data": device or resource busy`, 12, time.Minute)), []Code{CodeVolumeTeardownStuck}},
		{"a deleted pod with nothing holding it gets no finding", testSnapshot(testPod(deleted(time.Minute))), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, terminatingRules, tt.snap, tt.want...)
			for _, f := range got {
				if !hasField(f, "metadata.deletionTimestamp") {
					t.Errorf("%s evidence lacks metadata.deletionTimestamp", f.Code)
				}
			}
		})
	}
}

func TestFinalizerOwner(t *testing.T) {
	tests := []struct{ finalizer, want string }{
		{"batch.kubernetes.io/job-tracking", "the Job controller in kube-controller-manager (it removes the finalizer once it has counted the pod)"},
		{"example.com/cleanup", "the controller that owns the example.com API group or domain"},
		{"sample/do-something", ""},
	}
	for _, tt := range tests {
		if got := finalizerOwner(tt.finalizer); got != tt.want {
			t.Errorf("finalizerOwner(%q) = %q, want %q", tt.finalizer, got, tt.want)
		}
	}
}

func TestDeletionDescribe(t *testing.T) {
	s := testSnapshot(testPod(deleted(10 * time.Minute)))
	if got, want := deletionOf(s).describe(s), "deleted 10m ago with a 30s grace period (overdue by 9m30s)"; got != want {
		t.Errorf("describe() = %q, want %q", got, want)
	}
	s = testSnapshot(testPod(deleted(10*time.Second)), ev(corev1.EventTypeNormal, "Killing", "app", "Stopping container app", 1, 20*time.Minute))
	if got, want := deletionOf(s).describe(s), "deleted 10s ago with a 30s grace period (20s of it left); shutdown began 21m ago"; got != want {
		t.Errorf("describe() = %q, want %q", got, want)
	}
}

// TestRemoveFinalizersFix: the last-resort patch removes only the finalizers no Kubernetes
// controller owns, each behind a test of its index, from the end of the list.
func TestRemoveFinalizersFix(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app",
		Finalizers: []string{"example.com/cleanup", "batch.kubernetes.io/job-tracking", "example.com/backup"}}}
	want := `kubectl patch pod -n shop app --type=json -p '[{"op":"test","path":"/metadata/finalizers/2","value":"example.com/backup"},{"op":"remove","path":"/metadata/finalizers/2"},` +
		`{"op":"test","path":"/metadata/finalizers/0","value":"example.com/cleanup"},{"op":"remove","path":"/metadata/finalizers/0"}]'  # removes only example.com/cleanup, example.com/backup, and fails if the list changed; only once you know nothing still needs the cleanup`
	if got := removeFinalizersFix(pod); got != want {
		t.Errorf("removeFinalizersFix =\n%s\nwant\n%s", got, want)
	}
	pod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	if got := removeFinalizersFix(pod); strings.Contains(got, "kubectl patch") || !strings.Contains(got, "do not remove it by hand") {
		t.Errorf("only the Job controller's finalizer: removeFinalizersFix = %s, want no patch", got)
	}
}

// TestFinalizerWithinGrace: a pod deleted 2 s ago with 28 s of its grace period left may still
// be shutting down as it should: finalizer-blocking is then uncertain and says so.
func TestFinalizerWithinGrace(t *testing.T) {
	got := checkCodes(t, terminatingRules, testSnapshot(testPod(deleted(2*time.Second), finalizers("example.com/cleanup"))), CodeFinalizerBlocking)
	if !got[0].Uncertain || !strings.Contains(got[0].Summary, "Its grace period is not over (28s left)") {
		t.Errorf("within the grace period: uncertain %v, summary %q; want uncertain, saying the grace period is not over", got[0].Uncertain, got[0].Summary)
	}
	got = checkCodes(t, terminatingRules, testSnapshot(testPod(deleted(10*time.Minute), finalizers("example.com/cleanup"))), CodeFinalizerBlocking)
	if got[0].Uncertain {
		t.Errorf("10 min after the delete: uncertain, want sure")
	}
}
