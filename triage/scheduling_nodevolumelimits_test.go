package triage

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// withCSIVolumes gives the Snapshot a CSI driver's per-node attachable limit on nodes and pods
// that each mount one bound volume of that driver, plus an unbound WaitForFirstConsumer claim
// for the pod under diagnosis (the StatefulSet-per-replica shape of the reports).
func withCSIVolumes(s *Snapshot, driver string, limit int32, nodes ...string) {
	s.CSINodes = map[string]*storagev1.CSINode{}
	s.NodeClaims = map[string]*corev1.PersistentVolumeClaim{}
	s.PVs = map[string]*corev1.PersistentVolume{}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	s.StorageClasses = map[string]*storagev1.StorageClass{"fast": {
		ObjectMeta:        metav1.ObjectMeta{Name: "fast"},
		Provisioner:       driver,
		VolumeBindingMode: &wffc,
	}}
	for _, n := range nodes {
		s.CSINodes[n] = &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(limit)}}}}}
	}
	for _, pods := range s.PodsByNode {
		for _, p := range pods {
			claim := p.Name + "-data"
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
			pv := "pv-" + p.Name
			s.NodeClaims[p.Namespace+"/"+claim] = &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: p.Namespace},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv, StorageClassName: ptr.To("fast")},
				Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
			}
			s.PVs[pv] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv},
				Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
					CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + p.Name}}}}
		}
	}
	s.Pod.Spec.Volumes = append(s.Pod.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.Pod.Name + "-data"}}})
	s.PVCs = map[string]*corev1.PersistentVolumeClaim{s.Pod.Name + "-data": {
		ObjectMeta: metav1.ObjectMeta{Name: s.Pod.Name + "-data", Namespace: s.Pod.Namespace},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast")},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}}
}

// fullOfVolumes returns pods bound to node, one per volume slot.
func fullOfVolumes(node string, n int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, boundTo(node, fmt.Sprintf("%s-db-%d", node, i)))
	}
	return out
}

func TestNodeVolumeLimitsReasons(t *testing.T) {
	testFilterReasons(t, "NodeVolumeLimits", []reasonsCase{
		{name: "a node whose driver limit its pods' volumes fill", pod: podRequesting("db"), node: node("n1"), bound: fullOfVolumes("n1", 2),
			snap: func(s *Snapshot) { withCSIVolumes(s, "ebs.csi.aws.com", 2, "n1") },
			want: []NodeReason{{Code: CodeVolumeAttachLimit, Resource: "ebs.csi.aws.com", Requested: 1, Used: 2, Allocatable: 2}}},
		{name: "a node with a free slot", pod: podRequesting("db"), node: node("n1"), bound: fullOfVolumes("n1", 1),
			snap: func(s *Snapshot) { withCSIVolumes(s, "ebs.csi.aws.com", 2, "n1") }},
		{name: "another driver's limit does not count", pod: podRequesting("db"), node: node("n1"), bound: fullOfVolumes("n1", 2),
			snap: func(s *Snapshot) {
				withCSIVolumes(s, "ebs.csi.aws.com", 2, "n1")
				s.StorageClasses["fast"].Provisioner = "pd.csi.storage.gke.io"
			}},
		{name: "without CSINodes nothing is judged", pod: podRequesting("db"), node: node("n1"), bound: fullOfVolumes("n1", 2),
			snap: func(s *Snapshot) {
				withCSIVolumes(s, "ebs.csi.aws.com", 2, "n1")
				s.CSINodes = nil
			}},
	})
}
