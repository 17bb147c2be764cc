package triage

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestCrashRules(t *testing.T) {
	liveness := func(p *corev1.Pod) {
		p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 3}
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}}
	}
	readiness := func(p *corev1.Pod) {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		unready(p)
	}
	// restartedAndReady: running and ready again after a kill 30s ago that ended in exit 0
	// (nginx exits 0 on SIGTERM), as in seed-nginx-liveness.
	restartedAndReady := func(p *corev1.Pod) {
		st := status(p, "app")
		st.RestartCount = 3
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.NewTime(clock0.Add(-30 * time.Second))}}
	}
	killed := ev(corev1.EventTypeNormal, "Killing", "app", "Container app failed liveness probe, will be restarted", 4, 30*time.Second)
	unhealthy := ev(corev1.EventTypeWarning, "Unhealthy", "app", `Liveness probe failed: Get "http://10.0.0.1:8080/": dial tcp 10.0.0.1:8080: connect: connection refused`, 12, 35*time.Second)
	tests := []struct {
		name   string
		pod    *corev1.Pod
		events []Event
		logs   map[string]LogTail
		want   []Code
	}{
		{"a healthy pod", testPod(), nil, nil, nil},
		{"an old restart of a ready container is history", testPod(func(p *corev1.Pod) {
			st := status(p, "app")
			st.RestartCount = 1
			st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(clock0.Add(-2 * time.Hour))}}
		}), nil, nil, nil},
		{"OOMKilled", testPod(memory("20Mi", "30Mi"), crashLoop("app", 14, 137, "OOMKilled", "")), nil, nil, []Code{CodeOOMKilled}},
		{"liveness kills outrank the exit 0 they cause", testPod(liveness, restartedAndReady), []Event{killed, unhealthy}, nil, []Code{CodeLivenessProbeFailed}},
		{"startup probe kills", testPod(crashLoop("app", 5, 137, "Error", "")), []Event{ev(corev1.EventTypeNormal, "Killing", "app", "Container app failed startup probe, will be restarted", 5, time.Minute)}, nil, []Code{CodeStartupProbeFailed}},
		{"exec format error in the termination message", testPod(crashLoop("app", 23, 1, "Error", "standard_init_linux.go:219: exec user process caused: exec format error")), nil, nil, []Code{CodeExecFormatError}},
		{"exec format error in the previous log", testPod(crashLoop("app", 23, 1, "Error", "")), nil, map[string]LogTail{"app": {Lines: []string{"exec /app: exec format error"}}}, []Code{CodeExecFormatError}},
		{"permission denied in the previous log", testPod(crashLoop("app", 3, 1, "Error", "")), nil, map[string]LogTail{"app": {Lines: []string{"open /data/db.lock: permission denied"}}}, []Code{CodePermissionDenied}},
		{"exit 0 under restartPolicy Always", testPod(crashLoop("app", 24, 0, "Completed", "")), nil, nil, []Code{CodeContainerExitsImmediately}},
		{"non-zero exit, log unreadable", testPod(crashLoop("app", 7, 1, "Error", "")), nil, map[string]LogTail{"app": {Err: errors.New("node-1 unreachable")}}, []Code{CodeAppError}},
		{"readiness never passes", testPod(readiness), []Event{ev(corev1.EventTypeWarning, "Unhealthy", "app", "Readiness probe failed: dial tcp 10.0.0.1:80: connect: connection refused", 40, time.Minute)}, nil, []Code{CodeReadinessProbeNeverReady}},
		{"an evicted pod's killed containers are not a crash", testPod(statusReason("Evicted", "The node was low on resource: memory.", corev1.PodFailed), crashLoop("app", 0, 137, "Error", "")), nil, nil, nil},
		{"a deleted pod's stopped containers are not a crash", testPod(deleted(time.Minute), crashLoop("app", 2, 1, "Error", "")), nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(tt.pod, tt.events...)
			s.PreviousLogs = tt.logs
			checkCodes(t, crashRules, s, tt.want...)
		})
	}
}

func TestCrashRulesEvidence(t *testing.T) {
	s := testSnapshot(testPod(crashLoop("app", 7, 1, "Error", "")))
	s.PreviousLogs = map[string]LogTail{"app": {Err: errors.New("dial tcp 10.0.0.1:10250: i/o timeout")}}
	f := crashRules(s)[0]
	if !hasField(f, "status.containerStatuses[app].lastState.terminated") || !hasField(f, "log[app] (previous)") {
		t.Errorf("app-error evidence = %+v, want the last termination and why the log could not be read", f.Evidence)
	}

	s = testSnapshot(testPod(memory("20Mi", "30Mi"), crashLoop("app", 14, 137, "OOMKilled", "")))
	f = crashRules(s)[0]
	var got string
	for _, e := range f.Evidence {
		if e.Field == "spec.containers[app].resources" {
			got = e.Message
		}
	}
	if want := "memory limit 30Mi, request 20Mi"; got != want {
		t.Errorf("oom-killed resources evidence = %q, want %q", got, want)
	}
}

func TestDescribeProbe(t *testing.T) {
	p := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/api/health", Port: intstr.FromInt32(6987)}}, InitialDelaySeconds: 30, PeriodSeconds: 10, TimeoutSeconds: 5}
	want := "httpGet :6987/api/health, initialDelay 30s, period 10s, timeout 5s, failureThreshold 3 (about 30s of failures before a kill)"
	if got := describeProbe(p); got != want {
		t.Errorf("describeProbe() = %q, want %q", got, want)
	}
}
