package calico

// BenchmarkWatchChurn measures the watch (bot/watch) on a fixture with churn: three
// `whypending serve` processes of the built binary run side by side over the same cluster
// while 1,000 pods go stuck (ImagePullBackOff on a fixture node) and recover over the churn
// window: one without the watch, left alone; one without the watch that is asked
// `/why-pending` about each pod when the watch would post it (what a team without the watch
// does); and one with the watch (store backend kubernetes, a recording Slack).
// Results: calico/BENCHMARKS.md, "Watch under churn".
//
//	WHYPENDING_BENCH_KUBECONFIG=/path/to/L/kubeconfig go test ./calico -run '^$' -bench BenchmarkWatchChurn -benchtime 1x -timeout 60m
//
// With WHYPENDING_BENCH_KUBECONFIG the benchmark reuses that cluster (the shared size-L
// fixture): what it adds lives in its own namespaces (watch-bench-<time>, and -store) and the
// two whypending CRDs, created if missing; all of it is deleted at the end. Without it, it builds the
// "tiny" fixture. WHYPENDING_BENCH_CHURN shortens the window (default 5m). Every stuck pod is
// posted (the channel's rate limit lifted, the worst case) unless WHYPENDING_BENCH_MAXPOSTS
// sets it (the default config's is 10). WHYPENDING_BENCH_BIN names a built binary to run.
//
// Metrics: extra-cpu-cores (the watch process's CPU beyond the one without, averaged over the
// window), cpu-cores-nowatch, rss-avg-MiB and rss-extra-pct (average RSS over the window),
// the same against the asked process (-asked, rss-extra-pct-vs-asked), heap-live-MiB (the
// heap a collection leaves, halfway through; the heap profiles are kept in
// WHYPENDING_BENCH_PROFILES when set), delay-p50-s and delay-p95-s (from a pod's threshold
// to its post reaching Slack), posts, load1.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/whypending/whypending/internal/testenv"
)

// The benchmark's namespaces get a suffix per run: a fixture without kube-controller-manager
// never finishes deleting a namespace, so a name is not reused.
var (
	watchBenchNS    = fmt.Sprintf("watch-bench-%d", time.Now().Unix())
	watchBenchStore = watchBenchNS + "-store"
)

const (
	watchChurnPods = 1000
	watchThreshold = 10 * time.Second
	watchStuckFor  = 60 * time.Second
)

var churnPod = regexp.MustCompile(`churn-\d{4}`)

// watchSlack is the Slack Web API for the watch: chat.postMessage answers a ts, and the first
// root about each churn pod is timed.
type watchSlack struct {
	srv   *httptest.Server
	seq   atomic.Int64
	mu    sync.Mutex
	first map[string]time.Time // churn pod -> its root's arrival
	posts int
}

func newWatchSlack() *watchSlack {
	f := &watchSlack{first: map[string]time.Time{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 0))
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat.postMessage"):
			ts := fmt.Sprintf("%d.%06d", at.Unix(), f.seq.Add(1)%1000000)
			f.mu.Lock()
			f.posts++
			if r.PostForm.Get("thread_ts") == "" {
				if pod := churnPod.FindString(r.PostForm.Get("text")); pod != "" {
					if _, ok := f.first[pod]; !ok {
						f.first[pod] = at
					}
				}
			}
			f.mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": r.PostForm.Get("channel"), "ts": ts})
		case strings.HasSuffix(r.URL.Path, "/conversations.history"), strings.HasSuffix(r.URL.Path, "/conversations.replies"):
			_, _ = w.Write([]byte(`{"ok":true,"messages":[],"has_more":false}`))
		default:
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	return f
}

