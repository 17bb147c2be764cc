package triage

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// recentRestart is how long after a container's last termination a running, ready container
// still counts as crashing rather than recovered.
const recentRestart = 15 * time.Minute

// logEvidenceLines is how many of the previous log's last lines a finding quotes.
const logEvidenceLines = 10

// crashRules explains app containers (and restartable sidecars) that start and then die or
// never become ready: OOMKilled, killed by a failing liveness or startup probe, permission
// denied, exiting 0 under restartPolicy Always, any other non-zero exit (with its last log
// lines), or running but never Ready because the readiness probe fails. A container whose
// process never ran (neverStarted) is left to containerConfigRules, and one that waits for
// anything but a crash back-off now (its sandbox, image or config) to the rule of that wait:
// its last termination is history.
func crashRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil || pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || lostOrEvicted(pod) {
		return nil
	}
	var out []Finding
	for _, c := range containerStatuses(pod) {
		if c.Init && !c.sidecar() {
			continue // initContainerRules
		}
		if _, ok := neverStarted(s, c); ok {
			continue // containerConfigRules
		}
		if f, ok := crashFinding(s, c); ok {
			out = append(out, f)
		} else if f, ok := readinessFinding(s, c); ok {
			out = append(out, f)
		}
	}
	return out
}

// crashing reports whether container c is dying now. The current state decides: a container in
// CrashLoopBackOff or terminated now is; one waiting for anything else (ContainerCreating after
// a node reboot, an image pull, a config error) is blocked by that, not by its last
// termination; one running now is crashing only if it restarted recently (or is still not
// ready) after a termination of its own, not after one its node or runtime caused
// (lostTermination).
func crashing(s *Snapshot, c containerStatus) bool {
	st := c.Status
	switch {
	case st.State.Waiting != nil:
		return st.State.Waiting.Reason == "CrashLoopBackOff"
	case st.State.Terminated != nil:
		return st.State.Terminated.ExitCode != 0 || s.Pod.Spec.RestartPolicy != corev1.RestartPolicyNever
	case st.RestartCount > 0 && st.LastTerminationState.Terminated != nil:
		last := st.LastTerminationState.Terminated
		return !lostTermination(last) && (!st.Ready || age(s, last.FinishedAt.Time) < recentRestart)
	}
	return false
}

// lostTermination reports whether a termination was the node's or the runtime's doing rather
// than the process's: containerd's "Unknown" (exit 255) for a container lost when its node
// rebooted, and the kubelet's "ContainerStatusUnknown" for one it could no longer find.
func lostTermination(t *corev1.ContainerStateTerminated) bool {
	return t != nil && (t.Reason == "ContainerStatusUnknown" || t.Reason == "Unknown" && t.ExitCode == 255)
}

// crashFinding classifies why container c keeps dying, most specific first: the kubelet's own
// word (OOMKilled, probe kills), then what the process printed, then the exit code.
func crashFinding(s *Snapshot, c containerStatus) (Finding, bool) {
	if !crashing(s, c) {
		return Finding{}, false
	}
	pod := s.Pod
	t, tField := lastTermination(c)
	words := lastWords(s, c, t)
	switch {
	case t != nil && t.Reason == "OOMKilled":
		return oomFinding(s, c, t, tField), true
	case probeKills(s, c, "liveness") != nil:
		return probeKillFinding(s, c, "liveness", CodeLivenessProbeFailed, t, tField), true
	case probeKills(s, c, "startup") != nil:
		return probeKillFinding(s, c, "startup", CodeStartupProbeFailed, t, tField), true
	case containsAny(words, "permission denied", "operation not permitted", "EACCES", "read-only file system"):
		return processFinding(s, c, t, tField, CodePermissionDenied), true
	case t != nil && t.ExitCode == 0 && pod.Spec.RestartPolicy != corev1.RestartPolicyNever:
		return exitsZeroFinding(s, c, t, tField), true
	case t != nil:
		return processFinding(s, c, t, tField, CodeAppError), true
	}
	return Finding{}, false
}

