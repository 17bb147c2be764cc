package main

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/internal/testcluster"
)

// TestServeWatchQuiet runs what the watch leaves alone, and what it says only once in a
// while, end to end on the real kube-apiserver, kube-scheduler and kube-controller-manager and
// a recording Slack. Workloads stuck Pending past the threshold but opted out (the annotation
// whypending.io/watch: "false" on their namespace, on a Deployment, on a bare pod) or in a
// namespace of watch.excludeNamespaces get no post, while a control Deployment stuck beside
// them does. Three posted ones opted out later (their namespace, a Deployment, a bare pod
// annotated) are each edited once to "No longer watched", saying where, with one line, never
// "Deleted" or "Recovered", and get nothing more; the annotations of the Deployment and of the
// namespace removed, their posts say "Watched again; still stuck". The control post gets exactly one "Still stuck after" reply per remindAfter (a
// pod event between two brings none early) and no edit. A pod held Terminating by a
// finalizer past thresholds.terminating gets one post with finalizer-blocking; the finalizer
// removed, the pod is gone, which was the fix: its post says "Gone after", never "did not
// recover". Nothing is posted twice.
func TestServeWatchQuiet(t *testing.T) {
	const ns, remind = "shop", 6 * time.Second
	c := startWatchCluster(t, 1, ns, func(string) bool { return false })
	cs := c.Client
	ctx := t.Context()
	optOut := map[string]string{watch.OptOut: "false"}
	for _, n := range []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "quiet", Annotations: optOut}}, {ObjectMeta: metav1.ObjectMeta{Name: "batch"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "outlet"}}} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	alertResync = time.Second
	t.Cleanup(func() { alertResync = 0 })
	config := watchConfig(c, "{users: [U0BOB]}", "{digest: [C0OPS]}", "thresholds: {pending: 3s, terminating: 3s}",
		"remindAfter: "+remind.String(), "excludeNamespaces: [batch]")
	fake := newFakeSlack(t, nil)
	startServeOn(t, config, fake)
	byTitle := func(sub string) slackThread { return threadAbout(fake, "C0OPS", sub) }

	// Every one of them asks for 3 CPUs of a 2-CPU node: Pending for good. Only checkout
	// is watched.
	testcluster.Deployment(t, cs, "quiet", "ledger", 1, "3", nil)
	testcluster.Deployment(t, cs, ns, "reports", 1, "3", nil)
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "reports", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"whypending.io/watch":"false"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pendingPod(t, cs, ns, "scratch", optOut)
	pendingPod(t, cs, "batch", "nightly", nil)
	// Watched at first, opted out once posted: the namespace outlet, the Deployment
	// payments, the bare pod solo.
	testcluster.Deployment(t, cs, "outlet", "cart", 1, "3", nil)
	testcluster.Deployment(t, cs, ns, "payments", 1, "3", nil)
	pendingPod(t, cs, ns, "solo", nil)
	created := time.Now().Truncate(time.Second) // creationTimestamp has whole seconds
	testcluster.Deployment(t, cs, ns, "checkout", 1, "3", nil)

	// A running pod held by a finalizer: deleted with a 1 s grace period, and once that
	// passed the kubelet's own final delete (grace 0), which only the finalizer survives.
	draining := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "draining", Namespace: ns, Finalizers: []string{"example.com/hold"}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/shop/draining:1.0"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, draining, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "draining running", func() bool {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "draining", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	deletePod(t, cs, ns, "draining", 1)
	time.Sleep(1500 * time.Millisecond)
	deletePod(t, cs, ns, "draining", 0)
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, "draining", metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("draining after its deletion: %v, %v; want it Terminating, held by its finalizer", p, err)
	}

	// The control is posted; by then the others were as long past the threshold.
	waitUntil(t, 90*time.Second, "the post about checkout", func() bool { return byTitle("checkout").root.TS != "" })
	posted := time.Now()
	if s := shown(byTitle("checkout").root); !strings.Contains(s, "(insufficient-cpu)") {
		t.Fatalf("checkout's post = %s, want insufficient-cpu", s)
	}
	t.Logf("checkout posted %s after creation (threshold 3s)", posted.Sub(created).Round(100*time.Millisecond))
	waitUntil(t, 60*time.Second, "the post about draining", func() bool { return byTitle("draining").root.TS != "" })
	if s := shown(byTitle("draining").root); !strings.Contains(s, "(finalizer-blocking)") || !strings.Contains(s, "example.com/hold") {
		t.Errorf("draining's post = %s, want finalizer-blocking, naming example.com/hold", s)
	}

	// Reminders: one per remindAfter, as replies; the root is not edited.
	reminders := func(want int, at time.Duration) {
		t.Helper()
		time.Sleep(time.Until(posted.Add(at)))
		th := byTitle("checkout")
		n := 0
		for _, r := range th.replies {
			if strings.Contains(r.Text, "Still stuck after") {
				n++
			}
		}
		if n != want || len(th.replies) != want || len(th.updates) != 0 {
			t.Errorf("%s after checkout's post: %d reminders, %d replies, %d edits; want %d reminders, nothing else", at, n, len(th.replies), len(th.updates), want)
		}
	}
	reminders(1, remind*3/2)
	// A pod event between two reminders (here a harmless annotation) brings no reminder
	// before its time.
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=checkout"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("checkout's pods: %d, %v; want 1", len(pods.Items), err)
	}
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pods.Items[0].Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"example.com/touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	reminders(2, remind*5/2)

	// Opted out while posted: each post is edited to say it is no longer watched and where,
	// with one line, never that it recovered or was deleted; nothing comes after.
	later := []struct{ name, where, patch string }{
		{"cart", "on namespace outlet", "namespace"},
		{"payments", "on deploy/payments", "deployment"},
		{"solo", "on pod solo", "pod"},
	}
	before := map[string]int{}
	for _, l := range later {
		waitUntil(t, 60*time.Second, "the post about "+l.name, func() bool { return byTitle(l.name).root.TS != "" })
		before[l.name] = len(byTitle(l.name).replies)
	}
	annotate := []byte(`{"metadata":{"annotations":{"whypending.io/watch":"false"}}}`)
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, "outlet", types.MergePatchType, annotate, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "payments", types.MergePatchType, annotate, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "solo", types.MergePatchType, annotate, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, l := range later {
		waitUntil(t, 60*time.Second, l.name+"'s post edited to no longer watched, with one line", func() bool {
			th := byTitle(l.name)
			return len(th.updates) > 0 && strings.Contains(shown(th.updates[len(th.updates)-1]), "No longer watched") &&
				th.find("No longer watched") >= 0
		})
	}
	time.Sleep(remind + 2*time.Second) // a reminder would be due by now
	for _, l := range later {
		th := byTitle(l.name)
		var after []string
		for _, r := range th.replies[before[l.name]:] {
			after = append(after, r.Text)
		}
		i := th.find("No longer watched") - before[l.name]
		root := shown(th.updates[len(th.updates)-1])
		if i < 0 || len(after)-i != 1 || !strings.Contains(after[i], l.where) || !strings.Contains(after[i], "last seen stuck") {
			t.Errorf("%s opted out by its %s: replies since %q; want one saying it is no longer watched %s, and nothing after", l.name, l.patch, after, l.where)
		}
		for _, r := range after[:max(i, 0)] {
			if !strings.Contains(r, "Still stuck after") {
				t.Errorf("%s opted out: reply %q before the line; want only reminders", l.name, r)
			}
		}
		all := root
		for _, r := range after {
			all += r
		}
		if !strings.Contains(root, l.where) || strings.Contains(all, "Deleted") || strings.Contains(all, "deleted") || strings.Contains(all, "Recovered") {
			t.Errorf("%s opted out by its %s: root %s, replies %q; want it no longer watched %s, never deleted or recovered", l.name, l.patch, root, after, l.where)
		}
	}

	// The opt-outs of the Deployment and of the namespace removed, both still stuck: the
	// same post is open again, with one line that does not say it recovered in between (the
	// namespace's workload sends no event of its own: the namespace's change must do).
	unannotate := []byte(`{"metadata":{"annotations":{"whypending.io/watch":null}}}`)
	if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, "payments", types.MergePatchType, unannotate, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Patch(ctx, "outlet", types.MergePatchType, unannotate, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"payments", "cart"} {
		waitUntil(t, 60*time.Second, name+" watched again", func() bool {
			th := byTitle(name)
			return th.find("Watched again; still stuck: insufficient-cpu") > th.find("No longer watched")
		})
	}

	// Opted out and excluded: stuck all along, never posted.
	for _, name := range []string{"ledger", "reports", "scratch", "nightly"} {
		if th := byTitle(name); th.root.TS != "" {
			t.Errorf("%s is opted out or excluded, but was posted: %s", name, shown(th.root))
		}
	}

	// The finalizer removed: the pod is gone at last, which is what was wanted: its post says
	// it is gone (a recovery), never that it was deleted without recovering.
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "draining", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "draining gone", func() bool {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "draining", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	// The root is edited before the line is posted: both are waited for.
	waitUntil(t, 60*time.Second, "draining's post edited to gone, with one line", func() bool {
		th := byTitle("draining")
		return len(th.updates) > 0 && strings.Contains(shown(th.updates[len(th.updates)-1]), "Gone after") &&
			strings.Contains(th.replies[len(th.replies)-1].Text, "Gone after")
	})
	th := byTitle("draining")
	last := th.replies[len(th.replies)-1].Text
	all := last
	for _, m := range append(th.replies, th.updates...) {
		all += shown(m)
	}
	if !strings.Contains(last, "stuck Terminating (last cause finalizer-blocking)") || strings.Contains(all, "did not recover") {
		t.Errorf("draining gone: last reply %q; want it gone after being stuck Terminating, never 'did not recover'", last)
	}

	postedOnce(t, fake, "C0OPS", 5, "checkout, draining, cart, payments, solo")
}

