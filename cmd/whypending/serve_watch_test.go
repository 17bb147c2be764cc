package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/proc"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// watchKubelet plays the kubelet of every node until ctx ends: a pod bound to a node is
// marked Running and Ready, unless its name is in skip (the test sets those pods' status).
func watchKubelet(ctx context.Context, cs kubernetes.Interface, ns string, skip func(name string) bool) {
	playKubelet(ctx, cs, ns, skip, testcluster.MarkRunning)
}

// playKubelet is watchKubelet with the status mark gives a bound pod.
func playKubelet(ctx context.Context, cs kubernetes.Interface, ns string, skip func(name string) bool, mark func(*corev1.Pod, metav1.Time)) {
	for ctx.Err() == nil {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			now := metav1.Now()
			for _, p := range list.Items {
				if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodRunning || p.DeletionTimestamp != nil || skip(p.Name) {
					continue
				}
				mark(&p, now)
				_, _ = cs.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// leader is the replica among rs whose log says it leads the watch now.
func leader(rs ...*served) *served {
	for _, r := range rs {
		logs := r.logs.String()
		if i := strings.LastIndex(logs, `"leading the watch"`); i >= 0 && !strings.Contains(logs[i:], "lost the watch lease") {
			return r
		}
	}
	return nil
}

// startWatchCluster starts the real kube-apiserver, kube-scheduler and kube-controller-manager
// with the store installed, nodes Ready 2-CPU nodes node-1, node-2, …, namespace ns, and a
// played kubelet for ns (watchKubelet; the pods skip names are the test's) until the test ends.
func startWatchCluster(t *testing.T, nodes int, ns string, skip func(name string) bool) *testenv.Cluster {
	t.Helper()
	c := testcluster.Start(t, testenv.Options{Scheduler: true, ControllerManager: true})
	installStore(t, c, "whypending")
	for i := range nodes {
		testcluster.ReadyNode(t, c.Client, fmt.Sprintf("node-%d", i+1), "2", "300")
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kctx, stopKubelet := context.WithCancel(t.Context())
	t.Cleanup(stopKubelet)
	go watchKubelet(kctx, c.Client, ns, skip)
	return c
}

// watchConfig is serve's config (without a chat platform's section) for the watch tests:
// cluster test at c, the store, approvers (YAML under approvals.approvers), channels (YAML,
// e.g. "{digest: [C0OPS]}"), the watch on with settings (YAML lines under watch:).
func watchConfig(c *testenv.Cluster, approvers, channels string, settings ...string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
clusters:
- name: test
  kubeconfig: %s
store: {namespace: whypending}
approvals:
  approvers: %s
channels: %s
watch:
  enabled: true
`, c.KubeconfigPath, approvers, channels) + "  " + strings.Join(settings, "\n  ") + "\n"
}

// threadAbout is the channel's thread whose root mentions sub (zero when none does).
func threadAbout(fake *fakeSlack, channel, sub string) slackThread {
	for _, th := range fake.threads(channel) {
		if strings.Contains(th.root.Text, sub) {
			return th
		}
	}
	return slackThread{}
}

// postedOnce waits a few seconds for anything more to come, then checks that the channel has
// want threads (named in what) and that no message was posted twice, and logs the threads.
func postedOnce(t *testing.T, fake *fakeSlack, channel string, want int, what string) []slackThread {
	t.Helper()
	time.Sleep(5 * time.Second)
	ths := fake.threads(channel)
	if len(ths) != want {
		t.Errorf("%d posts, want %d (%s)", len(ths), want, what)
	}
	for mark, n := range fake.marks() {
		if n != 1 {
			t.Errorf("message %s posted %d times", mark, n)
		}
	}
	for _, th := range ths {
		t.Logf("root: %s", th.root.Text)
		for _, u := range th.updates {
			t.Logf("  edit: %s", u.Text)
		}
		for _, r := range th.replies {
			t.Logf("  reply: %s", r.Text)
		}
	}
	return ths
}

// TestServeWatch runs the watch end to end on the real kube-apiserver, kube-scheduler and
// kube-controller-manager, two serve replicas and a recording Slack: a Deployment scaled past
// the cluster's cpu gets one post with insufficient-cpu after the (short) threshold; the
// leader is killed and a third replica started while a second Deployment gets stuck, which the
// new leader posts once, nothing posted twice; the first Deployment's requests lowered, its
// post is edited to recovered with one line; a pod whose cause changes from insufficient-cpu
// to an image pull error gets one edit and one reply.
func TestServeWatch(t *testing.T) {
	const ns = "shop"
	c := startWatchCluster(t, 2, ns, func(name string) bool { return name == "importer" })
	cs := c.Client
	ctx := t.Context()

	var replica atomic.Int32
	ledgerIdentity = func() proc.Identity {
		return proc.Identity{Host: fmt.Sprintf("whypending-%d", replica.Add(1)), PID: 1, Start: 1}
	}
	alertResync = time.Second
	watchLeaseTiming.Duration, watchLeaseTiming.Renew, watchLeaseTiming.Retry = 3*time.Second, 2*time.Second, 500*time.Millisecond
	t.Cleanup(func() {
		ledgerIdentity, alertResync = proc.Self, 0
		watchLeaseTiming.Duration, watchLeaseTiming.Renew, watchLeaseTiming.Retry = 0, 0, 0
	})
	config := watchConfig(c, "{users: [U0BOB]}", "{digest: [C0OPS]}", "thresholds: {pending: 4s, imagePull: 2s}", "remindAfter: 1h")
	fake := newFakeSlack(t, nil)
	r1, r2 := startServeOn(t, config, fake), startServeOn(t, config, fake)

	// 1500m pods on 2-CPU nodes: two fit, the third stays Pending.
	created := time.Now().Truncate(time.Second) // creationTimestamp has whole seconds
	testcluster.Deployment(t, cs, ns, "checkout", 3, "1500m", nil)
	waitUntil(t, 90*time.Second, "one post about checkout", func() bool { return len(fake.threads("C0OPS")) >= 1 })
	posted := time.Since(created)
	th := fake.threads("C0OPS")
	if len(th) != 1 || !strings.Contains(shown(th[0].root), "insufficient-cpu") || !strings.Contains(shown(th[0].root), "checkout") {
		t.Fatalf("posts = %d, first %s; want one about checkout with insufficient-cpu", len(th), shown(th[0].root))
	}
	if posted < 4*time.Second {
		t.Errorf("posted %s after the Deployment was created, before the 4s threshold", posted)
	}
	t.Logf("checkout posted %s after creation (threshold 4s)", posted)

	// Fail over: kill the leader; while no replica leads, a second Deployment gets stuck; a
	// third replica starts (a restart).
	var lead *served
	waitUntil(t, 30*time.Second, "a watch leader", func() bool { lead = leader(r1, r2); return lead != nil })
	other := r1
	if lead == r1 {
		other = r2
	}
	lead.stop()
	testcluster.Deployment(t, cs, ns, "search", 1, "3", nil)
	r3 := startServeOn(t, config, fake)
	waitUntil(t, 90*time.Second, "the post about search from the new leader", func() bool { return len(fake.threads("C0OPS")) >= 2 })
	if l := leader(other, r3); l == nil {
		t.Errorf("no replica leads after the failover")
	}

	// The requests lowered: the rollout's pods fit, checkout recovers.
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "checkout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
	if _, err := cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	byTitle := func(sub string) slackThread { return threadAbout(fake, "C0OPS", sub) }
	waitUntil(t, 120*time.Second, "checkout's post edited to recovered", func() bool {
		th := byTitle("checkout")
		return len(th.updates) > 0 && strings.Contains(th.updates[len(th.updates)-1].Text, "Recovered after") && len(th.replies) == 1
	})
	if th := byTitle("checkout"); !strings.Contains(th.replies[0].Text, "Recovered after") {
		t.Errorf("checkout's reply = %q, want the recovery line", th.replies[0].Text)
	}

	// search is deleted while stuck: its post says so, never "Recovered".
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, "search", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 120*time.Second, "search's post edited to deleted", func() bool {
		th := byTitle("search")
		return len(th.updates) > 0 && strings.Contains(shown(th.updates[len(th.updates)-1]), "Deleted while stuck") && len(th.replies) == 1
	})
	if th := byTitle("search"); !strings.Contains(th.replies[0].Text, "was deleted after") || strings.Contains(th.replies[0].Text+shown(th.updates[len(th.updates)-1]), "Recovered") {
		t.Errorf("search deleted: reply %q, root %s; want the deletion, no recovery", th.replies[0].Text, shown(th.updates[len(th.updates)-1]))
	}

	// A bare pod whose cause changes: Pending for cpu, then bound and pulling an image that
	// does not exist.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "importer", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "registry.example.com/shop/importer:9.9",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 90*time.Second, "the post about importer", func() bool { return byTitle("importer").root.TS != "" })
	if th := byTitle("importer"); !strings.Contains(shown(th.root), "insufficient-cpu") {
		t.Errorf("importer's post = %s, want insufficient-cpu", shown(th.root))
	}
	bindPulling(t, cs, ns, "importer", "node-1")
	waitUntil(t, 90*time.Second, "importer's post edited with one reply", func() bool {
		th := byTitle("importer")
		return len(th.updates) > 0 && len(th.replies) == 1
	})
	th1 := byTitle("importer")
	if !strings.Contains(th1.replies[0].Text, "The cause changed: insufficient-cpu →") || strings.Contains(shown(th1.updates[len(th1.updates)-1]), "insufficient-cpu") && !strings.Contains(shown(th1.updates[len(th1.updates)-1]), "image") {
		t.Errorf("importer: reply %q, edit %s; want the cause change to an image pull error", th1.replies[0].Text, shown(th1.updates[len(th1.updates)-1]))
	}

	// Snooze: the 1 h button is on the root; a snooze of a few seconds (the same button's
	// wire form) holds back the next cause change, and its end posts once.
	btn := rootButton(t, fake, th1.root.TS, "snooze:1h0m0s")
	if _, ok := chat.ParseSnoozeButton(slack.ParseActionID(btn.ActionID), btn.Value); !ok {
		t.Fatalf("snooze button %q %q does not parse", btn.ActionID, btn.Value)
	}
	short := *btn
	short.ActionID = "snooze:6s"
	r3.client.click(t, "U0ALICE", th1.root.TS, &short)
	if n := fake.answer(t, "/clicks/1"); !strings.Contains(n.Text, "Snoozed importer -n shop until") {
		t.Fatalf("snooze notice = %q", n.Text)
	}
	snoozedAt := time.Now()
	waitUntil(t, 30*time.Second, "the root saying it is snoozed", func() bool {
		th := byTitle("importer")
		return strings.Contains(shown(th.updates[len(th.updates)-1]), "snoozed until")
	})
	crashLooping(t, cs, ns, "importer")
	time.Sleep(time.Until(snoozedAt.Add(5 * time.Second)))
	if th := byTitle("importer"); len(th.replies) != 1 {
		t.Errorf("%d replies while snoozed, want 1 (the cause change before the snooze)", len(th.replies))
	}
	waitUntil(t, 60*time.Second, "one reply when the snooze ends", func() bool { return len(byTitle("importer").replies) == 2 })
	if th := byTitle("importer"); !strings.Contains(th.replies[1].Text, "The snooze ended; still stuck after") || strings.Contains(th.replies[1].Text, "image-not-found") {
		t.Errorf("reply at the snooze's end = %q, want the new cause", th.replies[1].Text)
	}
	if !strings.Contains(r3.logs.String()+other.logs.String(), `"msg":"audit: watch post snoozed"`) {
		t.Errorf("no audit line for the snooze")
	}

	// Nothing more comes, and nothing was posted twice.
	postedOnce(t, fake, "C0OPS", 3, "checkout, search, importer")
	_, metrics := other.get(t, "/metrics")
	if l := leader(other, r3); l != nil {
		_, metrics = l.get(t, "/metrics")
	}
	for _, want := range []string{"whypending_watch_posts_total", "whypending_watch_stuck", "whypending_watch_watched_objects"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestServeWatchControllers runs the watch's controller states end to end on the real
// kube-apiserver, kube-scheduler and kube-controller-manager: a Deployment and a StatefulSet in
// a namespace whose ResourceQuota allows no pods have no pod at all (their controllers are
// refused), and get one post each with resource-quota-exceeded after the (short) failedCreate
// threshold; the quota raised, their pods come up and the posts are edited to recovered with
// one line each. A
// Deployment whose pods never become ready passes its progressDeadlineSeconds and gets one
// post with rollout-stalled (the controller's own verdict: a sure answer), and nothing else is
// posted.
func TestServeWatchControllers(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{Scheduler: true, ControllerManager: true})
	installStore(t, c, "whypending")
	cs := c.Client
	ctx := t.Context()
	testcluster.ReadyNode(t, cs, "node-1", "4", "110")
	for _, ns := range []string{"ledger", "search"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kctx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	none := func(string) bool { return false }
	go watchKubelet(kctx, cs, "ledger", none)
	// The search pods start but never pass their readiness probe.
	go playKubelet(kctx, cs, "search", none, func(p *corev1.Pod, now metav1.Time) {
		testcluster.MarkRunning(p, now)
		for i := range p.Status.Conditions {
			if ty := p.Status.Conditions[i].Type; ty == corev1.PodReady || ty == corev1.ContainersReady {
				p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = corev1.ConditionFalse, "ContainersNotReady"
			}
		}
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = false
		}
	})

	// A quota of no pods, counted by the quota controller before anything is refused against
	// it (until then the API server refuses with "status unknown for quota").
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: "ledger"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if _, err := cs.CoreV1().ResourceQuotas("ledger").Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "the quota controller to count the quota", func() bool {
		q, err := cs.CoreV1().ResourceQuotas("ledger").Get(ctx, "pods", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil
	})

	alertResync = time.Second
	t.Cleanup(func() { alertResync = 0 })
	config := watchConfig(c, "{users: [U0BOB]}", "{digest: [C0OPS]}", "thresholds: {pending: 1h, failedCreate: 4s}")
	fake := newFakeSlack(t, nil)
	startServeOn(t, config, fake)
	byTitle := func(sub string) slackThread { return threadAbout(fake, "C0OPS", sub) }

	// A Deployment (its ReplicaSet's ReplicaFailure condition) and a StatefulSet (its
	// FailedCreate events: it has no such condition) are refused their pods.
	created := time.Now().Truncate(time.Second)
	testcluster.Deployment(t, cs, "ledger", "ledger", 2, "100m", nil)
	journal := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "journal", Namespace: "ledger"}, Spec: appsv1.StatefulSetSpec{
		Replicas: new(int32(1)), ServiceName: "journal", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "journal"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "journal"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/ledger/journal:1.0"}}}}}}
	if _, err := cs.AppsV1().StatefulSets("ledger").Create(ctx, journal, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const deploy, sts = "Deployment ledger/ledger", "StatefulSet ledger/journal"
	waitUntil(t, 90*time.Second, "a post about ledger or journal", func() bool {
		return byTitle(deploy).root.TS != "" || byTitle(sts).root.TS != ""
	})
	posted := time.Since(created)
	waitUntil(t, 90*time.Second, "one post about each of ledger and journal", func() bool {
		return byTitle(deploy).root.TS != "" && byTitle(sts).root.TS != ""
	})
	for _, w := range []string{deploy, sts} {
		if th := byTitle(w); !strings.Contains(shown(th.root), "resource-quota-exceeded") {
			t.Errorf("%s's post = %s, want resource-quota-exceeded", w, shown(th.root))
		}
	}
	if posted < 4*time.Second {
		t.Errorf("first post %s after the workloads were created, before the 4s failedCreate threshold", posted)
	}
	t.Logf("first of ledger and journal posted %s after creation (threshold 4s)", posted)
	if pods, err := cs.CoreV1().Pods("ledger").List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Fatalf("namespace ledger has %d pods (err %v); the posts must come from the controllers' state, with no pod", len(pods.Items), err)
	}

	// The quota raised: the controllers' next retries create the pods, they run, and the posts
	// are edited to recovered.
	q, err := cs.CoreV1().ResourceQuotas("ledger").Get(ctx, "pods", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("10")
	if _, err := cs.CoreV1().ResourceQuotas("ledger").Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{deploy, sts} {
		waitUntil(t, 180*time.Second, w+"'s post edited to recovered", func() bool {
			th := byTitle(w)
			return len(th.updates) > 0 && strings.Contains(th.updates[len(th.updates)-1].Text, "Recovered after") && len(th.replies) == 1
		})
		if th := byTitle(w); !strings.Contains(th.replies[0].Text, "Recovered after") {
			t.Errorf("%s's reply = %q, want the recovery line", w, th.replies[0].Text)
		}
	}

	// Pods that never become ready: the rollout passes its deadline.
	testcluster.Deployment(t, cs, "search", "search", 1, "100m", nil)
	if _, err := cs.AppsV1().Deployments("search").Patch(ctx, "search", types.MergePatchType,
		[]byte(`{"spec":{"progressDeadlineSeconds":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 90*time.Second, "one post about search", func() bool { return byTitle("search").root.TS != "" })
	if th := byTitle("search"); !strings.Contains(shown(th.root), "rollout-stalled") {
		t.Errorf("search's post = %s, want rollout-stalled", shown(th.root))
	}
	d, err := cs.AppsV1().Deployments("search").Get(ctx, "search", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := triage.RolloutStalled(d); c == nil {
		t.Errorf("search posted but its Deployment is not past its deadline: %+v", d.Status.Conditions)
	}

	// Nothing more comes, and nothing was posted twice.
	postedOnce(t, fake, "C0OPS", 3, "ledger, journal, search")
}

// crashLooping gives pod the status of a container that keeps exiting.
func crashLooping(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: p.Spec.Containers[0].Image, RestartCount: 5,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: "back-off 2m40s restarting failed container=app pod=" + name}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			StartedAt: now, FinishedAt: now}}}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bindPulling binds pod to node and gives it the status and event a kubelet gives a pod whose
// image does not exist.
func bindPulling(t *testing.T, cs kubernetes.Interface, ns, name, node string) {
	t.Helper()
	ctx := t.Context()
	if err := cs.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	msg := `Back-off pulling image "registry.example.com/shop/importer:9.9": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "registry.example.com/shop/importer:9.9": not found`
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "registry.example.com/shop/importer:9.9",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: msg}}}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name + ".pull", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name, UID: types.UID(p.UID), FieldPath: "spec.containers{app}"},
		Reason:         "Failed", Type: corev1.EventTypeWarning, Count: 3, FirstTimestamp: now, LastTimestamp: now,
		Source:  corev1.EventSource{Component: "kubelet", Host: node},
		Message: `Failed to pull image "registry.example.com/shop/importer:9.9": rpc error: code = NotFound desc = failed to pull and unpack image "registry.example.com/shop/importer:9.9": registry.example.com/shop/importer:9.9: not found`}
	if _, err := cs.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestServeWatchMassEvent: 200 pods of one node stuck at once (each its own workload) give
