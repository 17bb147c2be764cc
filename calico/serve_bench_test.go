package calico

// BenchmarkServe measures the bot on the benchmark fixtures: the real `whypending serve`
// binary (built from this repository) pointed at the fixture's API server, asked questions the
// way Slack asks them (signed slash commands, answers to a response_url). Results:
// calico/BENCHMARKS.md, "Serving from caches".
//
//	WHYPENDING_BENCH_NICE=-15 go test ./calico -run '^$' -bench 'BenchmarkServe/large' -benchtime 1x -count 3 -timeout 180m

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/internal/testenv"
)

// serveSetup is what BenchmarkServe adds to a fixture: pods to ask about.
type serveSetup struct {
	// calicoPods are pods on ten nodes waiting for their sandbox with "IPAM allocated only
	// 0" events, in namespace serveNamespace.
	calicoPods []string
	// unscheduled is a pod no node fits, with a FailedScheduling event: its answer reads every
	// cached pod.
	unscheduled string
	// massWorkload is a ReplicaSet whose massPods pods no node fits, and massOthers are
	// massOtherPods more such pods, each with its own request: the mass event.
	massWorkload string
	massOthers   []string
}

// serveNamespace holds what BenchmarkServe adds to the fixture (WHYPENDING_BENCH_NAMESPACE,
// default serve-bench, so that two benchmarks can share one cluster of benchKubeconfigEnv).
var serveNamespace = cmp.Or(os.Getenv("WHYPENDING_BENCH_NAMESPACE"), "serve-bench")

const (
	serveSecret = "serve-bench-signing-secret"
	// servePods is how many Calico-failing pods the benchmark asks about.
	servePods = 10
	// massPods and massOtherPods size the mass event: the Pending pods of one workload and
	// other stuck pods, asked about at once.
	massPods      = 200
	massOtherPods = 50
)