// lastWords is everything the container said about its last death: the termination message,
// the waiting message and the previous log's tail.
func lastWords(s *Snapshot, c containerStatus, t *corev1.ContainerStateTerminated) string {
	var b strings.Builder
	if t != nil {
		b.WriteString(t.Message)
		b.WriteByte('\n')
	}
	if w := c.Status.State.Waiting; w != nil {
		b.WriteString(w.Message)
		b.WriteByte('\n')
	}
	if lt, ok := s.PreviousLogs[c.Status.Name]; ok {
		for _, l := range lt.Lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// probeKills returns the kubelet's events that show probe kind ("liveness", "startup") killing
// or failing container c, newest first; nil when there are none.
func probeKills(s *Snapshot, c containerStatus, kind string) []Event {
	killed := "failed " + kind + " probe"
	failed := strings.ToUpper(kind[:1]) + kind[1:] + " probe failed"
	ev := eventsMatching(s, func(e Event) bool {
		if !forContainer(c.Status.Name)(e) {
			return false
		}
		return (e.Reason == "Killing" && containsAny(e.Message, killed)) ||
			(e.Reason == "Unhealthy" && strings.HasPrefix(e.Message, failed))
	})
	// A failing probe alone is not a kill: require a Killing event, or failures plus restarts.
	for _, e := range ev {
		if e.Reason == "Killing" {
			return ev
		}
	}
	if len(ev) > 0 && c.Status.RestartCount > 0 {
		return ev
	}
	return nil
}

// probeOf returns the container's probe of kind ("liveness", "readiness", "startup").
func probeOf(c containerStatus, kind string) *corev1.Probe {
	if c.Spec == nil {
		return nil
	}
	switch kind {
	case "liveness":
		return c.Spec.LivenessProbe
	case "readiness":
		return c.Spec.ReadinessProbe
	case "startup":
		return c.Spec.StartupProbe
	}
	return nil
}

// describeProbe renders a probe with kubelet's defaults filled in, e.g.
// "httpGet :8080/healthz, initialDelay 30s, period 10s, timeout 1s, failureThreshold 3".
func describeProbe(p *corev1.Probe) string {
	var target string
	switch h := p.ProbeHandler; {
	case h.HTTPGet != nil:
		target = fmt.Sprintf("httpGet :%s%s", h.HTTPGet.Port.String(), h.HTTPGet.Path)
		if h.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			target += " (https)"
		}
	case h.TCPSocket != nil:
		target = "tcpSocket :" + h.TCPSocket.Port.String()
	case h.Exec != nil:
		target = fmt.Sprintf("exec %q", h.Exec.Command)
	case h.GRPC != nil:
		target = fmt.Sprintf("grpc :%d", h.GRPC.Port)
	default:
		target = "(no handler)"
	}
	period, timeout, failures := p.PeriodSeconds, p.TimeoutSeconds, p.FailureThreshold
	if period == 0 {
		period = 10
	}
	if timeout == 0 {
		timeout = 1
	}
	if failures == 0 {
		failures = 3
	}
	return fmt.Sprintf("%s, initialDelay %ds, period %ds, timeout %ds, failureThreshold %d (about %ds of failures before a kill)",
		target, p.InitialDelaySeconds, period, timeout, failures, period*failures)
}

// probeKillFinding reports liveness-probe-failed or startup-probe-failed.
func probeKillFinding(s *Snapshot, c containerStatus, kind string, code Code, t *corev1.ContainerStateTerminated, tField string) Finding {
	pod := s.Pod
	events := probeKills(s, c, kind)
	var failMsg string
	for _, e := range events {
		if e.Reason == "Unhealthy" {
			failMsg = e.Message
			break
		}
	}
	f := Finding{
		Code:     code,
		Severity: SeverityBlocker,
		Summary: fmt.Sprintf("The kubelet keeps killing container %q because its %s probe fails (restarted %d %s).",
			c.Status.Name, kind, c.Status.RestartCount, plural(int(c.Status.RestartCount), "time", "times")),
	}
	if failMsg != "" {
		f.Summary += " The probe gets: " + truncate(strings.TrimSpace(failMsg[strings.Index(failMsg, ":")+1:]), 160) + "."
	}
	for _, e := range events {
		if len(f.Evidence) < 3 {
			f.Evidence = append(f.Evidence, EventEvidence(pod, e))
		}
	}
	p := probeOf(c, kind)
	if p != nil {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField(kind + "Probe"), Message: describeProbe(p)})
	}
	if t != nil {
		f.Evidence = append(f.Evidence, terminatedEvidence(pod, tField, t))
	}
	f.Evidence = append(f.Evidence, logEvidence(s, c)...)
	f.Fix = []string{logsFix(pod, c.Status) + " | tail -20"}
	if containsAny(failMsg, "connection refused", "no such host") && p != nil && c.Spec != nil {
		if port := probePort(p); port != "" && !exposesPort(c.Spec, port) {
			f.Fix = append(f.Fix, fmt.Sprintf("The probe targets port %s, which the container does not declare (ports: %s): point the probe at the port the app listens on.", port, declaredPorts(c.Spec)))
		}
	}
	if kind == "liveness" && probeOf(c, "startup") == nil {
		f.Fix = append(f.Fix, "If the app is just slow to start, add a startupProbe (or raise livenessProbe.initialDelaySeconds) so liveness checks begin only once it is up.")
	} else {
		f.Fix = append(f.Fix, fmt.Sprintf("Check that the %s probe's path and port answer inside the container, and give it a longer timeoutSeconds/failureThreshold if the app is slow.", kind))
	}
	return f
}

