package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending"
	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/bot"
)

// TestDemoInterruptStopsStartingClusters interrupts the demo (Ctrl-C cancels its context)
// while its clusters are starting in the background: runDemo returns at once and leaves no
// control-plane process behind.
func TestDemoInterruptStopsStartingClusters(t *testing.T) {
	before := controlPlaneChildren(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdin, stdinW := io.Pipe() // never written: a user who has not typed yet
	defer stdinW.Close()
	var out bytes.Buffer
	progress := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runDemo(ctx, whypending.Scenarios, "testdata/scenarios", []string{"seed-frontend-cpu", "seed-ipam-leaked", "workload-quota"}, 2, nil, stdin, &out, progress)
	}()
	// Interrupt once the first question waits and a kube-apiserver of the demo runs.
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(progress.String(), "demo: starting scenario seed-frontend-cpu's cluster (about ") || len(newChildren(before, controlPlaneChildren(t))) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no progress line and no kube-apiserver for the first question's cluster:\n%s", progress.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(progress.String(), " ready (") {
		t.Logf("a cluster was ready before the interrupt:\n%s", progress.String())
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("runDemo after Ctrl-C = %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("runDemo did not return within a minute of Ctrl-C")
	}
	for pid, name := range newChildren(before, controlPlaneChildren(t)) {
		t.Errorf("%s (pid %d) still runs after the demo returned", name, pid)
	}
}

// newChildren are the processes of now that are not in before.
func newChildren(before, now map[int]string) map[int]string {
	out := map[int]string{}
	for pid, name := range now {
		if _, ok := before[pid]; !ok {
			out[pid] = name
		}
	}
	return out
}

// TestDemoStartFailureNamesTheLog asks about a scenario whose cluster cannot be loaded: the
// answer says its cluster failed to start and names the log, which has the error; the other
// scenario still answers.
func TestDemoStartFailureNamesTheLog(t *testing.T) {
	dir := t.TempDir()
	for name, files := range map[string][2]string{
		"broken": {"apiVersion: v1\nkind: Namespace\nmetadata: {name: broken}\n---\napiVersion: v1\nkind: NoSuchKind\nmetadata: {name: x, namespace: broken}\n",
			"code: insufficient-cpu\npod: broken/web\n"},
	} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name, "manifests.yaml"), files[0])
		writeFile(t, filepath.Join(dir, name, "expected.yaml"), files[1])
	}
	src := "testdata/scenarios/seed-frontend-cpu/"
	for _, f := range []string{"manifests.yaml", "expected.yaml"} {
		b, err := whypending.Scenarios.ReadFile(src + f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "seed-frontend-cpu"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "seed-frontend-cpu", f), string(b))
	}
	var out, progress bytes.Buffer
	err := runDemo(t.Context(), os.DirFS(dir), ".", nil, 1, nil, strings.NewReader("/kubeconfig broken\n/kubeconfig\n"), &out, &progress)
	if err != nil {
		t.Fatalf("runDemo: %v\nprogress:\n%s", err, progress.String())
	}
	got := out.String()
	m := regexp.MustCompile(`Its log: (\S+\.log) `).FindStringSubmatch(got)
	if !strings.Contains(got, "scenario broken's cluster failed to start") || m == nil {
		t.Fatalf("the answer for the broken scenario does not say it failed to start and name its log:\n%s", got)
	}
	defer os.RemoveAll(filepath.Dir(m[1]))
	log, err := os.ReadFile(m[1])
	if err != nil || !strings.Contains(string(log), "NoSuchKind") {
		t.Errorf("log %s (%v) lacks the load error:\n%s", m[1], err, log)
	}
	if !strings.Contains(progress.String(), "logs of the clusters that failed to start are kept in "+filepath.Dir(m[1])) {
		t.Errorf("progress does not say where the failed start's log is kept:\n%s", progress.String())
	}
	if n := strings.Count(got, "scenario broken's cluster failed to start"); n != 2 {
		t.Errorf("failure answers = %d, want 2 (the question and /kubeconfig broken)\n%s", n, got)
	}
	for _, want := range []string{
		"seed-frontend-cpu/frontend is Pending: insufficient-cpu",
		"failed to start (log: " + m[1] + ")", // the /kubeconfig table
	} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q:\n%s", want, got)
		}
	}
}

// controlPlaneChildren are this process's child processes that are control-plane components
// (pid: name).
func controlPlaneChildren(t *testing.T) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	me := os.Getpid()
	out := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm, rest := s[open+1:end], strings.Fields(s[end+1:])
		if len(rest) < 2 || !strings.HasPrefix(comm, "kube-") {
			continue
		}
		if ppid, _ := strconv.Atoi(rest[1]); ppid == me {
			out[pid] = comm
		}
	}
	return out
}

// TestDemoRefusesBadNameFirst: a question the bot refuses whatever the namespace (a name no
// pod or workload can have, two names, or NAMESPACE/KIND/NAME) gets the bot's refusal, not the demo's "which
// namespace?" or "no demo cluster has namespace"; a valid name without a namespace is still
// asked which. No cluster starts.
func TestDemoRefusesBadNameFirst(t *testing.T) {
	scenarios, err := readScenarios(whypending.Scenarios, "testdata/scenarios", []string{"seed-frontend-cpu"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := newDemoFleet(t.Context(), scenarios, io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	session := console.NewSession(bot.New(bot.Options{Clusters: f.botClusters(), Log: slog.New(slog.DiscardHandler)}), demoRequester)
	long := strings.Repeat("a", 254)
	for line, want := range map[string]string{
		"/why-pending Web_1":                     `/why-pending: "Web_1" is not a valid pod or workload name`,
		"/why-pending " + long:                   `/why-pending: "` + long + `" is not a valid pod or workload name`,
		"/why-pending deploy/Web_1":              `/why-pending: "Web_1" is not a valid deployment name`,
		"/why-pending nowhere/Web_1":             `/why-pending: "Web_1" is not a valid pod or workload name`,
		"/why-pending -n nowhere Web_1":          `/why-pending: "Web_1" is not a valid pod or workload name`,
		"/why-pending -n nowhere web":            `no demo cluster has namespace "nowhere"`,
		"/why-pending nowhere/deploy/web":        `/why-pending: "nowhere/deploy/web" puts the namespace before the kind: use -n nowhere deploy/web (namespace first, then kind/name)`,
		"/why-pending nowhere/deploy/<!channel>": `/why-pending: "<!channel>" is not a valid deployment name`,
		"/why-pending web 1":                     "/why-pending: name one pod or workload",
		"/why-pending web":                       "which namespace?",
	} {
		msgs := demoAnswer(t.Context(), f, session, line)
		if len(msgs) != 1 || !strings.HasPrefix(msgs[0].Title, want) {
			t.Errorf("%s: %+v, want one message titled %q…", line, msgs, want)
		}
	}
}
