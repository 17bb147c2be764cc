//go:build !linux

package testenv

import (
	"errors"
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// processAlive reports whether a process with this pid exists; off Linux it assumes yes, so
// stale temp dirs are never swept there.
func processAlive(pid int) bool { return true }

// pauseGroup is Linux-only.
func pauseGroup(int, bool) error { return errors.New("pausing a process is only supported on Linux") }