// installWatchCRDs creates the chart's CRDs when missing; the returned func deletes those it
// created.
func installWatchCRDs(b *testing.B, dyn dynamic.Interface) func() {
	root, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	var created []string
	for _, f := range []string{"whypending.io_notifications.yaml", "whypending.io_remediationrequests.yaml"} {
		raw, err := os.ReadFile(filepath.Join(root, "charts", "whypending", "crds", f))
		if err != nil {
			b.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			b.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		_, err = dyn.Resource(gvr).Create(b.Context(), u, metav1.CreateOptions{})
		switch {
		case err == nil:
			created = append(created, u.GetName())
		case apierrors.IsAlreadyExists(err):
		default:
			b.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second) // established
	return func() {
		for _, n := range created {
			_ = dyn.Resource(gvr).Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	}
}

func BenchmarkWatchChurn(b *testing.B) {
	kubeconfig := os.Getenv("WHYPENDING_BENCH_KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = benchSetup(b, "tiny", benchSizes[0].spec).c.KubeconfigPath
	}
	window := 5 * time.Minute
	if v := os.Getenv("WHYPENDING_BENCH_CHURN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	// Every stuck pod posted (the worst case), unless WHYPENDING_BENCH_MAXPOSTS sets the
	// channel's limit (10 is the default config's: 10 posts and one roll-up per 10 minutes).
	maxPosts := 100000
	if v := os.Getenv("WHYPENDING_BENCH_MAXPOSTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		maxPosts = n
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := b.Context()
	defer installWatchCRDs(b, dyn)()
	for _, ns := range []string{watchBenchNS, watchBenchStore} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		// Without a namespace controller nothing deletes a namespace's objects: delete them
		// first, then the namespaces.
		ctx := context.Background()
		_ = kube.CoreV1().Pods(watchBenchNS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = dyn.Resource(schema.GroupVersionResource{Group: "whypending.io", Version: "v1alpha1", Resource: "notifications"}).Namespace(watchBenchStore).
			DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = kube.CoordinationV1().Leases(watchBenchStore).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		for _, ns := range []string{watchBenchNS, watchBenchStore} {
			_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			// The namespace controller's part: drop the kubernetes finalizer of the
			// now-empty namespace, so it goes (a no-op where a controller runs).
			if n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
				n.Spec.Finalizers = nil
				_, _ = kube.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{})
			}
		}
	}()
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 50})
	if err != nil || len(nodes.Items) == 0 {
		b.Fatalf("nodes: %v", err)
	}
	bin := whypendingBinary(b)

	for b.Loop() {
		b.StopTimer()
		slack := newWatchSlack()
		pprofOf := map[*serveProcess]string{}
		start := func(watch, asked bool) (*serveProcess, func()) {
			addr, pprofAddr := freeAddr(b), freeAddr(b)
			c := fmt.Sprintf("listen: %q\npprofListen: %q\nclusters:\n  - name: bench\n    kubeconfig: %q\nslack:\n  mode: http\n  apiURL: %q\napprovals:\n  approvers: {users: [U0BENCH]}\n",
				addr, pprofAddr, kubeconfig, slack.srv.URL+"/api/")
			if watch {
				c += fmt.Sprintf("store: {namespace: %s}\nchannels: {digest: [C0BENCH]}\nwatch:\n  enabled: true\n  thresholds: {imagePull: %s}\n  maxPostsPer10m: %d\n", watchBenchStore, watchThreshold, maxPosts)
			} else {
				c += "store: {backend: memory}\n"
			}
			path := filepath.Join(b.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(c), 0o600); err != nil {
				b.Fatal(err)
			}
			p := &serveProcess{cmd: nicedCommand(bin, "serve", "--config", path), base: "http://" + addr, slack: &fakeSlack{srv: httptest.NewServer(http.NotFoundHandler())}, logBuf: &bytes.Buffer{}}
			if asked {
				p.slack.srv.Close()
				p.slack = newFakeSlack() // its answers arrive at response_url
			}
			p.cmd.Env = append(os.Environ(), "SLACK_SIGNING_SECRET="+serveSecret, "SLACK_BOT_TOKEN=xoxb-watch-bench", "GOMAXPROCS=2")
			p.cmd.Stderr = p.logBuf
			if err := p.cmd.Start(); err != nil {
				b.Fatal(err)
			}
			pprofOf[p] = "http://" + pprofAddr
			return p, p.stop
		}
		plain, stopPlain := start(false, false)
		asked, stopAsked := start(false, true)
		watched, stopWatched := start(true, false)
		rctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		for _, p := range []*serveProcess{plain, asked, watched} {
			if err := p.waitReady(rctx); err != nil {
				b.Fatal(err)
			}
		}
		cancel()
		time.Sleep(10 * time.Second) // settle after the sync
		load0 := loadAverage()
		cpuP, cpuA, cpuW := procCPU(plain.pid()), procCPU(asked.pid()), procCPU(watched.pid())
		var rssP, rssA, rssW []float64
		sampling := make(chan struct{})
		var sampled sync.WaitGroup
		sampled.Go(func() {
			for {
				select {
				case <-sampling:
					return
				case <-time.After(time.Second):
				}
				a, _ := procMem(plain.pid())
				q, _ := procMem(asked.pid())
				c, _ := procMem(watched.pid())
				rssP, rssA, rssW = append(rssP, float64(a)/1024), append(rssA, float64(q)/1024), append(rssW, float64(c)/1024)
			}
		})

		// Halfway through the churn, where most pods are stuck or being posted, each process's
		// live heap: a heap profile after a collection (kept in WHYPENDING_BENCH_PROFILES
		// when set, for `go tool pprof -diff_base`), and the heap the collection left.
		var live sync.WaitGroup
		liveMiB := map[string]float64{}
		live.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(window / 2):
			}
			for p, name := range map[*serveProcess]string{plain: "nowatch", asked: "asked", watched: "watch"} {
				if mib, err := liveHeap(ctx, pprofOf[p], name); err != nil {
					b.Logf("heap profile of %s: %v", name, err)
				} else {
					liveMiB[name] = mib
				}
			}
		})

		// The churn: pod i goes stuck at i*window/N and recovers watchStuckFor later.
		churnStart := time.Now()
		stuckAt := make([]time.Time, watchChurnPods)
		var wg sync.WaitGroup
		var failures, askFailures atomic.Int64
		for i := range watchChurnPods {
			at := churnStart.Add(time.Duration(i) * (window - watchStuckFor) / watchChurnPods)
			time.Sleep(time.Until(at))
			name := fmt.Sprintf("churn-%04d", i)
			node := nodes.Items[i%len(nodes.Items)].Name
			since, err := stuckPod(ctx, kube, name, node)
			if err != nil {
				failures.Add(1)
				continue
			}
			stuckAt[i] = since
			wg.Go(func() {
				// What an on-call engineer without the watch would do: ask about the pod when
				// the watch would have posted it.
				time.Sleep(time.Until(since.Add(watchThreshold)))
				if _, text, err := asked.ask("/why-pending", "-n "+watchBenchNS+" "+name); err != nil || !strings.Contains(text, name) {
					askFailures.Add(1)
				}
			})
			wg.Go(func() {
				time.Sleep(time.Until(since.Add(watchStuckFor)))
				if err := recoverPod(context.Background(), kube, name); err != nil {
					failures.Add(1)
				}
			})
		}
		wg.Wait()
		live.Wait()
		time.Sleep(10 * time.Second) // the last recoveries reach the posts
		elapsed := time.Since(churnStart)
		close(sampling)
		sampled.Wait()
		dP, dA, dW := procCPU(plain.pid())-cpuP, procCPU(asked.pid())-cpuA, procCPU(watched.pid())-cpuW
		_, hwmP := procMem(plain.pid())
		_, hwmW := procMem(watched.pid())
		m := map[string]float64{"load1-start": load0, "load1": loadAverage(), "failures": float64(failures.Load()), "ask-failures": float64(askFailures.Load())}
		m["cpu-cores-nowatch"] = dP / elapsed.Seconds()
		m["cpu-cores-watch"] = dW / elapsed.Seconds()
		m["extra-cpu-cores"] = (dW - dP) / elapsed.Seconds()
		m["cpu-cores-asked"] = dA / elapsed.Seconds()
		avg := func(xs []float64) float64 {
			s := 0.0
			for _, x := range xs {
				s += x
			}
			return s / float64(max(1, len(xs)))
		}
		m["rss-avg-MiB-nowatch"], m["rss-avg-MiB-watch"] = avg(rssP), avg(rssW)
		m["rss-extra-pct"] = 100 * (avg(rssW) - avg(rssP)) / avg(rssP)
		m["rss-avg-MiB-asked"] = avg(rssA)
		m["rss-extra-pct-vs-asked"] = 100 * (avg(rssW) - avg(rssA)) / avg(rssA)
		m["hwm-MiB-nowatch"], m["hwm-MiB-watch"] = float64(hwmP)/1024, float64(hwmW)/1024
		if liveMiB["nowatch"] > 0 && liveMiB["watch"] > 0 {
			m["heap-live-MiB-nowatch"], m["heap-live-MiB-watch"] = liveMiB["nowatch"], liveMiB["watch"]
			m["heap-live-extra-pct"] = 100 * (liveMiB["watch"] - liveMiB["nowatch"]) / liveMiB["nowatch"]
			m["heap-live-MiB-asked"] = liveMiB["asked"]
		}
		slack.mu.Lock()
		var delays []time.Duration
		for i, since := range stuckAt {
			if at, ok := slack.first[fmt.Sprintf("churn-%04d", i)]; ok && !since.IsZero() {
				delays = append(delays, at.Sub(since.Add(watchThreshold)))
			}
		}
		m["posts"], m["roots"] = float64(slack.posts), float64(len(slack.first))
		slack.mu.Unlock()
		sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
		if len(delays) > 0 {
			m["delay-p50-s"] = percentile(delays, 0.5).Seconds()
			m["delay-p95-s"] = percentile(delays, 0.95).Seconds()
			m["delay-max-s"] = delays[len(delays)-1].Seconds()
		}
		b.Logf("watch churn (%d pods over %s): %v", watchChurnPods, window, m)
		stopWatched()
		stopAsked()
		stopPlain()
		slack.srv.Close()
		if len(delays) < watchChurnPods*9/10 {
			b.Errorf("%d of %d stuck pods posted\nwatch log:\n%s", len(delays), watchChurnPods, lastLines(watched.logBuf.String(), 30))
		}
		b.StartTimer()
		for k, v := range m {
			b.ReportMetric(v, k)
		}
	}
	b.ReportMetric(0, "ns/op")
}

