package triage

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// withBoundClaim gives s's pod claim "data" bound to PV pv-1, whose node affinity requires
// label key to be one of values.
func withBoundClaim(key string, values ...string) func(*Snapshot) {
	return func(s *Snapshot) {
		s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data": {
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: s.Pod.Namespace},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}}
		s.PVs = map[string]*corev1.PersistentVolume{"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
			Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}}}
	}
}

// withWaitingClaim gives s's pod an unbound claim "data" of a WaitForFirstConsumer class that
// may only provision where label key is one of values.
func withWaitingClaim(key string, values ...string) func(*Snapshot) {
	return func(s *Snapshot) {
		wffc := storagev1.VolumeBindingWaitForFirstConsumer
		s.StorageClasses = map[string]*storagev1.StorageClass{"zonal": {ObjectMeta: metav1.ObjectMeta{Name: "zonal"},
			Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc,
			AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: key, Values: values}}}}}}
		s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data": {
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: s.Pod.Namespace},
			Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("zonal")},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}}
	}
}

func TestVolumeBindingReasons(t *testing.T) {
	zone := func(z string) func(*corev1.Node) { return withLabel("topology.kubernetes.io/zone", z) }
	testFilterReasons(t, "VolumeBinding", []reasonsCase{
		{name: "a bound PV pinned to another zone", pod: podRequesting("db"), node: node("n1", zone("a")),
			snap: withBoundClaim("topology.kubernetes.io/zone", "b"), want: []NodeReason{{Code: CodeVolumeNodeAffinityConflict}}},
		{name: "a bound PV in the node's zone", pod: podRequesting("db"), node: node("n1", zone("b")),
			snap: withBoundClaim("topology.kubernetes.io/zone", "b")},
		{name: "a waiting claim whose class may not provision in the node's zone", pod: podRequesting("db"), node: node("n1", zone("a")),
			snap: withWaitingClaim("topology.kubernetes.io/zone", "b"), want: []NodeReason{{Code: CodePVCUnbound}}},
		{name: "a waiting claim whose class may provision there", pod: podRequesting("db"), node: node("n1", zone("b")),
			snap: withWaitingClaim("topology.kubernetes.io/zone", "b", "c")},
	})
}
