package triage

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// healthyRules says plainly when the pod is not stuck: Running and Ready with no container
// crashing (pod-healthy), or Succeeded (pod-completed). Both are SeverityInfo: they are not
// causes, and Evaluate makes them the answer only when no rule found a blocker.
func healthyRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Reason != "" {
		return nil
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return []Finding{completedFinding(s)}
	case corev1.PodRunning:
		if f, ok := healthyFinding(s); ok {
			return []Finding{f}
		}
	}
	return nil
}

// healthyFinding reports pod-healthy when the Ready condition is True and no container is
// crashing or restarted recently.
func healthyFinding(s *Snapshot) (Finding, bool) {
	pod := s.Pod
	ready := podCondition(pod, corev1.PodReady)
	if ready == nil || ready.Status != corev1.ConditionTrue {
		return Finding{}, false
	}
	var restarts int32
	for _, c := range containerStatuses(pod) {
		if c.Init && !c.sidecar() {
			continue
		}
		if crashing(s, c) || !c.Status.Ready {
			return Finding{}, false
		}
		restarts += c.Status.RestartCount
	}
	f := Finding{
		Code:     CodePodHealthy,
		Severity: SeverityInfo,
		Summary:  fmt.Sprintf("The pod is not stuck: it is Running and Ready on %s (Ready for %s).", pod.Spec.NodeName, FormatAge(age(s, ready.LastTransitionTime.Time))),
		Evidence: []Evidence{{Object: podObject(pod), Field: "status.conditions[Ready]", Message: fmt.Sprintf("True since %s ago", FormatAge(age(s, ready.LastTransitionTime.Time)))}},
	}
	if restarts > 0 {
		f.Summary += fmt.Sprintf(" Its containers restarted %d %s in the past, but not in the last %s.", restarts, plural(int(restarts), "time", "times"), FormatAge(recentRestart))
	}
	f.Fix = []string{fmt.Sprintf("kubectl get pod %s %s -o wide", nsFlag(pod), shellQuote(pod.Name))}
	return f, true
}

// completedFinding reports pod-completed for a Succeeded pod.
func completedFinding(s *Snapshot) Finding {
	pod := s.Pod
	f := Finding{
		Code:     CodePodCompleted,
		Severity: SeverityInfo,
		Summary:  "The pod is not stuck: it ran to completion (phase Succeeded) and will not run again.",
		Evidence: []Evidence{{Object: podObject(pod), Field: "status.phase", Message: string(pod.Status.Phase)}},
	}
	for _, c := range containerStatuses(pod) {
		if t := c.Status.State.Terminated; t != nil && !c.Init {
			f.Evidence = append(f.Evidence, terminatedEvidence(pod, c.field("state.terminated"), t))
		}
	}
	f.Fix = []string{fmt.Sprintf("kubectl logs %s %s --all-containers", nsFlag(pod), shellQuote(pod.Name))}
	return f
}
