package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// process is one control-plane child process (etcd, kube-apiserver or kube-scheduler) in its
// own process group, with its combined output in a log file.
type process struct {
	name    string
	logPath string
	pid     int
	done    chan struct{} // closed when the process has exited
	err     error         // exit error, valid after done is closed
}

// startProcess starts path with args, output appended to logPath. The child runs in a new
// process group (so stop can kill it and anything it forks) and, on Linux, gets SIGKILL when
// the thread that started it dies. That thread is locked to the goroutine waiting for the
// child, so it lives exactly as long as the child: if the test binary dies, so do its
// control planes.
func startProcess(name, path string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the goroutine exits after the child does, and the runtime then
		// retires the thread, which is what we want.
		runtime.LockOSThread()
		defer logFile.Close()
		cmd := exec.Command(path, args...)
		cmd.Stdout = logFile
		cmd.Stderr = logFile
		cmd.SysProcAttr = sysProcAttr()
		cmd.Env = childEnv()
		if err := cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop kills the process group with SIGKILL and waits up to 10s for the child to be reaped.
// Control-plane state lives in etcd or a temp dir that is removed anyway, so there is
// nothing to shut down gracefully. stop is idempotent.
func (p *process) stop() error {
	if p == nil || p.exited() {
		return nil
	}
	killGroup(p.pid)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("stop %s (pid %d): still running 10s after SIGKILL", p.name, p.pid)
	}
}

// pause stops the process group with SIGSTOP (pause) or continues it with SIGCONT: a paused
// server keeps its listening socket, so the kernel still accepts connections, and answers
// nothing, as a hung process would.
func (p *process) pause(pause bool) error {
	if p == nil || p.exited() {
		return fmt.Errorf("pause %s: not running", p.name)
	}
	if err := pauseGroup(p.pid, pause); err != nil {
		return fmt.Errorf("pause %s (pid %d): %w", p.name, p.pid, err)
	}
	return nil
}

// logTail returns the last n lines of the process log, for error messages.
func (p *process) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(bytes.TrimSpace(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// childEnv is the environment of control-plane children: ours without the in-cluster
// variables, so a component never mistakes the host cluster (when tests run in a pod) for
// its own.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBERNETES_SERVICE_") || strings.HasPrefix(kv, "KUBERNETES_PORT") || strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Process is a child started like the control plane's (its own process group, killed with
// the thread that started it), for test support that runs another real binary.
type Process struct{ p *process }

// StartProcess starts path with args, its output appended to logPath.
func StartProcess(name, path string, args []string, logPath string) (*Process, error) {
	p, err := startProcess(name, path, args, logPath)
	if err != nil {
		return nil, err
	}
	return &Process{p}, nil
}

// Stop kills the process and waits for it (idempotent).
func (p *Process) Stop() error { return p.p.stop() }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool { return p.p.exited() }

// LogTail is the last n lines of its log.
func (p *Process) LogTail(n int) string { return p.p.logTail(n) }
