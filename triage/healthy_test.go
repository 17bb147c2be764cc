package triage

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHealthyRules(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []Code
	}{
		{"running and ready", testPod(), []Code{CodePodHealthy}},
		{"ready, restarted long ago", testPod(func(p *corev1.Pod) {
			st := status(p, "app")
			st.RestartCount = 2
			st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(clock0.Add(-3 * time.Hour))}}
		}), []Code{CodePodHealthy}},
		{"succeeded", testPod(statusReason("", "", corev1.PodSucceeded)), []Code{CodePodCompleted}},
		{"crash-looping is not healthy", testPod(crashLoop("app", 3, 1, "Error", "")), nil},
		{"not ready is not healthy", testPod(unready), nil},
		{"deleted is not healthy", testPod(deleted(time.Minute)), nil},
		{"pending is not healthy", testPod(pending("ContainerCreating", "")), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range checkCodes(t, healthyRules, testSnapshot(tt.pod), tt.want...) {
				if f.Severity != SeverityInfo {
					t.Errorf("%s severity = %s, want info", f.Code, f.Severity)
				}
			}
		})
	}
}

func TestEvaluateRanking(t *testing.T) {
	tests := []struct {
		name      string
		snap      *Snapshot
		want      []Code
		uncertain bool
	}{
		{"a healthy pod is a sure answer", testSnapshot(testPod()), []Code{CodePodHealthy}, false},
		{"a completed pod is a sure answer", testSnapshot(testPod(statusReason("", "", corev1.PodSucceeded))), []Code{CodePodCompleted}, false},
		{"one primary cause first, context after", func() *Snapshot {
			s := testSnapshot(testPod(deleted(time.Minute)))
			s.Nodes[0] = testNode("node-1", false, "v1.33.5")
			return s
		}(), []Code{CodeNodeUnreachableTerminating, CodeNodeNotReady, CodeKubeletVersionSkew}, false},
		{"thin evidence says so instead of guessing", testSnapshot(testPod(initContainer("init", corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(clock0.Add(-20 * time.Second))}}, 0))), []Code{CodeUnknown, CodeInitContainerWaitingDependency}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(tt.snap)
			if got := codesOf(d.Findings); !equalCodes(got, tt.want) || d.Uncertain != tt.uncertain {
				t.Errorf("Evaluate() codes = %v, uncertain %t; want %v, uncertain %t", got, d.Uncertain, tt.want, tt.uncertain)
			}
		})
	}
}

func equalCodes(a, b []Code) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