// probePort is the numeric or named port a probe targets, or "".
func probePort(p *corev1.Probe) string {
	switch {
	case p.HTTPGet != nil:
		return p.HTTPGet.Port.String()
	case p.TCPSocket != nil:
		return p.TCPSocket.Port.String()
	case p.GRPC != nil:
		return fmt.Sprint(p.GRPC.Port)
	}
	return ""
}

// exposesPort reports whether the container declares port (by number or name); true when it
// declares no ports at all (then nothing can be said).
func exposesPort(c *corev1.Container, port string) bool {
	if len(c.Ports) == 0 {
		return true
	}
	for _, p := range c.Ports {
		if fmt.Sprint(p.ContainerPort) == port || p.Name == port {
			return true
		}
	}
	return false
}

// declaredPorts lists the container's declared ports.
func declaredPorts(c *corev1.Container) string {
	var ps []string
	for _, p := range c.Ports {
		ps = append(ps, fmt.Sprint(p.ContainerPort))
	}
	return strings.Join(ps, ", ")
}

// oomFinding reports oom-killed with the memory limit against the request.
func oomFinding(s *Snapshot, c containerStatus, t *corev1.ContainerStateTerminated, tField string) Finding {
	pod := s.Pod
	f := Finding{
		Code:     CodeOOMKilled,
		Severity: SeverityBlocker,
		Summary: fmt.Sprintf("Container %q is killed by the kernel's OOM killer (exit code %d, restarted %d %s)",
			c.Status.Name, t.ExitCode, c.Status.RestartCount, plural(int(c.Status.RestartCount), "time", "times")),
		Evidence: []Evidence{terminatedEvidence(pod, tField, t)},
	}
	var limit, request string
	if c.Spec != nil {
		if q, ok := c.Spec.Resources.Limits[corev1.ResourceMemory]; ok {
			limit = q.String()
		}
		if q, ok := c.Spec.Resources.Requests[corev1.ResourceMemory]; ok {
			request = q.String()
		}
		msg := fmt.Sprintf("memory limit %s, request %s", orNone(limit), orNone(request))
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField("resources"), Message: msg})
	}
	switch {
	case limit != "":
		f.Summary += fmt.Sprintf(": it needs more than its memory limit of %s (request %s).", limit, orNone(request))
	default:
		f.Summary += ": it has no memory limit, so the node itself ran out of memory."
	}
	f.Evidence = append(f.Evidence, logEvidence(s, c)...)
	for _, e := range eventsWithReason(s, "BackOff", "OOMKilling") {
		if forContainer(c.Status.Name)(e) && len(f.Evidence) < 5 {
			f.Evidence = append(f.Evidence, EventEvidence(pod, e))
		}
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl top pod %s %s --containers  # what it uses before it dies (needs metrics-server)", nsFlag(pod), shellQuote(pod.Name)),
	}
	switch more := doubled(limit); {
	case more != "":
		f.Fix = append(f.Fix, setResourcesFix(pod, c.Status.Name, "--limits=memory="+more+" --requests=memory="+more, "the memory limit (twice the "+limit+" it exceeds; size it to what the app uses)"))
	case request != "":
		f.Fix = append(f.Fix, fmt.Sprintf("Give %s a memory request (and limit) of what it really uses: with no limit it was killed because the node ran out of memory, and its request (%s) is what the scheduler reserves for it.", c.who(), request))
	default:
		f.Fix = append(f.Fix, fmt.Sprintf("Give %s a memory request (and limit) of what it really uses: with none, the scheduler reserves nothing for it and the node runs out of memory.", c.who()))
	}
	f.Fix = append(f.Fix, "Or reduce the app's memory use (heap size flags such as -Xmx or GOMEMLIMIT below the limit).")
	return f
}

