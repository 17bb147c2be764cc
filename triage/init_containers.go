package triage

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// initWaitThreshold is how long an init container may run before triage calls it stuck waiting
// for a dependency; before that the finding is only a warning (it may be about to finish).
const initWaitThreshold = 2 * time.Minute

// initContainerRules explains a pod held in Init: an init container that keeps failing
// (init-container-crashloop) or one that keeps running, usually looping until a Service, DNS
// name or port answers (init-container-waiting-dependency). The current state of the first init
// container not done decides: one whose process never ran is left to containerConfigRules, one
// waiting on its sandbox, image or config to the rule of that wait (an old termination, e.g.
// from before a node reboot, is history), and restartable sidecars to crashRules.
func initContainerRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil || pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" || lostOrEvicted(pod) {
		return nil
	}
	for _, c := range containerStatuses(pod) {
		if !c.Init || c.sidecar() {
			continue
		}
		st := c.Status
		if t := st.State.Terminated; t != nil && t.ExitCode == 0 {
			continue // done
		}
		// Init containers run one at a time: the first one not done is the one to explain.
		if _, ok := neverStarted(s, c); ok {
			return nil // containerConfigRules
		}
		if w := st.State.Waiting; w != nil && w.Reason != "CrashLoopBackOff" {
			return nil // waits for its sandbox, image or config: another rule's cause
		}
		if f, ok := initCrashFinding(s, c); ok {
			return []Finding{f}
		}
		if st.State.Running != nil {
			return []Finding{initWaitingFinding(s, c)}
		}
		return nil
	}
	return nil
}

// initCrashFinding reports init-container-crashloop for an init container that fails: in
// back-off now, terminated now with a non-zero code, or running again shortly after a failure
// of its own (not one its node or runtime caused, see lostTermination).
func initCrashFinding(s *Snapshot, c containerStatus) (Finding, bool) {
	pod := s.Pod
	st := c.Status
	t, tField := lastTermination(c)
	backOff := st.State.Waiting != nil && st.State.Waiting.Reason == "CrashLoopBackOff"
	failedNow := st.State.Terminated != nil && st.State.Terminated.ExitCode != 0 && !lostTermination(st.State.Terminated)
	last := st.LastTerminationState.Terminated
	failedBefore := st.RestartCount > 0 && last != nil && last.ExitCode != 0 && !lostTermination(last) &&
		(st.State.Running == nil || age(s, last.FinishedAt.Time) < recentRestart)
	if !backOff && !failedNow && !failedBefore {
		return Finding{}, false
	}
	f := Finding{
		Code:     CodeInitContainerCrashloop,
		Severity: SeverityBlocker,
		Summary: fmt.Sprintf("Init container %q fails (restarted %d %s), so the app containers never start",
			st.Name, st.RestartCount, plural(int(st.RestartCount), "time", "times")),
	}
	if t != nil {
		f.Summary += fmt.Sprintf(": exit code %d", t.ExitCode)
		if t.Reason != "" {
			f.Summary += " (" + t.Reason + ")"
		}
		f.Evidence = append(f.Evidence, terminatedEvidence(pod, tField, t))
	}
	f.Summary += quoteLastWords(s, c, t) + "."
	if pod.Spec.RestartPolicy == corev1.RestartPolicyNever && failedNow {
		f.Summary += " With restartPolicy Never the pod has failed for good."
	}
	if st.State.Waiting != nil {
		f.Evidence = append(f.Evidence, waitingEvidence(pod, c))
	}
	if c.Spec != nil {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField("command"), Message: commandLine(c.Spec)})
	}
	f.Evidence = append(f.Evidence, logEvidence(s, c)...)
	f.Fix = []string{
		logsFix(pod, st),
		"Fix what the init container checks or runs (a migration, a config render, a permission), then the pod proceeds on its next restart.",
	}
	if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		f.Fix[1] = "Fix what the init container checks or runs (a migration, a config render, a permission), then " + runAgain(pod) + "."
	}
	if t != nil && t.Reason == "OOMKilled" {
		// Read from its last state: it decides the change, so it comes before the general one.
		f.Fix = slices.Insert(f.Fix, 1, fmt.Sprintf("It was OOMKilled: raise resources.limits.memory of init container %s.", st.Name))
	}
	return f, true
}

