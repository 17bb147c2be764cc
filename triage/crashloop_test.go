package triage

import (
	"errors"
	"strings"
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
		{"exec format error in the termination message is a start failure, left to containerConfigRules", testPod(crashLoop("app", 23, 1, "Error", "standard_init_linux.go:219: exec user process caused: exec format error")), nil, nil, nil},
		{"exec format error in the previous log is a start failure, left to containerConfigRules", testPod(crashLoop("app", 23, 1, "Error", "")), nil, map[string]LogTail{"app": {Lines: []string{"exec /app: exec format error"}}}, nil},
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

// TestBarePodResourcesFixSaysWhatReplaceCosts: a bare pod's limit can only change by replace
// --force, which deletes it; when it is Ready now (running again after an OOM kill 2 minutes
// ago) the fix says it serves nothing until the new pod is Ready, and says nothing of the kind
// for a pod in back-off, which serves nothing already.
func TestBarePodResourcesFixSaysWhatReplaceCosts(t *testing.T) {
	const cost = "that deletes the pod, which is Ready now and has no other replica: it serves nothing until the new pod is Ready"
	readyAgain := func(p *corev1.Pod) {
		st := status(p, "app")
		st.RestartCount = 4
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(clock0.Add(-2 * time.Minute))}}
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		wantCost bool
	}{
		{"Ready again between OOM kills: the replace costs it", testPod(memory("20Mi", "30Mi"), readyAgain), true},
		{"in back-off: nothing Ready to lose", testPod(memory("20Mi", "30Mi"), crashLoop("app", 14, 137, "OOMKilled", "")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := crashRules(testSnapshot(tt.pod))
			if len(fs) == 0 || fs[0].Code != CodeOOMKilled {
				t.Fatalf("findings = %+v, want oom-killed first", fs)
			}
			fix := strings.Join(fs[0].Fix, "\n")
			if !strings.Contains(fix, "kubectl replace --force -f pod.yaml") {
				t.Fatalf("fix = %q, want the bare pod's replace", fix)
			}
			if got := strings.Contains(fix, cost); got != tt.wantCost {
				t.Errorf("fix says the cost = %v, want %v: %q", got, tt.wantCost, fix)
			}
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

// TestCurrentBlockerBeatsHistory covers kind 1 of issue 12: what blocks the pod now comes
// first; a lastState.terminated from before (a node reboot, an earlier crash) is history and
// never makes the answer app-error with "read the logs". The variants differ in runtime, CNI,
// the old termination's exit code and reason, and which wait blocks the pod now.
func TestCurrentBlockerBeatsHistory(t *testing.T) {
	// rebooted gives container name the lastState a node reboot leaves: containerd's exit 255,
	// reason Unknown, and the restarts before it.
	rebooted := func(name string, code int32, reason string) podOpt {
		return func(p *corev1.Pod) {
			st := status(p, name)
			st.RestartCount = 3
			st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, StartedAt: metav1.NewTime(clock0.Add(-48 * time.Hour)), FinishedAt: metav1.NewTime(clock0.Add(-33 * time.Minute)),
			}}
		}
	}
	// creating puts every container back in ContainerCreating, as after a sandbox re-creation.
	creating := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		unready(p)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse})
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		}
	}
	sidecar := func(p *corev1.Pod) { status(p, "config-reloader") }
	proxy503 := `Failed create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "1faa": error getting ClusterInformation: Get https://[10.96.0.1]:443/apis/crd.projectcalico.org/v1/clusterinformations/default: Service Unavailable`
	crioNoCNI := `Failed to create pod sandbox: rpc error: code = Unknown desc = error creating pod sandbox with name "k8s_app_shop_1_0": cni plugin not initialized`
	initPending := func(p *corev1.Pod) {
		initContainer("wait-db", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}, 2, "sh", "-c", "until nc -z db 5432; do sleep 1; done")(p)
		initContainer("migrate", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}, 2, "/migrate")(p)
		for i := range p.Status.InitContainerStatuses {
			p.Status.InitContainerStatuses[i].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 255, Reason: "Unknown", FinishedAt: metav1.NewTime(clock0.Add(-20 * time.Minute))}}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse})
	}
	initRunningAfterReboot := func(p *corev1.Pod) {
		initContainer("wait-db", corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(clock0.Add(-10 * time.Minute))}}, 1, "sh", "-c", "until nc -z db 5432; do sleep 1; done")(p)
		p.Status.InitContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 255, Reason: "Unknown", FinishedAt: metav1.NewTime(clock0.Add(-11 * time.Minute))}}
	}
	runningAgain := func(p *corev1.Pod) {
		st := status(p, "app")
		st.RestartCount = 1
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was terminated", FinishedAt: metav1.NewTime(clock0.Add(-5 * time.Minute))}}
	}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		events []Event
		want   Code
	}{
		{"containerd node rebooted, Calico CNI gets 503 through a proxy (two containers)",
			testPod(sidecar, rebooted("app", 255, "Unknown"), rebooted("config-reloader", 255, "Unknown"), creating),
			[]Event{warning("FailedCreatePodSandBox", proxy503, 118, 21*time.Second), ev(corev1.EventTypeNormal, "SandboxChanged", "", "Pod sandbox changed, it will be killed and re-created.", 9, time.Minute)},
			CodeSandboxCreationFailed},
		{"CRI-O node rebooted before its CNI came back",
			testPod(rebooted("app", 255, "Unknown"), creating),
			[]Event{warning("FailedCreatePodSandBox", crioNoCNI, 12, 5*time.Second)},
			CodeCNINotInitialized},
		{"AWS VPC CNI out of IPs; the last run was lost by the kubelet (137 ContainerStatusUnknown)",
			testPod(rebooted("app", 137, "ContainerStatusUnknown"), creating),
			[]Event{warning("FailedCreatePodSandBox", msgAWS, 38, 14*time.Second)},
			CodeAWSVPCCNIIPExhausted},
		{"an old crash (exit 1) and a ConfigMap volume missing now",
			testPod(rebooted("app", 1, "Error"), creating),
			[]Event{warning("FailedMount", `MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`, 9, 30*time.Second)},
			CodeConfigMapNotFound},
		{"an old crash and ImagePullBackOff now",
			testPod(rebooted("app", 2, "Error"), pending("ImagePullBackOff", `Back-off pulling image "registry.example.com/shop/app:1.1"`)),
			[]Event{ev(corev1.EventTypeWarning, "Failed", "app", `Failed to pull image "registry.example.com/shop/app:1.1": rpc error: code = NotFound desc = failed to pull and unpack image "registry.example.com/shop/app:1.1": failed to resolve reference "registry.example.com/shop/app:1.1": registry.example.com/shop/app:1.1: not found`, 4, time.Minute)},
			CodeImageNotFound},
		{"an old OOMKill and CreateContainerConfigError now",
			testPod(rebooted("app", 137, "OOMKilled"), waiting("app", "CreateContainerConfigError", `secret "db-password" not found`)),
			nil,
			CodeSecretNotFound},
		{"Init:0/2 after a reboot, the sandbox fails now",
			testPod(initPending),
			[]Event{warning("FailedCreatePodSandBox", msgIPAMExhausted, 40, 10*time.Second)},
			CodeCalicoIPAMExhausted},
		{"an init container running again after a reboot waits for its dependency",
			testPod(initRunningAfterReboot),
			nil,
			CodeInitContainerWaitingDependency},
		{"running and ready again after the kubelet lost the last container",
			testPod(runningAgain),
			nil,
			CodePodHealthy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(tt.pod, tt.events...)
			d := Evaluate(s)
			if got := d.Primary(); got.Code != tt.want {
				t.Fatalf("primary = %s (%s), want %s", got.Code, got.Summary, tt.want)
			}
			for _, f := range d.Findings {
				switch f.Code {
				case CodeAppError, CodeOOMKilled, CodeInitContainerCrashloop, CodeContainerExitsImmediately:
					t.Errorf("finding %s (%s): an old termination is history, not the cause", f.Code, f.Summary)
				}
				for _, fix := range f.Fix {
					if strings.Contains(fix, "--previous") {
						t.Errorf("finding %s suggests %q: the previous run is not what blocks the pod", f.Code, fix)
					}
				}
			}
			if got := LogCandidates(s); len(got) != 0 {
				t.Errorf("LogCandidates() = %v: no previous log explains the current blocker", got)
			}
		})
	}
}

// TestExitsZeroFixReadsTheLogFirst: a container that exits 0 is either a server whose command
// quits or a one-shot task; its log says which, so the fix reads it before either change, and
// says the two changes are alternatives.
func TestExitsZeroFixReadsTheLogFirst(t *testing.T) {
	got := checkCodes(t, crashRules, testSnapshot(testPod(crashLoop("app", 24, 0, "Completed", ""))), CodeContainerExitsImmediately)
	fix := got[0].Fix
	if want := "kubectl logs -n shop app -c app --previous"; len(fix) == 0 || fix[0] != want {
		t.Fatalf("fix[0] = %q, want %q:\n%s", fix[0], want, strings.Join(fix, "\n"))
	}
	checkBefore(t, fix, "Either, if it is meant to keep running", "Or, if it is meant to run once")
}
