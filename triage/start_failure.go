package triage

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file is the one place that decides whether a container's process never ran: the
// runtime could not create or start it (CreateContainerError, RunContainerError, a StartError
// or ContainerCannotRun termination), runc refused to exec its entrypoint, or a shell could not
// find or execute the command it was given (exit 127, 126). The waiting path (the pod caught in
// RunContainerError) and the lastState path (caught in CrashLoopBackOff after a StartError)
// both go through neverStarted, so the answer does not flip with timing. containerConfigRules
// reports what it finds; crashRules and initContainerRules skip those containers.

// startCause is what kept a container's process from running.
type startCause int

const (
	// startCauseUnknown: the runtime says it could not create or start the container, in words
	// no pattern models (the message is the evidence).
	startCauseUnknown startCause = iota
	// startCommandNotFound: the command is not in the image ("executable file not found in
	// $PATH", "stat …: no such file or directory", a shell's "not found" and exit 127).
	startCommandNotFound
	// startInterpreterMissing: the file exists but exec fails with "no such file or directory":
	// the interpreter its #! line names, or the dynamic loader of the binary, is not in the image
	// (or the script has CRLF line endings).
	startInterpreterMissing
	// startNotExecutable: the kernel refused the exec ("permission denied", a shell's exit 126).
	startNotExecutable
	// startExecFormat: "exec format error", a binary for another CPU architecture.
	startExecFormat
	// startWorkingDirMissing: the runtime cannot enter workingDir (it is not a directory).
	startWorkingDirMissing
	// startWorkingDirDenied: the container's user may not enter workingDir.
	startWorkingDirDenied
	// startNoCommand: the image has no entrypoint and the pod sets no command.
	startNoCommand
	// startMountType: a file is mounted onto a directory, or the other way round.
	startMountType
	// startNameInUse: the runtime still holds a container of the same name.
	startNameInUse
	// startHookFailed: a lifecycle hook failed (PreCreateHookError, PostStartHookError, …).
	startHookFailed
)

// startFailure is why a container's process never ran, read from the current attempt.
type startFailure struct {
	cause startCause
	// message is the runtime's (or the shell's) own words, verbatim.
	message string
	// target is the command, file or path the message names ("" when it names none).
	target string
	// fromProcess is true when the words came from the container itself (a shell's exit
	// 126/127, runc's exec error written to the container log): then a log exists.
	fromProcess bool
	// evidence is where the words were read: the waiting state or the termination, first.
	evidence []Evidence
	// term is the termination the failure was read from (nil for a waiting container).
	term *corev1.ContainerStateTerminated
}

// code is the finding code of the failure: permission-denied where the exec (or the working
// directory) was refused, exec-format-error for another CPU architecture, else
// create-container-error.
func (sf startFailure) code() Code {
	switch sf.cause {
	case startNotExecutable, startWorkingDirDenied:
		return CodePermissionDenied
	case startExecFormat:
		return CodeExecFormatError
	}
	return CodeCreateContainerError
}

// startErrorReasons are the waiting reasons the kubelet sets when the runtime could not create
// or start a container, and the lifecycle hook failures it reports the same way.
var startErrorReasons = map[string]bool{
	"CreateContainerError": true, "RunContainerError": true, "StartError": true, "ContainerCannotRun": true,
	"PreCreateHookError": true, "PreStartHookError": true, "PostStartHookError": true,
}

// runtimeStartMarkers are phrases containerd, CRI-O, Docker and runc use when they could not
// create or start a container.
var runtimeStartMarkers = []string{
	"OCI runtime create failed", "OCI runtime start failed", "failed to create containerd task", "failed to create shim",
	"failed to create task", "failed to start container", "runc create failed", "container create failed",
	"Container creation error", "starting container process caused", "error during container init",
	"unable to start container process", "cannot start container",
}

