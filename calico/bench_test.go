package calico

// Benchmarks on the real control plane. They run only with -bench (never in the default test
// run); generating the fixtures takes about 4 minutes (small) and 10 minutes (large), once per
// test process: every benchmark of a size shares it. Results and method: BENCHMARKS.md.
//
//	WHYPENDING_BENCH_NICE=-15 go test ./calico -run '^$' -bench '/small' -benchtime 3x -timeout 90m | tee small.txt
//	WHYPENDING_BENCH_NICE=-15 go test ./calico -run '^$' -bench '/large' -benchtime 1x -count 3 -timeout 180m | tee large.txt
//	go run golang.org/x/perf/cmd/benchstat@latest small.txt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/whypending/whypending/internal/testenv"
)

// benchEnv is a cluster holding a generated fixture; it lives until the test binary exits so
// -count repetitions reuse it.
type benchEnv struct {
	c  *testenv.Cluster
	cl *Client
	f  *fixture
	// blocks and handles are the fixture's IPAM objects as created (raw JSON), for restoring
	// the leaked state after a release.
	blocks, handles map[string][]byte
	// lastWrite is when the benchmarks last wrote to the cluster (for the cold-cache runs).
	lastWrite time.Time
	// serve is what BenchmarkServe adds to the fixture (serve_bench_test.go).
	serve *serveSetup
	// attached is set for a cluster of benchKubeconfigEnv: its fixture's leaked count is
	// unknown (f.leaked is -1) and blocks and handles are not saved.
	attached bool
}

var (
	benchMu   sync.Mutex
	benchEnvs = map[string]*benchEnv{}
)

func benchSetup(b *testing.B, name string, spec fixtureSpec) *benchEnv {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if e := benchEnvs[name]; e != nil {
		return e
	}
	ctx := context.Background()
	if kc := os.Getenv(benchKubeconfigEnv); kc != "" {
		e := attachBench(b, ctx, kc, spec)
		benchEnvs[name] = e
		return e
	}
	c, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	f, err := buildFixture(ctx, c.Config, spec)
	if err != nil {
		b.Fatalf("build fixture: %v\n%s", err, c.LogTail("kube-apiserver", 20))
	}
	b.Logf("fixture %s: %d nodes, %d blocks, %d allocations (%d leaked, %d tunnel), %d pods, %d handles; %d writes in %s",
		name, spec.Nodes, f.blocks, spec.Allocations, f.leaked, f.tunnels, f.pods, f.handles, f.writes, f.createdIn.Round(time.Second))
	cl, err := NewClient(ctx, c.Config)
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{c: c, cl: cl, f: f, blocks: map[string][]byte{}, handles: map[string][]byte{}, lastWrite: time.Now()}
	if err := e.snapshot(ctx); err != nil {
		b.Fatal(err)
	}
	e.reniceServers(b)
	renice(b, os.Getpid())
	benchEnvs[name] = e
	return e
}

// benchKubeconfigEnv names the kubeconfig of a cluster that already holds the fixture of the
// benchmark's size (built by buildFixture in another process), which the benchmarks then use
// instead of starting a control plane and building one (15-20 minutes at L). Only
// BenchmarkServe runs on it: the release and cold-check benchmarks need the fixture's saved
// state and its API server's process. What BenchmarkServe adds goes into its own namespace
// (WHYPENDING_BENCH_NAMESPACE, default serve-bench), made afresh and deleted afterwards; the
// API server's and etcd's CPU seconds read 0 (their processes are not ours).
const benchKubeconfigEnv = "WHYPENDING_BENCH_KUBECONFIG"