// setupServe creates the pods BenchmarkServe asks about, once per fixture.
func (e *benchEnv) setupServe(b *testing.B) *serveSetup {
	b.Helper()
	if e.serve != nil {
		return e.serve
	}
	ctx := b.Context()
	kube := e.c.Client
	if e.attached { // a shared cluster: start afresh, in our own namespace
		deleteNamespace(b, e)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serveNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	s := &serveSetup{unscheduled: "batch-unschedulable"}
	create := func(p *corev1.Pod, reason, source, msg string) {
		status := p.Status
		created, err := kube.CoreV1().Pods(serveNamespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		created.Status = status
		if _, err := kube.CoreV1().Pods(serveNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: serveNamespace},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: serveNamespace, Name: p.Name, UID: created.UID},
			Type:           corev1.EventTypeWarning, Reason: reason, Message: msg, Count: 14, Source: corev1.EventSource{Component: source, Host: p.Spec.NodeName},
			FirstTimestamp: metav1.NewTime(now.Add(-10 * time.Minute)), LastTimestamp: metav1.NewTime(now.Add(-20 * time.Second))}
		if _, err := kube.CoreV1().Events(serveNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range servePods {
		node := fixtureNode((i*97 + 13) % e.f.spec.Nodes)
		p := benchPod(serveNamespace, fmt.Sprintf("checkout-5f7c9d8b6-%05d", i), node, "", fmt.Sprintf("%064x", 0xca11c0+i), metav1.NewTime(now))
		p.Annotations = nil
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))},
				{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: p.Spec.Containers[0].Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
		create(p, "FailedCreatePodSandBox", "kubelet", fmt.Sprintf(`Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "%064x": plugin type="calico" failed (add): failed to request 1 IPv4 addresses. IPAM allocated only 0.`, 0x5a0d+i))
		s.calicoPods = append(s.calicoPods, p.Name)
	}
	p := benchPod(serveNamespace, s.unscheduled, "", "", fmt.Sprintf("%064x", 0xbadc0de), metav1.NewTime(now))
	p.Annotations = nil
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("64")
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu.", e.f.spec.Nodes, e.f.spec.Nodes),
		LastTransitionTime: metav1.NewTime(now.Add(-5 * time.Minute))}}}
	create(p, "FailedScheduling", "default-scheduler", fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu. preemption: 0/%d nodes are available: %d No preemption victims found for incoming pod.",
		e.f.spec.Nodes, e.f.spec.Nodes, e.f.spec.Nodes, e.f.spec.Nodes))

	// The mass event: a ReplicaSet's massPods Pending pods (no controller manager runs, so
	// they stay as created) and massOtherPods other Pending pods, each requesting its own cpu.
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "stuck-web-6d5f8b7c9", Namespace: serveNamespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(massPods)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "stuck-web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "stuck-web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/shop/stuck-web:1.0"}}}}}}
	created, err := kube.AppsV1().ReplicaSets(serveNamespace).Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s.massWorkload = created.Name
	pending := func(name string, cpu string, owned bool) {
		p := benchPod(serveNamespace, name, "", "", fmt.Sprintf("%064x", 0x5cc0+len(s.massOthers)), metav1.NewTime(now))
		p.Annotations = nil
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		if owned {
			p.Labels = map[string]string{"app": "stuck-web", "pod-template-hash": "6d5f8b7c9"}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: created.Name, UID: created.UID, Controller: ptr(true)}}
		} else {
			p.OwnerReferences = nil
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu.", e.f.spec.Nodes, e.f.spec.Nodes),
			LastTransitionTime: metav1.NewTime(now.Add(-5 * time.Minute))}}}
		create(p, "FailedScheduling", "default-scheduler", fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu. preemption: 0/%d nodes are available: %d No preemption victims found for incoming pod.",
			e.f.spec.Nodes, e.f.spec.Nodes, e.f.spec.Nodes, e.f.spec.Nodes))
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range massPods {
		sem <- struct{}{}
		wg.Go(func() { defer func() { <-sem }(); pending(fmt.Sprintf("%s-%05x", created.Name, i), "48", true) })
	}
	for i := range massOtherPods {
		s.massOthers = append(s.massOthers, fmt.Sprintf("stuck-job-%02d", i))
	}
	for i, name := range s.massOthers {
		sem <- struct{}{}
		wg.Go(func() { defer func() { <-sem }(); pending(name, strconv.Itoa(65+i), false) })
	}
	wg.Wait()
	e.lastWrite = time.Now()
	e.serve = s
	return s
}