// neverStarted reports whether container c's current attempt failed before its process ran,
// judging the current state only: a container waiting in RunContainerError or
// CreateContainerError, one in CrashLoopBackOff whose last termination is a start failure, or
// one terminated now by a start failure. A container waiting for anything else (its sandbox,
// its image, its config) or running now is not a start failure, whatever its history.
func neverStarted(s *Snapshot, c containerStatus) (startFailure, bool) {
	st := c.Status
	var sf startFailure
	switch {
	case st.State.Waiting != nil && startErrorReasons[st.State.Waiting.Reason]:
		w := st.State.Waiting
		sf = startFailure{message: strings.TrimSpace(w.Message), evidence: []Evidence{waitingEvidence(s.Pod, c)}}
		if sf.message == "" {
			if e, ok := newestStartError(s, c); ok {
				sf.message = strings.TrimPrefix(e.Message, "Error: ")
			}
		}
		if strings.HasSuffix(w.Reason, "HookError") {
			sf.cause = startHookFailed
		} else {
			sf.cause, sf.target = classifyStart(sf.message)
		}
	case st.State.Waiting != nil && st.State.Waiting.Reason == "CrashLoopBackOff" && st.LastTerminationState.Terminated != nil:
		t := st.LastTerminationState.Terminated
		var ok bool
		if sf, ok = startFailureOf(s, c, t); !ok {
			return startFailure{}, false
		}
		sf.evidence = []Evidence{terminatedEvidence(s.Pod, c.field("lastState.terminated"), t), waitingEvidence(s.Pod, c)}
	case st.State.Terminated != nil:
		t := st.State.Terminated
		var ok bool
		if sf, ok = startFailureOf(s, c, t); !ok {
			return startFailure{}, false
		}
		sf.evidence = []Evidence{terminatedEvidence(s.Pod, c.field("state.terminated"), t)}
	default:
		return startFailure{}, false
	}
	return sf, true
}

// startFailureOf reads a termination: a StartError or ContainerCannotRun, a runtime message
// about creating or starting the container, runc's exec error in the termination message or
// the previous log, or a shell's exit 127 (command not found) or 126 (not executable).
func startFailureOf(s *Snapshot, c containerStatus, t *corev1.ContainerStateTerminated) (startFailure, bool) {
	msg := strings.TrimSpace(t.Message)
	sf := startFailure{message: msg, term: t}
	if t.Reason == "StartError" || t.Reason == "ContainerCannotRun" || containsAny(msg, runtimeStartMarkers...) {
		if msg == "" {
			if e, ok := newestStartError(s, c); ok {
				sf.message = strings.TrimPrefix(e.Message, "Error: ")
			}
		}
		sf.cause, sf.target = classifyStart(sf.message)
		return sf, true
	}
	// After runc has started the container, an exec failure is written to the container's own
	// output: the termination message (FallbackToLogsOnError) or the previous log.
	for _, line := range []string{lastLine(msg), lastLogLine(s, c)} {
		if line == "" {
			continue
		}
		if cause, target := classifyExecLine(line); cause != startCauseUnknown {
			sf.cause, sf.target, sf.message, sf.fromProcess = cause, target, line, true
			return sf, true
		}
		if t.ExitCode == 126 || t.ExitCode == 127 {
			if cause, target := classifyShellLine(line); cause != startCauseUnknown {
				sf.cause, sf.target, sf.message, sf.fromProcess = cause, target, line, true
				return sf, true
			}
		}
	}
	// POSIX shells exit 127 when a command is not found and 126 when it is not executable.
	switch t.ExitCode {
	case 127:
		sf.cause, sf.fromProcess = startCommandNotFound, true
		return sf, true
	case 126:
		sf.cause, sf.fromProcess = startNotExecutable, true
		return sf, true
	}
	return startFailure{}, false
}

