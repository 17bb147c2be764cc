package calico

// Process measurements for the benchmarks (see BENCHMARKS.md, "Method and caveats"): CPU
// seconds and memory from /proc, the load average, and the niceness the measured processes
// get on a shared machine.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchNiceEnv names the niceness (e.g. -15) the benchmarks give the API server, etcd, the
// measured processes and themselves, so that on a loaded machine they get the CPU a quiet one
// would give them. Unset or 0: no change. Negative values need root.
const benchNiceEnv = "WHYPENDING_BENCH_NICE"

func benchNice() int {
	n, _ := strconv.Atoi(os.Getenv(benchNiceEnv))
	return n
}

// renice sets every thread of pid to benchNice (Linux niceness is per thread; threads started
// later inherit it from their creator).
func renice(tb testing.TB, pid int) {
	n := benchNice()
	if n == 0 || pid == 0 {
		return
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		tb.Logf("renice %d: %v", pid, err)
		return
	}
	for _, t := range tasks {
		tid, _ := strconv.Atoi(t.Name())
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil {
			tb.Logf("renice %d/%d to %d: %v", pid, tid, n, err)
			return
		}
	}
}

// nicedCommand is exec.Command at benchNice.
func nicedCommand(name string, args ...string) *exec.Cmd {
	if n := benchNice(); n != 0 {
		return exec.Command("nice", append([]string{"-n", strconv.Itoa(n), name}, args...)...)
	}
	return exec.Command(name, args...)
}

// procCPU is the CPU time (user + system) pid has used, in seconds; 0 when unknown.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64) // field 14
	stime, _ := strconv.ParseFloat(f[12], 64) // field 15
	return (utime + stime) / 100              // USER_HZ
}

// procMem returns VmRSS and VmHWM of pid in KiB.
func procMem(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm
}

// loadAverage is the 1-minute load average.
func loadAverage() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// serverCPU is the CPU seconds the env's kube-apiserver and etcd have used.
func (e *benchEnv) serverCPU() float64 {
	api, etcd := e.c.PIDs()
	return procCPU(api) + procCPU(etcd)
}

// reniceServers gives the env's kube-apiserver and etcd benchNice.
func (e *benchEnv) reniceServers(tb testing.TB) {
	api, etcd := e.c.PIDs()
	renice(tb, api)
	renice(tb, etcd)
}

// apiMetrics sums the API server's counters whose line starts with name and carries every
// label in match, e.g. apiMetrics(ctx, "apiserver_storage_list_total", `storage="etcd"`).
func (e *benchEnv) apiMetrics(ctx context.Context, name string, match ...string) (float64, error) {
	body, err := e.c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(line, m)
		}
		if !ok {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			sum += v
		}
	}
	return sum, sc.Err()
}

// peakWatcher polls a child's VmHWM until stop: the child's own peak RSS (the rusage a parent
// gets after exec includes the parent's RSS at fork time).
func peakWatcher(pid int) (stop func() int64) {
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		var peak int64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if _, hwm := procMem(pid); hwm > peak {
				peak = hwm
			}
			select {
			case <-done:
				result <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(done); return <-result }
}
