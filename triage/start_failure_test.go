package triage

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestNeverStarted covers kind 2 of issue 12: a container whose process never ran is not an app
// crash. Each variant is caught twice, as kubectl alternates: waiting in RunContainerError (or
// CreateContainerError) and in CrashLoopBackOff with the failure in lastState.terminated. Both
// timings must give the same code, name what failed, and suggest logs only when the container
// really wrote one.
func TestNeverStarted(t *testing.T) {
	command := func(cmd ...string) podOpt { return func(p *corev1.Pod) { p.Spec.Containers[0].Command = cmd } }
	workingDir := func(dir string, uid int64) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].WorkingDir = dir
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
		}
	}
	scriptsFromConfigMap := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scripts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "scripts"}}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "scripts", MountPath: "/scripts"})
	}
	fileMount := func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "conf", MountPath: "/etc/nginx/nginx.conf", SubPath: "nginx.conf"})
	}
	tests := []struct {
		name string
		// reason and exit code of the termination in CrashLoopBackOff; waiting is the reason the
		// kubelet shows while the runtime error is fresh ("" when this runtime never shows one).
		termReason, waitReason string
		exit                   int32
		msg                    string
		logs                   *LogTail
		opts                   []podOpt
		want                   Code
		// mention is a word the summary must contain (the command or path that failed).
		mention string
		// fixMentions is a word the fix must contain (the spec field or the remedy).
		fixMentions string
	}{
		{
			name: "containerd: command not in $PATH (StartError 128)", termReason: "StartError", waitReason: "RunContainerError", exit: 128,
			msg:  `failed to create containerd task: OCI runtime create failed: container_linux.go:370: starting container process caused: exec: "watermarkpodautoscaler": executable file not found in $PATH: unknown`,
			opts: []podOpt{command("watermarkpodautoscaler")}, want: CodeCreateContainerError, mention: "watermarkpodautoscaler", fixMentions: "spec.containers[app].command",
		},
		{
			name: "containerd 1.7, runc 1.1: entrypoint path missing", termReason: "StartError", waitReason: "RunContainerError", exit: 128,
			msg:  `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: exec: "./user": stat ./user: no such file or directory: unknown`,
			opts: []podOpt{command("./user")}, want: CodeCreateContainerError, mention: "./user", fixMentions: "ENTRYPOINT",
		},
		{
			name: "docker: ContainerCannotRun exit 127, image entrypoint missing", termReason: "ContainerCannotRun", waitReason: "RunContainerError", exit: 127,
			msg:  `OCI runtime create failed: container_linux.go:348: starting container process caused "exec: \"./bin/run.sh\": stat ./bin/run.sh: no such file or directory": unknown`,
			want: CodeCreateContainerError, mention: "./bin/run.sh", fixMentions: "the pod sets no command",
		},
		{
			name: "CRI-O: exec refused, permission denied", termReason: "StartError", waitReason: "CreateContainerError", exit: 128,
			msg:  `container create failed: time="2025-04-07T08:00:01Z" level=error msg="runc create failed: unable to start container process: exec: \"/bin/prometheus-config-reloader\": permission denied"`,
			want: CodePermissionDenied, mention: "/bin/prometheus-config-reloader", fixMentions: "chmod +x",
		},
		{
			name: "script from a ConfigMap volume without the execute bit", termReason: "StartError", waitReason: "RunContainerError", exit: 128,
			msg:  `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "/scripts/run.sh": permission denied: unknown`,
			opts: []podOpt{command("/scripts/run.sh"), scriptsFromConfigMap}, want: CodePermissionDenied, mention: "/scripts/run.sh", fixMentions: "defaultMode",
		},
		{
			name: "runc: workingDir the user may not enter", termReason: "StartError", waitReason: "RunContainerError", exit: 128,
			msg:  `failed to create containerd task: OCI runtime create failed: container_linux.go:366: starting container process caused: chdir to cwd ("/home/nonroot") set in config.json failed: permission denied: unknown`,
			opts: []podOpt{workingDir("/home/nonroot", 1001)}, want: CodePermissionDenied, mention: "/home/nonroot", fixMentions: "user 1001",
		},
		{
			name: "runc: workingDir is a file", termReason: "StartError", waitReason: "RunContainerError", exit: 128,
			msg:  `failed to create containerd task: OCI runtime create failed: container_linux.go:367: starting container process caused: chdir to cwd ("/app/config.yaml") set in config.json failed: not a directory: unknown`,
			opts: []podOpt{workingDir("/app/config.yaml", 0)}, want: CodeCreateContainerError, mention: "/app/config.yaml", fixMentions: "spec.containers[app].workingDir",
		},
		{
			name: "runc: a file mounted onto a directory", termReason: "StartError", waitReason: "RunContainerError", exit: 128,
			msg:  `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error mounting "/var/lib/kubelet/pods/1/volume-subpaths/conf/app/0" to rootfs at "/etc/nginx/nginx.conf": mount /var/lib/kubelet/pods/1/volume-subpaths/conf/app/0:/etc/nginx/nginx.conf (via /proc/self/fd/6), flags: 0x5001: not a directory: unknown: Are you trying to mount a directory onto a file (or vice-versa)? Check if the specified host path exists and is the expected type`,
			opts: []podOpt{fileMount}, want: CodeCreateContainerError, mention: "/etc/nginx/nginx.conf", fixMentions: "volumeMounts[0]",
		},
		{
			name: "runc 1.1 in the log: the #! interpreter is missing (exit 255)", termReason: "Error", exit: 255,
			logs: &LogTail{Lines: []string{"exec /docker-entrypoint.sh: no such file or directory"}},
			want: CodeCreateContainerError, mention: "/docker-entrypoint.sh", fixMentions: "#!/bin/sh",
		},
		{
			name: "old runc in the termination message: exec refused (exit 1)", termReason: "Error", exit: 1,
			msg:  `standard_init_linux.go:211: exec user process caused "permission denied"`,
			want: CodePermissionDenied, mention: "permission denied", fixMentions: "execute bit",
		},
		{
			name: "a shell cannot find the command (exit 127, log read)", termReason: "Error", exit: 127,
			logs: &LogTail{Lines: []string{"starting", "/entrypoint.sh: line 12: gosu: command not found"}},
			opts: []podOpt{command("/entrypoint.sh")}, want: CodeCreateContainerError, mention: "gosu", fixMentions: "--previous",
		},
		{
			name: "a shell may not execute the script (exit 126, log unreadable)", termReason: "Error", exit: 126,
			logs: &LogTail{Err: errors.New("node-1 unreachable")},
			opts: []podOpt{command("sh", "-c", "./run.sh")}, want: CodePermissionDenied, mention: "126", fixMentions: "execute bit",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timings := map[string]*corev1.Pod{
				"CrashLoopBackOff": testPod(append(tt.opts, crashLoop("app", 4, tt.exit, tt.termReason, tt.msg))...),
			}
			if tt.waitReason != "" {
				timings[tt.waitReason] = testPod(append(tt.opts, waiting("app", tt.waitReason, tt.msg))...)
			}
			for timing, pod := range timings {
				s := testSnapshot(pod, ev(corev1.EventTypeWarning, "BackOff", "app", "Back-off restarting failed container", 11, 10*time.Second))
				if tt.logs != nil {
					s.PreviousLogs = map[string]LogTail{"app": *tt.logs}
				}
				d := Evaluate(s)
				p := d.Primary()
				if p.Code != tt.want {
					t.Fatalf("%s: primary = %s (%s), want %s", timing, p.Code, p.Summary, tt.want)
				}
				if !strings.Contains(p.Summary, tt.mention) {
					t.Errorf("%s: summary %q does not name %q", timing, p.Summary, tt.mention)
				}
				fix := strings.Join(p.Fix, "\n")
				if !strings.Contains(fix, tt.fixMentions) {
					t.Errorf("%s: fix %q does not mention %q", timing, fix, tt.fixMentions)
				}
				if hasPreviousLog(s, containerStatuses(pod)[0]) != strings.Contains(fix, "--previous") {
					t.Errorf("%s: fix %q suggests logs --previous = %t, but a previous log exists = %t", timing, fix, !hasPreviousLog(s, containerStatuses(pod)[0]), hasPreviousLog(s, containerStatuses(pod)[0]))
				}
				// Look first: what the process printed when there is a log, else the image's
				// own entrypoint or the pod's describe, before any change.
				if !looksFirst(p.Fix) {
					t.Errorf("%s: fix acts before it looks:\n%s", timing, fix)
				}
				if strings.Contains(fix, "--previous") && !strings.Contains(p.Fix[0], "--previous") {
					t.Errorf("%s: fix reads the log at step %d, want it first:\n%s", timing, stepIndex(p.Fix, "--previous"), fix)
				}
				for _, f := range d.Findings {
					if f.Code == CodeAppError || f.Code == CodeInitContainerCrashloop {
						t.Errorf("%s: finding %s (%s): a process that never ran is not an app crash", timing, f.Code, f.Summary)
					}
				}
			}
		})
	}
}

