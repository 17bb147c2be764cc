package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	slackgo "github.com/slack-go/slack"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/internal/discordfake"
	"github.com/whypending/whypending/internal/testcluster"
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
	const ns = "shop"
	c := startWatchCluster(t, 1, ns, func(name string) bool { return name == "importer" || name == "worker" })
	cs := c.Client
	ctx := t.Context()
	kubeletLogs(t, cs, "node-1", map[string]string{ns + "/worker/app": "starting worker\npanic: <!here> *boom* ```closed```\n"})
	alertResync = time.Second
	t.Cleanup(func() { alertResync = 0 })
	config := watchConfig(c, "{users: [U0BOB]}", "{digest: [C0OPS]}", "thresholds: {pending: 3s, imagePull: 1h}", "remindAfter: 1h")
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
	t.Logf("events reply: %s", shown(ev))
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

// TestServeWatchFollowupsOnDiscord is TestServeWatchFollowups on Discord, on one cluster: a
// signed click on a watch post's Events and Nodes buttons puts the answers in the Discord
// thread started on the post; an interaction signed with another key is refused and posts
// nothing; Logs on a crash-looping pod puts its previous container's log in the post's thread,
// as it is inside one code block (a mention there is shown, not parsed; no run of backticks
// closes the block), in an embed sent with allowed_mentions {parse: []}; Re-check now after
// the cause changed, clicked by two people at once, edits the root once and replies once each
// (one "cause changed", one "still stuck"), and each clicker gets their notice to themselves.
func TestServeWatchFollowupsOnDiscord(t *testing.T) {
	const ns = "shop"
	c := startWatchCluster(t, 1, ns, func(name string) bool { return name == "importer" || name == "worker" })
	cs := c.Client
	ctx := t.Context()
	const log = "starting worker\npanic: @everyone <@1600000000000000001> <@&1700000000000000001> *boom* ```closed``` `````five\n"
	kubeletLogs(t, cs, "node-1", map[string]string{ns + "/worker/app": log})
	alertResync = time.Second
	t.Cleanup(func() { alertResync = 0 })
	config := watchConfig(c, `{discord: {roles: ["1700000000000000001"]}}`, fmt.Sprintf("{digest: [%q]}", discordfake.ChannelID),
		"thresholds: {pending: 3s, imagePull: 1h}", "remindAfter: 1h")
	fake, sign := discordfake.New(t), discordfake.NewSigner(t)
	r := startServeDiscord(t, config, fake, sign)
	carol := discordfake.Member{ID: "1600000000000000002", Name: "carol"} // no role: follow-ups are anyone's
	dave := discordfake.Member{ID: "1600000000000000004", Name: "dave"}

	// shows waits up to within for a message of in (a channel's or a thread's) showing want.
	shows := func(in string, want string, within time.Duration) *discordgo.Message {
		t.Helper()
		var found *discordgo.Message
		waitUntil(t, within, fmt.Sprintf("a message in %s showing %q", in, want), func() bool {
			for _, m := range fake.Thread(in) {
				if strings.Contains(discordfake.MessageText(m), want) {
					found = m
					return true
				}
			}
			return false
		})
		return found
	}
	// postAbout waits for the channel's post that mentions subject.
	postAbout := func(subject string) *discordgo.Message {
		t.Helper()
		return shows(discordfake.ChannelID, subject, 90*time.Second)
	}
	// interaction is who's click on root's button label, as Discord sends it.
	interaction := func(root *discordgo.Message, label string, who discordfake.Member) (string, []byte) {
		t.Helper()
		for _, b := range discordfake.ButtonsOf(root) {
			if b.Label == label {
				token, body := discordfake.InteractionJSON(t, discordgo.InteractionMessageComponent, discordfake.ClickData(b.CustomID), who, root)
				fake.Expect(token, discordfake.ChannelID)
				return token, body
			}
		}
		t.Fatalf("the post has no %s button: %s", label, discordfake.MessageText(root))
		return "", nil
	}
	click := func(root *discordgo.Message, label string, who discordfake.Member) string {
		t.Helper()
		token, body := interaction(root, label, who)
		if status, _, raw := sign.Post(t, http.DefaultClient, r.base+"/discord/interactions", body); status != http.StatusOK {
			t.Fatalf("click %s = %d %s", label, status, raw)
		}
		return token
	}
	// inThread waits for a message in root's thread showing want.
	inThread := func(root *discordgo.Message, want string) *discordgo.Message {
		t.Helper()
		return shows(root.ID, want, 60*time.Second)
	}
	labels := func(m *discordgo.Message) string {
		var out []string
		for _, b := range discordfake.ButtonsOf(m) {
			out = append(out, b.Label)
		}
		return strings.Join(out, ", ")
	}

	testcluster.Deployment(t, cs, ns, "checkout", 2, "1500m", nil)
	root := postAbout("checkout")
	if got := labels(root); !strings.Contains(got, "Events") || !strings.Contains(got, "Nodes") || !strings.Contains(got, "Re-check now") || strings.Contains(got, "Logs") {
		t.Errorf("checkout's post has buttons %s, want Events, Nodes and Re-check now (no Logs: no container of it ran)", got)
	}

	// A click signed with another key: refused, nothing posted.
	_, forged := interaction(root, "Events", carol)
	if status, _, _ := discordfake.NewSigner(t).Post(t, http.DefaultClient, r.base+"/discord/interactions", forged); status != http.StatusUnauthorized {
		t.Errorf("click signed with another key = %d, want 401", status)
	}
	for _, label := range []string{"Events", "Nodes"} {
		click(root, label, carol)
	}
	if text := discordfake.MessageText(inThread(root, "Events of deploy/checkout")); !strings.Contains(text, "FailedScheduling") {
		t.Errorf("events in the thread = %s, want the FailedScheduling event", text)
	}
	if text := discordfake.MessageText(inThread(root, "Why not here (per node)")); !strings.Contains(text, "node-1") {
		t.Errorf("node table in the thread = %s, want node-1", text)
	}
	if n := len(fake.Thread(root.ID)); n != 2 {
		t.Errorf("%d messages in the post's thread, want 2 (the events and the table; the forged click none)", n)
	}

	// Logs: a crash-looping pod's previous log, read through the API server from its kubelet.
	worker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: ns}, Spec: corev1.PodSpec{NodeName: "node-1",
		Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/shop/worker:2.1"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, worker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crashLooping(t, cs, ns, "worker")
	wroot := postAbout("worker")
	if got := labels(wroot); !strings.Contains(got, "Logs") {
		t.Fatalf("worker's post has buttons %s, want Logs", got)
	}
	// The post quotes the log's last line outside a code block: escaped there.
	if text := discordfake.MessageText(wroot); regexp.MustCompile(`(^|[^\\])(@everyone|<@|\*boom)`).MatchString(text) {
		t.Errorf("worker's post = %s, want the log line's mentions and markdown escaped", text)
	}
	click(wroot, "Logs", carol)
	logs := inThread(wroot, "Previous container's log")
	var code string
	for _, e := range logs.Embeds {
		for _, f := range e.Fields {
			if strings.Contains(f.Value, "starting worker") {
				code = f.Value
			}
		}
	}
	t.Logf("logs field: %q", code)
	// In a code block Discord shows text as it is: the mentions are not escaped (a backslash
	// would show), and they cannot ping from inside an embed sent with allowed_mentions
	// {parse: []}.
	if !strings.HasPrefix(code, "```\n") || !strings.HasSuffix(code, "\n```") || strings.Count(code, "```") != 2 ||
		!strings.Contains(code, "panic: @everyone <@1600000000000000001> <@&1700000000000000001> *boom*") || !strings.Contains(code, "five") {
		t.Errorf("logs field = %q, want the previous log's lines as they are in one code block, its fences defused", code)
	}
	if logs.Content != "" {
		t.Errorf("logs reply has content %q, want the log in the embed only", logs.Content)
	}
	var sent int
	for _, call := range fake.Snapshot("channel-send") {
		if call.Message != nil && call.Message.ID == logs.ID {
			discordfake.NoMentionsSent(t, call)
			sent++
		}
	}
	if sent != 1 {
		t.Errorf("the logs reply was sent %d times, want once", sent)
	}

	// Re-check now: a pod Pending for cpu, then bound and failing to pull (the watch's
	// image-pull threshold is an hour, so only the re-check sees the change), clicked by two
	// people at once.
	importer := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "importer", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "registry.example.com/shop/importer:9.9",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, importer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	iroot := postAbout("importer")
	if text := discordfake.MessageText(iroot); !strings.Contains(text, "insufficient-cpu") {
		t.Fatalf("importer's post = %s, want insufficient-cpu", text)
	}
	bindPulling(t, cs, ns, "importer", "node-1")
	tokens := map[string]string{}
	var reqs []*http.Request
	for _, who := range []discordfake.Member{carol, dave} {
		token, body := interaction(iroot, "Re-check now", who)
		tokens[who.Name] = token
		reqs = append(reqs, sign.Request(t, r.base+"/discord/interactions", time.Now(), body))
	}
	codes := make(chan int, len(reqs))
	for _, req := range reqs {
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for range reqs {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a re-check click = %d, want 200", code)
		}
	}
	waitUntil(t, 60*time.Second, "two replies to the re-checks", func() bool { return len(fake.Thread(iroot.ID)) >= 2 })
	time.Sleep(3 * time.Second) // nothing more comes
	replies, edits := fake.Thread(iroot.ID), fake.ChannelEdits(iroot.ID)
	var changed, still int
	for _, m := range replies {
		text := discordfake.MessageText(m)
		t.Logf("importer reply: %s", text)
		switch {
		case strings.Contains(text, "The cause changed: insufficient-cpu →"):
			changed++
		case strings.Contains(text, "Still ") && (strings.Contains(text, ", checked by Carol") || strings.Contains(text, ", checked by Dave")):
			still++
		}
	}
	if len(replies) != 2 || changed != 1 || still != 1 {
		t.Errorf("importer's replies = %d (%d cause changes, %d still-stuck lines), want one of each", len(replies), changed, still)
	}
	for _, e := range edits {
		t.Logf("importer edit: %s", discordfake.MessageText(e.Message))
	}
	if len(edits) != 1 || strings.Contains(discordfake.MessageText(edits[0].Message), "insufficient-cpu") {
		t.Errorf("importer's root edited %d times, want once, to the new cause", len(edits))
	} else if got := labels(edits[0].Message); !strings.Contains(got, "Events") || !strings.Contains(got, "Re-check now") {
		t.Errorf("importer's edited root has buttons %s, want Events and Re-check now still", got)
	}
	// Each clicker is told what their click did, in a message only they see.
	for name, token := range tokens {
		var notices []string
		for _, call := range fake.CallsFor(token) {
			if call.Route == "followup" && call.Message != nil && strings.Contains(discordfake.MessageText(call.Message), "Re-checked") {
				if call.Message.Flags&discordgo.MessageFlagsEphemeral == 0 {
					t.Errorf("%s's re-check notice is not ephemeral: %s", name, call.Body)
				}
				notices = append(notices, discordfake.MessageText(call.Message))
			}
		}
		if len(notices) != 1 {
			t.Errorf("%s got %d re-check notices %q, want 1", name, len(notices), notices)
		}
	}
	// Everything the bot posted or edited in the channel went with allowed_mentions {parse: []}.
	for _, route := range []string{"channel-send", "channel-edit"} {
		for _, call := range fake.Snapshot(route) {
			discordfake.NoMentionsSent(t, call)
		}
	}
}

