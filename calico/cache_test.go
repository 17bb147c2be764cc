package calico

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// informerUsers is an AddressUsers over plain pod and node informers, for tests and
// benchmarks (the bot uses triage/collect's caches). The pod informer keeps only each pod's
// PodUse.
type informerUsers struct {
	pods, nodes cache.SharedIndexInformer
	gen         atomic.Uint64
}

func startInformerUsers(ctx context.Context, kube kubernetes.Interface) *informerUsers {
	f := informers.NewSharedInformerFactory(kube, 0)
	u := &informerUsers{pods: f.Core().V1().Pods().Informer(), nodes: f.Core().V1().Nodes().Informer()}
	_ = u.pods.SetTransform(func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		use, ok := PodUseOf(p)
		c := &cached[PodUse]{name: p.Name, namespace: p.Namespace, rv: p.ResourceVersion}
		if ok {
			c.val = &use
		}
		return c, nil
	})
	bump := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { u.gen.Add(1) }, UpdateFunc: func(any, any) { u.gen.Add(1) }, DeleteFunc: func(any) { u.gen.Add(1) }}
	_, _ = u.pods.AddEventHandler(bump)
	_, _ = u.nodes.AddEventHandler(bump)
	f.Start(ctx.Done())
	return u
}

func (u *informerUsers) Generation() uint64 { return u.gen.Load() }
func (u *informerUsers) HasSynced() bool    { return u.pods.HasSynced() && u.nodes.HasSynced() }
func (u *informerUsers) EachPod(fn func(PodUse)) {
	for _, o := range u.pods.GetStore().List() {
		if p, _ := cachedValue[PodUse](o); p != nil {
			fn(*p)
		}
	}
}
func (u *informerUsers) EachNode(fn func(string, map[string]string)) {
	for _, o := range u.nodes.GetStore().List() {
		n := o.(*corev1.Node)
		fn(n.Name, n.Annotations)
	}
}

// checkDiff compares two check results, ignoring how they were made.
func checkDiff(want, got *CheckResult) string {
	return cmp.Diff(want, got, cmpopts.IgnoreFields(CheckResult{}, "Took", "Cached"), cmp.AllowUnexported(HandleInfo{}))
}

// newSyncedCache starts a Cache over w's cluster and waits for it.
func newSyncedCache(t *testing.T, w *world) *Cache {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k := NewCache(ctx, w.cl, startInformerUsers(ctx, w.kube))
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if err := k.WaitForSync(sctx); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestCacheMatchesLiveCheck: on the cluster with every problem class, the Cache's check and
// utilization equal the live Client's, and after changes (a pod goes away, a handle appears,
// the datastore is locked) the cache follows and still agrees.
func TestCacheMatchesLiveCheck(t *testing.T) {
	w := problemWorld(t)
	ctx := t.Context()
	k := newSyncedCache(t, w)
	compare := func(when string) {
		t.Helper()
		live, err := w.cl.Overview(ctx)
		if err != nil || live.CheckErr != nil {
			t.Fatalf("%s: live overview: %v %v", when, err, live.CheckErr)
		}
		cached, err := k.Overview(ctx)
		if err != nil || cached.CheckErr != nil {
			t.Fatalf("%s: cached overview: %v", when, err)
		}
		if !cached.Check.Cached || live.Check.Cached {
			t.Errorf("%s: Cached = %t (cache), %t (live)", when, cached.Check.Cached, live.Check.Cached)
		}
		if d := checkDiff(live.Check, cached.Check); d != "" {
			t.Errorf("%s: check (-live +cache):\n%s", when, d)
		}
		if d := cmp.Diff(live.Utilization, cached.Utilization, cmpopts.EquateComparable(netip.Prefix{})); d != "" {
			t.Errorf("%s: utilization (-live +cache):\n%s", when, d)
		}
		if d := cmp.Diff(live.DatastoreReady, cached.DatastoreReady); d != "" {
			t.Errorf("%s: datastore ready (-live +cache):\n%s", when, d)
		}
	}
	compare("at rest")

	// Nothing changed: the same result, not a new computation.
	a, _ := k.Check(ctx, CheckOptions{})
	b, _ := k.Check(ctx, CheckOptions{})
	if a != b {
		t.Error("two checks of unchanged caches computed twice")
	}

	if err := w.kube.CoreV1().Pods("app").Delete(ctx, "running", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	w.handle("another-leaked-handle", map[string]int{"10.10.0.0/26": 1})
	if _, err := w.cl.Lock(ctx, LockOptions{Owner: "test", Operation: "cache test"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cache to see the changes", func() bool {
		res, err := k.Check(ctx, CheckOptions{})
		return err == nil && len(res.LeakedIPs) == 5 && len(res.LeakedHandles) == 2 && res.Report.DatastoreLocked
	})
	compare("after changes")
}

// TestCacheRefusesBeforeSync: a Cache answers nothing until its informers have synced.
func TestCacheRefusesBeforeSync(t *testing.T) {
	k := &Cache{users: &informerUsers{pods: cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, nil), nodes: cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Node{}, 0, nil)}}
	if _, err := k.Check(t.Context(), CheckOptions{}); err != errNotSynced {
		t.Errorf("Check before sync: err = %v, want %v", err, errNotSynced)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