// pendingPod creates a bare pod asking for 3 CPUs (more than any node has) with annotations.
func pendingPod(t *testing.T, cs kubernetes.Interface, ns, name string, annotations map[string]string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "registry.example.com/" + ns + "/" + name + ":1.0",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deletePod deletes a pod with a grace period of grace seconds.
func deletePod(t *testing.T, cs kubernetes.Interface, ns, name string, grace int64) {
	t.Helper()
	if err := cs.CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
}

// TestServeWatchExcludeAcrossRestarts: a namespace put in watch.excludeNamespaces while its
// workload's post is open takes effect at the next start: the post is edited once to "No
// longer watched … in watch.excludeNamespaces" with one line, and nothing more comes, not
// even across a reminder interval. Taken out of the list again at the start after, the same
// post says "Watched again; still stuck" once, and no second post is made.
func TestServeWatchExcludeAcrossRestarts(t *testing.T) {
	const ns, remind = "shop", 6 * time.Second
	c := startWatchCluster(t, 1, ns, func(string) bool { return false })
	if _, err := c.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "outlet"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alertResync = time.Second
	t.Cleanup(func() { alertResync = 0 })
	config := func(exclude string) string {
		return watchConfig(c, "{users: [U0BOB]}", "{digest: [C0OPS]}", "thresholds: {pending: 3s}",
			"remindAfter: "+remind.String(), "excludeNamespaces: "+exclude)
	}
	fake := newFakeSlack(t, nil)
	cart := func() slackThread { return threadAbout(fake, "C0OPS", "cart") }
	testcluster.Deployment(t, c.Client, "outlet", "cart", 1, "3", nil) // 3 CPUs of a 2-CPU node

	first := startServeOn(t, config("[]"), fake)
	waitUntil(t, 90*time.Second, "the post about cart", func() bool { return cart().root.TS != "" })
	first.stop()

	excluded := startServeOn(t, config("[outlet]"), fake)
	waitUntil(t, 60*time.Second, "cart's post edited to no longer watched", func() bool {
		th := cart()
		return len(th.updates) > 0 && strings.Contains(shown(th.updates[len(th.updates)-1]), "No longer watched")
	})
	time.Sleep(remind + 2*time.Second) // a reminder would be due by now
	th := cart()
	if root := shown(th.updates[len(th.updates)-1]); !strings.Contains(root, "namespace outlet is in watch.excludeNamespaces") {
		t.Errorf("cart's root = %s, want it no longer watched, outlet being in watch.excludeNamespaces", root)
	}
	var lines []string
	for _, r := range th.replies {
		if !strings.Contains(r.Text, "Still stuck after") {
			lines = append(lines, r.Text)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "No longer watched") || th.replies[len(th.replies)-1].Text != lines[0] {
		t.Errorf("cart's replies = %+v; want one 'No longer watched' line, last", th.replies)
	}
	excluded.stop()

	startServeOn(t, config("[]"), fake)
	waitUntil(t, 60*time.Second, "cart watched again", func() bool {
		th := cart()
		return th.find("Watched again; still stuck: insufficient-cpu") > th.find("No longer watched")
	})
	if n := len(fake.threads("C0OPS")); n != 1 {
		t.Errorf("%d threads in C0OPS, want cart's one", n)
	}
}
