package triage

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Evaluate runs every rule over s and ranks the findings: the first blocker (in rules order) is
// the primary cause, then the other blockers, then context findings. When no rule reports a
// blocker, a not-stuck finding (pod-healthy, pod-completed) comes first if there is one; else
// the diagnosis is marked Uncertain with CodeUnknown first; an Uncertain primary finding marks
// it Uncertain too. Reads the API server refused (s.Refused) make the diagnosis Partial; the
// primary finding then lists them (markRefused). Evaluate is pure: it reads only s.
func Evaluate(s *Snapshot) *Diagnosis {
	d := evaluatePod(s)
	d.Refused, d.Partial = s.Refused, len(s.Refused) > 0
	d.Findings, d.Summary = withRefused(d.Findings, d.Summary, s.Refused)
	return d
}

// evaluatePod is Evaluate before the refused reads are added.
func evaluatePod(s *Snapshot) *Diagnosis {
	d := &Diagnosis{CollectedAt: s.Now, Events: s.Events}
	if s.Pod == nil {
		d.Pod = s.Requested
		d.Findings = []Finding{notFoundFinding(s)}
		if m := s.MissingNamespace; m != nil {
			d.Findings = []Finding{namespaceNotFoundFinding(m, "pod "+s.Requested.Name, s.Requested.Name)}
		}
		d.Summary = d.Findings[0].Summary
		return d
	}
	d.Pod = PodRef{Namespace: s.Pod.Namespace, Name: s.Pod.Name, UID: string(s.Pod.UID)}
	d.Phase = s.Pod.Status.Phase
	d.State = PodState(s.Pod)
	d.Node = s.Pod.Spec.NodeName

	var blockers, context []Finding
	for _, r := range rules {
		blockers, context = bySeverity(blockers, context, r.check(s))
	}
	d.Findings = append(blockers, context...)
	if len(blockers) == 0 {
		if i := notStuckIndex(context); i >= 0 {
			// The pod is fine (pod-healthy, pod-completed): that is a sure answer, not a guess.
			d.Findings = append([]Finding{context[i]}, append(context[:i:i], context[i+1:]...)...)
		} else {
			d.Uncertain = true
			d.Findings = append([]Finding{unknownFinding(s)}, d.Findings...)
		}
	}
	if d.Findings[0].Uncertain {
		d.Uncertain = true
	}
	d.Summary = d.Findings[0].Summary
	return d
}

// bySeverity appends the blockers of fs to blockers and the rest to context, keeping order.
func bySeverity(blockers, context, fs []Finding) ([]Finding, []Finding) {
	for _, f := range fs {
		if f.Severity == SeverityBlocker {
			blockers = append(blockers, f)
		} else {
			context = append(context, f)
		}
	}
	return blockers, context
}

// notStuckIndex returns the index of a finding that says the pod is not stuck (pod-healthy or
// pod-completed), or -1. Such findings are SeverityInfo (they block nothing) but are the
// answer when no rule found a blocker.
func notStuckIndex(fs []Finding) int {
	for i, f := range fs {
		if f.Code == CodePodHealthy || f.Code == CodePodCompleted {
			return i
		}
	}
	return -1
}

// unknownFinding is the honest fallback when no rule is sure. A pod bound to a node whose
// kubelet never reported on it gets boundNotStartedFinding; otherwise it quotes the newest informative
// Warning events first (the runtime's own words, not "Back-off …" repeats), then the current
// state of each container that is not running, so the operator still has the cluster's own
// evidence to go on.
func unknownFinding(s *Snapshot) Finding {
	if f, ok := boundNotStartedFinding(s); ok {
		return f
	}
	f := Finding{
		Code:      CodeUnknown,
		Severity:  SeverityWarning,
		Uncertain: true,
		Summary:   fmt.Sprintf("No rule is sure why this pod is %s; the evidence below is what the cluster says.", strings.ToLower(PodState(s.Pod))),
	}
	for _, e := range s.Events {
		if e.Type == corev1.EventTypeWarning && informative(e) && len(f.Evidence) < 4 {
			if len(f.Evidence) == 0 {
				// The component's own words, even when no rule reads them.
				f.Summary += fmt.Sprintf(" The newest warning is %s's %s (%s): %q.", orDefault(e.Source, "the cluster"), e.Reason, eventSeen(s, e), truncateStart(e.Message, 240))
			}
			f.Evidence = append(f.Evidence, EventEvidence(s.Pod, e))
		}
	}
	if len(f.Evidence) == 0 {
		for _, e := range s.Events {
			if e.Type == corev1.EventTypeWarning && len(f.Evidence) < 2 {
				f.Evidence = append(f.Evidence, EventEvidence(s.Pod, e))
			}
		}
	}
	for _, c := range containerStatuses(s.Pod) {
		if w := c.Status.State.Waiting; w != nil && len(f.Evidence) < 6 {
			f.Evidence = append(f.Evidence, waitingEvidence(s.Pod, c))
		}
	}
	if p := s.Pod.Status.Message; p != "" {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(s.Pod), Field: "status.message", Reason: s.Pod.Status.Reason, Message: p})
	}
	f.Fix = []string{fmt.Sprintf("kubectl describe pod -n %s %s", shellQuote(s.Pod.Namespace), shellQuote(s.Pod.Name))}
	return f
}

// notFoundFinding answers for a pod that does not exist, suggesting the closest names.
func notFoundFinding(s *Snapshot) Finding {
	f := Finding{
		Code:     CodePodNotFound,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("There is no pod %q in namespace %q.", s.Requested.Name, s.Requested.Namespace),
	}
	if len(s.Refused) > 0 {
		// The lookups that would have found a workload of that name were refused: it may exist.
		f.Uncertain = true
		how := "were refused by the API server"
		if _, failed := splitFailures(s.Refused); len(failed) > 0 {
			how = "did not all succeed (refused, timed out or failed)"
		}
		f.Summary += fmt.Sprintf(" The reads that look for a workload named %q %s, so one may exist: whypending cannot tell.", s.Requested.Name, how)
	}
	if len(s.SimilarPods) > 0 {
		f.Summary += " Did you mean " + strings.Join(s.SimilarPods, ", ") + "?"
		for _, p := range s.SimilarPods {
			f.Evidence = append(f.Evidence, Evidence{Object: "Pod " + p, Message: "similar name"})
		}
	}
	f.Fix = []string{fmt.Sprintf("kubectl get pods -A | grep %s", shellQuote(s.Requested.Name))}
	return f
}
