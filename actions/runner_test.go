package actions_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// leakedCluster starts a control plane with the seed-ipam-leaked scenario (181 leaked IPs)
// and returns a Runner for it.
func leakedCluster(t *testing.T, policy actions.LockPolicy) (*testenv.Cluster, *calico.Client, *actions.Runner) {
	t.Helper()
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	client, err := calico.NewClient(t.Context(), c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c, client, &actions.Runner{Cluster: "test", IPAM: client, LockPolicy: policy, LockTTL: time.Minute, LockOwner: "whypending-test"}
}

func approve(p actions.Plan, at time.Time) actions.Approved {
	return actions.Approved{Plan: p, By: "slack:T1/UBOB", At: at}
}

func leakedCount(t *testing.T, client *calico.Client) int {
	t.Helper()
	res, err := client.Check(t.Context(), calico.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.LeakedIPs)
}

func TestReleaseLeakedIPs(t *testing.T) {
	tests := []struct {
		name   string
		policy actions.LockPolicy
	}{
		{"with the datastore lock", actions.LockAlways},
		{"without the datastore lock", actions.LockNever},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, client, r := leakedCluster(t, tt.policy)
			ctx := t.Context()
			p, err := r.Plan(ctx, actions.KindReleaseLeakedIPs, actions.PlanOptions{})
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if len(p.Items) != 181 || p.Total != 181 {
				t.Fatalf("plan items, total = %d, %d, want 181, 181", len(p.Items), p.Total)
			}
			if got := actions.Fingerprint(p.Kind, p.Cluster, p.Items); got != p.Fingerprint {
				t.Errorf("fingerprint = %s, want %s (recomputed)", p.Fingerprint, got)
			}
			p.ExpiresAt = time.Now().Add(15 * time.Minute)
			res, err := r.Execute(ctx, approve(p, time.Now()))
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if res.Done != 181 || len(res.Skipped) != 0 || res.Remaining != 0 || res.Locked != (tt.policy == actions.LockAlways) {
				t.Errorf("result done=%d skipped=%v remaining=%d locked=%v, want 181, none, 0, %v",
					res.Done, res.Skipped, res.Remaining, res.Locked, tt.policy == actions.LockAlways)
			}
			if n := leakedCount(t, client); n != 0 {
				t.Errorf("leaked IPs after release = %d, want 0", n)
			}
			if s, err := client.LockStatus(ctx); err != nil || !s.Ready || s.Marker != nil {
				t.Errorf("datastore after release: %+v, %v; want unlocked with no marker", s, err)
			}
		})
	}
}