// TestServeWatchFollowupsAuthorization: follow-ups are read-only but not open to all. Under
// authorization mode all, a person not mapped to Kubernetes and one RBAC does not allow to get
// pods in the namespace are refused (to them only), as /why-pending refuses them; a channel
// limited to another namespace (channels.namespaces) is refused; the person RBAC allows gets
// the events in the thread, and only they made a reply.
func TestServeWatchFollowupsAuthorization(t *testing.T) {
	const ns = "shop"
	c := startWatchCluster(t, 1, ns, func(string) bool { return false })
	cs := c.Client
	ctx := t.Context()
	rbac := cs.RbacV1()
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-reads-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's RBAC authorizer sees a new binding a moment later.
	waitUntil(t, 30*time.Second, "RBAC allowing alice to get pods in shop", func() bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: ns}}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed
	})
	alertResync = time.Second
	t.Cleanup(func() { alertResync = 0 })
	config := watchConfig(c, "{users: [U0BOB]}", "{digest: [C0OPS], namespaces: {C0BATCH: batch}}", "thresholds: {pending: 3s}", "remindAfter: 1h") +
		"authorization:\n  mode: all\n  slack:\n    users: {U0ALICE: {user: alice}, U0BOB: {user: bob}}\n"
	fake := newFakeSlack(t, nil)
	r := startServeOn(t, config, fake)

	testcluster.Deployment(t, cs, ns, "checkout", 2, "1500m", nil)
	var root slackMessage
	waitUntil(t, 90*time.Second, "the post about checkout", func() bool {
		for _, th := range fake.threads("C0OPS") {
			if strings.Contains(th.root.Text, "checkout") {
				root = th.root
				return true
			}
		}
		return false
	})
	events := rootButton(t, fake, root.TS, "followup:events")
	batch := &slackClient{base: r.base, secret: r.client.secret, channel: "C0BATCH", slack: fake}
	batch.seq.Store(100) // its response_url paths apart from r.client's
	for _, tt := range []struct {
		name   string
		client *slackClient
		user   string
		want   string
	}{
		{"a person mapped to nobody", r.client, "U0MALLORY", "is not in"},
		{"a person RBAC does not allow to get pods in shop", r.client, "U0BOB", "does not allow you to"},
		{"a channel limited to another namespace", batch, "U0ALICE", "This channel follows namespace batch, not shop"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.client.click(t, tt.user, root.TS, events)
			notice := fake.answer(t, fmt.Sprintf("/clicks/%d", tt.client.seq.Load()))
			if text := shown(slackMessage{Text: notice.Text, Blocks: notice.Blocks}); !strings.Contains(text, tt.want) || notice.ResponseType == "in_channel" {
				t.Errorf("notice (%s) = %q, want one to the clicker only with %q", notice.ResponseType, text, tt.want)
			}
		})
	}
	r.client.click(t, "U0ALICE", root.TS, events)
	var replies []slackMessage
	waitUntil(t, 60*time.Second, "alice's events in the thread", func() bool {
		replies = fake.threadReplies(root.TS)
		return len(replies) > 0
	})
	time.Sleep(2 * time.Second) // a refused click that posted late would show now
	replies = fake.threadReplies(root.TS)
	if len(replies) != 1 || !strings.Contains(shown(replies[0]), "FailedScheduling") || !strings.Contains(shown(replies[0]), "asked by u0alice") {
		for _, m := range replies {
			t.Logf("reply: %s", shown(m))
		}
		t.Errorf("%d replies in the thread, want 1: alice's events", len(replies))
	}
}
