//go:build linux

package testenv

import "syscall"

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// pauseGroup stops (pause) or continues the process group of pid with SIGSTOP or SIGCONT.
func pauseGroup(pid int, pause bool) error {
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	return syscall.Kill(-pid, sig)
}