// orNone returns s, or "none" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// exitsZeroFinding reports container-exits-immediately.
func exitsZeroFinding(s *Snapshot, c containerStatus, t *corev1.ContainerStateTerminated, tField string) Finding {
	pod := s.Pod
	policy := pod.Spec.RestartPolicy
	if policy == "" {
		policy = corev1.RestartPolicyAlways
	}
	ran := "at once"
	if !t.StartedAt.IsZero() && !t.FinishedAt.IsZero() {
		ran = "after " + FormatAge(t.FinishedAt.Sub(t.StartedAt.Time))
	}
	f := Finding{
		Code:     CodeContainerExitsImmediately,
		Severity: SeverityBlocker,
		Summary: fmt.Sprintf("Container %q finishes successfully (exit code 0) %s, but restartPolicy %s restarts it, so it ends up in back-off (restarted %d %s). Its command is not a long-running process.",
			c.Status.Name, ran, policy, c.Status.RestartCount, plural(int(c.Status.RestartCount), "time", "times")),
		Evidence: []Evidence{terminatedEvidence(pod, tField, t)},
	}
	if c.Spec != nil {
		cmd := "the image's default entrypoint"
		if len(c.Spec.Command) > 0 || len(c.Spec.Args) > 0 {
			cmd = strings.TrimSpace(strings.Join(append(append([]string{}, c.Spec.Command...), c.Spec.Args...), " "))
		}
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField("command"), Message: fmt.Sprintf("runs %s (image %s); restartPolicy %s", cmd, c.Spec.Image, policy)})
	}
	if w := c.Status.State.Waiting; w != nil {
		f.Evidence = append(f.Evidence, waitingEvidence(pod, c))
	}
	f.Evidence = append(f.Evidence, logEvidence(s, c)...)
	// The log says which case this is (a server that quits at once, or a task that did its
	// work), so it comes before either change.
	f.Fix = []string{
		logsFix(pod, c.Status),
		"Either, if it is meant to keep running, give the container a command that does (the server, not a one-shot script); a shell image needs e.g. command: [\"sleep\", \"infinity\"] to stay up.",
		"Or, if it is meant to run once (the log shows a task that did its work), run it as a Job (restartPolicy OnFailure/Never) instead of a Deployment or bare pod.",
	}
	return f
}

// processFinding reports permission-denied or app-error from the exit and what the process
// printed.
func processFinding(s *Snapshot, c containerStatus, t *corev1.ContainerStateTerminated, tField string, code Code) Finding {
	pod := s.Pod
	f := Finding{Code: code, Severity: SeverityBlocker}
	restarts := fmt.Sprintf("restarted %d %s", c.Status.RestartCount, plural(int(c.Status.RestartCount), "time", "times"))
	exit := ""
	if t != nil {
		exit = fmt.Sprintf("exit code %d", t.ExitCode)
		if t.Reason != "" {
			exit += " (" + t.Reason + ")"
		}
		if t.ExitCode == 137 {
			exit += ", killed by SIGKILL"
		} else if t.ExitCode == 143 {
			exit += ", stopped by SIGTERM"
		}
		f.Evidence = append(f.Evidence, terminatedEvidence(pod, tField, t))
	}
	if w := c.Status.State.Waiting; w != nil && w.Reason != "CrashLoopBackOff" {
		f.Evidence = append(f.Evidence, waitingEvidence(pod, c))
	}
	f.Evidence = append(f.Evidence, logEvidence(s, c)...)
	said := quoteLastWords(s, c, t)
	switch code {
	case CodePermissionDenied:
		f.Summary = fmt.Sprintf("Container %q fails with a permission error (%s; %s)%s.", c.Status.Name, exit, restarts, said)
		f.Fix = []string{
			fmt.Sprintf("kubectl get pod %s %s -o jsonpath='{.spec.securityContext}{\"\\n\"}{.spec.containers[?(@.name==\"%s\")].securityContext}'", nsFlag(pod), shellQuote(pod.Name), c.Status.Name), // a DNS label, inside the quoted jsonpath
			"Run as a user that owns the paths it writes (runAsUser), set fsGroup so volumes are group-writable, or mount a writable emptyDir where the app writes.",
		}
	default:
		f.Summary = fmt.Sprintf("Container %q exits with %s; %s%s.", c.Status.Name, exit, restarts, said)
		f.Fix = []string{
			logsFix(pod, c.Status),
			"Fix what the log says (a bad flag, missing config or an unreachable dependency), then " + runAgain(pod) + ".",
		}
	}
	return f
}