// TestNeverStartedInitContainer checks that an init container whose command is missing gets the
// same answer as an app container, not init-container-crashloop with logs that do not exist.
func TestNeverStartedInitContainer(t *testing.T) {
	msg := `failed to create containerd task: OCI runtime create failed: runc create failed: unable to start container process: exec: "/migrate": stat /migrate: no such file or directory: unknown`
	backOff := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}
	pod := testPod(initContainer("migrate", backOff, 3, "/migrate"), func(p *corev1.Pod) {
		st := &p.Status.InitContainerStatuses[0]
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: msg}}
	})
	caught := testPod(initContainer("migrate", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: msg}}, 3, "/migrate"))
	for name, p := range map[string]*corev1.Pod{"CrashLoopBackOff": pod, "RunContainerError": caught} {
		d := Evaluate(testSnapshot(p))
		got := d.Primary()
		if got.Code != CodeCreateContainerError || !strings.Contains(strings.ToLower(got.Summary), `init container "migrate"`) || !strings.Contains(got.Summary, "/migrate") {
			t.Errorf("%s: primary = %s: %s; want create-container-error naming init container migrate and /migrate", name, got.Code, got.Summary)
		}
		if fix := strings.Join(got.Fix, "\n"); strings.Contains(fix, "logs") {
			t.Errorf("%s: fix %q suggests logs of a process that never ran", name, fix)
		}
	}
}

