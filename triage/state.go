package triage

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// PodState returns what `kubectl get pod` prints in its STATUS column, following kubectl's
// printPod: status.reason, then init container progress ("Init:1/2", "Init:CrashLoopBackOff"),
// then the last container's waiting or terminated reason, then "Terminating" or "Unknown"
// (NodeLost) for a deleted pod.
func PodState(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	initializing := false
	for i, c := range pod.Status.InitContainerStatuses {
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case c.State.Terminated != nil:
			if c.State.Terminated.Reason != "" {
				reason = "Init:" + c.State.Terminated.Reason
			} else if c.State.Terminated.Signal != 0 {
				reason = fmt.Sprintf("Init:Signal:%d", c.State.Terminated.Signal)
			} else {
				reason = fmt.Sprintf("Init:ExitCode:%d", c.State.Terminated.ExitCode)
			}
			initializing = true
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
			initializing = true
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
			initializing = true
		}
		break
	}
	if !initializing {
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := pod.Status.ContainerStatuses[i]
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason != "":
				reason = c.State.Terminated.Reason
			case c.State.Terminated != nil && c.State.Terminated.Signal != 0:
				reason = fmt.Sprintf("Signal:%d", c.State.Terminated.Signal)
			case c.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
			case c.Ready && c.State.Running != nil:
				hasRunning = true
			}
		}
		if reason == "Completed" && hasRunning {
			reason = "Running"
		}
	}
	if pod.DeletionTimestamp != nil {
		if pod.Status.Reason == "NodeLost" {
			return "Unknown"
		}
		return "Terminating"
	}
	return reason
}

// EventEvidence turns a pod event into Evidence, with the container field path in front of
// the message as kubectl describe prints it.
func EventEvidence(pod *corev1.Pod, e Event) Evidence {
	msg := e.Message
	if e.FieldPath != "" {
		msg = e.FieldPath + ": " + msg
	}
	return Evidence{
		Object:   "Pod " + pod.Namespace + "/" + pod.Name,
		Reason:   e.Reason,
		Message:  strings.TrimSpace(msg),
		Count:    e.Count,
		LastSeen: e.LastSeen,
	}
}
