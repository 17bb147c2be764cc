package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// cliChildArgs names the environment variable that makes TestCLIChild run the CLI.
const cliChildArgs = "WHYPENDING_CLI_CHILD_ARGS"

// TestCLIChild runs `whypending` with the JSON array of arguments in $WHYPENDING_CLI_CHILD_ARGS
// and exits with its code, so that a test sees the process's real stdout and stderr (client-go
// writes its own log lines to the process's stderr, not to cobra's). Skipped otherwise.
func TestCLIChild(t *testing.T) {
	raw := os.Getenv(cliChildArgs)
	if raw == "" {
		t.Skip("the helper process of the CLI outage tests")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr))
}

// cliProcess is `whypending ARGS` running in a child process.
type cliProcess struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	exited         chan error
}

func startCLI(t *testing.T, args ...string) *cliProcess {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	p := &cliProcess{exited: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestCLIChild$")
	p.cmd.Env = append(os.Environ(), cliChildArgs+"="+string(raw))
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// wait waits up to limit for the process to exit and returns its exit code.
func (p *cliProcess) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		p.exited <- nil // for the cleanup
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("whypending still running after %s\nstdout:\n%s\nstderr:\n%s", limit, p.stdout.String(), p.stderr.String())
		return -1
	}
}

// klogLine matches a client-go (klog) log line: "E1201 12:03:04.123456   123 request.go:…".
var klogLine = regexp.MustCompile(`(?m)^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ `)

// TestReleaseCutShortByTheAPIServer is issue 22 item 5: `ipam release-ips --lock --yes` with
// the API server killed right after the release's first IPAMBlock write and started again 7 s
// later. No address in use is released; the datastore ends unlocked (the unlock is retried
// until the API server is back), or the last line says it is LOCKED and how to unlock it; the
// output says how many IPs were released before the failure; the error is one line naming
// the server; no client-go log line reaches stderr.
func TestReleaseCutShortByTheAPIServer(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	ctx := t.Context()
	ipam := calicoClient(t, c)
	if n := leakedIPs(t, ipam); n != 181 {
		t.Fatalf("leaked IPs before = %d, want 181", n)
	}

	p := releaseUntilFirstWrite(t, c, "--lock-ttl", "5m")
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(7 * time.Second)
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 3*time.Minute)
	stdout, stderr := p.stdout.String(), p.stderr.String()
	t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)

	assertInUseAllocated(t, c, ipam)
	s, err := ipam.LockStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout+stderr), "\n")
	last := lines[len(lines)-1]
	if !s.Ready && !(strings.Contains(last, "LOCKED") && strings.Contains(last, "whypending ipam unlock")) {
		t.Errorf("the datastore is still locked and the last line does not say so: %q", last)
	}
	if !s.Ready {
		t.Errorf("datastoreReady is false after the API server came back: the unlock was not retried")
	}
	if !regexp.MustCompile(`Released \d+ IPs?`).MatchString(stdout) {
		t.Errorf("stdout does not say how many IPs were released before the failure")
	}
	// What the output says remains is what a check finds now.
	res, err := ipam.Check(ctx, calico.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`Check afterwards: (\d+) leaked IPs and (\d+) leaked handles remain`).FindStringSubmatch(stdout); m != nil {
		if want := fmt.Sprintf("%d/%d", len(res.LeakedIPs), len(res.LeakedHandles)); m[1]+"/"+m[2] != want {
			t.Errorf("the output says %s/%s leaked IPs/handles remain, a check finds %s", m[1], m[2], want)
		}
	}
	if klogLine.MatchString(stderr) {
		t.Errorf("client-go's own log lines reached stderr:\n%s", stderr)
	}
	if code != 0 {
		errLines := 0
		for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if strings.HasPrefix(l, "error:") {
				errLines++
				if !strings.Contains(l, c.Config.Host) {
					t.Errorf("the error does not name the API server %s: %q", c.Config.Host, l)
				}
			}
		}
		others := 0 // lines that are neither the error, the LOCKED line nor progress
		for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if !strings.HasPrefix(l, "error:") && !strings.HasPrefix(l, "whypending: ") && !strings.HasPrefix(l, "THE CALICO DATASTORE IS STILL LOCKED") {
				others++
			}
		}
		if errLines != 1 || others > 0 {
			t.Errorf("the error is not one line:\n%s", stderr)
		}
	}
}

// releaseUntilFirstWrite starts `ipam release-ips --lock --yes` with extra flags on c and
// returns once it has written its first IPAMBlock.
func releaseUntilFirstWrite(t *testing.T, c *testenv.Cluster, extra ...string) *cliProcess {
	t.Helper()
	ctx := t.Context()
	blocks := c.Dynamic.Resource(schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipamblocks"})
	list, err := blocks.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := blocks.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	p := startCLI(t, append([]string{"ipam", "release-ips", "--lock", "--yes", "--kubeconfig", c.KubeconfigPath}, extra...)...)
	select {
	case <-w.ResultChan():
	case <-p.exited:
		t.Fatalf("the release exited before its first block write\nstdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("no block write within 2 minutes")
	}
	return p
}

// TestReleaseLeftLockedSaysSo is issue 22 item 5 when the API server does not come back
// before the lock's deadline: the unlock is retried until then, the last line says in
// capitals that the datastore is LOCKED and gives the command that unlocks it, and that
// command, run once the API server is back, unlocks it.
func TestReleaseLeftLockedSaysSo(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	p := releaseUntilFirstWrite(t, c, "--lock-ttl", "30s")
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 2*time.Minute)
	stdout, stderr := p.stdout.String(), p.stderr.String()
	t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	last := lines[len(lines)-1]
	const prefix = "THE CALICO DATASTORE IS STILL LOCKED"
	_, unlock, found := strings.Cut(last, "Unlock it with: ")
	if code != 1 || !strings.HasPrefix(last, prefix) || !found {
		t.Fatalf("exit %d, last line %q: want 1 and a line starting %q with the unlock command", code, last, prefix)
	}
	if !regexp.MustCompile(`Released \d+ IPs?`).MatchString(stdout) {
		t.Errorf("stdout does not say how many IPs were released before the failure")
	}
	if klogLine.MatchString(stderr) {
		t.Errorf("client-go's own log lines reached stderr:\n%s", stderr)
	}
	if err := c.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	ipam := calicoClient(t, c)
	if s, err := ipam.LockStatus(t.Context()); err != nil || s.Ready {
		t.Fatalf("lock status after the run = %+v, %v; want still locked", s, err)
	}
	args := strings.Fields(unlock)
	if args[0] != "whypending" {
		t.Fatalf("unlock command %q does not start with whypending", unlock)
	}
	code, out, errOut := runCLI(t, args[1:]...)
	if s, err := ipam.LockStatus(t.Context()); code != 0 || err != nil || !s.Ready {
		t.Errorf("%s: exit %d, %s%s; lock status %+v, %v: want unlocked", unlock, code, out, errOut, s, err)
	}
	assertInUseAllocated(t, c, ipam)
}