var (
	// runc/containerd/CRI-O: `exec: "watermarkpodautoscaler": executable file not found in $PATH`.
	reExecNotFound = regexp.MustCompile(`exec: \\*"([^"\\]+)\\*": executable file not found`)
	// `exec: "./user": stat ./user: no such file or directory`.
	reExecStat = regexp.MustCompile(`exec: \\*"([^"\\]+)\\*": stat [^:]*: no such file or directory`)
	// `exec: "/bin/prometheus-config-reloader": permission denied`.
	reExecDenied = regexp.MustCompile(`exec: \\*"([^"\\]+)\\*": permission denied`)
	// runc ≥ 1.1 in the container log: `exec /start.sh: no such file or directory`.
	reExecLog = regexp.MustCompile(`(?:^|[\s:])exec (/?[^\s:"]+): (no such file or directory|permission denied|exec format error)`)
	// older runc: `standard_init_linux.go:211: exec user process caused "permission denied"`.
	reExecUserProcess = regexp.MustCompile(`exec user process caused:? \\*"?(no such file or directory|permission denied|exec format error)`)
	// runc: `chdir to cwd ("/home/nonroot") set in config.json failed: permission denied`.
	reChdir = regexp.MustCompile(`chdir to cwd \(\\*"([^"\\]+)\\*"\) set in config\.json failed: ([a-z ]+)`)
	// runc: `error mounting "…" to rootfs at "/etc/nginx/nginx.conf": … not a directory`.
	reMountAt = regexp.MustCompile(`rootfs(?: \\*"[^"\\]*\\*")? at \\*"([^"\\]+)\\*"`)
	// sh/bash/dash: `sh: foo: not found`, `/entrypoint.sh: line 12: gosu: command not found`.
	reShellNotFound = regexp.MustCompile(`([^\s:]+): (?:command )?not found\s*$`)
	// `sh: ./run.sh: Permission denied`, `/bin/sh: 1: /app/start.sh: Permission denied`.
	reShellDenied = regexp.MustCompile(`([^\s:]+): Permission denied\s*$`)
)

// classifyStart maps a runtime's (or runc's) start error to its cause and the command or path
// it names.
func classifyStart(msg string) (startCause, string) {
	if m := reChdir.FindStringSubmatch(msg); m != nil {
		if strings.Contains(m[2], "permission denied") {
			return startWorkingDirDenied, m[1]
		}
		return startWorkingDirMissing, m[1]
	}
	if m := reExecNotFound.FindStringSubmatch(msg); m != nil {
		return startCommandNotFound, m[1]
	}
	if m := reExecStat.FindStringSubmatch(msg); m != nil {
		return startCommandNotFound, m[1]
	}
	if m := reExecDenied.FindStringSubmatch(msg); m != nil {
		return startNotExecutable, m[1]
	}
	if cause, target := classifyExecLine(msg); cause != startCauseUnknown {
		return cause, target
	}
	switch {
	case containsAny(msg, "no command specified"):
		return startNoCommand, ""
	case containsAny(msg, "mount a directory onto a file", "not a directory") && containsAny(msg, "mount"):
		target := ""
		if m := reMountAt.FindStringSubmatch(msg); m != nil {
			target = m[1]
		}
		return startMountType, target
	case containsAny(msg, "is already in use", "is reserved for"):
		return startNameInUse, ""
	}
	return startCauseUnknown, ""
}

// classifyExecLine reads runc's own exec error, as it reaches the container's output once the
// container has started ("exec /start.sh: no such file or directory", "standard_init_linux.go:
// 219: exec user process caused: exec format error"), or any "exec format error".
func classifyExecLine(line string) (startCause, string) {
	m := reExecLog.FindStringSubmatch(line)
	switch {
	case containsAny(line, "exec format error"):
		if m != nil {
			return startExecFormat, m[1]
		}
		return startExecFormat, ""
	case m != nil && m[2] == "permission denied":
		return startNotExecutable, m[1]
	case m != nil:
		return startInterpreterMissing, m[1]
	}
	if m := reExecUserProcess.FindStringSubmatch(line); m != nil {
		if m[1] == "permission denied" {
			return startNotExecutable, ""
		}
		return startInterpreterMissing, ""
	}
	return startCauseUnknown, ""
}

// classifyShellLine reads a shell's last words before exit 126/127.
func classifyShellLine(line string) (startCause, string) {
	if m := reShellNotFound.FindStringSubmatch(line); m != nil {
		return startCommandNotFound, m[1]
	}
	if m := reShellDenied.FindStringSubmatch(line); m != nil {
		return startNotExecutable, m[1]
	}
	return startCauseUnknown, ""
}

// newestStartError returns the newest "Error: …" Failed event about container c that says more
// than a reason.
func newestStartError(s *Snapshot, c containerStatus) (Event, bool) {
	for _, e := range startErrorEvents(s, c) {
		return e, true
	}
	return Event{}, false
}

// startErrorEvents returns the kubelet's Failed events for container c that carry a runtime
// error ("Error: failed to create containerd task: …"), newest first.
func startErrorEvents(s *Snapshot, c containerStatus) []Event {
	return eventsMatching(s, func(e Event) bool {
		return e.Reason == "Failed" && forContainer(c.Status.Name)(e) && informative(e) && !containsAny(e.Message, "pull", "image")
	})
}

