package triage

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInitContainerRules(t *testing.T) {
	running := func(ago time.Duration) corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(clock0.Add(-ago))}}
	}
	done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	backoff := func(p *corev1.Pod) {
		st := &p.Status.InitContainerStatuses[len(p.Status.InitContainerStatuses)-1]
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "migration failed: relation exists"}}
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		want     []Code
		severity Severity
	}{
		{"no init containers", testPod(), nil, 0},
		{"a completed init container", testPod(initContainer("init", done, 0)), nil, 0},
		{"running for 25 minutes waits for a dependency", testPod(initContainer("init", running(25*time.Minute), 0, "sh", "-c", "until nslookup db.shop; do sleep 2; done")), []Code{CodeInitContainerWaitingDependency}, SeverityBlocker},
		{"running for 30 seconds is only a warning", testPod(initContainer("init", running(30*time.Second), 0, "sh", "-c", "until nslookup db.shop; do sleep 2; done")), []Code{CodeInitContainerWaitingDependency}, SeverityWarning},
		{"crash-looping init container", testPod(initContainer("migrate", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, 5), backoff), []Code{CodeInitContainerCrashloop}, SeverityBlocker},
		{"the second init container is the one that hangs", testPod(initContainer("first", done, 0), initContainer("wait", running(10*time.Minute), 0, "sh", "-c", "until nc -z db 5432; do sleep 1; done")), []Code{CodeInitContainerWaitingDependency}, SeverityBlocker},
		{"an OOM-killed init container", testPod(initContainer("migrate", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, 5), func(p *corev1.Pod) {
			p.Status.InitContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}
		}), []Code{CodeInitContainerCrashloop}, SeverityBlocker},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, initContainerRules, testSnapshot(tt.pod), tt.want...)
			if len(got) > 0 && got[0].Severity != tt.severity {
				t.Errorf("severity = %s, want %s", got[0].Severity, tt.severity)
			}
			for _, f := range got {
				if !looksFirst(f.Fix) {
					t.Errorf("%s fix acts before it looks: %q", f.Code, f.Fix)
				}
				// The kill its last state records decides the change: said before the
				// general one.
				if stepIndex(f.Fix, "It was OOMKilled") >= 0 {
					checkBefore(t, f.Fix, "It was OOMKilled", "Fix what the init container checks or runs")
				}
			}
		})
	}
}

func TestWaitTarget(t *testing.T) {
	tests := []struct {
		cmd  []string
		want string
	}{
		{[]string{"sh", "-c", "until nslookup firmament-service.kube-system; do echo waiting; sleep 2; done;"}, "firmament-service.kube-system"},
		{[]string{"sh", "-c", "until nc -z -w 2 postgres 5432; do sleep 1; done"}, "postgres 5432"},
		{[]string{"sh", "-c", "until wget -q -O- http://api:8080/healthz; do sleep 1; done"}, "http://api:8080/healthz"},
		{[]string{"/bin/migrate", "--up"}, ""},
	}
	for _, tt := range tests {
		if got := waitTarget(&corev1.Container{Command: tt.cmd}); got != tt.want {
			t.Errorf("waitTarget(%q) = %q, want %q", tt.cmd, got, tt.want)
		}
	}
}
