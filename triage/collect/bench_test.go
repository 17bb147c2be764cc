package collect

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// Benchmark cluster size (the target: 200 nodes, 5,000 bound pods with status).
const (
	benchNodes = 200
	benchPods  = 5000
	// benchWorkers is how many goroutines create objects.
	benchWorkers = 48
)

// benchRequestCounter counts API requests that are not watches (the informers' long-running
// watches are not per-diagnosis work).
type benchRequestCounter struct {
	rt    http.RoundTripper
	count atomic.Int64
}

func (r *benchRequestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") != "true" {
		r.count.Add(1)
	}
	return r.rt.RoundTrip(req)
}

// BenchmarkDiagnose measures Diagnose with the informer-backed Collector on a local control
// plane holding benchNodes nodes and benchPods bound pods with status (most Running and Ready;
// some crash-looping, pulling images or waiting for a sandbox, each with kubelet-like events).
// It reports:
//
//   - p50-ms, p95-ms: Diagnose latency with warm caches;
//   - api-requests/op: API requests per Diagnose (non-watch requests on the collector's client);
//   - informer-rss-MB/1000pods: process RSS growth from starting the informers to synced,
//     after a GC, per 1,000 pods in the cluster (objects pass through stripForCache);
//   - informer-heap-MB/1000pods: the same for the Go heap in use.
//
// The cluster is built once (b.Loop runs the body once); -benchtime sets the number of
// diagnoses. Run: go test ./triage -run '^$' -bench BenchmarkDiagnose -benchtime 400x
func BenchmarkDiagnose(b *testing.B) {
	c, loader := benchCluster(b)
	ctx := b.Context()
	start := time.Now()
	targets := populateBenchCluster(b, ctx, loader)
	b.Logf("created %d nodes and %d pods with status and events in %s", benchNodes, benchPods, time.Since(start).Round(time.Second))

	client, counter, cfg := countedClient(b, c)

	rssBefore, heapBefore := memoryNow()
	collectorCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	col, err := NewCached(collectorCtx, client)
	if err != nil {
		b.Fatal(err)
	}
	col.WithCalico(cfg)
	rssAfter, heapAfter := memoryNow()

	// Warm up: the first diagnoses fill the version cache.
	for _, t := range targets[:min(10, len(targets))] {
		if _, err := Diagnose(ctx, col, t.Namespace, t.Name); err != nil {
			b.Fatal(err)
		}
	}
	counter.count.Store(0)
	var lat []time.Duration
	byCode := map[triage.Code][]time.Duration{}
	for i := 0; b.Loop(); i++ {
		t := targets[i%len(targets)]
		t0 := time.Now()
		d, err := Diagnose(ctx, col, t.Namespace, t.Name)
		took := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, took)
		byCode[d.Primary().Code] = append(byCode[d.Primary().Code], took)
	}
	perK := float64(benchPods) / 1000
	b.ReportMetric(percentileMS(lat, 0.50), "p50-ms")
	b.ReportMetric(percentileMS(lat, 0.95), "p95-ms")
	b.ReportMetric(float64(counter.count.Load())/float64(len(lat)), "api-requests/op")
	b.ReportMetric(float64(int64(rssAfter)-int64(rssBefore))/(1<<20)/perK, "informer-rss-MB/1000pods")
	b.ReportMetric(float64(int64(heapAfter)-int64(heapBefore))/(1<<20)/perK, "informer-heap-MB/1000pods")
	for code, ds := range byCode {
		b.Logf("%-22s %4d diagnoses, p50 %.1f ms, p95 %.1f ms", code, len(ds), percentileMS(ds, 0.5), percentileMS(ds, 0.95))
	}
}

// benchCluster starts the benchmark's control plane and returns it with a client fast enough to
// fill it (5,000 QPS).
func benchCluster(b *testing.B) (*testenv.Cluster, kubernetes.Interface) {
	c := testcluster.Start(b, testenv.Options{})
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	loader, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c, loader
}

// countedClient returns a client of c whose non-watch requests counter counts, and its config.
func countedClient(b *testing.B, c *testenv.Cluster) (kubernetes.Interface, *benchRequestCounter, *rest.Config) {
	counter := &benchRequestCounter{}
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return client, counter, cfg
}

// percentileMS returns the p-th percentile of ds in milliseconds (ds is sorted in place).
func percentileMS(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
}

// memoryNow returns the process RSS and the Go heap in use after a full GC.
func memoryNow() (rss, heap uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	data, err := os.ReadFile("/proc/self/statm")
	if err == nil {
		if f := strings.Fields(string(data)); len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			rss = pages * uint64(os.Getpagesize())
		}
	}
	return rss, ms.HeapInuse
}

