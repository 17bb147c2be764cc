package triage

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// boundNotStartedFinding explains a pod that is bound to a node (spec.nodeName set) but that
// the node's kubelet has never reported on: no container or init-container status and no event
// from the kubelet since the binding. Which of the usual causes holds (the kubelet is down or
// cannot reach the API server, the node is gone, the kubelet is slow to admit the pod) cannot
// be told from the API alone (even a missing Node may be a read race), so the finding is Uncertain and says what to check: the node's
// Ready condition and heartbeat (status.conditions[Ready].lastHeartbeatTime) and the kubelet's
// log on that node. FailedScheduling events older than the binding are the scheduler's earlier
// attempts, not current evidence, and are only counted as such. ok is false for any other pod.
func boundNotStartedFinding(s *Snapshot) (Finding, bool) {
	pod := s.Pod
	name := pod.Spec.NodeName
	if name == "" || len(pod.Status.ContainerStatuses) > 0 || len(pod.Status.InitContainerStatuses) > 0 ||
		pod.DeletionTimestamp != nil || (pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "") {
		return Finding{}, false
	}
	boundAt := boundTime(pod)
	var stale []Event
	for _, e := range s.Events {
		if e.Reason == "FailedScheduling" {
			stale = append(stale, e) // a bound pod is no longer being scheduled
			continue
		}
		if e.Source == "kubelet" && !e.LastSeen.Before(boundAt) {
			return Finding{}, false // the kubelet has seen it; other evidence applies
		}
	}
	since := ""
	if !boundAt.IsZero() {
		since = fmt.Sprintf(" %s ago", FormatAge(age(s, boundAt)))
	}
	f := Finding{
		Code:      CodeUnknown,
		Severity:  SeverityWarning,
		Uncertain: true,
		Summary: fmt.Sprintf("The pod was bound to node %s%s, but the kubelet there has not reported it: no container status and no kubelet event.",
			name, since),
		Evidence: []Evidence{
			{Object: podObject(pod), Field: "spec.nodeName", Message: name},
			{Object: podObject(pod), Field: "status.containerStatuses", Message: "none: the kubelet has not started the pod"},
		},
		Fix: []string{
			fmt.Sprintf("kubectl get node %s -o wide", shellQuote(name)),
			fmt.Sprintf(`kubectl get node %s -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.reason} heartbeat {.lastHeartbeatTime}{"\n"}{end}'`, shellQuote(name)),
			fmt.Sprintf("On %s: systemctl status kubelet; journalctl -u kubelet --since -30m | grep %s", shellQuote(name), shellQuote(pod.Name)),
		},
	}
	if u := s.eventsUnread(); u != "" {
		f.Summary = fmt.Sprintf("The pod was bound to node %s%s, but the kubelet there has not reported a container status; its events could not be read (%s), so whether the kubelet reported anything else is not known.", name, since, u)
	}
	if !boundAt.IsZero() {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "status.conditions[PodScheduled]",
			Message: "True since " + FormatAge(age(s, boundAt)) + " ago"})
	}
	switch node := s.Node(name); {
	case node == nil && apierrors.IsNotFound(s.NodesErr):
		f.Summary += fmt.Sprintf(" No Node %s exists any more, so no kubelet will start it: delete the pod (%s).", name, replacement(pod))
		f.Fix = []string{fmt.Sprintf("kubectl delete pod -n %s %s   # its node is gone; %s", shellQuote(pod.Namespace), shellQuote(pod.Name), replacement(pod))}
	case node == nil:
		f.Summary += fmt.Sprintf(" Node %s could not be read, so its state is unknown; check its Ready condition and the kubelet's log there.", name)
	default:
		c := nodeReadyCondition(node)
		switch {
		case c == nil:
			f.Summary += fmt.Sprintf(" Node %s has no Ready condition: its kubelet has never posted status. Check that the kubelet runs there and can reach the API server.", name)
		case c.Status != corev1.ConditionTrue:
			f.Summary += fmt.Sprintf(" Node %s is Ready=%s (last heartbeat %s ago), so its kubelet is down or cannot reach the API server: fix the node, or the pod is evicted once the node stays unreachable.",
				name, c.Status, FormatAge(age(s, c.LastHeartbeatTime.Time)))
		default:
			f.Summary += fmt.Sprintf(" Node %s reports Ready (last heartbeat %s ago), so its kubelet runs but has not admitted or started this pod yet; its log on %s says why.",
				name, FormatAge(age(s, c.LastHeartbeatTime.Time)), name)
		}
		if c != nil {
			f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(name), Field: "status.conditions[Ready]", Reason: c.Reason,
				Message: fmt.Sprintf("status %s (last heartbeat %s ago)", c.Status, FormatAge(age(s, c.LastHeartbeatTime.Time))), LastSeen: c.LastHeartbeatTime.Time})
		}
	}
	if len(stale) > 0 {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "events", Reason: "FailedScheduling",
			Message:  fmt.Sprintf("%d FailedScheduling event(s), last %s ago: from before the pod was bound, no longer current", len(stale), FormatAge(age(s, stale[0].LastSeen))),
			LastSeen: stale[0].LastSeen})
	}
	return f, true
}

// boundTime is when the pod was bound to its node: the PodScheduled condition's
// lastTransitionTime when it is True (zero when unknown).
func boundTime(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
