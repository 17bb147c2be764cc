package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// runIPAM runs `whypending ipam ARGS` against the cluster of kubeconfig and returns its output
// (stdout and stderr together).
func runIPAM(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newIPAMCommand(&kubeFlags{kubeconfig: kubeconfig})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

func mustRunIPAM(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := runIPAM(t, kubeconfig, args...)
	if err != nil {
		t.Fatalf("ipam %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func TestIPAMCheckReleaseLocked(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, filepath.Join(repoRoot(t), "testdata", "scenarios", "seed-ipam-leaked"))
	kc := c.KubeconfigPath

	report := filepath.Join(t.TempDir(), "report.json")
	out := mustRunIPAM(t, kc, "check", "--report", report)
	if !strings.Contains(out, "Found 181 IPs that are allocated in IPAM but not actually in use.") ||
		!strings.HasSuffix(out, "Check complete; found 181 problems.\n") {
		t.Errorf("check output:\n%s", out)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep calico.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Allocations) != 256 || len(rep.Leaked()) != 181 || rep.ClusterGUID != "ad00d57ad9583d0391ba57ddfa5d9225" {
		t.Errorf("report: %d allocations, %d leaked, guid %q", len(rep.Allocations), len(rep.Leaked()), rep.ClusterGUID)
	}

	out = mustRunIPAM(t, kc, "show", "--show-blocks")
	for _, want := range []string{"| IP Pool  | 172.16.0.0/24   |       256 | 256 (100%) |   0 (0%) |", "| Block    | 172.16.0.128/26 |        64 |  64 (100%) |   0 (0%) | worker-2 | 2/20 "} {
		if !strings.Contains(out, want) {
			t.Errorf("show output lacks %q:\n%s", want, out)
		}
	}

	// Without --yes: the plan only.
	out = mustRunIPAM(t, kc, "release-ips", "--lock")
	if !strings.Contains(out, "Plan: release 181 IPs in 4 blocks and delete 0 leaked handles.") || !strings.Contains(out, "Dry run: nothing changed.") {
		t.Errorf("dry run output:\n%s", out)
	}
	if out := mustRunIPAM(t, kc, "check"); !strings.Contains(out, "found 181 problems") {
		t.Errorf("the dry run changed something:\n%s", out)
	}

	out = mustRunIPAM(t, kc, "release-ips", "--lock", "--yes")
	for _, want := range []string{
		"Locked the Calico datastore",
		"Released 181 IPs (kept 0) with 4 block writes; 181 handles deleted, 0 decremented (181 handle writes)",
		"Unlocked the Calico datastore.",
		"Check complete; found 0 problems.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("release output lacks %q:\n%s", want, out)
		}
	}
	cl := calicoClient(t, c)
	if s, err := cl.LockStatus(t.Context()); err != nil || !s.Ready || s.Marker != nil {
		t.Errorf("after release: %+v, %v; want unlocked", s, err)
	}
}

// TestIPAMReleaseIPsWithHandles runs release-ips, whose leaked IPs and leaked handles are two
// kinds of repair, as one release: one plan summary, one datastore lock, one check afterwards.
func TestIPAMReleaseIPsWithHandles(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, filepath.Join(repoRoot(t), "testdata", "scenarios", "seed-ipam-leaked"))
	kc := c.KubeconfigPath
	// A handle no block references, seconds old: maybe an allocation in flight, so kept.
	const young = "k8s-pod-network.0000cafe"
	handles := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipamhandles"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMHandle",
		"metadata": map[string]any{"name": young},
		"spec":     map[string]any{"handleID": young, "block": map[string]any{"172.16.0.128/26": int64(1)}},
	}}
	if _, err := c.Dynamic.Resource(handles).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	out := mustRunIPAM(t, kc, "release-ips")
	for _, want := range []string{
		"Check: 256 allocations, 181 leaked IPs, 1 leaked handles, 182 problems.",
		"Plan: release 181 IPs in 4 blocks and delete 0 leaked handles.",
		"Plan: release 181 leaked IPs on ",
		"Plan: delete 0 leaked IPAM handles on ",
		"- " + young + ": younger than 1m0s: maybe an allocation in flight",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}

	out = mustRunIPAM(t, kc, "release-ips", "--lock", "--yes")
	if n := strings.Count(out, "Locked the Calico datastore"); n != 1 || strings.Count(out, "Unlocked the Calico datastore.") != 1 {
		t.Errorf("locked %d times for one release, want once:\n%s", n, out)
	}
	for _, want := range []string{
		"Released 181 IPs (kept 0) with 4 block writes; 181 handles deleted, 0 decremented (181 handle writes)",
		"Check afterwards: 0 leaked IPs and 0 leaked handles remain.", // the young one is not counted yet
		"Check complete; found 1 problems.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("release lacks %q:\n%s", want, out)
		}
	}
	if _, err := c.Dynamic.Resource(handles).Get(t.Context(), young, metav1.GetOptions{}); err != nil {
		t.Errorf("young leaked handle: %v, want it kept", err)
	}
}

