package triage

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestEvictedRules(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []Code
	}{
		{"a running pod is neither evicted nor lost", testPod(), nil},
		{"status.reason Evicted", testPod(statusReason("Evicted", "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.", corev1.PodFailed)), []Code{CodeEvicted}},
		{"status.reason NodeLost", testPod(statusReason("NodeLost", "Node node-1 which was running pod app is unresponsive", corev1.PodRunning)), []Code{CodeNodeLost}},
		{"phase Unknown", testPod(statusReason("", "", corev1.PodUnknown)), []Code{CodeNodeLost}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, evictedRules, testSnapshot(tt.pod), tt.want...)
			for _, f := range got {
				if !hasField(f, "status.reason") {
					t.Errorf("%s evidence lacks status.reason", f.Code)
				}
			}
		})
	}
}

func TestEvictionPressure(t *testing.T) {
	tests := []struct{ msg, want string }{
		{"The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.", "memory"},
		{"The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 2Gi.", "ephemeral-storage"},
		{"Pod ephemeral local storage usage exceeds the total limit of containers 1Gi.", "ephemeral-storage"},
		{"The node had condition: [DiskPressure].", "disk"},
		{"The node was low on resource: pids.", "pids"},
		{"something else", ""},
	}
	for _, tt := range tests {
		if got := evictionPressure(tt.msg); got != tt.want {
			t.Errorf("evictionPressure(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}