// the channel at most maxPostsPer10m posts of their own and one roll-up message that lists
// the rest, edited as it grows; a pod whose answer is uncertain is not posted on its own but
// counted on the roll-up's line with the command that shows it.
func TestServeWatchMassEvent(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	installStore(t, c, "whypending")
	cs := c.Client
	ctx := t.Context()
	testcluster.ReadyNode(t, cs, "node-3", "64", "300")
	for _, ns := range []string{"shop", "batch"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	alertResync = time.Second
	t.Cleanup(func() { alertResync = 0 })
	config := watchConfig(c, "{users: [U0BOB]}", "{digest: [C0OPS]}", "thresholds: {pending: 3s, imagePull: 2s}", "maxPostsPer10m: 10") +
		`digest: {schedule: "* * * * *"}` + "\n"
	fake := newFakeSlack(t, nil)
	startServeOn(t, config, fake)

	// One pod bound to the node with no status and no event: nothing says why it waits.
	unclear := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "batch"}, Spec: corev1.PodSpec{NodeName: "node-3",
		Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/batch/nightly:1"}}}}
	if _, err := cs.CoreV1().Pods("batch").Create(ctx, unclear, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		name := fmt.Sprintf("worker-%03d", i)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/shop/importer:9.9"}}}}
		if _, err := cs.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bindPulling(t, cs, "shop", name, "node-3")
	}
	rollupOf := func() (slackThread, int) {
		var r slackThread
		own := 0
		for _, th := range fake.threads("C0OPS") {
			if strings.Contains(th.root.Text, "more stuck") || strings.Contains(th.root.Text, "more stuck workload") {
				r = th
			} else {
				own++
			}
		}
		return r, own
	}
	seen := "no roll-up"
	defer func() {
		if t.Failed() {
			_, own := rollupOf()
			t.Logf("at the end: %d posts of their own; the roll-up said: %s", own, seen)
		}
	}()
	waitUntil(t, 180*time.Second, "the roll-up listing 190 held back and 1 without a clear cause", func() bool {
		r, _ := rollupOf()
		if r.root.TS == "" {
			return false
		}
		last := r.root
		if len(r.updates) > 0 {
			last = r.updates[len(r.updates)-1]
		}
		seen = fmt.Sprintf("%s (%d edits)", chat.Cut(last.Text, 300), len(r.updates))
		return strings.Contains(last.Text, "191 more stuck workloads")
	})
	r, own := rollupOf()
	last := r.updates[len(r.updates)-1]
	if own != 10 {
		t.Errorf("%d posts of their own, want 10 (maxPostsPer10m)", own)
	}
	if s := shown(last); !strings.Contains(s, "1 more stuck workload without a clear cause: `/why-pending -n batch --all`") {
		t.Errorf("roll-up = %s, want the line about the uncertain pod", s)
	}
	for _, th := range fake.threads("C0OPS") {
		if strings.Contains(th.root.Text, "nightly") {
			t.Errorf("the uncertain pod got a post of its own: %s", th.root.Text)
		}
	}
	roots := 0
	for _, m := range fake.marks() {
		roots += m
	}
	t.Logf("messages posted: %d (roots %d, roll-up edits %d); roll-up: %s", roots, own+1, len(r.updates), last.Text)
	if roots != 11 {
		t.Errorf("%d messages posted, want 11 (10 posts and the roll-up)", roots)
	}

	// The daily digest (here every minute) lists the pod without a clear cause, read from the
	// ledger's roll-up, below its IPAM report (which this cluster, with Calico's CRDs and no
	// ClusterInformation, cannot give).
	var digestPost slackMessage
	waitUntil(t, 90*time.Second, "a digest listing the stuck pod without a clear cause", func() bool {
		for _, m := range fake.digests("C0OPS") {
			if strings.Contains(shown(m), "Stuck without a clear cause") {
				digestPost = m
				return true
			}
		}
		return false
	})
	if s := shown(digestPost); !strings.Contains(s, "Stuck without a clear cause (1, not posted on their own)") || !strings.Contains(s, "/why-pending nightly -n batch") ||
		strings.Contains(s, "worker-") {
		t.Errorf("digest = %s, want the uncertain pod nightly alone (the held-back workers have a sure cause)", s)
	}
}

// digests are the messages posted to channel outside any ledger thread (the digest's).
func (f *fakeSlack) digests(channel string) []slackMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slackMessage
	for _, m := range f.messages {
		if m.Method == "chat.postMessage" && m.Channel == channel && m.Mark == "" && m.ThreadTS == "" {
			out = append(out, m)
		}
	}
	return out
}