func TestReleaseLeakedIPsSkipsWhatChanged(t *testing.T) {
	c, client, r := leakedCluster(t, actions.LockAlways)
	ctx := t.Context()
	p, err := r.Plan(ctx, actions.KindReleaseLeakedIPs, actions.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Between plan and approval a pod starts on worker-2 with one of the planned addresses.
	var target actions.Item
	for _, it := range p.Items {
		if it.Node == "worker-2" {
			target = it
			break
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "late-starter", Namespace: "seed-ipam-leaked"},
		Spec:       corev1.PodSpec{NodeName: "worker-2", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
	created, err := c.Client.CoreV1().Pods("seed-ipam-leaked").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: target.Target, PodIPs: []corev1.PodIP{{IP: target.Target}}}
	if _, err := c.Client.CoreV1().Pods("seed-ipam-leaked").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.ExpiresAt = time.Now().Add(15 * time.Minute)
	res, err := r.Execute(ctx, approve(p, time.Now()))
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	want := actions.Skip{Target: target.Target, Reason: "now in use by Workload(seed-ipam-leaked/late-starter)"}
	if res.Done != 180 || len(res.Skipped) != 1 || res.Skipped[0] != want {
		t.Errorf("done=%d skipped=%+v, want 180 and %+v", res.Done, res.Skipped, want)
	}
	if n := leakedCount(t, client); n != 0 {
		t.Errorf("leaked IPs after release = %d, want 0 (the in-use one is not leaked)", n)
	}
}

func TestExecuteRefusals(t *testing.T) {
	c, client, r := leakedCluster(t, actions.LockAlways)
	ctx := t.Context()
	p, err := r.Plan(ctx, actions.KindReleaseLeakedIPs, actions.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.ExpiresAt = time.Now().Add(-time.Second)

	t.Run("an approval after the expiry changes nothing", func(t *testing.T) {
		_, err := r.Execute(ctx, approve(p, time.Now()))
		if !errors.Is(err, actions.ErrApprovalExpired) {
			t.Errorf("Execute error = %v, want ErrApprovalExpired", err)
		}
		if n := leakedCount(t, client); n != 181 {
			t.Errorf("leaked IPs = %d, want 181 (untouched)", n)
		}
	})

	t.Run("a datastore locked by someone else changes nothing", func(t *testing.T) {
		setDatastoreReady(t, c, false)
		p.ExpiresAt = time.Now().Add(time.Minute)
		_, err := r.Execute(ctx, approve(p, time.Now()))
		if !errors.Is(err, actions.ErrDatastoreLocked) {
			t.Errorf("Execute error = %v, want ErrDatastoreLocked", err)
		}
		if n := leakedCount(t, client); n != 181 {
			t.Errorf("leaked IPs = %d, want 181 (untouched)", n)
		}
		if s, _ := client.LockStatus(ctx); s.Ready {
			t.Errorf("datastore unlocked by a refused execution; want the other owner's lock kept")
		}
		// Without its own lock (LockNever), a repair refuses too, and its plan says so.
		never := &actions.Runner{Cluster: r.Cluster, IPAM: r.IPAM, LockOwner: r.LockOwner}
		never.LockPolicy = actions.LockNever
		for _, kind := range []actions.Kind{actions.KindReleaseLeakedIPs, actions.KindReleaseEmptyBlocks, actions.KindReleaseLeakedHandles} {
			np, err := never.Plan(ctx, kind, actions.PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(np.Warning, "The Calico datastore is locked by ") || !strings.Contains(np.Warning, "cannot run until it is unlocked") {
				t.Errorf("%s plan warning = %q, want that the datastore is locked and the repair cannot run", kind, np.Warning)
			}
		}
		_, err = never.Execute(ctx, approve(p, time.Now()))
		if !errors.Is(err, actions.ErrDatastoreLocked) || !strings.Contains(err.Error(), "no whypending marker") {
			t.Errorf("LockNever Execute error = %v, want ErrDatastoreLocked naming the holder", err)
		}
		if n := leakedCount(t, client); n != 181 {
			t.Errorf("leaked IPs after a LockNever execution = %d, want 181 (untouched)", n)
		}
	})

	t.Run("unlock plans and clears a foreign lock", func(t *testing.T) {
		up, err := r.Plan(ctx, actions.KindUnlockDatastore, actions.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(up.Items) != 1 {
			t.Fatalf("unlock plan items = %d, want 1", len(up.Items))
		}
		up.ExpiresAt = time.Now().Add(time.Minute)
		res, err := r.Execute(ctx, approve(up, time.Now()))
		if err != nil || res.Done != 1 || res.Remaining != 0 {
			t.Errorf("unlock = done %d remaining %d, %v; want 1, 0, nil", res.Done, res.Remaining, err)
		}
		if s, _ := client.LockStatus(ctx); !s.Ready {
			t.Errorf("datastore still locked after unlock")
		}
		again, err := r.Plan(ctx, actions.KindUnlockDatastore, actions.PlanOptions{})
		if err != nil || len(again.Items) != 0 {
			t.Errorf("unlock plan on an unlocked datastore = %d items, %v; want 0", len(again.Items), err)
		}
	})
}

// setDatastoreReady sets ClusterInformation default spec.datastoreReady as calicoctl would
// (no whypending marker).
func setDatastoreReady(t *testing.T, c *testenv.Cluster, ready bool) {
	t.Helper()
	ctx := context.Background()
	gvr := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "clusterinformations"}
	dyn := c.Dynamic
	obj, err := dyn.Resource(gvr).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(obj.Object, ready, "spec", "datastoreReady"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gvr).Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseEmptyBlocksKeepsEachNodesLastBlock(t *testing.T) {
	_, client, r := leakedCluster(t, actions.LockAlways)
	ctx := t.Context()
	// Releasing the leaked IPs empties both of worker-2's blocks.
	p, err := r.Plan(ctx, actions.KindReleaseLeakedIPs, actions.PlanOptions{Node: "worker-2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 128 {
		t.Fatalf("worker-2 plan items = %d, want 128", len(p.Items))
	}
	p.ExpiresAt = time.Now().Add(time.Minute)
	if res, err := r.Execute(ctx, approve(p, time.Now())); err != nil || res.Done != 128 || res.Remaining != 0 {
		t.Fatalf("release on worker-2 = done %d remaining %d, %v; want 128, 0", res.Done, res.Remaining, err)
	}
	if n := leakedCount(t, client); n != 53 {
		t.Errorf("leaked IPs left on worker-1 = %d, want 53 (181 - 128, outside the node's plan)", n)
	}

	bp, err := r.Plan(ctx, actions.KindReleaseEmptyBlocks, actions.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(bp.Items) != 1 || bp.Items[0].Node != "worker-2" {
		t.Fatalf("empty-block plan = %+v, want one of worker-2's two empty blocks (the other is kept)", bp.Items)
	}
	bp.ExpiresAt = time.Now().Add(time.Minute)
	res, err := r.Execute(ctx, approve(bp, time.Now()))
	if err != nil || res.Done != 1 || res.Remaining != 0 {
		t.Fatalf("release empty blocks = done %d skipped %v remaining %d, %v; want 1, none, 0", res.Done, res.Skipped, res.Remaining, err)
	}
	u, err := client.Utilization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := u.NodeBlocks["worker-2"]; n != 1 {
		t.Errorf("worker-2 affine blocks = %d, want 1", n)
	}
}

// ipamHandles is the Calico v1 IPAMHandle resource.
var ipamHandles = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipamhandles"}

// createHandle creates an IPAMHandle named id that claims one address in block; no block
// allocation references it, so it is leaked.
func createHandle(t *testing.T, c *testenv.Cluster, id, block string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMHandle",
		"metadata": map[string]any{"name": id},
		"spec":     map[string]any{"handleID": id, "block": map[string]any{block: int64(1)}},
	}}
	if _, err := c.Dynamic.Resource(ipamHandles).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func handleCount(t *testing.T, c *testenv.Cluster) int {
	t.Helper()
	list, err := c.Dynamic.Resource(ipamHandles).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func TestReleaseLeakedHandles(t *testing.T) {
	c, client, r := leakedCluster(t, actions.LockAlways)
	r.HandleGracePeriod = -1 // the handles below are seconds old
	ctx := t.Context()
	const block = "172.16.0.128/26"
	leaked := []string{"k8s-pod-network.0000aaaa", "k8s-pod-network.0000bbbb", "k8s-pod-network.0000cccc", "k8s-pod-network.0000dddd"}
	for _, id := range leaked {
		createHandle(t, c, id, block)
	}
	before := handleCount(t, c)

	young, err := (&actions.Runner{Cluster: "test", IPAM: client}).Plan(ctx, actions.KindReleaseLeakedHandles, actions.PlanOptions{})
	if err != nil || len(young.Items) != 0 {
		t.Errorf("plan with the default grace period = %d items, %v; want none (the handles are seconds old: maybe in flight)", len(young.Items), err)
	}
	p, err := r.Plan(ctx, actions.KindReleaseLeakedHandles, actions.PlanOptions{})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	var planned []string
	for _, it := range p.Items {
		planned = append(planned, it.Target)
		if it.Revision == "" {
			t.Errorf("item %s has no resourceVersion", it.Target)
		}
	}
	if diff := cmp.Diff(leaked, planned); diff != "" || p.Total != 4 {
		t.Fatalf("planned handles (-want +got):\n%s (total %d)", diff, p.Total)
	}
	if !p.Kind.Destructive() || p.Title() != "delete 4 leaked IPAM handles on test" {
		t.Errorf("plan %q destructive=%v, want a destructive handle deletion", p.Title(), p.Kind.Destructive())
	}
	if _, err := r.Plan(ctx, actions.KindReleaseLeakedHandles, actions.PlanOptions{Node: "worker-1"}); err == nil {
		t.Errorf("Plan with a node = nil error, want a refusal (handles belong to no node)")
	}

	// Between plan and approval: one handle changes (someone writes it), and a block
	// allocation starts to reference another (a CNI ADD reused the ID).
	h, err := c.Dynamic.Resource(ipamHandles).Get(ctx, leaked[1], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(h.Object, map[string]any{block: int64(2)}, "spec", "block"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dynamic.Resource(ipamHandles).Update(ctx, h, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	blocks := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipamblocks"}
	b, err := c.Dynamic.Resource(blocks).Get(ctx, "172-16-0-128-26", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	attrs, _, _ := unstructured.NestedSlice(b.Object, "spec", "attributes")
	attrs[0].(map[string]any)["handle_id"] = leaked[2]
	if err := unstructured.SetNestedSlice(b.Object, attrs, "spec", "attributes"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dynamic.Resource(blocks).Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	p.ExpiresAt = time.Now().Add(time.Minute)
	res, err := r.Execute(ctx, approve(p, time.Now()))
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	skipped := map[string]string{}
	for _, s := range res.Skipped {
		skipped[s.Target] = s.Reason
	}
	if res.Done != 2 || len(skipped) != 2 || !strings.HasPrefix(skipped[leaked[1]], "changed since the plan") ||
		!strings.HasPrefix(skipped[leaked[2]], "no longer leaked") {
		t.Errorf("done=%d skipped=%v, want 2 deleted, %s changed and %s referenced again", res.Done, skipped, leaked[1], leaked[2])
	}
	if !res.Locked {
		t.Errorf("the deletion ran without the datastore lock (policy always)")
	}
	// The handle the block took over was leaked before; the one it no longer names is now.
	if res.Remaining != 2 {
		t.Errorf("remaining leaked handles = %d, want 2 (the changed one, and the one the block let go)", res.Remaining)
	}
	if n := handleCount(t, c); n != before-2 {
		t.Errorf("handles = %d, want %d (only the two still leaked as planned deleted)", n, before-2)
	}
	for _, id := range []string{leaked[1], leaked[2]} {
		if _, err := c.Dynamic.Resource(ipamHandles).Get(ctx, id, metav1.GetOptions{}); err != nil {
			t.Errorf("handle %s: %v, want it kept", id, err)
		}
	}
	if s, err := client.LockStatus(ctx); err != nil || !s.Ready {
		t.Errorf("datastore after the deletion: %+v, %v; want unlocked", s, err)
	}
}

func TestRecover(t *testing.T) {
	c, client, r := leakedCluster(t, actions.LockAlways)
	ctx := t.Context()
	p, err := r.Plan(ctx, actions.KindReleaseLeakedIPs, actions.PlanOptions{Node: "worker-2"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the lock a dead run of the plan holds is released, and nothing was done", func(t *testing.T) {
		// The run took the lock in another process (detached: no process to look up here).
		if _, err := client.Lock(ctx, calico.LockOptions{Owner: r.LockOwner, Operation: string(p.Kind) + " " + p.ID,
			TTL: time.Hour, Detached: true}); err != nil {
			t.Fatal(err)
		}
		rec, err := r.Recover(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		want := actions.Recovery{Planned: 128, Remaining: 128, Unlocked: true}
		if rec != want {
			t.Errorf("Recover = %+v, want %+v", rec, want)
		}
		if s, _ := client.LockStatus(ctx); !s.Ready || s.Marker != nil {
			t.Errorf("datastore after Recover: %+v, want unlocked with no marker", s)
		}
		if n := leakedCount(t, client); n != 181 {
			t.Errorf("leaked IPs = %d, want 181 (Recover re-runs nothing)", n)
		}
	})

	t.Run("what a dead run did is counted, and a lock of someone else is left alone", func(t *testing.T) {
		half := p
		half.Items = p.Items[:64]
		half.ExpiresAt = time.Now().Add(time.Minute)
		if res, err := r.Execute(ctx, approve(half, time.Now())); err != nil || res.Done != 64 {
			t.Fatalf("release half = done %d, %v; want 64", res.Done, err)
		}
		setDatastoreReady(t, c, false)
		rec, err := r.Recover(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Done() != 64 || rec.Remaining != 64 || rec.Unlocked || !strings.HasPrefix(rec.LockedBy, "no whypending marker") {
			t.Errorf("Recover = %+v, want 64 done, 64 remaining and the foreign lock reported, not released", rec)
		}
		if s, _ := client.LockStatus(ctx); s.Ready {
			t.Errorf("Recover released a lock that was not the plan's")
		}
		setDatastoreReady(t, c, true)
	})
}

func TestExecuteAllRunsPlansAsOneExecution(t *testing.T) {
	c, client, r := leakedCluster(t, actions.LockAlways)
	r.HandleGracePeriod = -1 // the handles below are seconds old
	ctx := t.Context()
	leaked := []string{"k8s-pod-network.0000aaaa", "k8s-pod-network.0000bbbb"}
	for _, id := range leaked {
		createHandle(t, c, id, "172.16.0.128/26")
	}
	var locks []calico.LockMarker
	unlocks := 0
	r.OnLock = func(m calico.LockMarker) { locks = append(locks, m) }
	r.OnUnlock = func() { unlocks++ }

	// Both kinds planned from one check, as the CLI's release-ips does.
	check, err := client.Check(ctx, calico.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips, err := r.Plan(ctx, actions.KindReleaseLeakedIPs, actions.PlanOptions{Check: check})
	if err != nil {
		t.Fatal(err)
	}
	handles, err := r.Plan(ctx, actions.KindReleaseLeakedHandles, actions.PlanOptions{Check: check})
	if err != nil {
		t.Fatal(err)
	}
	if len(ips.Items) != 181 || len(handles.Items) != 2 || ips.Basis != handles.Basis {
		t.Fatalf("plans: %d IPs (%s), %d handles (%s); want 181 and 2 from one check", len(ips.Items), ips.Basis, len(handles.Items), handles.Basis)
	}

	t.Run("a lock-free kind does not join", func(t *testing.T) {
		unlock := actions.Plan{ID: "rr-unlock", Kind: actions.KindUnlockDatastore, Cluster: "test"}
		if _, err := r.ExecuteAll(ctx, approve(ips, time.Now()), approve(unlock, time.Now())); err == nil || len(locks) != 0 {
			t.Errorf("ExecuteAll(release, unlock) = %v after %d locks; want a refusal before any lock", err, len(locks))
		}
		if n := leakedCount(t, client); n != 181 {
			t.Errorf("leaked IPs = %d, want 181 (untouched)", n)
		}
	})

	results, err := r.ExecuteAll(ctx, approve(ips, time.Now()), approve(handles, time.Now()))
	if err != nil {
		t.Fatalf("ExecuteAll: %v", err)
	}
	if len(locks) != 1 || unlocks != 1 {
		t.Fatalf("locked %d times, unlocked %d times; want once each for both plans", len(locks), unlocks)
	}
	if op := locks[0].Operation; !strings.Contains(op, ips.ID) || !strings.Contains(op, handles.ID) {
		t.Errorf("lock operation %q, want both plans named", op)
	}
	got := []actions.Result{results[0], results[1]}
	for i := range got {
		got[i].StartedAt, got[i].FinishedAt = time.Time{}, time.Time{}
		got[i].Writes = actions.Writes{}
	}
	want := []actions.Result{
		{PlanID: ips.ID, Kind: ips.Kind, Planned: 181, Done: 181, Locked: true},
		{PlanID: handles.ID, Kind: handles.Kind, Planned: 2, Done: 2, Locked: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if w := results[0].Writes; w.Blocks != 4 || w.HandlesDeleted != 181 {
		t.Errorf("IP release writes = %+v, want 4 block writes and 181 handles deleted", w)
	}
	if w := results[1].Writes; w.Blocks != 0 || w.HandlesDeleted != 2 || w.Handles != 2 {
		t.Errorf("handle deletion writes = %+v, want 2 handle deletes", w)
	}
	if n := handleCount(t, c); n != 256-181 {
		t.Errorf("handles left = %d, want %d (the in-use addresses' handles)", n, 256-181)
	}
	if s, err := client.LockStatus(ctx); err != nil || !s.Ready || s.Marker != nil {
		t.Errorf("datastore afterwards: %+v, %v; want unlocked", s, err)
	}
}
