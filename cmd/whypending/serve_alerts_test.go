package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/internal/amtest"
	"github.com/whypending/whypending/internal/proc"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

const amToken = "am-test-bearer-token"

// balancer is one URL in front of several serve replicas, as a Service is: each request goes
// to the next live replica. It keeps every body, so a test can deliver them again.
type balancer struct {
	mu       sync.Mutex
	backends []string
	next     int
	bodies   [][]byte
	statuses []int
}

func (b *balancer) set(backends ...string) {
	b.mu.Lock()
	b.backends = backends
	b.mu.Unlock()
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	backend := b.backends[b.next%len(b.backends)]
	b.next++
	b.bodies = append(b.bodies, body)
	b.mu.Unlock()
	req, _ := http.NewRequest(r.Method, backend+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	b.mu.Lock()
	b.statuses = append(b.statuses, resp.StatusCode)
	b.mu.Unlock()
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

// redeliver posts every body Alertmanager sent so far again, as its retries do.
func (b *balancer) redeliver(t *testing.T, url string) {
	t.Helper()
	b.mu.Lock()
	bodies := append([][]byte(nil), b.bodies...)
	b.mu.Unlock()
	for _, body := range bodies {
		if code, text := postAlert(t, url, amToken, body); code != http.StatusOK {
			t.Fatalf("redelivery = %d %s", code, text)
		}
	}
}

func postAlert(t *testing.T, url, token string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(text))
}

// thread is the Slack messages of one root: the root's post, its replies and its edits.
type slackThread struct {
	root    slackMessage
	replies []slackMessage
	updates []slackMessage
}

func (f *fakeSlack) threads(channel string) []slackThread {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slackThread
	index := map[string]int{}
	for _, m := range f.messages {
		if m.Channel != channel || m.Mark == "" {
			continue
		}
		switch {
		case m.Method == "chat.postMessage" && m.ThreadTS == "":
			index[m.TS] = len(out)
			out = append(out, slackThread{root: m})
		case m.Method == "chat.postMessage":
			out[index[m.ThreadTS]].replies = append(out[index[m.ThreadTS]].replies, m)
		case m.Method == "chat.update":
			out[index[m.TS]].updates = append(out[index[m.TS]].updates, m)
		}
	}
	return out
}

// alertRoots are the ts of the thread roots posted so far, in order; threadReplies the
// replies under one.
func (f *fakeSlack) alertRoots() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.messages {
		if m.Method == "chat.postMessage" && m.Mark != "" && m.ThreadTS == "" {
			out = append(out, m.TS)
		}
	}
	return out
}

func (f *fakeSlack) threadReplies(ts string) []slackMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slackMessage
	for _, m := range f.messages {
		if m.Method == "chat.postMessage" && m.ThreadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

// marks returns how many posts carry each mark.
func (f *fakeSlack) marks() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, m := range f.messages {
		if m.Method == "chat.postMessage" && m.Mark != "" {
			out[m.Mark]++
		}
	}
	return out
}

// shown is what a message shows: its fallback text and every block's text.
func shown(m slackMessage) string {
	b, _ := json.Marshal(m.Blocks)
	return m.Text + "\n" + string(b)
}

func (th slackThread) find(sub string) int {
	for i, r := range th.replies {
		if strings.Contains(shown(r), sub) {
			return i
		}
	}
	return -1
}

// alertsE2E is what the Alertmanager end-to-end tests share: the control plane with
// crashAndPending loaded and the store installed, replicas named whypending-1, -2, … that
// resync every second, the real Alertmanager (group_wait 1s, group_interval 2s,
// repeat_interval 4s) delivering to lb behind front, and the two alerts it fires first.
type alertsE2E struct {
	kubeconfig     string
	lb             *balancer
	front          *httptest.Server
	am             *amtest.Alertmanager
	crash, pending amtest.Alert
}

