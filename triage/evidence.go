package triage

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// This file holds the small readers and text helpers the rule families share: finding a pod's
// events by reason and container, turning container states into Evidence with a field path,
// rendering ages the way kubectl describe does, naming a pod's workload, and joining names.
// They only read the Snapshot.

// podObject is "Pod namespace/name", the Evidence.Object of facts read from the pod.
func podObject(pod *corev1.Pod) string { return "Pod " + pod.Namespace + "/" + pod.Name }

// nodeObject is "Node name".
func nodeObject(name string) string { return "Node " + name }

// eventsMatching returns the pod's events for which keep is true, newest first (the order of
// Snapshot.Events).
func eventsMatching(s *Snapshot, keep func(Event) bool) []Event {
	var out []Event
	for _, e := range s.Events {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// eventsWithReason returns the pod's events with one of the reasons, newest first.
func eventsWithReason(s *Snapshot, reasons ...string) []Event {
	return eventsMatching(s, func(e Event) bool {
		for _, r := range reasons {
			if e.Reason == r {
				return true
			}
		}
		return false
	})
}

// informative reports whether an event says more than a state name: not empty, not a bare
// "Error: ErrImagePull" / "Error: ImagePullBackOff" / "Error: CrashLoopBackOff" line, and not
// a "Back-off pulling image" / "Back-off restarting failed container" line, which only repeat
// that the kubelet waits. The runtime's own error is in the informative events.
func informative(e Event) bool {
	msg := strings.TrimSpace(e.Message)
	switch {
	case msg == "":
		return false
	case strings.HasPrefix(msg, "Error: ") && !strings.ContainsAny(strings.TrimSpace(msg[len("Error: "):]), " :"):
		return false
	case strings.HasPrefix(msg, "Back-off "), strings.HasPrefix(msg, "back-off "):
		return false
	}
	return true
}

// currentAttemptSince returns when the pod's current start attempt began, as far as the
// container states tell: the newest lastState.terminated.finishedAt of a container that is
// waiting again (zero when none). An event last seen before it belongs to an earlier run of the
// pod (before a node reboot, say) and cannot explain what blocks it now.
func currentAttemptSince(pod *corev1.Pod) time.Time {
	var since time.Time
	for _, c := range containerStatuses(pod) {
		if t := c.Status.LastTerminationState.Terminated; t != nil && c.Status.State.Waiting != nil && t.FinishedAt.After(since) {
			since = t.FinishedAt.Time
		}
	}
	return since
}

// currentEvents keeps the events of the pod's current attempt (see currentAttemptSince).
func currentEvents(s *Snapshot, events []Event) []Event {
	since := currentAttemptSince(s.Pod)
	if since.IsZero() {
		return events
	}
	var out []Event
	for _, e := range events {
		if !e.LastSeen.Before(since) {
			out = append(out, e)
		}
	}
	return out
}

// eventContainer returns the container an event's involvedObject.fieldPath names
// ("spec.containers{app}" -> "app", "spec.initContainers{init}" -> "init"), or "".
func eventContainer(e Event) string {
	fp := e.FieldPath
	open := strings.IndexByte(fp, '{')
	if open < 0 || !strings.HasSuffix(fp, "}") {
		return ""
	}
	return fp[open+1 : len(fp)-1]
}

// forContainer keeps events about container name, and events with no field path (older
// kubelets and some runtimes leave it empty).
func forContainer(name string) func(Event) bool {
	return func(e Event) bool {
		c := eventContainer(e)
		return c == "" || c == name
	}
}

// containerStatus pairs a container's spec with its status and says which list it came from.
type containerStatus struct {
	Spec   *corev1.Container
	Status *corev1.ContainerStatus
	// Init is true for spec.initContainers (including restartable sidecars).
	Init bool
}

// statusList is "initContainerStatuses" or "containerStatuses".
func (c containerStatus) statusList() string {
	if c.Init {
		return "initContainerStatuses"
	}
	return "containerStatuses"
}

// field returns the field path of sub under this container's status, e.g.
// "status.containerStatuses[app].lastState.terminated".
func (c containerStatus) field(sub string) string {
	f := "status." + c.statusList() + "[" + c.Status.Name + "]"
	if sub != "" {
		f += "." + sub
	}
	return f
}

// specField returns the field path of sub under this container's spec, e.g.
// "spec.containers[app].livenessProbe".
func (c containerStatus) specField(sub string) string {
	list := "containers"
	if c.Init {
		list = "initContainers"
	}
	f := "spec." + list + "[" + c.Status.Name + "]"
	if sub != "" {
		f += "." + sub
	}
	return f
}

// who is `container "app"` or `init container "init"`, for summaries.
func (c containerStatus) who() string {
	if c.Init {
		return fmt.Sprintf("init container %q", c.Status.Name)
	}
	return fmt.Sprintf("container %q", c.Status.Name)
}

// sidecar reports whether c is a restartable init container (restartPolicy Always), which
// keeps running beside the app containers.
func (c containerStatus) sidecar() bool {
	return c.Init && c.Spec != nil && c.Spec.RestartPolicy != nil &&
		*c.Spec.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// containerStatuses returns the pod's init containers then its app containers, each paired
// with its spec (Spec is nil when the status names a container the spec lacks).
func containerStatuses(pod *corev1.Pod) []containerStatus {
	var out []containerStatus
	add := func(specs []corev1.Container, statuses []corev1.ContainerStatus, init bool) {
		for i := range statuses {
			cs := containerStatus{Status: &statuses[i], Init: init}
			for j := range specs {
				if specs[j].Name == statuses[i].Name {
					cs.Spec = &specs[j]
					break
				}
			}
			out = append(out, cs)
		}
	}
	add(pod.Spec.InitContainers, pod.Status.InitContainerStatuses, true)
	add(pod.Spec.Containers, pod.Status.ContainerStatuses, false)
	return out
}

// waitingEvidence is the evidence of a container's current waiting state.
func waitingEvidence(pod *corev1.Pod, c containerStatus) Evidence {
	w := c.Status.State.Waiting
	return Evidence{Object: podObject(pod), Field: c.field("state.waiting"), Reason: w.Reason, Message: strings.TrimSpace(w.Message)}
}

// terminatedEvidence is the evidence of a terminated state (current or last) at field.
func terminatedEvidence(pod *corev1.Pod, field string, t *corev1.ContainerStateTerminated) Evidence {
	msg := fmt.Sprintf("exit code %d", t.ExitCode)
	if t.Signal != 0 {
		msg += fmt.Sprintf(", signal %d", t.Signal)
	}
	if !t.FinishedAt.IsZero() && !t.StartedAt.IsZero() {
		msg += fmt.Sprintf(", ran %s", FormatAge(t.FinishedAt.Sub(t.StartedAt.Time)))
	}
	if m := strings.TrimSpace(t.Message); m != "" {
		msg += ": " + m
	}
	return Evidence{Object: podObject(pod), Field: field, Reason: t.Reason, Message: msg, LastSeen: t.FinishedAt.Time}
}

// lastTermination returns the container's most relevant termination and its field path: the
// current state when terminated, else lastState.
func lastTermination(c containerStatus) (*corev1.ContainerStateTerminated, string) {
	if t := c.Status.State.Terminated; t != nil {
		return t, c.field("state.terminated")
	}
	if t := c.Status.LastTerminationState.Terminated; t != nil {
		return t, c.field("lastState.terminated")
	}
	return nil, ""
}

// podCondition returns the pod condition of type t, or nil.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// Node returns the node named name from s.Nodes, or nil.
func (s *Snapshot) Node(name string) *corev1.Node {
	if name == "" {
		return nil
	}
	for _, n := range s.Nodes {
		if n != nil && n.Name == name {
			return n
		}
	}
	return nil
}

// nodeReadyCondition returns the node's Ready condition, or nil when it has none.
func nodeReadyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	c := nodeReadyCondition(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

// age is how long before s.Now the time t was; zero for a zero t or a t in the future.
func age(s *Snapshot, t time.Time) time.Duration { return ageAt(s.Now, t) }

// ageAt is how long before now the time t was; zero for a zero t or a t in the future.
func ageAt(now, t time.Time) time.Duration {
	if t.IsZero() || now.Before(t) {
		return 0
	}
	return now.Sub(t)
}

// eventSeen renders an event's count and age the way kubectl describe does:
// "42 times, last 21s ago".
func eventSeen(s *Snapshot, e Event) string { return eventSeenAt(s.Now, e) }

// eventSeenAt is eventSeen with the ages counted back from now.
func eventSeenAt(now time.Time, e Event) string {
	times := "once"
	if e.Count > 1 {
		times = fmt.Sprintf("%d times", e.Count)
	}
	if e.LastSeen.IsZero() {
		return times
	}
	return fmt.Sprintf("%s, last %s ago", times, FormatAge(ageAt(now, e.LastSeen)))
}

// containsAny reports whether s contains any of subs, ignoring case.
func containsAny(s string, subs ...string) bool {
	ls := strings.ToLower(s)
	for _, sub := range subs {
		if strings.Contains(ls, strings.ToLower(sub)) {
			return true
		}
	}
	return false
}

// quoted returns the first double-quoted string after prefix in msg (e.g. the name in
// `configmap "app-config" not found` for prefix `configmap `), or "".
func quoted(msg, prefix string) string {
	i := strings.Index(strings.ToLower(msg), strings.ToLower(prefix)+`"`)
	if i < 0 {
		return ""
	}
	rest := msg[i+len(prefix)+1:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// truncateStart shortens s to at most n runes by cutting its start, marking the cut with "…".
// Go error chains ("failed to pull …: failed to resolve …: x509: …") end with the cause, so
// that is the part to keep.
func truncateStart(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// plural returns one or many depending on n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// nsFlag is "-n namespace" for kubectl lines about the pod.
func nsFlag(pod *corev1.Pod) string { return "-n " + shellQuote(pod.Namespace) }

// FormatAge renders d the way kubectl prints ages and durations (apimachinery's
// duration.HumanDuration: 45s, 2m49s, 2h5m, 4d); a negative d prints as its absolute value.
func FormatAge(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	return duration.HumanDuration(d)
}

// joinLimited joins up to n names and says how many more there are.
func joinLimited(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// workloadOf names the controller a person would scale or edit for pod, as kubectl resource
// kind and name: a ReplicaSet's Deployment (its name minus the pod-template-hash), a
// StatefulSet, a DaemonSet or a Job; for a pod without owner references, a Deployment is
// inferred from the pod-template-hash label and the generated name. Empty for a bare pod.
func workloadOf(pod *corev1.Pod) (kind, name string) {
	hash := pod.Labels["pod-template-hash"]
	for _, o := range pod.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		switch o.Kind {
		case "ReplicaSet":
			if hash != "" && strings.HasSuffix(o.Name, "-"+hash) {
				return "deployment", strings.TrimSuffix(o.Name, "-"+hash)
			}
			return "replicaset", o.Name
		case "StatefulSet":
			return "statefulset", o.Name
		case "DaemonSet":
			return "daemonset", o.Name
		case "Job":
			return "job", o.Name
		}
	}
	return "", "" // no controller owns it (a bare pod): there is nothing to scale or edit
}

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
