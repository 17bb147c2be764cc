// Package proc identifies an operating-system process across hosts and restarts, so that a
// whypending process can tell whether the process that left a marker behind (a datastore lock,
// a running plan) is certainly gone.
package proc

import (
	"os"
	"strconv"
	"strings"
)

// Identity names one process: the host it runs on, its PID and its start time. The start time
// tells a PID that was reused after the process exited from the process itself.
type Identity struct {
	// Host is os.Hostname() of the process (the pod name inside Kubernetes).
	Host string `json:"host,omitempty"`
	// PID is the process ID on Host.
	PID int `json:"pid,omitempty"`
	// Start is the process start time in clock ticks since boot (/proc/<pid>/stat field 22);
	// 0 when /proc was not readable.
	Start uint64 `json:"pidStart,omitempty"`
}

// Self returns the identity of the calling process.
func Self() Identity {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return Identity{Host: host, PID: pid, Start: startTime(pid)}
}

// Same reports whether id and o name the same process.
func (id Identity) Same(o Identity) bool {
	return id.Host == o.Host && id.PID == o.PID && id.Start == o.Start
}

// Gone reports whether the process is known to have exited: it ran on this host, and /proc
// shows no process with its PID, or one that started at another time (a reused PID). A
// process on another host, or one recorded without a PID, is never known to be gone.
func (id Identity) Gone() bool {
	host, _ := os.Hostname()
	if id.Host == "" || id.Host != host || id.PID == 0 {
		return false
	}
	start := startTime(id.PID)
	if start == 0 {
		return procReadable()
	}
	return id.Start != 0 && start != id.Start
}

// startTime is the start time of pid in clock ticks since boot (/proc/<pid>/stat field 22),
// or 0 when the process does not exist or /proc is not available. A zombie (exited, not yet
// reaped) still has its entry.
func startTime(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may contain spaces; fields after it follow the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// procReadable reports whether this process can see /proc (so a missing /proc/<pid> means
// the process is gone).
func procReadable() bool { return startTime(os.Getpid()) != 0 }