// attachBench is the benchEnv of the cluster at kubeconfig, which holds the fixture spec.
func attachBench(b *testing.B, ctx context.Context, kubeconfig string, spec fixtureSpec) *benchEnv {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatalf("%s: %v", benchKubeconfigEnv, err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit, as buildFixture writes
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := NewClient(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(nodes.Items) != spec.Nodes {
		b.Fatalf("%s: the cluster has %d nodes, the fixture %d", benchKubeconfigEnv, len(nodes.Items), spec.Nodes)
	}
	b.Logf("using the fixture of the cluster at %s (%s)", kubeconfig, benchKubeconfigEnv)
	return &benchEnv{c: &testenv.Cluster{Config: cfg, Client: client, KubeconfigPath: kubeconfig}, cl: cl,
		f: &fixture{spec: spec, leaked: -1}, attached: true, lastWrite: time.Now()}
}

// snapshot saves the IPAM blocks and handles.
func (e *benchEnv) snapshot(ctx context.Context) error {
	save := func(res string, into map[string][]byte) error {
		_, err := listAll(ctx, e.cl, res, func(raw *json.RawMessage) error {
			var m struct {
				Metadata objectMeta `json:"metadata"`
			}
			if err := json.Unmarshal(*raw, &m); err != nil {
				return err
			}
			into[m.Metadata.Name] = append([]byte(nil), *raw...)
			return nil
		})
		return err
	}
	if err := save(resBlocks, e.blocks); err != nil {
		return err
	}
	return save(resHandles, e.handles)
}

// restore puts the blocks back as snapshotted and recreates deleted handles.
func (e *benchEnv) restore(ctx context.Context) error {
	live := map[string]bool{}
	if _, err := listAll(ctx, e.cl, resHandles, func(h *handleObject) error {
		live[h.Metadata.Name] = true
		return nil
	}); err != nil {
		return err
	}
	var names []string
	for n := range e.blocks {
		names = append(names, n)
	}
	if err := forEach(ctx, 64, names, func(ctx context.Context, n string) error {
		cur, err := e.cl.res(resBlocks).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var old map[string]any
		if err := json.Unmarshal(e.blocks[n], &old); err != nil {
			return err
		}
		cur.Object["spec"] = old["spec"]
		_, err = e.cl.res(resBlocks).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("restore blocks: %w", err)
	}
	var missing [][]byte
	for n, raw := range e.handles {
		if !live[n] {
			var m map[string]any
			_ = json.Unmarshal(raw, &m)
			md := m["metadata"].(map[string]any)
			m["metadata"] = map[string]any{"name": md["name"]}
			b, _ := json.Marshal(m)
			missing = append(missing, b)
		}
	}
	e.lastWrite = time.Now()
	return forEach(ctx, 64, missing, func(ctx context.Context, body []byte) error {
		return e.cl.raw.Post().Resource(resHandles).Body(body).Do(ctx).Error()
	})
}

// touch makes one no-op write (an annotation) to an object of every kind a check lists. A live
// cluster's IPAM objects and pods change all the time, which keeps the API server's watch
// cache able to serve paginated lists; in an idle fixture, after the API server's periodic
// etcd compaction, continuation pages are served from etcd instead, at several times the
// server CPU. See BENCHMARKS.md.
func (e *benchEnv) touch(ctx context.Context) error {
	e.lastWrite = time.Now()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"bench/touch":"%d"}}}`, time.Now().UnixNano()))
	for _, r := range []string{resHandles, resBlocks, resPools} {
		var name string
		if _, err := listAll(ctx, e.cl, r, func(o *struct {
			Metadata objectMeta `json:"metadata"`
		}) error {
			if name == "" {
				name = o.Metadata.Name
			}
			return nil
		}); err != nil {
			return err
		}
		if _, err := e.cl.res(r).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	if _, err := e.c.Client.CoreV1().Nodes().Patch(ctx, fixtureNode(0), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	for _, ns := range e.f.namespaces {
		pods, err := e.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		if _, err := e.c.Client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			if _, err := e.c.Client.CoreV1().Pods(ns).Patch(ctx, pods.Items[0].Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchSizes are the fixture sizes; "tiny" (a minute to build) is for trying a benchmark out.
var benchSizes = []struct {
	name string
	spec fixtureSpec
}{
	{"tiny", fixtureSpec{Nodes: 20, BlocksPerNode: 2, Allocations: 1600}},
	{"small", fixtureSmall},
	{"large", fixtureLarge},
}

// BenchmarkCheck runs Check in a fresh helper process per iteration (like running calicoctl)
// and reports its wall time (ns/op, process start to exit), peak RSS (the child's VmHWM), the
// CPU seconds of the child (client-cpu-s) and of the API server and etcd (server-cpu-s), the
// LIST requests the API server answered from etcd rather than its watch cache (etcd-lists) and
// the load average. "warm" makes a no-op write to every listed kind first; "cold" runs once
// the fixture has had no write for longer than the API server's etcd compaction interval (5
// minutes), so that its watch cache holds no snapshot to serve paginated lists from.
func BenchmarkCheck(b *testing.B) {
	for _, size := range benchSizes {
		for _, cache := range []string{"warm", "cold"} {
			b.Run(size.name+"/"+cache, func(b *testing.B) {
				e := benchSetup(b, size.name, size.spec)
				if e.attached {
					b.Skipf("needs its own fixture (%s is set)", benchKubeconfigEnv)
				}
				if cache == "cold" {
					if wait := time.Until(e.lastWrite.Add(6 * time.Minute)); wait > 0 {
						b.Logf("waiting %s for the watch cache to go cold", wait.Round(time.Second))
						time.Sleep(wait)
					}
				}
				var maxRSS int64
				var clientCPU, serverCPU, etcdLists, load float64
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					if cache == "warm" {
						if err := e.touch(b.Context()); err != nil {
							b.Fatal(err)
						}
					}
					e.reniceServers(b)
					lists0, _ := e.apiMetrics(b.Context(), "apiserver_storage_list_total", `storage="etcd"`)
					cpu0 := e.serverCPU()
					b.StartTimer()
					cmd := nicedCommand(os.Args[0])
					cmd.Env = append(os.Environ(), helperEnv+"=check", "KUBECONFIG="+e.c.KubeconfigPath, "GOMAXPROCS=2")
					var out, errb bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &errb
					if err := cmd.Run(); err != nil {
						b.Fatalf("check helper: %v\n%s", err, errb.String())
					}
					b.StopTimer()
					serverCPU += e.serverCPU() - cpu0
					lists1, _ := e.apiMetrics(b.Context(), "apiserver_storage_list_total", `storage="etcd"`)
					etcdLists += lists1 - lists0
					clientCPU += (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
					load += loadAverage()
					var sum struct {
						Allocations, Leaked int
						PeakRSSKiB          int64
					}
					if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
						b.Fatalf("check helper output %q: %v", out.String(), err)
					}
					if sum.Allocations != size.spec.Allocations || sum.Leaked != e.f.leaked {
						b.Fatalf("check saw %d allocations, %d leaked; want %d and %d", sum.Allocations, sum.Leaked, size.spec.Allocations, e.f.leaked)
					}
					maxRSS = max(maxRSS, sum.PeakRSSKiB)
					b.StartTimer()
				}
				n := float64(b.N)
				b.ReportMetric(float64(maxRSS)/1024, "peak-RSS-MiB")
				b.ReportMetric(clientCPU/n, "client-cpu-s")
				b.ReportMetric(serverCPU/n, "server-cpu-s")
				b.ReportMetric(etcdLists/n, "etcd-lists")
				b.ReportMetric(load/n, "load1")
			})
		}
	}
}

// BenchmarkCheckInProcess runs Check in the benchmark process (allocation profile).
func BenchmarkCheckInProcess(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			e := benchSetup(b, size.name, size.spec)
			if e.attached {
				b.Skipf("needs its own fixture (%s is set)", benchKubeconfigEnv)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				if err := e.touch(b.Context()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := e.cl.Check(b.Context(), CheckOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.LeakedIPs) != e.f.leaked {
					b.Fatalf("leaked = %d, want %d", len(res.LeakedIPs), e.f.leaked)
				}
			}
		})
	}
}

// BenchmarkReleaseIPs releases every leaked address of the fixture (found by an untimed check)
// and reports the API writes. The fixture is restored after each iteration (untimed).
func BenchmarkReleaseIPs(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			e := benchSetup(b, size.name, size.spec)
			if e.attached {
				b.Skipf("needs its own fixture (%s is set)", benchKubeconfigEnv)
			}
			ctx := b.Context()
			var last *ReleaseResult
			var serverCPU, writesPerSec, load float64
			for b.Loop() {
				b.StopTimer()
				if err := e.touch(ctx); err != nil {
					b.Fatal(err)
				}
				res, err := e.cl.Check(ctx, CheckOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.LeakedIPs) != e.f.leaked {
					b.Fatalf("leaked = %d, want %d", len(res.LeakedIPs), e.f.leaked)
				}
				e.reniceServers(b)
				renice(b, os.Getpid())
				cpu0 := e.serverCPU()
				b.StartTimer()
				rel, err := e.cl.ReleaseIPs(ctx, res.LeakedIPs, ReleaseOptions{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				serverCPU += e.serverCPU() - cpu0
				writesPerSec += float64(rel.BlockWrites+rel.HandleWrites) / rel.Took.Seconds()
				load += loadAverage()
				if len(rel.Released) != e.f.leaked {
					b.Fatalf("released %d, want %d (skipped %d)", len(rel.Released), e.f.leaked, len(rel.Skipped))
				}
				last = rel
				if err := e.restore(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(last.BlockWrites), "block-writes")
			b.ReportMetric(float64(last.HandleWrites), "handle-writes")
			b.ReportMetric(float64(last.BlockWrites+last.HandleWrites), "api-writes")
			b.ReportMetric(float64(last.Reads), "api-reads")
			b.ReportMetric(writesPerSec/n, "writes/s")
			b.ReportMetric(serverCPU/n, "server-cpu-s")
			b.ReportMetric(load/n, "load1")
		})
	}
}