func TestClassifyStart(t *testing.T) {
	tests := []struct {
		msg    string
		cause  startCause
		target string
	}{
		{`exec: "watermarkpodautoscaler": executable file not found in $PATH`, startCommandNotFound, "watermarkpodautoscaler"},
		{`starting container process caused "exec: \"./bin/run.sh\": stat ./bin/run.sh: no such file or directory": unknown`, startCommandNotFound, "./bin/run.sh"},
		{`runc create failed: unable to start container process: exec: "/bin/x": permission denied`, startNotExecutable, "/bin/x"},
		{`exec /start.sh: no such file or directory`, startInterpreterMissing, "/start.sh"},
		{`exec /app: exec format error`, startExecFormat, "/app"},
		{`standard_init_linux.go:195: exec user process caused "no such file or directory"`, startInterpreterMissing, ""},
		{`chdir to cwd ("/home/nonroot") set in config.json failed: permission denied`, startWorkingDirDenied, "/home/nonroot"},
		{`failed to generate container "x" spec: no command specified`, startNoCommand, ""},
		{`failed to reserve container name "app_shop": name "app_shop" is reserved for "4c8a"`, startNameInUse, ""},
		{`failed to create containerd task: failed to create shim task: context deadline exceeded: unknown`, startCauseUnknown, ""},
		// Go's own os/exec error from an app that runs a helper is the app's error, not runc's.
		{`fork/exec /usr/bin/git: no such file or directory`, startCauseUnknown, ""},
	}
	for _, tt := range tests {
		if cause, target := classifyStart(tt.msg); cause != tt.cause || target != tt.target {
			t.Errorf("classifyStart(%q) = %d, %q; want %d, %q", tt.msg, cause, target, tt.cause, tt.target)
		}
	}
}

// TestAppErrorStaysAppError keeps the never-started classifier narrow: a process that ran and
// printed Go's exec error for a helper it spawns, or exited 128 on its own, is an app error.
func TestAppErrorStaysAppError(t *testing.T) {
	for name, pod := range map[string]*corev1.Pod{
		"go os/exec error in the log": testPod(crashLoop("app", 5, 1, "Error", "")),
		"exit 128 without StartError": testPod(crashLoop("app", 5, 128, "Error", "")),
	} {
		s := testSnapshot(pod)
		s.PreviousLogs = map[string]LogTail{"app": {Lines: []string{`level=fatal msg="clone failed" error="exec: \"git\": executable file not found in $PATH"`}}}
		if got := Evaluate(s).Primary().Code; got != CodeAppError {
			t.Errorf("%s: primary = %s, want app-error", name, got)
		}
	}
}

// TestStartFailureFixEditsAfterItLooks: for a Deployment's pod whose command is not in the
// image, the image's own entrypoint is read first, then the choice, then the edit of the
// Deployment; the pod's describe comes last (the next attempt), not before the look.
func TestStartFailureFixEditsAfterItLooks(t *testing.T) {
	labelled := func(p *corev1.Pod) { p.Labels = map[string]string{} }
	pod := testPod(labelled, func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"watermarkpodautoscaler"} },
		waiting("app", "RunContainerError", `failed to create containerd task: OCI runtime create failed: container_linux.go:370: starting container process caused: exec: "watermarkpodautoscaler": executable file not found in $PATH: unknown`))
	pod = ofDeployment(pod, "shop", "app")
	f := Evaluate(testSnapshot(pod)).Primary()
	if f.Code != CodeCreateContainerError {
		t.Fatalf("primary = %s, want %s: %s", f.Code, CodeCreateContainerError, f.Summary)
	}
	if !strings.HasPrefix(f.Fix[0], "crane config ") {
		t.Errorf("fix[0] = %q, want the image's config", f.Fix[0])
	}
	checkBefore(t, f.Fix, "name a binary that exists in the image", "kubectl edit deployment/app")
	checkBefore(t, f.Fix, "kubectl edit deployment/app", "kubectl describe pod")

	// With nothing of its own to read first (no command in the image, no entrypoint), the
	// describe is the look and comes first.
	pod = ofDeployment(testPod(labelled, waiting("app", "CreateContainerError", `failed to create containerd task: OCI runtime create failed: no command specified`)), "shop", "app")
	f = Evaluate(testSnapshot(pod)).Primary()
	if !strings.HasPrefix(f.Fix[0], "kubectl describe pod") || !looksFirst(f.Fix) {
		t.Errorf("%s fix starts with %q, want the pod's describe:\n%s", f.Code, f.Fix[0], strings.Join(f.Fix, "\n"))
	}
}