func startAlertsE2E(t *testing.T) *alertsE2E {
	t.Helper()
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, crashAndPending(t))
	installStore(t, c, "whypending")
	t.Setenv("WP_TEST_AM_TOKEN", amToken)
	var replica atomic.Int32
	ledgerIdentity = func() proc.Identity {
		return proc.Identity{Host: fmt.Sprintf("whypending-%d", replica.Add(1)), PID: 1, Start: 1}
	}
	alertResync = time.Second
	t.Cleanup(func() { ledgerIdentity, alertResync = proc.Self, 0 })
	e := &alertsE2E{kubeconfig: c.KubeconfigPath, lb: &balancer{}}
	e.front = httptest.NewServer(e.lb)
	t.Cleanup(e.front.Close)
	e.am = amtest.Start(t, amtest.Options{WebhookURL: e.front.URL + "/alertmanager", Token: amToken,
		GroupBy: []string{"alertname"}, GroupWait: time.Second, GroupInterval: 2 * time.Second, RepeatInterval: 4 * time.Second})
	started := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	e.crash = amtest.Alert{Labels: map[string]string{"alertname": "KubePodCrashLooping", "namespace": "seed-crash-app", "pod": "crash-app", "container": "app", "severity": "warning"},
		Annotations: map[string]string{"summary": "Pod is crash looping."}, StartsAt: started, GeneratorURL: "http://prometheus.example/graph?g0.expr=kube_pod"}
	e.pending = amtest.Alert{Labels: map[string]string{"alertname": "KubeDeploymentReplicasMismatch", "namespace": "workload-grouped", "deployment": "checkout", "severity": "warning"},
		Annotations: map[string]string{"summary": "Deployment has not matched the expected number of replicas."}, StartsAt: started}
	return e
}

// config is serve's config for this cluster and Alertmanager: settings (YAML) and the
// alertmanager section with its receivers (a YAML map of receiver to channel IDs).
func (e *alertsE2E) config(settings, receivers string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
clusters:
- name: test
  kubeconfig: %s
store: {namespace: whypending}
%salertmanager:
  token: {env: WP_TEST_AM_TOKEN}
  receivers: %s
  url: %s
`, e.kubeconfig, settings, receivers, e.am.URL)
}

// joined is a second crash-looping container of crash's pod, joining its group.
func (e *alertsE2E) joined(crash amtest.Alert) amtest.Alert {
	crash.Labels = map[string]string{"alertname": "KubePodCrashLooping", "namespace": "seed-crash-app", "pod": "crash-app", "container": "sidecar", "severity": "warning"}
	return crash
}

// resolve ends alerts a second ago and fires them so, as Prometheus sends a resolved alert.
func (e *alertsE2E) resolve(t *testing.T, alerts ...*amtest.Alert) {
	t.Helper()
	now := time.Now().UTC()
	var fired []amtest.Alert
	for _, a := range alerts {
		a.EndsAt = now.Add(-time.Second)
		fired = append(fired, *a)
	}
	e.am.Fire(t, fired...)
}

// amSilence is a silence as GET /api/v2/silences lists it.
type amSilence struct {
	ID        string    `json:"id"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	Matchers  []struct{ Name, Value string }
	Status    struct{ State string }
}

// oneSilence waits for a silence in Alertmanager, gives a second one 2s to show up, and checks
// there is exactly one: active, created by user, its comment naming channel, matching the
// Deployment group's alertname.
func oneSilence(t *testing.T, am *amtest.Alertmanager, user, channel string) []amSilence {
	t.Helper()
	var silences []amSilence
	waitUntil(t, 30*time.Second, "the silence in Alertmanager", func() bool {
		am.Get(t, "/api/v2/silences", &silences)
		return len(silences) > 0
	})
	time.Sleep(2 * time.Second)
	am.Get(t, "/api/v2/silences", &silences)
	if len(silences) != 1 || silences[0].Status.State != "active" || !strings.Contains(silences[0].CreatedBy, user) ||
		!strings.Contains(silences[0].Comment, channel) || len(silences[0].Matchers) != 1 || silences[0].Matchers[0].Value != "KubeDeploymentReplicasMismatch" {
		t.Fatalf("silences = %+v, want one active, by %s, naming %s, matching the group", silences, user, channel)
	}
	t.Logf("Alertmanager silence: %+v", silences[0])
	return silences
}