func TestIPAMReleaseFromReport(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, filepath.Join(repoRoot(t), "testdata", "scenarios", "seed-ipam-leaked"))
	report := filepath.Join(t.TempDir(), "report.json")
	mustRunIPAM(t, c.KubeconfigPath, "check", "--report", report)
	out := mustRunIPAM(t, c.KubeconfigPath, "release-ips", "--from-report", report, "--yes")
	if !strings.Contains(out, "Released 181 IPs (kept 0)") {
		t.Errorf("release output:\n%s", out)
	}
	if out := mustRunIPAM(t, c.KubeconfigPath, "check"); !strings.Contains(out, "found 0 problems") {
		t.Errorf("after release:\n%s", out)
	}
}

func TestIPAMReleaseBlocks(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, filepath.Join(repoRoot(t), "testdata", "scenarios", "seed-block-limit"))
	out := mustRunIPAM(t, c.KubeconfigPath, "release-blocks", "--all-empty")
	if !strings.Contains(out, "Plan: release 1 empty IPAM block on ") || !strings.Contains(out, "\n  172.24.10.64/26  worker-1\n") || !strings.Contains(out, "Dry run") {
		t.Errorf("plan:\n%s", out)
	}
	out = mustRunIPAM(t, c.KubeconfigPath, "release-blocks", "--all-empty", "--yes", "--lock")
	if !strings.Contains(out, "Released 1 block (kept 0) with 5 writes.") || !strings.Contains(out, "Unlocked the Calico datastore.") {
		t.Errorf("release:\n%s", out)
	}
	if out := mustRunIPAM(t, c.KubeconfigPath, "show", "--show-blocks"); !strings.Contains(out, "Empty affine blocks: 0") || !strings.Contains(out, "3/4") {
		t.Errorf("show after release:\n%s", out)
	}
	if _, err := runIPAM(t, c.KubeconfigPath, "release-blocks"); err == nil {
		t.Error("release-blocks without blocks or --all-empty succeeded")
	}
	// Named blocks: the plan keeps what the release would keep, says why, and names a block once.
	out = mustRunIPAM(t, c.KubeconfigPath, "release-blocks", "172.24.10.0/26", "10.99.0.0/26", "172.24.10.0/26")
	for _, want := range []string{"Plan: release 0 empty IPAM blocks on ", "Left alone", "- 172.24.10.0/26: 64 of its 64 addresses are allocated", "- 10.99.0.0/26: no such block"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan for named blocks lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "172.24.10.0/26:"); n != 1 {
		t.Errorf("a block named twice is listed %d times, want once:\n%s", n, out)
	}
}

