package triage

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestContainerConfigRules(t *testing.T) {
	withEnv := func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = []corev1.EnvVar{
			{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
			{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "mode"}}},
		}
	}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		want  []Code
		field string
	}{
		{"secret not found names the env var", testPod(withEnv, pending("CreateContainerConfigError", `secret "db" not found`)), []Code{CodeSecretNotFound}, "spec.containers[app].env[DB_PASSWORD]"},
		{"configmap not found", testPod(withEnv, pending("CreateContainerConfigError", `configmap "app" not found`)), []Code{CodeConfigMapNotFound}, "spec.containers[app].env[MODE]"},
		{"secret key missing", testPod(withEnv, pending("CreateContainerConfigError", `couldn't find key password in Secret shop/db`)), []Code{CodeSecretKeyNotFound}, "spec.containers[app].env[DB_PASSWORD]"},
		{"configmap key missing", testPod(withEnv, pending("CreateContainerConfigError", `couldn't find key mode in ConfigMap shop/app`)), []Code{CodeConfigMapKeyNotFound}, "spec.containers[app].env[MODE]"},
		{"any other config error", testPod(pending("CreateContainerConfigError", `container has runAsNonRoot and image will run as root`)), []Code{CodeCreateContainerError}, "status.containerStatuses[app].state.waiting"},
		{"CreateContainerError", testPod(pending("CreateContainerError", `failed to generate container "x" spec: no command specified`)), []Code{CodeCreateContainerError}, "spec.containers[app].command"},
		{"RunContainerError with exec format error", testPod(pending("RunContainerError", `exec format error`)), []Code{CodeExecFormatError}, "status.containerStatuses[app].state.waiting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(tt.pod, ev(corev1.EventTypeWarning, "Failed", "app", "Error: whatever", 3, time.Minute))
			got := checkCodes(t, containerConfigRules, s, tt.want...)
			if len(got) > 0 && !hasField(got[0], tt.field) {
				t.Errorf("evidence %v lacks field %s", got[0].Evidence, tt.field)
			}
		})
	}
}
