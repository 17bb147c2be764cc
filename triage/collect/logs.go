package collect

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/whypending/whypending/triage"
)

// Limits of the previous-log reads (pods/log?previous=true of a crashing container).
const (
	// previousLogLines is pods/log tailLines for a previous container's log.
	previousLogLines = 20
	// previousLogBytes is pods/log limitBytes: long lines are cut, not the request.
	previousLogBytes = 16 << 10
	// maxLogFetches caps how many previous logs one diagnosis reads.
	maxLogFetches = 2
	// logTimeout bounds one log read: the API server proxies it to the node's kubelet, which
	// may be unreachable.
	logTimeout = 3 * time.Second
)

// previousLogs reads pods/log?previous=true (tail-limited) for up to maxLogFetches containers,
// concurrently. A failed read is kept as triage.LogTail.Err so the finding can say why.
func (c *Collector) previousLogs(ctx context.Context, s *triage.Snapshot) map[string]triage.LogTail {
	cands := triage.LogCandidates(s)
	if len(cands) == 0 {
		return nil
	}
	pod := s.Pod
	out := map[string]triage.LogTail{}
	if n := s.Node(pod.Spec.NodeName); n != nil && !triage.NodeReady(n) {
		for _, cs := range cands {
			out[cs] = triage.LogTail{Err: fmt.Errorf("node %s is not Ready, so its kubelet cannot serve logs", n.Name)}
		}
		return out
	}
	if len(cands) > maxLogFetches {
		cands = cands[:maxLogFetches]
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, cs := range cands {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			lt := c.previousLog(ctx, pod, name)
			mu.Lock()
			out[name] = lt
			mu.Unlock()
		}(cs)
	}
	wg.Wait()
	return out
}

// previousLog reads one container's previous log.
func (c *Collector) previousLog(ctx context.Context, pod *corev1.Pod, container string) triage.LogTail {
	ctx, cancel := context.WithTimeout(ctx, logTimeout)
	defer cancel()
	tail, limit := int64(previousLogLines), int64(previousLogBytes)
	raw, err := c.read.podLog(ctx, pod.Namespace, pod.Name, &corev1.PodLogOptions{
		Container: container, Previous: true, TailLines: &tail, LimitBytes: &limit,
	})
	if err != nil {
		return triage.LogTail{Err: fmt.Errorf("read previous log of container %s: %w", container, err)}
	}
	return triage.LogTail{Lines: splitLogLines(raw, previousLogLines)}
}

// splitLogLines splits a log into at most n last lines, dropping a trailing empty line.
func splitLogLines(raw []byte, n int) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 4096), previousLogBytes+1)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
