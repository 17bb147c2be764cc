package collect

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// TestWatchWorkloads follows the workload cache as the watch does, on a real API server: a
// StatefulSet there before is told as added, a FailedCreate event about it tells of it again
// (a refused controller changes nothing else the cache sees), its events are read from the
// cache by UID, and its deletion is told as gone. Events of other reasons tell nothing.
func TestWatchWorkloads(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	ctx := t.Context()
	const ns = "journal"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb := map[string]string{"app": "journal"}
	sts, err := c.Client.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "journal", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: lb}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: lb}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/journal:1"}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	col, err := NewCached(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}

	type told struct {
		kind triage.Kind
		name string
		gone bool
	}
	var (
		mu  sync.Mutex
		got []told
	)
	remove, err := col.WatchWorkloads(func(kind triage.Kind, obj runtime.Object, gone bool) {
		m := obj.(metav1.Object)
		mu.Lock()
		got = append(got, told{kind, m.GetName(), gone})
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	count := func(want told) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, g := range got {
			if g == want {
				n++
			}
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; told %v", what, got)
			}
		}
	}
	added := told{triage.KindStatefulSet, "journal", false}
	waitFor("the StatefulSet as added", func() bool { return count(added) >= 1 })

	event := func(name, reason, typ string) {
		t.Helper()
		now := metav1.Now()
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: ns, Name: "journal", UID: sts.UID},
			Reason:         reason, Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "statefulset-controller"},
			Message: "create Pod journal-0 in StatefulSet journal failed error: pods \"journal-0\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=0, limited: pods=0"}
		if _, err := c.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// An event of another reason first: it must tell nothing, so the FailedCreate after it is
	// the one that tells.
	before := count(added)
	event("journal.other", "RecreatingFailedPod", corev1.EventTypeNormal)
	event("journal.failed", "FailedCreate", corev1.EventTypeWarning)
	waitFor("the StatefulSet told again on its FailedCreate", func() bool { return count(added) == before+1 })
	waitFor("its events in the cache", func() bool { return len(col.CachedWorkloadEvents(sts.UID)) == 2 })
	if evs := col.CachedWorkloadEvents(sts.UID); evs[0].Reason != "FailedCreate" && evs[1].Reason != "FailedCreate" {
		t.Errorf("cached events = %+v, want the FailedCreate among them", evs)
	}
	if obj, ok := col.CachedWorkload(triage.KindStatefulSet, ns, "journal"); !ok || obj.(*appsv1.StatefulSet).UID != sts.UID {
		t.Errorf("CachedWorkload = %v, %v; want the StatefulSet", obj, ok)
	}
	time.Sleep(time.Second)
	if n := count(added); n != before+1 {
		t.Errorf("told %d times after the two events, want %d (the other event tells nothing)", n, before+1)
	}

	if err := c.Client.AppsV1().StatefulSets(ns).Delete(ctx, "journal", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the StatefulSet as gone", func() bool { return count(told{triage.KindStatefulSet, "journal", true}) == 1 })
}