// lastLine is the last non-blank line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// lastLogLine is the last non-blank line of container c's previous log, or "".
func lastLogLine(s *Snapshot, c containerStatus) string {
	lt, ok := s.PreviousLogs[c.Status.Name]
	if !ok {
		return ""
	}
	for i := len(lt.Lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lt.Lines[i]); l != "" {
			return l
		}
	}
	return ""
}

// hasPreviousLog reports whether container c's previous log was read and has lines.
func hasPreviousLog(s *Snapshot, c containerStatus) bool {
	lt, ok := s.PreviousLogs[c.Status.Name]
	return ok && lt.Err == nil && len(lt.Lines) > 0
}

// startFailureFinding builds the finding for a container whose process never ran: the cause in
// the runtime's words, the spec field to change (command, workingDir, a volume mount), and no
// log to read unless the container really wrote one.
func startFailureFinding(s *Snapshot, c containerStatus, sf startFailure) Finding {
	pod := s.Pod
	who := c.who()
	f := Finding{Code: sf.code(), Severity: SeverityBlocker, Evidence: sf.evidence}
	for i, e := range startErrorEvents(s, c) {
		if i < 2 {
			f.Evidence = append(f.Evidence, EventEvidence(pod, e))
		}
	}
	if c.Spec != nil {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField("command"), Message: specCommandLine(c.Spec)})
	}
	if sf.fromProcess {
		f.Evidence = append(f.Evidence, logEvidence(s, c)...)
	}

	node := pod.Spec.NodeName
	image := containerImage(c)
	said := ""
	if sf.message != "" {
		said = fmt.Sprintf(" The runtime says: %q.", truncateStart(sf.message, 300))
		if sf.fromProcess {
			said = fmt.Sprintf(" It printed: %q.", truncateStart(sf.message, 300))
		}
	}
	noLogs := " Its process never ran, so this is not an app crash and there is no log to read."
	if sf.fromProcess {
		noLogs = ""
	}
	restarts := ""
	if n := c.Status.RestartCount; n > 0 {
		restarts = fmt.Sprintf(" (restarted %d %s)", n, plural(int(n), "time", "times"))
	}
	target := sf.target
	editField := editSpecFix(pod, c)
	cause := sf.cause
	if !sf.fromProcess && cause == startCommandNotFound && containsAny(sf.message, "apparmor_parser") {
		// The runtime's own helper is missing on the node, not the container's command.
		cause = startCauseUnknown
	}

	switch cause {
	case startCommandNotFound:
		if sf.fromProcess {
			f.Summary = fmt.Sprintf("%s exits with code 127%s: its shell could not find %s (127 is a shell's \"command not found\").%s", capitalize(who), restarts, orQuoted(target, "a command it was told to run"), said)
		} else {
			f.Summary = fmt.Sprintf("%s never started%s: the runtime cannot find %s in image %s.%s%s", capitalize(who), restarts, described("its command", target), image, said, noLogs)
		}
		f.Fix = commandFix(c, target, image, sf.fromProcess)
	case startInterpreterMissing:
		f.Summary = fmt.Sprintf("%s cannot start %s%s: exec says \"no such file or directory\" although the file is there, so the interpreter its first line (#!) names, or the binary's dynamic loader, is missing from image %s, or the script has Windows (CRLF) line endings.%s",
			capitalize(who), described("its entrypoint", target), restarts, image, said)
		f.Fix = []string{
			fmt.Sprintf("Check the first line of %s: a #!/bin/bash script needs bash in the image (alpine and distroless have none: use #!/bin/sh), and a script saved with CRLF line endings needs dos2unix.", orQuoted(target, "the entrypoint")),
			"A binary linked against glibc does not run on musl (alpine) or scratch images: build it statically (e.g. CGO_ENABLED=0 for Go) or use a base image with its libraries.",
		}
	case startNotExecutable:
		f.Summary = fmt.Sprintf("%s cannot start: executing %s was refused (permission denied)%s.%s%s", capitalize(who), described("its command", target), restarts, said, noLogs)
		if sf.term != nil && sf.fromProcess && sf.term.ExitCode == 126 {
			f.Summary = fmt.Sprintf("%s exits with code 126%s: its shell found %s but may not execute it (permission denied).%s", capitalize(who), restarts, orQuoted(target, "the command"), said)
		}
		f.Fix = notExecutableFix(pod, c, target)
	case startExecFormat:
		arch := ""
		if n := s.Node(node); n != nil {
			arch = n.Status.NodeInfo.Architecture
		}
		f.Summary = fmt.Sprintf("%s cannot start its binary: exec format error, i.e. the image is built for another CPU architecture than node %s (%s)%s.", capitalize(who), node, orUnknown(arch), restarts)
		f.Fix = []string{
			fmt.Sprintf("docker manifest inspect %s | grep architecture", shellQuote(image)),
			"Use an image built for the node's architecture (a multi-arch image), or keep the pod on matching nodes with a nodeSelector on kubernetes.io/arch.",
		}
	case startWorkingDirMissing, startWorkingDirDenied:
		why := "it is not a directory the runtime can create or enter"
		if sf.cause == startWorkingDirDenied {
			why = "the container's user may not enter it (permission denied)"
		}
		f.Summary = fmt.Sprintf("%s never started%s: the runtime cannot change into %s: %s.%s%s", capitalize(who), restarts, described("its working directory", target), why, said, noLogs)
		f.Fix = workingDirFix(pod, c, target, sf.cause == startWorkingDirDenied)
	case startNoCommand:
		f.Summary = fmt.Sprintf("%s never started%s: image %s has no entrypoint and the pod sets no command.%s", capitalize(who), restarts, image, said)
		f.Fix = []string{"Set command: in the container spec, or run the pod on the node/runtime the image is built for (e.g. a WASM runtime class with its nodeSelector and toleration)."}
	case startMountType:
		f.Summary = fmt.Sprintf("%s never started%s: the runtime cannot mount a volume at %s because one side is a file and the other a directory.%s%s", capitalize(who), restarts, orQuoted(target, "one of its mount paths"), said, noLogs)
		f.Fix = mountTypeFix(c, target)
	case startNameInUse:
		f.Summary = fmt.Sprintf("The container runtime on %s still holds an earlier container of the same name as %s%s, so it cannot create a new one.%s", node, who, restarts, said)
		f.Fix = []string{
			fmt.Sprintf("On %s: crictl ps -a --name %s  # a stale or still-starting container; the kubelet retries, and a slow disk or runtime makes this last", shellQuote(node), shellQuote(c.Status.Name)),
			fmt.Sprintf("If it persists, remove that container on %s with crictl rm and the ID the line above shows, or restart the container runtime.", shellQuote(node)),
		}
	case startHookFailed:
		f.Summary = fmt.Sprintf("A lifecycle hook of %s failed%s, so the kubelet does not let it run.%s", who, restarts, said)
		f.Fix = []string{fmt.Sprintf("Fix the lifecycle hook (%s) so it succeeds, or remove it.", c.specField("lifecycle"))}
	default:
		if explainRuntime(s, c, sf.message, &f) {
			f.Summary += said
			if editField != "" && strings.HasPrefix(editField, "kubectl edit") && slices.ContainsFunc(f.Fix, func(l string) bool { return strings.HasPrefix(l, "kubectl patch") }) {
				editField = "" // the patch is the edit
			}
			break
		}
		f.Uncertain = true
		f.Summary = fmt.Sprintf("The container runtime on %s cannot create or start %s%s; no rule recognises its error, so its own words are the evidence.%s", node, who, restarts, said)
		f.Fix = []string{fmt.Sprintf("On %s: journalctl -u kubelet -u %s --since -15min | grep -i %s | tail", shellQuote(node), runtimeUnit(s), shellQuote(c.Status.Name))}
	}
	// Look before the cause's own steps and the edit: what the process printed, when it ran;
	// and the pod's describe (its containers' last state and events, the runtime's words), first
	// when nothing else reads before the first change, else last, to see the next attempt.
	if sf.fromProcess && hasPreviousLog(s, c) {
		f.Fix = append([]string{logsFix(pod, c.Status)}, f.Fix...)
	}
	if editField != "" {
		f.Fix = append(f.Fix, editField)
	}
	describe := fmt.Sprintf("kubectl describe pod %s %s", nsFlag(pod), shellQuote(pod.Name))
	if len(f.Fix) > 0 && ParseFixStep(f.Fix[0]).ReadOnly() {
		f.Fix = append(f.Fix, describe)
	} else {
		f.Fix = append([]string{describe + "   # the container's last state and events: the runtime's own words"}, f.Fix...)
	}
	return f
}