// crashAndPending is a scenario of its own: workload-grouped (a Deployment, 4 of 5 pods
// Pending on Insufficient cpu) plus seed-crash-app's crash-looping pod on its node-1.
func crashAndPending(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	read := func(name, file string) string {
		b, err := os.ReadFile(filepath.Join(root, "testdata", "scenarios", name, file))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	manifests := read("workload-grouped", "manifests.yaml")
	for _, doc := range strings.Split(read("seed-crash-app", "manifests.yaml"), "\n---\n") {
		if !strings.Contains(doc, "\nkind: Node\n") && strings.Contains(doc, "kind:") {
			manifests += "\n---\n" + doc
		}
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "manifests.yaml"), manifests)
	writeFile(t, filepath.Join(dir, "expected.yaml"), read("workload-grouped", "expected.yaml"))
	return dir
}

// TestServeAnswersAlertmanager runs the real Alertmanager against two serve replicas behind
// one URL, on the real control plane with a crash-looping pod and a Deployment whose pods
// are Pending: each group gets one root with its diagnosis replies (the right codes), a
// joining alert an edit plus one reply, the resolve an edit to Resolved plus one reply; and
// redeliveries (three rounds of every body), repeat_interval re-sends and a replica stopped
// mid-stream and replaced post nothing twice. The receiver posts to two channels, C0OPS and
// C0TWO: a group has one silence whichever channel's root is clicked, both roots show it, and
// Unsilence from the other channel ends it.
func TestServeAnswersAlertmanager(t *testing.T) {
	e := startAlertsE2E(t)
	lb, front, am, crash, pending := e.lb, e.front, e.am, e.crash, e.pending
	config := e.config(`approvals:
  approvers: {users: [U0BOB]}
channels:
  namespaces: {C0SHOP: workload-grouped}
`, "{team: [C0OPS, C0TWO], shop: [C0SHOP]}")
	fake := newFakeSlack(t, nil)
	r1, r2 := startServeOn(t, config, fake), startServeOn(t, config, fake)
	lb.set(r1.base, r2.base)
	am.Fire(t, crash, pending)

	waitUntil(t, 90*time.Second, "two group roots with their diagnoses", func() bool {
		ths := fake.threads("C0OPS")
		return len(ths) == 2 && len(ths[0].replies) == 1 && len(ths[1].replies) == 1
	})
	byNameIn := func(channel string) (crashTh, pendingTh slackThread) {
		for _, th := range fake.threads(channel) {
			if strings.Contains(th.root.Text, "KubePodCrashLooping") {
				crashTh = th
			} else {
				pendingTh = th
			}
		}
		return
	}
	byName := func() (crashTh, pendingTh slackThread) { return byNameIn("C0OPS") }
	crashTh, pendingTh := byName()
	if !strings.Contains(shown(crashTh.replies[0]), "container-exits-immediately") {
		t.Errorf("crash-looping pod's reply = %s, want code container-exits-immediately", shown(crashTh.replies[0]))
	}
	if !strings.Contains(shown(pendingTh.replies[0]), "insufficient-cpu") {
		t.Errorf("Pending Deployment's reply = %s, want code insufficient-cpu", shown(pendingTh.replies[0]))
	}

	// Alertmanager's retries: every body so far, three times, to both replicas.
	for range 3 {
		lb.redeliver(t, front.URL+"/alertmanager")
	}

	// A restart mid-stream: replica 1 goes away, a second crash-looping container of the pod joins, and
	// a new replica takes its place.
	r1.stop()
	lb.set(r2.base)
	joined := e.joined(crash)
	am.Fire(t, joined)
	r3 := startServeOn(t, config, fake)
	lb.set(r2.base, r3.base)
	waitUntil(t, 60*time.Second, "the joining alert's reply and the root's edit", func() bool {
		th, _ := byName()
		return len(th.replies) == 2 && len(th.updates) > 0 && strings.Contains(th.updates[len(th.updates)-1].Text, "(2 alerts)")
	})
	// The joining alert is the same pod's other container: one line, not its diagnosis again.
	if th, _ := byName(); !strings.Contains(shown(th.replies[1]), "Joined, for an object diagnosed above: KubePodCrashLooping seed-crash-app/pod/crash-app (container sidecar)") {
		t.Errorf("join reply = %s, want one line naming the joining alert, no second diagnosis of the pod", shown(th.replies[1]))
	}

	// Resolve both: the root is edited to Resolved, with one reply saying so.
	e.resolve(t, &crash, &joined)
	waitUntil(t, 60*time.Second, "the group resolved", func() bool {
		th, _ := byName()
		return len(th.replies) == 3 && len(th.updates) > 0 && strings.Contains(th.updates[len(th.updates)-1].Text, "Resolved: KubePodCrashLooping (fired for")
	})
	if th, _ := byName(); !strings.Contains(shown(th.replies[2]), "All resolved: the group fired for") {
		t.Errorf("resolve reply = %s", shown(th.replies[2]))
	}

	// repeat_interval (4s) re-sends of the still-firing group, and three more rounds of every
	// body: nothing new.
	time.Sleep(9 * time.Second)
	for range 3 {
		lb.redeliver(t, front.URL+"/alertmanager")
	}
	time.Sleep(3 * time.Second)
	crashTh, pendingTh = byName()
	if len(crashTh.replies) != 3 || len(pendingTh.replies) != 1 || len(fake.threads("C0OPS")) != 2 {
		t.Errorf("after re-sends: %d and %d replies in %d threads, want 3 and 1 in 2", len(crashTh.replies), len(pendingTh.replies), len(fake.threads("C0OPS")))
	}
	for mark, n := range fake.marks() {
		if n != 1 {
			t.Errorf("message %s posted %d times", mark, n)
		}
	}
	_, metrics := r2.get(t, "/metrics")
	for _, want := range []string{"whypending_alerts_received_total", "whypending_alerts_mapped_total", "whypending_alerts_deduplicated_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	lb.mu.Lock()
	for i, code := range lb.statuses {
		if code != http.StatusOK {
			t.Errorf("delivery %d answered %d", i, code)
		}
	}
	lb.mu.Unlock()

	// The refusals, and an alert for a namespace the channel does not answer for.
	body := func(version, receiver string, namespaces ...string) []byte {
		var alerts []string
		for i, ns := range namespaces {
			alerts = append(alerts, fmt.Sprintf(`{"status":"firing","labels":{"alertname":"KubePodCrashLooping","namespace":%q,"pod":"crash-app"},
"startsAt":"2026-12-01T00:00:00Z","endsAt":"0001-01-01T00:00:00Z","fingerprint":"f00d%d"}`, ns, i))
		}
		return fmt.Appendf(nil, `{"version":%q,"groupKey":"{}:{alertname=\"KubePodCrashLooping\"}","status":"firing","receiver":%q,
"groupLabels":{"alertname":"KubePodCrashLooping"},"externalURL":"http://am.example","alerts":[%s]}`, version, receiver, strings.Join(alerts, ","))
	}
	url := r2.base + "/alertmanager"
	for _, c := range []struct {
		name, token string
		body        []byte
		want        int
	}{
		{"no token", "", body("4", "team", "seed-crash-app"), http.StatusUnauthorized},
		{"a wrong token", "not-the-token", body("4", "team", "seed-crash-app"), http.StatusUnauthorized},
		{"malformed JSON", amToken, []byte(`{"version": "4", "alerts": [`), http.StatusBadRequest},
		{"an unknown version", amToken, body("3", "team", "seed-crash-app"), http.StatusBadRequest},
		{"an oversized body", amToken, bytes.Repeat([]byte(" "), 5<<20), http.StatusRequestEntityTooLarge},
		{"an unknown receiver", amToken, body("4", "nobody", "seed-crash-app"), http.StatusNotFound},
		{"a group of another namespace's alert only", amToken, body("4", "shop", "seed-crash-app"), http.StatusOK},
	} {
		if code, text := postAlert(t, url, c.token, c.body); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, text, c.want)
		}
	}
	time.Sleep(3 * time.Second) // both replicas resync every second: a root would be posted now
	if ths := fake.threads("C0SHOP"); len(ths) != 0 {
		t.Errorf("shop channel got %d roots for a group of another namespace's alert only, want none: %s", len(ths), shown(ths[0].root))
	}
	_, metrics = r2.get(t, "/metrics")
	for _, want := range []string{`whypending_alerts_refused_total{reason="unauthorized"} 2`, "whypending_alerts_not_shown_total 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	// The group gains an alert of the channel's namespace: now it has a root, with the other
	// alert counted, not shown or diagnosed, and no Silence buttons (the silence would mute
	// the alert the channel cannot see).
	if code, text := postAlert(t, url, amToken, body("4", "shop", "workload-grouped", "seed-crash-app")); code != http.StatusOK {
		t.Fatalf("a group of two namespaces' alerts: %d %s", code, text)
	}
	waitUntil(t, 30*time.Second, "the shop channel's root", func() bool { return len(fake.threads("C0SHOP")) == 1 })
	time.Sleep(2 * time.Second)
	shop := fake.threads("C0SHOP")[0]
	if strings.Contains(shown(shop.root), "seed-crash-app") || !strings.Contains(shown(shop.root), "1 alert is for a namespace this channel does not answer for") ||
		strings.Contains(shown(shop.root), "silence:") {
		t.Errorf("shop channel shows %s, want the other namespace's alert counted, not shown, and no Silence buttons", shown(shop.root))
	}

	for _, th := range fake.threads("C0OPS") {
		t.Logf("root %s: %s", th.root.TS, th.root.Text)
		for _, r := range th.replies {
			t.Logf("  reply: %s", r.Text)
		}
		for _, u := range th.updates {
			t.Logf("  edit: %s", u.Text)
		}
	}

	// Silence 1h from the Deployment group's root: a non-approver is refused; the approver's
	// click, delivered to both replicas, makes one silence in Alertmanager, which then
	// suppresses the group's next notification itself; Unsilence expires it.
	_, pendingTh = byName()
	silence := rootButton(t, fake, pendingTh.root.TS, "silence:1h0m0s")
	_, pendingTwo := byNameIn("C0TWO")
	silenceTwo := rootButton(t, fake, pendingTwo.root.TS, "silence:1h0m0s")
	r2.client.click(t, "U0MALLORY", pendingTh.root.TS, silence)
	if n := fake.answer(t, "/clicks/1"); !strings.Contains(n.Text, "only approvers may silence") {
		t.Errorf("non-approver's click answered %q", n.Text)
	}
	r2.client.click(t, "U0BOB", pendingTh.root.TS, silence)
	r3.client.click(t, "U0BOB", pendingTh.root.TS, silence)
	silences := oneSilence(t, am, "U0BOB", "C0OPS")
	// The same group's root in C0TWO: its click, once the silence is made, makes no second.
	two := &slackClient{base: r3.base, secret: r3.client.secret, channel: "C0TWO", slack: fake}
	two.seq.Store(1000) // its response_urls apart from the C0OPS clients'
	two.click(t, "U0BOB", pendingTwo.root.TS, silenceTwo)
	// The date is the silence's end, not today's: an hour's silence made after 23:00 UTC ends tomorrow.
	if n := fake.answer(t, "/clicks/1001"); !strings.Contains(n.Text, "already silenced until "+silences[0].EndsAt.UTC().Format("2006-01-02")) ||
		!strings.Contains(n.Text, "from channel C0OPS") {
		t.Errorf("C0TWO's click answered %q, want already silenced, with the date, from C0OPS", n.Text)
	}
	oneSilence(t, am, "U0BOB", "C0OPS")
	for _, ch := range []string{"C0OPS", "C0TWO"} {
		waitUntil(t, 30*time.Second, ch+"'s root edited to show the silence", func() bool {
			_, th := byNameIn(ch)
			if len(th.updates) == 0 {
				return false
			}
			last := shown(th.updates[len(th.updates)-1])
			return strings.Contains(last, "Silenced in Alertmanager until") && strings.Contains(last, "from channel C0OPS") &&
				strings.Contains(last, "(silence "+silences[0].ID+")") && strings.Contains(last, "unsilence")
		})
	}
	if _, th := byNameIn("C0TWO"); true {
		t.Logf("silenced root in C0TWO: %s", shown(th.updates[len(th.updates)-1]))
	}
	second := pending
	second.Labels = map[string]string{"alertname": "KubeDeploymentReplicasMismatch", "namespace": "workload-grouped", "deployment": "checkout-canary", "severity": "warning"}
	am.Fire(t, second)
	time.Sleep(8 * time.Second) // four group_intervals
	if _, th := byName(); len(th.replies) != 1 {
		t.Errorf("the silenced group got %d replies, want Alertmanager to have suppressed the new alert", len(th.replies))
	}
	// Unsilence from C0TWO ends the silence made from C0OPS, and both roots say so.
	_, pendingTwo = byNameIn("C0TWO")
	two.click(t, "U0BOB", pendingTwo.root.TS, rootButton(t, fake, pendingTwo.root.TS, "unsilence"))
	waitUntil(t, 30*time.Second, "the silence expired", func() bool {
		am.Get(t, "/api/v2/silences", &silences)
		return len(silences) == 1 && silences[0].Status.State == "expired"
	})
	for _, ch := range []string{"C0OPS", "C0TWO"} {
		waitUntil(t, 30*time.Second, ch+"'s root offering Silence again", func() bool {
			_, th := byNameIn(ch)
			last := shown(th.updates[len(th.updates)-1])
			return !strings.Contains(last, "Silenced in Alertmanager") && strings.Contains(last, "silence:1h0m0s")
		})
	}
	waitUntil(t, 60*time.Second, "the unsuppressed alert's reply", func() bool {
		_, th := byName()
		return len(th.replies) == 2 && strings.Contains(th.replies[1].Text, "Joined")
	})
	made := 0
	for _, r := range []*served{r2, r3} {
		if _, metrics := r.get(t, "/metrics"); strings.Contains(metrics, "whypending_silences_made_total 1") {
			made++
		}
	}
	if made != 1 {
		t.Errorf("%d replicas count a silence made, want exactly one", made)
	}

	// A silence expired in Alertmanager, not from chat: the root stops saying it is silenced
	// and offers Silence again, and the thread gets one line saying how it ended.
	_, pendingTh = byName()
	r2.client.click(t, "U0BOB", pendingTh.root.TS, rootButton(t, fake, pendingTh.root.TS, "silence:1h0m0s"))
	var active string
	waitUntil(t, 30*time.Second, "the second silence in Alertmanager", func() bool {
		am.Get(t, "/api/v2/silences", &silences)
		for _, s := range silences {
			if s.Status.State == "active" {
				active = s.ID
			}
		}
		return active != ""
	})
	waitUntil(t, 30*time.Second, "the root edited to show the second silence", func() bool {
		_, th := byName()
		return len(th.updates) > 0 && strings.Contains(shown(th.updates[len(th.updates)-1]), "(silence "+active+")")
	})
	am.ExpireSilence(t, active)
	waitUntil(t, 30*time.Second, "the root offering Silence again and one line on how the silence ended", func() bool {
		_, th := byName()
		last := shown(th.updates[len(th.updates)-1])
		return !strings.Contains(last, "Silenced in Alertmanager") && strings.Contains(last, "silence:1h0m0s") &&
			len(th.replies) == 3 && strings.Contains(th.replies[2].Text, "it was expired in Alertmanager")
	})
	time.Sleep(3 * time.Second) // both replicas check every second: a second line would show now
	if _, th := byName(); len(th.replies) != 3 {
		t.Errorf("%d replies after the silence ended, want one line for it", len(th.replies))
	}
}

// rootButton is the button of the last version (post or edit) of the message at ts whose
// action is action.
func rootButton(t *testing.T, f *fakeSlack, ts, action string) *slackgo.ButtonBlockElement {
	t.Helper()
	var found *slackgo.ButtonBlockElement
	waitUntil(t, 30*time.Second, "a "+action+" button on the root", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		found = nil
		for _, m := range f.messages {
			if m.TS != ts {
				continue
			}
			found = nil
			for _, b := range m.Blocks.BlockSet {
				if ab, ok := b.(*slackgo.ActionBlock); ok {
					for _, el := range ab.Elements.ElementSet {
						if btn, ok := el.(*slackgo.ButtonBlockElement); ok && slack.ParseActionID(btn.ActionID) == action {
							found = btn
						}
					}
				}
			}
		}
		return found != nil
	})
	return found
}
