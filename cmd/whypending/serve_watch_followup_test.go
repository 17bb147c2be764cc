package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// kubeletLogs plays the log endpoint of node's kubelet: a TLS server answering GET
// /containerLogs/NS/POD/CONTAINER?previous=true with logs["NS/POD/CONTAINER"], and the
// node's status pointing the kube-apiserver at it (InternalIP 127.0.0.1 and its port). The
// API server proxies pods/log there; without a kubelet CA configured it does not check the
// kubelet's certificate.
func kubeletLogs(t *testing.T, cs kubernetes.Interface, node string, logs map[string]string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.URL.Path, "/containerLogs/")
		text, known := logs[key]
		if !ok || !known || r.URL.Query().Get("previous") != "true" {
			http.Error(w, "no such container log", http.StatusNotFound)
			return
		}
		_, _ = fmt.Fprint(w, text)
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	n, err := cs.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(p)
	if _, err := cs.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// buttonIDs are the action IDs of m's buttons.
func buttonIDs(m slackMessage) []string {
	var out []string
	for _, b := range m.Blocks.BlockSet {
		if ab, ok := b.(*slackgo.ActionBlock); ok {
			for _, el := range ab.Elements.ElementSet {
				if btn, ok := el.(*slackgo.ButtonBlockElement); ok {
					out = append(out, slack.ParseActionID(btn.ActionID))
				}
			}
		}
	}
	return out
}