// commandFix names the command field, or the image's own entrypoint when the pod sets none.
// When a shell in the container could not find a command (fromProcess), that command may be
// one the container's script calls, so the fix names both places.
func commandFix(c containerStatus, target, image string, fromProcess bool) []string {
	inspect := fmt.Sprintf("crane config %s | jq '.config.Entrypoint, .config.Cmd'  # what the image runs by default (or: docker image inspect)", shellQuote(image))
	if fromProcess {
		where := "the image's ENTRYPOINT/CMD"
		if c.Spec != nil && (len(c.Spec.Command) > 0 || len(c.Spec.Args) > 0) {
			where = fmt.Sprintf("%s/args (%q %q)", c.specField("command"), c.Spec.Command, c.Spec.Args)
		}
		return []string{fmt.Sprintf("%s is not in image %s, or not on its $PATH: install it in the image, or fix the name where it is called: %s, or the script they run.", orQuoted(target, "The command"), image, where)}
	}
	if c.Spec != nil && len(c.Spec.Command) > 0 {
		return []string{
			inspect,
			fmt.Sprintf("%s is %q, which image %s does not contain (on its $PATH or at that path): name a binary that exists in the image, or remove the command override so the image's own ENTRYPOINT runs.", c.specField("command"), c.Spec.Command, image),
		}
	}
	what := "The image's own ENTRYPOINT/CMD"
	if c.Spec != nil && len(c.Spec.Args) > 0 {
		what = fmt.Sprintf("The image's ENTRYPOINT, with args %q,", c.Spec.Args)
	}
	return []string{
		inspect,
		fmt.Sprintf("%s names %s, which the image does not contain (the pod sets no command): fix the image, or set command: to a binary that exists in it.", what, orQuoted(target, "a file")),
	}
}

