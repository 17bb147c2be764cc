package triage

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// nodeLostReason is the status.reason the node controller sets on pods of an unresponsive
// node (kubectl shows them as Unknown).
const nodeLostReason = "NodeLost"

// evictedReason is the status.reason the kubelet sets when it evicts a pod under node pressure.
const evictedReason = "Evicted"

// evictedRules explains pods the kubelet evicted (evicted, naming the pressure) and pods on a
// node the node controller gave up on (node-lost).
func evictedRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil {
		return nil
	}
	switch {
	case pod.Status.Reason == evictedReason:
		return []Finding{evictedFinding(s)}
	case pod.Status.Reason == nodeLostReason || pod.Status.Phase == corev1.PodUnknown:
		return []Finding{nodeLostFinding(s)}
	}
	return nil
}

// lostOrEvicted reports whether evictedRules explains the pod; its container states are then
// stale (NodeLost) or the result of the eviction, not causes of their own.
func lostOrEvicted(pod *corev1.Pod) bool {
	return pod.Status.Reason == evictedReason || pod.Status.Reason == nodeLostReason || pod.Status.Phase == corev1.PodUnknown
}

// evictionPressure names the node resource an eviction message blames: "memory", "disk"
// (nodefs or imagefs), "ephemeral-storage" (the pod's own limit), "pids", or "" if unknown.
func evictionPressure(msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "ephemeral local storage") || strings.Contains(m, "ephemeral-storage") || strings.Contains(m, "emptydir usage exceeds"):
		return "ephemeral-storage"
	case strings.Contains(m, "resource: memory") || strings.Contains(m, "memorypressure"):
		return "memory"
	case strings.Contains(m, "resource: pids") || strings.Contains(m, "pidpressure"):
		return "pids"
	case strings.Contains(m, "nodefs") || strings.Contains(m, "imagefs") || strings.Contains(m, "diskpressure") || strings.Contains(m, "resource: disk"):
		return "disk"
	}
	return ""
}

// evictedFinding reports evicted with the pressure named.
func evictedFinding(s *Snapshot) Finding {
	pod := s.Pod
	msg := pod.Status.Message
	pressure := evictionPressure(msg)
	for _, e := range eventsWithReason(s, "Evicted") {
		if pressure == "" {
			pressure = evictionPressure(e.Message)
		}
	}
	what := "under node pressure"
	switch pressure {
	case "memory":
		what = "because its node ran low on memory"
	case "disk":
		what = "because its node ran low on disk (nodefs/imagefs)"
	case "ephemeral-storage":
		what = "because it used more ephemeral storage than its limit allows"
	case "pids":
		what = "because its node ran low on process IDs"
	}
	f := Finding{
		Code:     CodeEvicted,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("The kubelet on %s evicted the pod %s; an evicted pod never restarts, its controller makes a new one.", orUnknown(pod.Spec.NodeName), what),
		Evidence: []Evidence{{Object: podObject(pod), Field: "status.reason", Reason: pod.Status.Reason, Message: strings.TrimSpace(msg)}},
	}
	if c := podCondition(pod, corev1.DisruptionTarget); c != nil {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "status.conditions[DisruptionTarget]", Reason: c.Reason, Message: c.Message})
	}
	for _, e := range eventsWithReason(s, "Evicted") {
		f.Evidence = append(f.Evidence, EventEvidence(pod, e))
	}
	if node := s.Node(pod.Spec.NodeName); node != nil {
		for _, c := range node.Status.Conditions {
			if c.Status == corev1.ConditionTrue && strings.HasSuffix(string(c.Type), "Pressure") {
				f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node.Name), Field: "status.conditions[" + string(c.Type) + "]", Reason: c.Reason, Message: c.Message})
			}
		}
	}
	f.Fix = []string{fmt.Sprintf("kubectl describe node %s | grep -A8 Conditions", pod.Spec.NodeName)}
	switch pressure {
	case "memory":
		f.Fix = append(f.Fix, "Set memory requests close to real usage (pods using more than they request are evicted first), or add memory to the node.")
	case "disk":
		f.Fix = append(f.Fix, "Free disk on the node (unused images, logs), or give it a larger disk.")
	case "ephemeral-storage":
		f.Fix = append(f.Fix, "Raise resources.limits.ephemeral-storage or write less to the container's filesystem and emptyDir volumes.")
	case "pids":
		f.Fix = append(f.Fix, "Find the process that forks without bound; set a pids limit for the pod.")
	}
	f.Fix = append(f.Fix, fmt.Sprintf("kubectl delete pod %s %s  # evicted pods stay as records until deleted", nsFlag(pod), pod.Name))
	return f
}

// nodeLostFinding reports node-lost: the node controller marked the pod Unknown/NodeLost because
// its node stopped reporting.
func nodeLostFinding(s *Snapshot) Finding {
	pod := s.Pod
	f := Finding{
		Code:     CodeNodeLost,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("The pod's node %s stopped responding, so the node controller marked the pod %s; nothing about it can change until the node returns or the pod is force-deleted.", orUnknown(pod.Spec.NodeName), PodState(pod)),
		Evidence: []Evidence{{Object: podObject(pod), Field: "status.reason", Reason: pod.Status.Reason, Message: strings.TrimSpace(pod.Status.Message)}},
	}
	if pod.DeletionTimestamp != nil {
		del := deletionOf(s)
		f.Summary = fmt.Sprintf("The pod's node %s stopped responding (NodeLost); the pod was %s, but only that node's kubelet could confirm it, so it stays until the node returns or the pod is force-deleted.", orUnknown(pod.Spec.NodeName), del.describe(s))
		f.Evidence = append(f.Evidence, del.evidence(s))
	}
	if node := s.Node(pod.Spec.NodeName); node != nil {
		if c := nodeReadyCondition(node); c != nil {
			f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node.Name), Field: "status.conditions[Ready]", Reason: c.Reason,
				Message: fmt.Sprintf("status %s: %s (last heartbeat %s ago)", c.Status, c.Message, FormatAge(age(s, c.LastHeartbeatTime.Time))), LastSeen: c.LastHeartbeatTime.Time})
		}
	} else if pod.Spec.NodeName != "" {
		f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(pod.Spec.NodeName), Message: "the node object no longer exists"})
	}
	for _, e := range eventsWithReason(s, "NodeNotReady", "NodeLost") {
		f.Evidence = append(f.Evidence, EventEvidence(pod, e))
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl describe node %s", pod.Spec.NodeName),
		fmt.Sprintf("kubectl delete pod %s %s --grace-period=0 --force  # once you know the node is down: its controller then starts a replacement", nsFlag(pod), pod.Name),
		fmt.Sprintf("kubectl delete node %s  # if the machine is gone for good", pod.Spec.NodeName),
	}
	return f
}

// orUnknown returns s, or "(unknown node)" when it is empty.
func orUnknown(s string) string {
	if s == "" {
		return "(unknown node)"
	}
	return s
}