// logsFix is the kubectl logs command for the failed run of container st of pod: with
// --previous while the kubelet restarts it (the failed run is the previous instance), without
// when the failed run is the current one (terminated and not restarted, as under restartPolicy
// Never, where --previous finds no earlier instance).
func logsFix(pod *corev1.Pod, st *corev1.ContainerStatus) string {
	cmd := fmt.Sprintf("kubectl logs %s %s -c %s", nsFlag(pod), shellQuote(pod.Name), shellQuote(st.Name))
	if st.RestartCount > 0 && st.State.Terminated == nil {
		cmd += " --previous"
	}
	return cmd
}

// runAgain says how the fixed app gets to run again: a Job's pod template cannot change in
// place, so the Job is run again; a pod under restartPolicy Never is not restarted, so it is
// created again; anything else rolls out again.
func runAgain(pod *corev1.Pod) string {
	if ref := controllerOf(pod); ref != nil && ref.Kind == "Job" {
		return fmt.Sprintf("run Job %s again from the fixed template (a Job's pod template cannot be changed in place)", ref.Name)
	}
	if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		return "create the pod again (with restartPolicy Never it is not restarted)"
	}
	return "let the workload roll out again"
}

// quoteLastWords is `; it said: "…"` with the last meaningful line the container printed
// (termination message, else the previous log), or "".
func quoteLastWords(s *Snapshot, c containerStatus, t *corev1.ContainerStateTerminated) string {
	var lines []string
	if t != nil && strings.TrimSpace(t.Message) != "" {
		lines = strings.Split(strings.TrimSpace(t.Message), "\n")
	} else if lt, ok := s.PreviousLogs[c.Status.Name]; ok {
		lines = lt.Lines
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return fmt.Sprintf("; it said: %q", truncate(l, 200))
		}
	}
	return ""
}

// containerImage is the container's image from the spec, else from the status.
func containerImage(c containerStatus) string {
	if c.Spec != nil {
		return c.Spec.Image
	}
	return c.Status.Image
}

// PreviousLogField is the Evidence.Field of container's previous log, "log[<container>]
// (previous)"; its Message is the log's last lines, or why they could not be read.
func PreviousLogField(container string) string { return "log[" + container + "] (previous)" }

// PreviousLogContainer is the container whose previous log the Evidence.Field field names
// (PreviousLogField); false when it names none.
func PreviousLogContainer(field string) (string, bool) {
	c, ok := strings.CutPrefix(field, "log[")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(c, "] (previous)")
}

// logEvidence is the previous log's tail for container c, or why it could not be read.
func logEvidence(s *Snapshot, c containerStatus) []Evidence {
	lt, ok := s.PreviousLogs[c.Status.Name]
	if !ok {
		return nil
	}
	obj := podObject(s.Pod)
	field := PreviousLogField(c.Status.Name)
	if lt.Err != nil {
		return []Evidence{{Object: obj, Field: field, Message: "previous log could not be read: " + lt.Err.Error()}}
	}
	lines := lt.Lines
	if len(lines) > logEvidenceLines {
		lines = lines[len(lines)-logEvidenceLines:]
	}
	if len(lines) == 0 {
		return []Evidence{{Object: obj, Field: field, Message: "the previous container wrote nothing to its log"}}
	}
	return []Evidence{{Object: obj, Field: field, Message: strings.Join(lines, "\n")}}
}