// populateBenchCluster creates the nodes, then the pods (bound, with status) and their events,
// with benchWorkers goroutines, and returns a sample of pods to diagnose in every state.
func populateBenchCluster(b *testing.B, ctx context.Context, cs kubernetes.Interface) []*corev1.Pod {
	b.Helper()
	createBenchNodes(b, ctx, cs)
	for _, ns := range []string{"shop", "batch", "calico-system"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var mu sync.Mutex
	var targets []*corev1.Pod
	benchParallel(b, benchPods, func(i int) error {
		p, events := benchPod(i)
		if err := createPodWithEvents(ctx, cs, p, events); err != nil {
			return err
		}
		if i >= benchNodes && i%100 >= 20 && i%100 < 24 { // one of each shape per hundred pods
			mu.Lock()
			targets = append(targets, p)
			mu.Unlock()
		}
		return nil
	})
	slices.SortFunc(targets, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return targets
}

// createBenchNodes creates benchNodes Ready nodes with status.
func createBenchNodes(b *testing.B, ctx context.Context, cs kubernetes.Interface) {
	b.Helper()
	benchParallel(b, benchNodes, func(i int) error {
		n := benchNode(i)
		created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status = n.Status
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
}

// createPodWithEvents creates p, writes its status and creates its events about it. p gets the
// created pod's metadata (UID, resourceVersion).
func createPodWithEvents(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, events []*corev1.Event) error {
	created, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created.Status = p.Status
	if _, err := cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	p.ObjectMeta = created.ObjectMeta
	for _, e := range events {
		e.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: created.Namespace, Name: created.Name, UID: created.UID, APIVersion: "v1", FieldPath: e.InvolvedObject.FieldPath}
		if _, err := cs.CoreV1().Events(created.Namespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// benchParallel runs fn(0..n-1) on benchWorkers goroutines and fails b on the first error.
func benchParallel(b *testing.B, n int, fn func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || firstErr.Load() != nil {
					return
				}
				if err := fn(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		b.Fatal(err)
	}
}

// benchNode is a Ready node with realistic status (no addresses, so a log read fails fast
// instead of dialing a kubelet that does not exist).
func benchNode(i int) *corev1.Node {
	name := fmt.Sprintf("node-%03d", i)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%3), "node.kubernetes.io/instance-type": "m5.2xlarge",
	}}}
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status = corev1.NodeStatus{
		Capacity: rl, Allocatable: rl,
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
		},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", ContainerRuntimeVersion: "containerd://2.1.4", OSImage: "Ubuntu 24.04.2 LTS", KernelVersion: "6.8.0-60-generic", Architecture: "amd64", OperatingSystem: "linux"},
	}
	return n
}

// benchKinds is how many pod shapes benchPod cycles through.
const benchKinds = 20

// benchPod is pod i with status and kubelet-like events: 16 of every 20 Running and Ready, the
// rest crash-looping, failing to pull, or waiting for a sandbox; one calico-node per node.
func benchPod(i int) (*corev1.Pod, []*corev1.Event) {
	node := fmt.Sprintf("node-%03d", i%benchNodes)
	now := metav1.Now()
	earlier := metav1.NewTime(now.Add(-time.Hour))
	ns, app := "shop", fmt.Sprintf("svc-%d", i%40)
	if i%3 == 0 {
		ns = "batch"
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("%s-%08x-%05d", app, i*2654435761%(1<<32), i),
			Labels:          map[string]string{"app": app, "pod-template-hash": "7d58v5wzn2", "team": "shop"},
			Annotations:     map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-7d58v5wzn2", UID: "1b4e28ba-2fa1-11d2-883f-0016d3cca427", Controller: benchPtr(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/shop/" + app + ":1.8.2",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "DB_HOST", Value: "postgres.shop.svc"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10},
				VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}},
			}},
			Volumes:     []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app}}}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: benchPtr(int64(300))}},
		},
	}
	running := corev1.ContainerStatus{Name: "app", Image: p.Spec.Containers[0].Image, ImageID: "registry.example.com/shop/app@sha256:41d7386dbb0756676c5142dd7b6b038be0ad1197cc2ff195535cef8149c6c822",
		ContainerID: "containerd://45534c25391fc51d6a44d83bfcd6129d62a3b533d86f74fb7fb9e21c5a6e770a", Ready: true, Started: benchPtr(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: earlier}}}
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: fmt.Sprintf("10.%d.%d.%d", 100+i/65536, i/256%256, i%256), StartTime: &earlier,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
		},
		ContainerStatuses: []corev1.ContainerStatus{running},
	}
	p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
	event := func(typ, reason, msg string, count int32) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + "."}, Type: typ, Reason: reason, Message: msg, Count: count,
			FirstTimestamp: earlier, LastTimestamp: now, Source: corev1.EventSource{Component: "kubelet", Host: node},
			InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{app}"}}
	}
	events := []*corev1.Event{event(corev1.EventTypeNormal, "Pulled", "Container image already present on machine", 1), event(corev1.EventTypeNormal, "Started", "Started container app", 1)}
	notReady := func() {
		p.Status.Conditions[2].Status, p.Status.Conditions[3].Status = corev1.ConditionFalse, corev1.ConditionFalse
		p.Status.ContainerStatuses[0].Ready = false
	}
	switch {
	case i < benchNodes:
		// One calico-node per node, as an operator install runs it.
		p.Namespace, p.Name, p.Labels = "calico-system", fmt.Sprintf("calico-node-%05d", i), map[string]string{"k8s-app": "calico-node"}
		p.OwnerReferences = nil
	case i%benchKinds == 1:
		notReady()
		p.Status.ContainerStatuses[0].RestartCount = 7
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container=app"}}
		p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "Error: unknown flag: --enable-leader-election", StartedAt: earlier, FinishedAt: now}}
		events = append(events, event(corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container app", 32))
	case i%benchKinds == 2:
		p.Status.Phase = corev1.PodPending
		notReady()
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + p.Spec.Containers[0].Image + `"`}}
		events = append(events, event(corev1.EventTypeWarning, "Failed", `Failed to pull image "`+p.Spec.Containers[0].Image+`": manifest unknown`, 6),
			event(corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff", 31))
	case i%benchKinds == 3:
		p.Status.Phase = corev1.PodPending
		notReady()
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.Status.PodIP, p.Status.PodIPs = "", nil
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		e := event(corev1.EventTypeWarning, "FailedMount", `MountVolume.SetUp failed for volume "config" : configmap "`+app+`" not found`, 23)
		e.InvolvedObject.FieldPath = ""
		events = append(events, e)
	}
	return p, events
}

func benchPtr[T any](v T) *T { return &v }
