package calico

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// helperEnv makes the test binary act as a helper process (see runHelper) instead of running
// tests: the crash test and the benchmarks re-execute it.
const helperEnv = "WHYPENDING_CALICO_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	testcluster.Main(m)
}

// runHelper runs one helper mode against the cluster of $KUBECONFIG:
//
//	check    run Check and print a JSON summary
//	release  run Check, then ReleaseIPs of its leaks, and print a JSON summary
//	lock   take the datastore lock as owner $WHYPENDING_LOCK_OWNER, print "locked", then block
//	       until killed (never unlocks)
//	serve-small, serve-large
//	       start a cluster, generate that benchmark fixture, print the kubeconfig path and
//	       block until killed (for calicoctl comparisons and profiling)
//
// $WHYPENDING_CPUPROFILE names a CPU profile file for the check mode.
func runHelper(mode string) int {
	ctx := context.Background()
	if spec, ok := map[string]fixtureSpec{"serve-small": fixtureSmall, "serve-large": fixtureLarge}[mode]; ok {
		return serveFixture(ctx, spec)
	}
	if p := os.Getenv("WHYPENDING_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cl, err := NewClient(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch mode {
	case "check":
		res, err := cl.Check(ctx, CheckOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if os.Getenv("WHYPENDING_CHECK_TEXT") != "" {
			res.WriteText(os.Stderr, Summary)
		}
		json.NewEncoder(os.Stdout).Encode(map[string]any{
			"allocations": len(res.Allocations), "leaked": len(res.LeakedIPs), "problems": res.Problems, "tookMs": res.Took.Milliseconds(),
			"peakRSSKiB": peakRSS(),
		})
		return 0
	case "release":
		res, err := cl.Check(ctx, CheckOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		rel, err := cl.ReleaseIPs(ctx, res.LeakedIPs, ReleaseOptions{Handles: res.LeakedHandles})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		json.NewEncoder(os.Stdout).Encode(map[string]any{
			"checkMs": res.Took.Milliseconds(), "leaked": len(res.LeakedIPs), "released": len(rel.Released), "skipped": len(rel.Skipped),
			"releaseMs": rel.Took.Milliseconds(), "blockWrites": rel.BlockWrites, "handleWrites": rel.HandleWrites,
			"blocksWritten": rel.BlocksWritten, "handlesDeleted": rel.HandlesDeleted, "reads": rel.Reads,
		})
		return 0
	case "lock":
		if _, err := cl.Lock(ctx, LockOptions{Owner: os.Getenv("WHYPENDING_LOCK_OWNER"), Operation: "crash-test", TTL: time.Hour}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("locked")
		select {}
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}

// startCluster starts a fresh control plane with the Calico CRDs and, when scenario is not
// empty, loads testdata/scenarios/<scenario>. It returns the cluster and a Client for it.
func startCluster(t testing.TB, scenario string) (*testenv.Cluster, *Client) {
	t.Helper()
	c := testcluster.Start(t, testenv.Options{})
	if scenario != "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		testcluster.Load(t, c, filepath.Join(root, "testdata", "scenarios", scenario))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := NewClient(ctx, c.Config)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c, cl
}

func serveFixture(ctx context.Context, spec fixtureSpec) int {
	c, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testenv.Shutdown()
	f, err := buildFixture(ctx, c.Config, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("fixture: %d blocks, %d leaked, %d pods, %d handles, %d writes in %s\n", f.blocks, f.leaked, f.pods, f.handles, f.writes, f.createdIn)
	fmt.Printf("KUBECONFIG=%s\n", c.KubeconfigPath)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return 0
}

// peakRSS is this process's peak resident set size in KiB (VmHWM). Unlike the rusage a parent
// gets, it does not include the parent's memory inherited across fork and exec.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