// notExecutableFix explains a refused exec: a file without the execute bit, or one that a
// volume (ConfigMap, Secret, a noexec mount) puts there.
func notExecutableFix(pod *corev1.Pod, c containerStatus, target string) []string {
	if vm, ok := mountHolding(c, target); ok {
		v := podVolume(pod, vm.Name)
		fix := fmt.Sprintf("%s comes from volume %q (mounted at %s): ", target, vm.Name, vm.MountPath)
		switch {
		case v != nil && (v.ConfigMap != nil || v.Secret != nil || v.Projected != nil):
			fix += fmt.Sprintf("ConfigMap, Secret and projected files get defaultMode 0644, without the execute bit: set defaultMode: 0555 (or the item's mode) on the volume, or run it through its interpreter (command: [\"sh\", %q]).", target)
		default:
			fix += fmt.Sprintf("the volume is mounted without exec rights (noexec) or the file lacks the execute bit: run it through its interpreter (command: [\"sh\", %q]) or make it executable on the volume.", target)
		}
		return []string{fix}
	}
	return []string{
		fmt.Sprintf("Give %s the execute bit in the image (RUN chmod +x, or COPY --chmod=755), or run it through its interpreter (command: [\"sh\", %q]).", orQuoted(target, "the command"), orDefault(target, "<script>")),
		"If it is executable but still refused, the container's user (runAsUser) may lack read/exec rights on it or on its directory.",
	}
}

// workingDirFix names the workingDir field.
func workingDirFix(pod *corev1.Pod, c containerStatus, dir string, denied bool) []string {
	field := c.specField("workingDir")
	if c.Spec == nil || c.Spec.WorkingDir == "" {
		field = "the image's WORKDIR (the pod sets no workingDir)"
	}
	if denied {
		user := "the container's user"
		if uid := runAsUser(pod, c); uid != "" {
			user = "user " + uid + " (runAsUser)"
		}
		return []string{fmt.Sprintf("%s is %s, which %s may not enter: set workingDir to a directory that user can read, run as a user that can (runAsUser/runAsGroup), or make the directory accessible in the image.", field, orQuoted(dir, "unset"), user)}
	}
	return []string{fmt.Sprintf("%s is %s: set it to a directory that exists in the image (a file there, or a mount of a file, cannot be the working directory).", field, orQuoted(dir, "unset"))}
}