// deleteNamespace deletes serveNamespace and what BenchmarkServe made in it, and waits until
// it is gone. The fixture's control plane runs no controller manager, so it empties the
// namespace itself (pods with no grace period: no kubelet confirms them) and finalizes it, as
// the namespace controller would.
func deleteNamespace(b *testing.B, e *benchEnv) {
	ctx := context.Background()
	kube := e.c.Client
	ns, err := kube.CoreV1().Namespaces().Get(ctx, serveNamespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		b.Fatal(err)
	}
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}
	if err := kube.CoreV1().Pods(serveNamespace).DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := kube.CoreV1().Events(serveNamespace).DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := kube.AppsV1().ReplicaSets(serveNamespace).DeleteCollection(ctx, now, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := kube.CoreV1().Namespaces().Delete(ctx, serveNamespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	if ns, err = kube.CoreV1().Namespaces().Get(ctx, serveNamespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		b.Fatal(err)
	}
	ns.Spec.Finalizers = nil
	if _, err := kube.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if _, err := kube.CoreV1().Namespaces().Get(ctx, serveNamespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
	}
	b.Fatalf("namespace %s still exists 2 minutes after its deletion", serveNamespace)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// whypendingBinary builds cmd/whypending once per test process; WHYPENDING_BENCH_BIN names a
// binary built already instead (another revision's, for before and after figures).
func whypendingBinary(b *testing.B) string {
	if bin := os.Getenv("WHYPENDING_BENCH_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "whypending-serve-bench-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "whypending")
		cmd := exec.Command("go", "build", "-o", builtBin, "./cmd/whypending")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/whypending: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return builtBin
}

// fakeSlack is the Slack side of the benchmark: the Web API (every call succeeds) and the
// response_url endpoints, recording when each answer arrives.
type fakeSlack struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers map[string]chan answer
}

type answer struct {
	at   time.Time
	text string
}

func newFakeSlack() *fakeSlack {
	f := &fakeSlack{answers: map[string]chan answer{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		if id, ok := strings.CutPrefix(r.URL.Path, "/hook/"); ok {
			var m struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(body, &m)
			f.hook(id) <- answer{at: at, text: m.Text}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	return f
}

func (f *fakeSlack) hook(id string) chan answer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answers[id] == nil {
		f.answers[id] = make(chan answer, 4)
	}
	return f.answers[id]
}

// serveProcess is one running `whypending serve`.
type serveProcess struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT
	slack  *fakeSlack
	seq    int
	seqMu  sync.Mutex
	logBuf *bytes.Buffer
}

// startServe starts the binary against e's cluster.
func startServe(b *testing.B, e *benchEnv, bin string) *serveProcess {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	slack := newFakeSlack()
	cfg := fmt.Sprintf(`listen: %q
clusters:
  - name: bench
    kubeconfig: %q
    namespace: %s
slack:
  mode: http
  apiURL: %q
approvals:
  approvers: {users: [U0BENCHAPPROVER]}
store: {backend: memory}
`, addr, e.c.KubeconfigPath, serveNamespace, slack.srv.URL+"/api/")
	path := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	p := &serveProcess{cmd: nicedCommand(bin, "serve", "--config", path), base: "http://" + addr, slack: slack, logBuf: &bytes.Buffer{}}
	p.cmd.Env = append(os.Environ(), "SLACK_SIGNING_SECRET="+serveSecret, "SLACK_BOT_TOKEN=xoxb-serve-bench", "GOMAXPROCS=2")
	p.cmd.Stderr = p.logBuf
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return p
}

func (p *serveProcess) pid() int { return p.cmd.Process.Pid }

// stop ends the process (SIGTERM, then SIGKILL after 20 s).
func (p *serveProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.slack.srv.Close()
}

// waitReady polls /readyz until it answers 200.
func (p *serveProcess) waitReady(ctx context.Context) error {
	for {
		resp, err := http.Get(p.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.cmd.ProcessState != nil {
			return fmt.Errorf("serve exited: %s", p.logBuf.String())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w\n%s", ctx.Err(), lastLines(p.logBuf.String(), 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ask sends a signed slash command and waits for its answer at the response_url; it returns
// the time from sending to the answer's arrival, and the answer's text.
func (p *serveProcess) ask(command, text string) (time.Duration, string, error) {
	p.seqMu.Lock()
	p.seq++
	id := strconv.Itoa(p.seq)
	p.seqMu.Unlock()
	body := url.Values{"command": {command}, "text": {text}, "team_id": {"T0BENCH"}, "user_id": {"U0ASKER"}, "user_name": {"asker"},
		"channel_id": {"C0BENCH"}, "response_url": {p.slack.srv.URL + "/hook/" + id}, "trigger_id": {"1.2.3"}}.Encode()
	ts := time.Now()
	mac := hmac.New(sha256.New, []byte(serveSecret))
	fmt.Fprintf(mac, "v0:%d:%s", ts.Unix(), body)
	req, err := http.NewRequest(http.MethodPost, p.base+"/slack/commands", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("%s %s: HTTP %d", command, text, resp.StatusCode)
	}
	select {
	case a := <-p.slack.hook(id):
		return a.at.Sub(start), a.text, nil
	case <-time.After(2 * time.Minute):
		return 0, "", fmt.Errorf("%s %s: no answer within 2 minutes", command, text)
	}
}

// metrics returns the sum of serve's /metrics samples named name, by the value of label
// (every sample under "" when label is empty).
func (p *serveProcess) metrics(name, label string) (map[string]float64, error) {
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		key := ""
		if label != "" {
			if _, rest, ok := strings.Cut(line, label+`="`); ok {
				key, _, _ = strings.Cut(rest, `"`)
			}
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			out[key] += v
		}
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkServe starts `whypending serve` on the fixture (one process per iteration) and
// reports:
//
//   - sync-s: from process start to /readyz answering 200 (every cache synced);
//   - rss-ready-MiB, heap-ready-MiB: its RSS and Go heap (go_memstats_heap_alloc_bytes) 5 s
//     after ready; heap-bytes/pod: that heap over the cached pods (an upper bound of a cached
//     pod's cost: the heap holds every other cache too);
//   - warm-p50-ms, warm-p95-ms: /why-pending on a pod with "IPAM allocated only 0", 30
//     questions one after another over ten such pods, after each was asked once;
//   - conc-p95-ms, conc-max-ms: ten questions about the ten pods sent at once;
//   - lists/question: LIST requests the API server received while the questions were
//     answered (all clients; the benchmark itself sends none then), minus those of an equal
//     idle window before; the benchmark fails if the questions sent any (the issue: 0 after
//     sync); pod-gets/question likewise for GET pods (the asked-about pod is read whole);
//   - ipam-check-ms: /ipam check (from the cache);
//   - unsched-ms, rss-after-MiB: an unscheduled pod (its answer reads every cached pod) and
//     the RSS after all questions; hwm-MiB: the peak RSS (VmHWM); serve-cpu-s its CPU time;
//   - cli-why-s, cli-why-peak-MiB, cli-why-server-cpu-s: `whypending why-pending` from the
//     command line on one of the Calico-failing pods (before serve starts).
//
// It also checks that the cache's check (a calico.Cache in the benchmark process) finds the
// same leaked set as a fresh `whypending ipam check --report` of the same binary, and that the
// bot's /ipam check answer names that count.
func BenchmarkServe(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			e := benchSetup(b, size.name, size.spec)
			s := e.setupServe(b)
			if e.attached {
				b.Cleanup(func() { deleteNamespace(b, e) })
			}
			bin := whypendingBinary(b)
			leaked := cacheMatchesCLI(b, e, bin)
			ctx := b.Context()
			var runs []map[string]float64
			for b.Loop() {
				b.StopTimer()
				e.reniceServers(b)
				m := runServeBench(b, ctx, e, s, bin, leaked)
				runs = append(runs, m)
				b.StartTimer()
			}
			b.ReportMetric(0, "ns/op") // the timer is stopped: the figures are the metrics below
			for _, k := range slices.Sorted(maps.Keys(runs[0])) {
				var sum float64
				for _, r := range runs {
					sum += r[k]
				}
				b.ReportMetric(sum/float64(len(runs)), k)
			}
		})
	}
}

// cliWhyPending runs `whypending why-pending` from the command line on a Calico-failing pod,
// cold (a fresh process that reads everything the answer needs), and records its wall time,
// peak RSS and the API server's and etcd's CPU seconds in m.
func cliWhyPending(b *testing.B, e *benchEnv, s *serveSetup, bin string, m map[string]float64) {
	cmd := nicedCommand(bin, "why-pending", "-n", serveNamespace, s.calicoPods[0], "-o", "json")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.c.KubeconfigPath, "GOMAXPROCS=2")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cpu0 := e.serverCPU()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	peak := peakWatcher(cmd.Process.Pid)
	err := cmd.Wait()
	m["cli-why-s"], m["cli-why-peak-MiB"] = time.Since(start).Seconds(), float64(peak())/1024
	m["cli-why-server-cpu-s"] = e.serverCPU() - cpu0
	if err != nil || !strings.Contains(out.String(), "calico-ipam-exhausted") {
		b.Fatalf("whypending why-pending: %v\n%s", err, lastLines(out.String(), 20))
	}
}

// runServeBench is one serve process, start to stop.
func runServeBench(b *testing.B, ctx context.Context, e *benchEnv, s *serveSetup, bin string, leaked int) map[string]float64 {
	m := map[string]float64{"load1": loadAverage()}
	cliWhyPending(b, e, s, bin, m)
	p := startServe(b, e, bin)
	defer p.stop()
	start := time.Now()
	renice(b, p.pid())
	rctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	if err := p.waitReady(rctx); err != nil {
		b.Fatal(err)
	}
	m["sync-s"] = time.Since(start).Seconds()
	time.Sleep(5 * time.Second)
	rss, _ := procMem(p.pid())
	m["rss-ready-MiB"] = float64(rss) / 1024
	heap, err := p.metrics("go_memstats_heap_alloc_bytes", "")
	if err != nil {
		b.Fatal(err)
	}
	m["heap-ready-MiB"] = heap[""] / (1 << 20)
	objects, err := p.metrics("whypending_cache_objects", "cache")
	if err != nil {
		b.Fatal(err)
	}
	synced, _ := p.metrics("whypending_cache_synced", "cache")
	b.Logf("caches after %.1fs: objects %v; synced %v", m["sync-s"], objects, synced)
	m["heap-bytes/pod"] = heap[""] / objects["pods"]

	lists := func() float64 {
		v, err := e.apiMetrics(ctx, "apiserver_request_total", `verb="LIST"`)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	podGets := func() float64 {
		v, err := e.apiMetrics(ctx, "apiserver_request_total", `verb="GET"`, `resource="pods"`, `subresource=""`)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	ask := func(command, text, want string) time.Duration {
		took, answer, err := p.ask(command, text)
		if err != nil {
			b.Fatalf("%v\n%s", err, lastLines(p.logBuf.String(), 20))
		}
		if !strings.Contains(answer, want) {
			b.Fatalf("%s %s answered %q, want it to mention %q", command, text, answer, want)
		}
		return took
	}
	for _, pod := range s.calicoPods { // warm up: the first answer computes the IPAM result
		ask("/why-pending", serveNamespace+"/"+pod, "calico-ipam-exhausted")
	}
	idleStart, idleLists, idleGets := time.Now(), lists(), podGets()
	time.Sleep(10 * time.Second)
	idleLists, idleGets = lists()-idleLists, podGets()-idleGets
	idle := time.Since(idleStart)

	qStart, l0, g0 := time.Now(), lists(), podGets()
	var warm []time.Duration
	for i := range 3 * servePods {
		warm = append(warm, ask("/why-pending", serveNamespace+"/"+s.calicoPods[i%servePods], "calico-ipam-exhausted"))
	}
	conc := make([]time.Duration, servePods)
	var wg sync.WaitGroup
	for i, pod := range s.calicoPods {
		wg.Go(func() { conc[i] = ask("/why-pending", serveNamespace+"/"+pod, "calico-ipam-exhausted") })
	}
	wg.Wait()
	questions := float64(len(warm) + len(conc))
	window := time.Since(qStart)
	scale := window.Seconds() / idle.Seconds()
	extraLists := lists() - l0 - idleLists*scale
	m["lists/question"] = extraLists / questions
	if extraLists >= 1 { // the issue: no LIST per question once the caches have synced
		b.Fatalf("%.0f questions sent %.1f LIST requests to the API server (beyond the idle rate of %.0f in %s); want 0 after sync",
			questions, extraLists, idleLists, idle.Round(time.Second))
	}
	m["pod-gets/question"] = (podGets() - g0 - idleGets*scale) / questions
	m["warm-p50-ms"], m["warm-p95-ms"] = ms(percentile(warm, 0.5)), ms(percentile(warm, 0.95))
	m["conc-p95-ms"], m["conc-max-ms"] = ms(percentile(conc, 0.95)), ms(slices.Max(conc))

	m["ipam-check-ms"] = ms(ask("/ipam", "check", fmt.Sprintf("%d leaked IPs", leaked)))
	_, hwm := procMem(p.pid())
	m["hwm-MiB"] = float64(hwm) / 1024 // the sync's peak, before the questions that read every pod
	// The peak while answering: VmHWM reset to the RSS before each question (clear_refs 5).
	resetPeak(b, p.pid())
	m["rss-before-unsched-MiB"] = float64(first(procMem(p.pid()))) / 1024
	m["unsched-ms"] = ms(ask("/why-pending", serveNamespace+"/"+s.unscheduled, s.unscheduled))
	_, hwm = procMem(p.pid())
	m["unsched-peak-MiB"] = float64(hwm) / 1024
	massEvent(b, p, s, m, ask)
	rss, hwm = procMem(p.pid())
	m["rss-after-MiB"], m["hwm-MiB"] = float64(rss)/1024, max(m["hwm-MiB"], float64(hwm)/1024)
	m["serve-cpu-s"] = procCPU(p.pid())
	b.Logf("serve on %d nodes: %v", e.f.spec.Nodes, m)
	return m
}

// massEvent asks, all at once, what a watch asks in a mass event: the namespace's sweep (every
// stuck pod), the stuck ReplicaSet, and each of the other stuck pods and ten of the
// ReplicaSet's; it records the time until every answer arrived (mass-s) and serve's peak RSS
// meanwhile (mass-peak-MiB, VmHWM reset before).
func massEvent(b *testing.B, p *serveProcess, s *serveSetup, m map[string]float64, ask func(command, text, want string) time.Duration) {
	time.Sleep(5 * time.Second) // let the last answer's garbage go
	resetPeak(b, p.pid())
	m["rss-before-mass-MiB"] = float64(first(procMem(p.pid()))) / 1024
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { ask("/why-pending", "-n "+serveNamespace+" --all", "stuck pods") })
	wg.Go(func() { ask("/why-pending", "-n "+serveNamespace+" replicaset/"+s.massWorkload, s.massWorkload) })
	for _, pod := range s.massOthers {
		wg.Go(func() { ask("/why-pending", serveNamespace+"/"+pod, pod) })
	}
	for i := range 10 {
		pod := fmt.Sprintf("%s-%05x", s.massWorkload, i*massPods/10)
		wg.Go(func() { ask("/why-pending", serveNamespace+"/"+pod, pod) })
	}
	wg.Wait()
	m["mass-s"] = time.Since(start).Seconds()
	_, hwm := procMem(p.pid())
	m["mass-peak-MiB"] = float64(hwm) / 1024
}

// resetPeak sets pid's VmHWM to its current RSS (/proc/PID/clear_refs, "5").
func resetPeak(b *testing.B, pid int) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		b.Fatalf("reset the peak RSS of %d: %v", pid, err)
	}
}

func first[A, B any](a A, _ B) A { return a }

// cacheMatchesCLI checks that a calico.Cache finds exactly the leaked set a fresh CLI check
// (the built binary's `ipam check --report report.json`) finds, and returns its size.
func cacheMatchesCLI(b *testing.B, e *benchEnv, bin string) int {
	b.Helper()
	report := filepath.Join(b.TempDir(), "report.json")
	cmd := nicedCommand(bin, "ipam", "check", "--report", report)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.c.KubeconfigPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("whypending ipam check: %v\n%s", err, out)
	}
	f, err := os.Open(report)
	if err != nil {
		b.Fatal(err)
	}
	rep, err := ReadReport(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	k := syncedBenchCache(b, ctx, e)
	res, err := k.Check(ctx, CheckOptions{})
	if err != nil {
		b.Fatal(err)
	}
	key := func(a Allocation) string { return fmt.Sprintf("%s %s %d", a.IP, a.Handle, *a.SequenceNumber) }
	var fromCache, fromCLI []string
	for _, a := range res.LeakedIPs {
		fromCache = append(fromCache, key(a))
	}
	for _, a := range rep.Leaked() {
		fromCLI = append(fromCLI, key(a))
	}
	slices.Sort(fromCache)
	slices.Sort(fromCLI)
	if !slices.Equal(fromCache, fromCLI) || (e.f.leaked >= 0 && len(fromCache) != e.f.leaked) {
		b.Fatalf("the cache finds %d leaked IPs, a fresh CLI check %d (fixture: %d); the sets differ", len(fromCache), len(fromCLI), e.f.leaked)
	}
	b.Logf("cache and a fresh CLI check agree: the same %d leaked IPs", len(fromCache))
	return len(fromCache)
}