// readinessFinding reports readiness-probe-never-ready (or, while no kill has happened yet,
// a failing startup probe) for a running container that is not Ready.
func readinessFinding(s *Snapshot, c containerStatus) (Finding, bool) {
	pod := s.Pod
	st := c.Status
	if st.State.Running == nil || st.Ready || pod.Status.Phase != corev1.PodRunning {
		return Finding{}, false
	}
	kind, code := "readiness", CodeReadinessProbeNeverReady
	if st.Started != nil && !*st.Started && probeOf(c, "startup") != nil {
		kind, code = "startup", CodeStartupProbeFailed
	}
	failed := strings.ToUpper(kind[:1]) + kind[1:] + " probe failed"
	events := eventsMatching(s, func(e Event) bool {
		return forContainer(st.Name)(e) && e.Reason == "Unhealthy" && strings.HasPrefix(e.Message, failed)
	})
	p := probeOf(c, kind)
	if p == nil && len(events) == 0 {
		return Finding{}, false
	}
	running := age(s, st.State.Running.StartedAt.Time)
	f := Finding{
		Code:     code,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("Container %q has been running for %s but is not Ready: its %s probe fails, so it gets no Service traffic.", st.Name, FormatAge(running), kind),
	}
	if len(events) == 0 {
		// A probe is configured but no failure was recorded (events expire after an hour):
		// say so, and do not claim the cause.
		f.Severity = SeverityWarning
		f.Summary = fmt.Sprintf("Container %q has been running for %s but is not Ready, and it has a %s probe; no probe failure event was found.", st.Name, FormatAge(running), kind)
		if u := s.eventsUnread(); u != "" {
			f.Uncertain = true
			f.Summary = fmt.Sprintf("Container %q has been running for %s but is not Ready, and it has a %s probe; the pod's events, which would show its failures, could not be read (%s).", st.Name, FormatAge(running), kind, u)
		}
	}
	for _, e := range events {
		if len(f.Evidence) < 2 {
			f.Evidence = append(f.Evidence, EventEvidence(pod, e))
		}
	}
	if p != nil {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField(kind + "Probe"), Message: describeProbe(p)})
	}
	f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.field("ready"), Message: fmt.Sprintf("false; running since %s ago", FormatAge(running))})
	f.Fix = []string{
		fmt.Sprintf("kubectl logs %s %s -c %s | tail -20", nsFlag(pod), shellQuote(pod.Name), shellQuote(st.Name)),
		fmt.Sprintf("kubectl exec %s %s -c %s -- <the probe's request, e.g. wget -qO- localhost:PORT/PATH>", nsFlag(pod), shellQuote(pod.Name), shellQuote(st.Name)),
		"Fix the probe's path/port, or what the app waits for before it reports ready (a database, a migration).",
	}
	return f, true
}

// setResourcesFix is the command that changes container's resources (flags such as
// "--limits=memory=512Mi"): on the owning workload, or, for a pod no controller owns, the note
// that it must be recreated with the new value of what; replace --force deletes it first, so a
// bare pod that is Ready now (between crashes) is told it serves nothing until the new one is.
func setResourcesFix(pod *corev1.Pod, container, flags, what string) string {
	target, mutable := templateTarget(pod)
	switch {
	case mutable:
		return fmt.Sprintf("kubectl set resources %s %s -c %s %s  # on the owning workload", target, nsFlag(pod), shellQuote(container), flags)
	case strings.HasPrefix(target, "job/"):
		return fmt.Sprintf("Set %s on container %s (%s): %s.", what, container, flags, immutableNote(target))
	}
	line := fmt.Sprintf("kubectl get pod %s %s -o yaml > pod.yaml  # a bare pod: raise %s of %s in pod.yaml (%s), then kubectl replace --force -f pod.yaml", shellQuote(pod.Name), nsFlag(pod), what, container, flags)
	if servesTraffic(pod) {
		line += "; that deletes the pod, which is Ready now and has no other replica: it serves nothing until the new pod is Ready"
	}
	return line
}

// doubled is twice quantity q ("256Mi" -> "512Mi"), for a suggested limit; "" when q does not
// parse.
func doubled(q string) string {
	v, err := resource.ParseQuantity(q)
	if err != nil || v.IsZero() {
		return ""
	}
	v.Add(v)
	return v.String()
}