// TestServeWatchFollowups runs the watch posts' follow-up buttons end to end on the real
// kube-apiserver, kube-scheduler and kube-controller-manager and a recording Slack: a post for
// a Pending Deployment has Events, Nodes and Re-check now (no Logs); a signed click on Events
// puts the pod's events in the post's thread, Nodes the per-node table; an unsigned or
// forged click is refused and posts nothing; Logs on a crash-looping pod puts its previous
// container's log in the thread, escaped, in a code block; Re-check now after the cause
// changed (faster than the watch's own threshold for the new state) edits the post once and
// replies once, however often it is clicked at once.
func TestServeWatchFollowups(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{Scheduler: true, ControllerManager: true})
	installStore(t, c, "whypending")
	cs := c.Client
	ctx := t.Context()
	testcluster.ReadyNode(t, cs, "node-1", "2", "300")
	const ns = "shop"
	kubeletLogs(t, cs, "node-1", map[string]string{ns + "/worker/app": "starting worker\npanic: <!here> *boom* ```closed```\n"})
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kctx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	go watchKubelet(kctx, cs, ns, func(name string) bool { return name == "importer" || name == "worker" })
	alertResync = time.Second
	t.Cleanup(func() { alertResync = 0 })
	config := fmt.Sprintf(`listen: 127.0.0.1:0
clusters:
- name: test
  kubeconfig: %s
store: {namespace: whypending}
approvals:
  approvers: {users: [U0BOB]}
channels:
  digest: [C0OPS]
watch:
  enabled: true
  thresholds: {pending: 3s, imagePull: 1h}
  remindAfter: 1h
`, c.KubeconfigPath)
	fake := newFakeSlack(t, nil)
	r := startServeOn(t, config, fake)
	byTitle := func(sub string) slackThread {
		for _, th := range fake.threads("C0OPS") {
			if strings.Contains(th.root.Text, sub) {
				return th
			}
		}
		return slackThread{}
	}
	// reply waits for a reply in the thread of the post about subject that shows want.
	reply := func(subject, want string) slackMessage {
		t.Helper()
		var found slackMessage
		waitUntil(t, 60*time.Second, fmt.Sprintf("a reply about %s showing %q", subject, want), func() bool {
			for _, m := range byTitle(subject).replies {
				if strings.Contains(shown(m), want) {
					found = m
					return true
				}
			}
			return false
		})
		return found
	}

	// 1500m pods on a 2-CPU node: one fits, the other stays Pending.
	testcluster.Deployment(t, cs, ns, "checkout", 2, "1500m", nil)
	waitUntil(t, 90*time.Second, "the post about checkout", func() bool { return byTitle("checkout").root.TS != "" })
	root := byTitle("checkout").root
	ids := strings.Join(buttonIDs(root), " ")
	for _, want := range []string{"snooze:1h0m0s", "followup:events", "followup:nodes", "followup:recheck"} {
		if !strings.Contains(ids, want) {
			t.Errorf("checkout's post has buttons %s, want %s", ids, want)
		}
	}
	if strings.Contains(ids, "followup:logs") {
		t.Errorf("checkout's post has a Logs button (%s), but no container of it ran", ids)
	}

	// Events: the scheduler's FailedScheduling of the Pending pod, in the thread.
	events := rootButton(t, fake, root.TS, "followup:events")
	r.client.click(t, "U0ALICE", root.TS, events)
	ev := reply("checkout", "Events of deploy/checkout")
	if s := shown(ev); !strings.Contains(s, "FailedScheduling") || ev.ThreadTS != root.TS {
		t.Errorf("events reply (thread %q, root %q) = %s, want the FailedScheduling event in the root's thread", ev.ThreadTS, root.TS, s)
	}

	// Nodes: the per-node table, node-1 short of cpu.
	r.client.click(t, "U0ALICE", root.TS, rootButton(t, fake, root.TS, "followup:nodes"))
	if s := shown(reply("checkout", "Why not here (per node)")); !strings.Contains(s, "node-1") || !strings.Contains(s, "cpu") {
		t.Errorf("nodes reply = %s, want node-1's cpu shortfall", s)
	}

	// An unsigned click and one signed with another secret are refused; nothing is posted.
	before := len(byTitle("checkout").replies)
	body := r.client.clickBody(t, "U0MALLORY", root.TS, events)
	if code, _ := r.client.send(t, "/slack/interactions", body, false); code != http.StatusUnauthorized {
		t.Errorf("unsigned click = %d, want 401", code)
	}
	forger := &slackClient{base: r.client.base, secret: "not-the-signing-secret", channel: r.client.channel, slack: fake}
	if code, _ := forger.send(t, "/slack/interactions", body, true); code != http.StatusUnauthorized {
		t.Errorf("click with a forged signature = %d, want 401", code)
	}

	// Logs: a crash-looping pod's previous log, read through the API server from its kubelet.
	worker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns}, Spec: corev1.PodSpec{NodeName: "node-1",
		Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/shop/worker:2.1"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, worker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crashLooping(t, cs, ns, "worker")
	waitUntil(t, 90*time.Second, "the post about worker", func() bool { return byTitle("worker").root.TS != "" })
	wroot := byTitle("worker").root
	r.client.click(t, "U0ALICE", wroot.TS, rootButton(t, fake, wroot.TS, "followup:logs"))
	logs := strings.ReplaceAll(shown(reply("worker", "Previous container's log")), `\u0026`, "&") // shown's JSON escapes &
	if !strings.Contains(logs, "panic: &lt;!here&gt; *boom*") || strings.Contains(logs, "<!here>") || strings.Contains(logs, "```closed```") || !strings.Contains(logs, "starting worker") {
		t.Errorf("logs reply = %s, want the previous log's lines, escaped, fences defused", logs)
	}
	if n := len(byTitle("checkout").replies); n != before {
		t.Errorf("checkout's thread has %d replies after the refused clicks, want %d", n, before)
	}

	// Re-check now: a pod Pending for cpu, then bound and failing to pull (the watch's
	// image-pull threshold is an hour, so only the re-check sees the change), clicked twice
	// at once.
	importer := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "importer", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "registry.example.com/shop/importer:9.9",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, importer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 90*time.Second, "the post about importer", func() bool { return byTitle("importer").root.TS != "" })
	iroot := byTitle("importer").root
	if !strings.Contains(shown(iroot), "insufficient-cpu") {
		t.Fatalf("importer's post = %s, want insufficient-cpu", shown(iroot))
	}
	bindPulling(t, cs, ns, "importer", "node-1")
	recheck := rootButton(t, fake, iroot.TS, "followup:recheck")
	first := make(chan int, 1)
	aliceClick := r.client.clickBody(t, "U0ALICE", iroot.TS, recheck)
	go func() { code, _ := r.client.send(t, "/slack/interactions", aliceClick, true); first <- code }()
	r.client.click(t, "U0BOB", iroot.TS, recheck)
	if code := <-first; code != http.StatusOK {
		t.Errorf("the first re-check click = %d, want 200", code)
	}
	waitUntil(t, 60*time.Second, "two replies to the re-checks", func() bool { return len(byTitle("importer").replies) >= 2 })
	time.Sleep(3 * time.Second) // nothing more comes
	th := byTitle("importer")
	var changed, still int
	for _, m := range th.replies {
		switch {
		case strings.Contains(m.Text, "The cause changed: insufficient-cpu →"):
			changed++
		case strings.Contains(m.Text, "Still ") && strings.Contains(m.Text, ", checked by u0"):
			still++
		}
	}
	if len(th.replies) != 2 || changed != 1 || still != 1 {
		t.Errorf("importer's replies = %d (%d cause changes, %d still-stuck lines), want one of each", len(th.replies), changed, still)
	}
	if len(th.updates) != 1 || strings.Contains(th.updates[0].Text, "insufficient-cpu") {
		t.Errorf("importer's root edited %d times, want once, to the new cause", len(th.updates))
	}
	for _, m := range th.replies {
		t.Logf("importer reply: %s", m.Text)
	}
	for _, u := range th.updates {
		t.Logf("importer edit: %s", u.Text)
	}
}
