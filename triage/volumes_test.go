package triage

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestVolumeRules(t *testing.T) {
	creating := testPod(pending("ContainerCreating", ""), func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}}
	})
	generic := warning("FailedMount", "Unable to attach or mount volumes: unmounted volumes=[config], unattached volumes=[config kube-api-access-x]: timed out waiting for the condition", 13, time.Second)
	tests := []struct {
		name string
		snap *Snapshot
		want []Code
	}{
		{"no mount events", testSnapshot(creating), nil},
		{"configmap not found, behind a newer generic timeout", testSnapshot(creating, generic, warning("FailedMount", `MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`, 23, time.Minute)), []Code{CodeConfigMapNotFound}},
		{"secret not found", testSnapshot(creating, warning("FailedMount", `MountVolume.SetUp failed for volume "tls" : secret "app-tls" not found`, 3, time.Minute)), []Code{CodeSecretNotFound}},
		{"multi-attach", testSnapshot(creating, warning("FailedAttachVolume", `Multi-Attach error for volume "pvc-1" Volume is already used by pod(s) db-0`, 3, time.Minute)), []Code{CodeMultiAttachRWO}},
		{"only the generic timeout", testSnapshot(creating, generic), []Code{CodeVolumeMountFailed}},
		{"a running pod's old mount events are ignored", testSnapshot(testPod(), generic), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCodes(t, volumeRules, tt.snap, tt.want...) })
	}
}