// TestViewIntoReusesNothingOfThePodBefore: WatchPods gives every event the same view, so a
// view of one pod must show nothing of the pod shown before it (labels, owners, a deletion,
// conditions), and each view's conditions carry their own transition times.
func TestViewIntoReusesNothingOfThePodBefore(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	grace := int64(30)
	first := newLeanPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cart-1", Namespace: "shop", Labels: map[string]string{"app": "cart"}, DeletionTimestamp: &at,
			DeletionGracePeriodSeconds: &grace, OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "cart-5d4f"}}},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at}}},
	})
	later := metav1.NewTime(at.Add(time.Hour))
	second := newLeanPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: "jobs"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", LastTransitionTime: later}}},
	})
	var view corev1.Pod
	first.viewInto(&view)
	if view.Name != "cart-1" || view.Labels["app"] != "cart" || view.DeletionTimestamp == nil || view.Spec.NodeName != "node-1" ||
		len(view.Status.Conditions) != 3 || !view.Status.Conditions[2].LastTransitionTime.Equal(&at) {
		t.Fatalf("view of cart-1 = %+v", view)
	}
	second.viewInto(&view)
	if view.Name != "batch" || view.Namespace != "jobs" || view.Labels != nil || view.OwnerReferences != nil || view.DeletionTimestamp != nil ||
		view.DeletionGracePeriodSeconds != nil || view.Spec.NodeName != "" || view.Status.Phase != corev1.PodPending {
		t.Errorf("view of batch after cart-1 = %+v", view.ObjectMeta)
	}
	if len(view.Status.Conditions) != 1 || view.Status.Conditions[0].Reason != "Unschedulable" || !view.Status.Conditions[0].LastTransitionTime.Equal(&later) {
		t.Errorf("conditions of batch = %+v", view.Status.Conditions)
	}
	// The view writes times into its own conditions, never into the cache's.
	if again := first.watchView(); !again.Status.Conditions[0].LastTransitionTime.Equal(&at) {
		t.Errorf("cart-1 after the reuse: %+v", again.Status.Conditions)
	}
}

// TestWatchPods follows the pod cache as the watch does, on a real API server: every pod there
// before is told as added before WatchPods returns, a change and a deletion after it are told,
// two handlers each get every event, calls to one handler never overlap, and a removed handler
// is told nothing more.
func TestWatchPods(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	ctx := t.Context()
	const ns = "orders"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/orders:1"}}}}
	}
	for i := range 50 {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("before-%02d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	col, err := NewCached(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}

	type handler struct {
		mu      sync.Mutex
		told    map[string][]string // pod -> "added" / "gone", in order
		inCall  atomic.Bool
		overlap atomic.Bool
	}
	watch := func() (*handler, func()) {
		h := &handler{told: map[string][]string{}}
		remove, err := col.WatchPods(func(p *corev1.Pod, gone bool) {
			if !h.inCall.CompareAndSwap(false, true) {
				h.overlap.Store(true)
			}
			defer h.inCall.Store(false)
			what := "added"
			if gone {
				what = "gone"
			}
			h.mu.Lock()
			h.told[p.Name] = append(h.told[p.Name], what)
			h.mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		return h, remove
	}
	told := func(h *handler, name string) []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Clone(h.told[name])
	}

	// Pods created while the handlers are added: each is told by the cache's first look or
	// by its event (or both), never missed.
	during := make(chan error, 1)
	go func() {
		for i := range 20 {
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("during-%02d", i)), metav1.CreateOptions{}); err != nil {
				during <- err
				return
			}
		}
		during <- nil
	}()
	a, removeA := watch()
	for i := range 50 {
		if got := told(a, fmt.Sprintf("before-%02d", i)); len(got) != 1 || got[0] != "added" {
			t.Fatalf("before-%02d when WatchPods returned: told %v, want added once", i, got)
		}
	}
	b, removeB := watch()
	defer removeB()
	if err := <-during; err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	for i := range 20 {
		name := fmt.Sprintf("during-%02d", i)
		waitFor(name+" told to both", func() bool { return len(told(a, name)) > 0 && len(told(b, name)) > 0 })
	}

	// A label change is told as a change; after A is removed, only B is told the deletion.
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "before-07", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels = map[string]string{"tier": "web"}
	if _, err := c.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the change told to both", func() bool { return len(told(a, "before-07")) == 2 && len(told(b, "before-07")) == 2 })
	removeA()
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "before-07", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitFor("the deletion told to B", func() bool { got := told(b, "before-07"); return len(got) > 0 && got[len(got)-1] == "gone" })
	time.Sleep(time.Second)
	if got := told(a, "before-07"); len(got) != 2 {
		t.Errorf("removed handler A was told %v about before-07, want nothing after its removal (added, added)", got)
	}
	if a.overlap.Load() || b.overlap.Load() {
		t.Errorf("a handler was called while its last call was running (A %v, B %v)", a.overlap.Load(), b.overlap.Load())
	}
}