// stuckPod creates a bare pod bound to node whose image pull fails (the status a kubelet
// writes) and returns when it became stuck as the cluster records it (whole seconds).
func stuckPod(ctx context.Context, kube kubernetes.Interface, name, node string) (time.Time, error) {
	const image = "registry.example.com/bench/churn:9.9"
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: watchBenchNS}, Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{{Name: "app", Image: image}}}}
	created, err := kube.CoreV1().Pods(watchBenchNS).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, err
	}
	now := metav1.Now()
	created.Status.Phase = corev1.PodPending
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now}}
	created.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + image + `": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "` + image + `": not found`}}}}
	if _, err := kube.CoreV1().Pods(watchBenchNS).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return time.Time{}, err
	}
	return now.Truncate(time.Second), nil
}

// recoverPod marks the pod Running and Ready (the image finally pulled).
func recoverPod(ctx context.Context, kube kubernetes.Interface, name string) error {
	p, err := kube.CoreV1().Pods(watchBenchNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now}, {Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: p.Spec.Containers[0].Image, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	_, err = kube.CoreV1().Pods(watchBenchNS).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// freeAddr is a free loopback host:port.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// liveHeap takes a heap profile of the serve process whose profiles are at base, after a
// collection (?gc=1), saves it as WHYPENDING_BENCH_PROFILES/heap-NAME.pb.gz when that is set,
// and returns the live heap: HeapAlloc right after a collection, from the MemStats that end
// the profile's text form.
func liveHeap(ctx context.Context, base, name string) (float64, error) {
	get := func(q string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/heap?"+q, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("heap profile: %s", resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	raw, err := get("gc=1")
	if err != nil {
		return 0, err
	}
	if dir := os.Getenv("WHYPENDING_BENCH_PROFILES"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "heap-"+name+".pb.gz"), raw, 0o644); err != nil {
			return 0, err
		}
	}
	text, err := get("gc=1&debug=1") // after another collection; the text form ends with the runtime's MemStats
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`).FindSubmatch(text)
	if m == nil {
		return 0, fmt.Errorf("no HeapAlloc in the heap profile's text form")
	}
	var n float64
	_, err = fmt.Sscan(string(m[1]), &n)
	return n / (1 << 20), err
}
