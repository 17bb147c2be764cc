package triage

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// Tiny builders for the non-scheduling rule tables: a pod "shop/app" bound to node-1 with one
// container "app", changed by options; a Ready node-1; events relative to clock0.

var clock0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

// testPod returns a Running pod shop/app on node-1 whose container "app" is running and ready.
func testPod(opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app", UID: "uid-app", CreationTimestamp: metav1.NewTime(clock0.Add(-time.Hour))},
		Spec: corev1.PodSpec{
			NodeName:      "node-1",
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers:    []corev1.Container{{Name: "app", Image: "registry.example.com/shop/app:1.0"}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(clock0.Add(-50 * time.Minute))}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(clock0.Add(-50 * time.Minute))}},
			}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// status returns the status of the named container (app or init), adding one if missing.
func status(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	for i := range p.Status.InitContainerStatuses {
		if p.Status.InitContainerStatuses[i].Name == name {
			return &p.Status.InitContainerStatuses[i]
		}
	}
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: name, Image: "registry.example.com/" + name})
	p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name})
	return &p.Status.ContainerStatuses[len(p.Status.ContainerStatuses)-1]
}

func unready(p *corev1.Pod) {
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	for i := range p.Status.ContainerStatuses {
		p.Status.ContainerStatuses[i].Ready = false
	}
}

// pending makes the pod Pending with container app waiting for reason (ContainerCreating,
// ErrImagePull, …).
func pending(reason, msg string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		unready(p)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse})
		if reason != "ContainerCreating" {
			p.Status.Conditions[len(p.Status.Conditions)-1].Status = corev1.ConditionTrue
		}
		st := status(p, "app")
		st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
}

// waiting sets container name's state to waiting (the pod stays Running).
func waiting(name, reason, msg string) podOpt {
	return func(p *corev1.Pod) {
		unready(p)
		status(p, name).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
}

// crashLoop puts container name in CrashLoopBackOff after restarts, its last run ending with
// exit code and reason (message is the termination message).
func crashLoop(name string, restarts, code int32, reason, message string) podOpt {
	return func(p *corev1.Pod) {
		unready(p)
		st := status(p, name)
		st.RestartCount = restarts
		st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}}
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, Message: message,
			StartedAt: metav1.NewTime(clock0.Add(-3 * time.Minute)), FinishedAt: metav1.NewTime(clock0.Add(-2 * time.Minute)),
		}}
	}
}

// deleted marks the pod deleted ago with a 30s grace period.
func deleted(ago time.Duration) podOpt {
	return func(p *corev1.Pod) {
		grace := int64(30)
		at := metav1.NewTime(clock0.Add(-ago + 30*time.Second))
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &at, &grace
	}
}

func finalizers(f ...string) podOpt { return func(p *corev1.Pod) { p.Finalizers = f } }

func statusReason(reason, msg string, phase corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Reason, p.Status.Message, p.Status.Phase = reason, msg, phase }
}

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func memory(request, limit string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(request)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
		}
	}
}

// initContainer adds init container name (command cmd) in state st before the app container,
// which then waits in PodInitializing.
func initContainer(name string, st corev1.ContainerState, restarts int32, cmd ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: name, Image: "busybox", Command: cmd})
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: name, State: st, RestartCount: restarts})
		p.Status.Phase = corev1.PodPending
		unready(p)
		status(p, "app").State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	}
}

// ev is a pod event seen count times, last ago before clock0, about container (may be "").
func ev(typ, reason, container, msg string, count int32, ago time.Duration) Event {
	e := Event{Type: typ, Reason: reason, Message: msg, Count: count, LastSeen: clock0.Add(-ago), FirstSeen: clock0.Add(-ago - time.Minute)}
	if container != "" {
		e.FieldPath = "spec.containers{" + container + "}"
	}
	return e
}

func warning(reason, msg string, count int32, ago time.Duration) Event {
	return ev(corev1.EventTypeWarning, reason, "", msg, count, ago)
}

// testNode returns a node; ready false makes its Ready condition Unknown with unreachable taints.
func testNode(name string, ready bool, kubelet string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.NodeInfo.KubeletVersion = kubelet
	n.Status.NodeInfo.Architecture = "amd64"
	n.Status.NodeInfo.OperatingSystem = "linux"
	c := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastTransitionTime: metav1.NewTime(clock0.Add(-24 * time.Hour)), LastHeartbeatTime: metav1.NewTime(clock0.Add(-10 * time.Second))}
	if !ready {
		c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
		c.LastTransitionTime, c.LastHeartbeatTime = metav1.NewTime(clock0.Add(-30*time.Minute)), metav1.NewTime(clock0.Add(-31*time.Minute))
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
	}
	n.Status.Conditions = []corev1.NodeCondition{c}
	return n
}

// testSnapshot is a Snapshot of pod with a Ready node-1 (v1.37 kubelet and API server) and the
// events sorted newest first.
func testSnapshot(pod *corev1.Pod, events ...Event) *Snapshot {
	s := &Snapshot{
		Now:           clock0,
		Requested:     PodRef{Namespace: pod.Namespace, Name: pod.Name},
		Pod:           pod,
		Events:        append([]Event(nil), events...),
		Nodes:         []*corev1.Node{testNode("node-1", true, "v1.37.2")},
		PodsByNode:    map[string][]*corev1.Pod{},
		ServerVersion: &version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"},
	}
	SortEvents(s.Events)
	return s
}

// codesOf lists the codes of findings in order.
func codesOf(fs []Finding) []Code {
	var out []Code
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

// checkCodes fails unless rule(s) returns exactly want (in order), and every finding has a
// summary, evidence and a fix.
func checkCodes(t *testing.T, rule func(*Snapshot) []Finding, s *Snapshot, want ...Code) []Finding {
	t.Helper()
	got := rule(s)
	if !slices.Equal(codesOf(got), want) {
		t.Fatalf("codes = %v, want %v", codesOf(got), want)
	}
	for _, f := range got {
		if f.Summary == "" || len(f.Evidence) == 0 || len(f.Fix) == 0 {
			t.Errorf("finding %s: summary %q, %d evidence, %d fix lines; want all three", f.Code, f.Summary, len(f.Evidence), len(f.Fix))
		}
	}
	return got
}

// hasField reports whether a finding's evidence reads field.
func hasField(f Finding, field string) bool {
	return slices.ContainsFunc(f.Evidence, func(e Evidence) bool { return e.Field == field })
}

func slicesContain(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// looksFirst reports whether fix starts with a command that only reads, or has none at all:
// the order a person pasting it top to bottom needs (look, decide, change, verify), which
// TestFixLooksBeforeItActs in triage/collect checks over every scenario folder.
func looksFirst(fix []string) bool {
	if len(fix) == 0 || ParseFixStep(fix[0]).ReadOnly() {
		return true
	}
	return !slices.ContainsFunc(fix, func(e string) bool { return ParseFixStep(e).ReadOnly() })
}

// stepIndex is the index of the first entry of fix that contains sub, or -1.
func stepIndex(fix []string, sub string) int {
	return slices.IndexFunc(fix, func(e string) bool { return strings.Contains(e, sub) })
}

// checkBefore fails unless fix has an entry containing first, and one containing then after it.
func checkBefore(t *testing.T, fix []string, first, then string) {
	t.Helper()
	i, j := stepIndex(fix, first), stepIndex(fix, then)
	if i < 0 || j < 0 || i > j {
		t.Errorf("fix has %q at step %d and %q at step %d, want both, the first before:\n%s", first, i, then, j, strings.Join(fix, "\n"))
	}
}