// dependencyPatterns find what a waiting loop in an init container's command waits for.
var dependencyPatterns = []*regexp.Regexp{
	regexp.MustCompile(`nslookup\s+([\w.-]+)`),
	regexp.MustCompile(`\bnc\s+(?:-\w+(?:\s+\d+)?\s+)*(\w[\w.-]*)\s+(\d+)`),
	regexp.MustCompile(`\b(?:wget|curl)\s+(?:-[\w-]+(?:\s+\S+)?\s+)*(https?://\S+|[\w.-]+:\d+\S*)`),
	regexp.MustCompile(`pg_isready\s+(?:-\w+\s+\S+\s+)*-h\s+(\S+)`),
	regexp.MustCompile(`(?:mysqladmin|redis-cli)\s+.*-h\s*(\S+)`),
	regexp.MustCompile(`until\s+(?:getent hosts|host|dig)\s+([\w.-]+)`),
}

// waitTarget returns what the init container's command waits for (a host, "host port" or URL),
// or "".
func waitTarget(c *corev1.Container) string {
	cmd := commandLine(c)
	for _, re := range dependencyPatterns {
		if m := re.FindStringSubmatch(cmd); m != nil {
			return strings.TrimRight(strings.TrimSpace(strings.Join(m[1:], " ")), `;'"`)
		}
	}
	return ""
}

// commandLine is the container's command and args as one line.
func commandLine(c *corev1.Container) string {
	parts := append(append([]string{}, c.Command...), c.Args...)
	if len(parts) == 0 {
		return "(the image's default entrypoint)"
	}
	return strings.Join(parts, " ")
}

// initWaitingFinding reports init-container-waiting-dependency for a running init container.
func initWaitingFinding(s *Snapshot, c containerStatus) Finding {
	pod := s.Pod
	st := c.Status
	running := age(s, st.State.Running.StartedAt.Time)
	f := Finding{
		Code:     CodeInitContainerWaitingDependency,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("Init container %q has been running for %s without finishing, so the app containers have not started", st.Name, FormatAge(running)),
		Evidence: []Evidence{{Object: podObject(pod), Field: c.field("state.running"), Message: fmt.Sprintf("started %s ago", FormatAge(running)), LastSeen: st.State.Running.StartedAt.Time}},
	}
	target := ""
	if c.Spec != nil {
		target = waitTarget(c.Spec)
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField("command"), Message: commandLine(c.Spec)})
	}
	if target != "" {
		f.Summary += fmt.Sprintf("; its command loops until %s answers.", target)
	} else {
		f.Summary += "; it is most likely waiting for something it depends on."
	}
	if running < initWaitThreshold {
		f.Severity = SeverityWarning
		f.Summary = fmt.Sprintf("Init container %q started %s ago and is still running; it may simply not be done yet.", st.Name, FormatAge(running))
	}
	f.Evidence = append(f.Evidence, logEvidence(s, c)...)
	f.Fix = []string{fmt.Sprintf("kubectl logs %s %s -c %s --tail=20", nsFlag(pod), shellQuote(pod.Name), shellQuote(st.Name))}
	if target != "" {
		host := strings.Fields(target)[0]
		f.Fix = append(f.Fix,
			fmt.Sprintf("kubectl run -it --rm dnscheck %s --image=busybox:1.36 --restart=Never -- nslookup %s", nsFlag(pod), shellQuote(host)),
			"Make sure the dependency exists and is ready (its Service has endpoints); short names like svc.namespace need the cluster's search domains, so prefer the full name <svc>.<namespace>.svc.cluster.local in the init command.")
	}
	return f
}