func TestIPAMLockUnlock(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, filepath.Join(repoRoot(t), "testdata", "scenarios", "seed-ipam-leaked"))
	kc := c.KubeconfigPath
	cl := calicoClient(t, c)

	if out := mustRunIPAM(t, kc, "lock", "--owner", "alice"); !strings.Contains(out, "Locked the Calico datastore (owner alice") {
		t.Errorf("lock:\n%s", out)
	}
	// The lock outlives the command that took it: its marker names no process, so the next
	// command (a separate process in real use) does not take it for a crashed run's lock.
	if s, _ := cl.LockStatus(t.Context()); s.Ready || s.Marker == nil || s.Marker.PID != 0 {
		t.Errorf("after ipam lock: %+v, want locked with a marker that names no process", s)
	}
	if out := mustRunIPAM(t, kc, "show", "--owner", "alice"); strings.Contains(out, "Undid") {
		t.Errorf("show undid a live lock:\n%s", out)
	}
	if _, err := runIPAM(t, kc, "lock", "--owner", "bob"); !errors.Is(err, calico.ErrDatastoreLocked) {
		t.Errorf("lock by bob: %v, want ErrDatastoreLocked", err)
	}
	if _, err := runIPAM(t, kc, "unlock", "--owner", "bob"); !errors.Is(err, calico.ErrDatastoreLocked) {
		t.Errorf("unlock by bob: %v, want ErrDatastoreLocked", err)
	}
	// A locked release refuses to run under someone else's lock, and changes nothing.
	if _, err := runIPAM(t, kc, "release-ips", "--lock", "--yes", "--owner", "bob"); !errors.Is(err, calico.ErrDatastoreLocked) {
		t.Errorf("release under alice's lock: %v", err)
	}
	if out := mustRunIPAM(t, kc, "unlock", "--owner", "alice"); !strings.Contains(out, "Unlocked") {
		t.Errorf("unlock:\n%s", out)
	}
	if out := mustRunIPAM(t, kc, "unlock", "--owner", "alice"); !strings.Contains(out, "not locked") {
		t.Errorf("second unlock:\n%s", out)
	}

	// A lock whose deadline passed is undone by the owner's next command, whatever it is.
	mustRunIPAM(t, kc, "lock", "--owner", "alice", "--ttl", "1s")
	time.Sleep(1100 * time.Millisecond)
	if out := mustRunIPAM(t, kc, "show", "--owner", "alice"); !strings.Contains(out, "Undid a datastore lock of alice") {
		t.Errorf("next start did not recover:\n%s", out)
	}
	if s, _ := cl.LockStatus(t.Context()); !s.Ready {
		t.Error("still locked")
	}
	// A lock lifetime out of range is refused, not silently replaced.
	for _, ttl := range []string{"0s", "-5m", "1000h"} {
		if _, err := runIPAM(t, kc, "lock", "--owner", "alice", "--ttl", ttl); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("lock --ttl %s: %v, want out of range", ttl, err)
		}
	}
	// --force unlocks anyone's lock.
	mustRunIPAM(t, kc, "lock", "--owner", "carol")
	mustRunIPAM(t, kc, "unlock", "--force")
	if s, _ := cl.LockStatus(t.Context()); !s.Ready || s.Marker != nil {
		t.Errorf("after --force: %+v", s)
	}
}

func calicoClient(t *testing.T, c *testenv.Cluster) *calico.Client {
	t.Helper()
	cl, err := calico.NewClient(t.Context(), c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestIPAMReleaseHandles is issue 22 item 10's `ipam release-handles`, the CLI twin of the
// bot's /ipam release-handles through the same actions.Runner: a leaked handle younger than the
// grace period is left out of the plan, and once it is older it is deleted with --yes, while the
// handles of allocated addresses stay.
func TestIPAMReleaseHandles(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, filepath.Join(repoRoot(t), "testdata", "scenarios", "seed-ipam-leaked"))
	kc := c.KubeconfigPath
	const leaked = "k8s-pod-network.0000dead"
	handles := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipamhandles"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMHandle",
		"metadata": map[string]any{"name": leaked},
		"spec":     map[string]any{"handleID": leaked, "block": map[string]any{"172.16.0.128/26": int64(1)}},
	}}
	if _, err := c.Dynamic.Resource(handles).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := c.Dynamic.Resource(handles).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := mustRunIPAM(t, kc, "release-handles")
	for _, want := range []string{"Plan: delete 0 leaked IPAM handles on ", "- " + leaked + ": younger than 1m0s", "Dry run: nothing changed."} {
		if !strings.Contains(out, want) {
			t.Errorf("young handle: plan lacks %q:\n%s", want, out)
		}
	}
	time.Sleep(61 * time.Second) // past the grace period
	out = mustRunIPAM(t, kc, "release-handles", "--yes")
	for _, want := range []string{"Plan: delete 1 leaked IPAM handle on ", "Deleted 1 leaked handle (kept 0) with 1 handle writes.", "Check afterwards: 0 leaked handles remain."} {
		if !strings.Contains(out, want) {
			t.Errorf("release lacks %q:\n%s", want, out)
		}
	}
	after, err := c.Dynamic.Resource(handles).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != len(before.Items)-1 {
		t.Errorf("handles %d -> %d, want exactly the leaked one deleted", len(before.Items), len(after.Items))
	}
	if _, err := c.Dynamic.Resource(handles).Get(t.Context(), leaked, metav1.GetOptions{}); err == nil {
		t.Errorf("the leaked handle %s is still there", leaked)
	}
}