// mountTypeFix names the volumeMount whose source and target differ in kind.
func mountTypeFix(c containerStatus, path string) []string {
	if c.Spec != nil {
		for i, vm := range c.Spec.VolumeMounts {
			if vm.MountPath == path {
				sub := ""
				if vm.SubPath != "" {
					sub = fmt.Sprintf(" with subPath %q", vm.SubPath)
				}
				return []string{fmt.Sprintf("%s mounts volume %q%s at %s: the source and the mount path must both be files or both be directories (a subPath that does not exist in the volume is created as a directory).",
					c.specField(fmt.Sprintf("volumeMounts[%d]", i)), vm.Name, sub, path)}
			}
		}
	}
	return []string{fmt.Sprintf("Check %s: for each mount the source and the mount path must both be files or both be directories; a subPath that does not exist in the volume is created as a directory.", c.specField("volumeMounts"))}
}

// editSpecFix is the command that opens the spec to change: the owning workload, or the pod.
func editSpecFix(pod *corev1.Pod, c containerStatus) string {
	target, mutable := templateTarget(pod)
	switch {
	case mutable:
		return fmt.Sprintf("kubectl edit %s %s  # containers[%s] in the pod template", target, nsFlag(pod), c.Status.Name)
	case strings.HasPrefix(target, "job/"):
		return fmt.Sprintf("Change containers[%s] in the pod template: %s.", c.Status.Name, immutableNote(target))
	}
	return ""
}

// mountHolding returns the volume mount of container c under which path lies.
func mountHolding(c containerStatus, path string) (corev1.VolumeMount, bool) {
	if c.Spec == nil || !strings.HasPrefix(path, "/") {
		return corev1.VolumeMount{}, false
	}
	for _, vm := range c.Spec.VolumeMounts {
		mp := strings.TrimSuffix(vm.MountPath, "/")
		if path == mp || strings.HasPrefix(path, mp+"/") {
			return vm, true
		}
	}
	return corev1.VolumeMount{}, false
}

// podVolume returns the pod's volume named name, or nil.
func podVolume(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// runAsUser is the container's effective runAsUser (container, else pod), or "".
func runAsUser(pod *corev1.Pod, c containerStatus) string {
	if c.Spec != nil && c.Spec.SecurityContext != nil && c.Spec.SecurityContext.RunAsUser != nil {
		return fmt.Sprint(*c.Spec.SecurityContext.RunAsUser)
	}
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsUser != nil {
		return fmt.Sprint(*pod.Spec.SecurityContext.RunAsUser)
	}
	return ""
}

// specCommandLine renders what the container runs: command, args, workingDir and image.
func specCommandLine(c *corev1.Container) string {
	msg := fmt.Sprintf("command %q, args %q", c.Command, c.Args)
	if c.WorkingDir != "" {
		msg += fmt.Sprintf(", workingDir %q", c.WorkingDir)
	}
	return msg + ", image " + c.Image
}

// runtimeUnit is the systemd unit of the node's container runtime, from
// status.nodeInfo.containerRuntimeVersion ("containerd://1.7.2" -> "containerd").
func runtimeUnit(s *Snapshot) string {
	if n := s.Node(s.Pod.Spec.NodeName); n != nil {
		switch rt, _, _ := strings.Cut(n.Status.NodeInfo.ContainerRuntimeVersion, "://"); rt {
		case "cri-o":
			return "crio"
		case "docker":
			return "docker"
		case "containerd":
			return "containerd"
		}
	}
	return "containerd"
}

// orQuoted returns s in quotes, or alt when s is empty.
func orQuoted(s, alt string) string {
	if s == "" {
		return alt
	}
	return fmt.Sprintf("%q", s)
}

// described is what, followed by name in quotes when name is known: `its command "x"`.
func described(what, name string) string {
	if name == "" {
		return what
	}
	return fmt.Sprintf("%s %q", what, name)
}

// orDefault returns s, or alt when s is empty.
func orDefault(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
