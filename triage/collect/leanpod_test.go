package collect

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"

	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// leanView is what the pod cache hands out for pod.
func leanView(pod *corev1.Pod) *corev1.Pod {
	if pod == nil {
		return nil
	}
	return newLeanPod(pod).pod()
}

// TestLeanPodsDiagnoseTheSame evaluates every scenario folder twice, once with the pods as
// the API server returns them and once with every pod (the one asked about, the pods on the
// nodes, the calico-node pods) as the pod cache hands it out: the diagnoses must be equal, so
// the cache keeps every field a rule reads.
func TestLeanPodsDiagnoseTheSame(t *testing.T) {
	for _, dir := range scenarioDirs(t) {
		sc, err := testenv.LoadScenarioDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(sc.Name, func(t *testing.T) {
			if sc.Expected.Pod == "" {
				t.Skip("a workload target with no pod to evaluate alone: TestScenarios compares its cached and direct answers")
			}
			full := offlineSnapshot(t, sc)
			lean := *full
			lean.Pod = leanView(full.Pod)
			lean.PodsByNode = map[string][]*corev1.Pod{}
			for node, pods := range full.PodsByNode {
				for _, p := range pods {
					lean.PodsByNode[node] = append(lean.PodsByNode[node], leanView(p))
				}
			}
			lean.CalicoNodePods = nil
			for _, p := range full.CalicoNodePods {
				lean.CalicoNodePods = append(lean.CalicoNodePods, leanView(p))
			}
			want, got := triage.Evaluate(full), triage.Evaluate(&lean)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("diagnosis from lean pods differs (-full +lean):\n%s", d)
			}
			if full.Pod == nil || full.Pod.Spec.NodeName != "" {
				return
			}
			// As the cached Collector reads an unscheduled pod's cluster: node by node from the
			// cache entries (leanNodePods), the requests summed per spec, and a node table shared
			// through NodeTables (the second evaluation reads the first's).
			var entries []any
			for _, pods := range full.PodsByNode {
				for _, p := range pods {
					entries = append(entries, newLeanPod(p))
				}
			}
			byNode := lean
			byNode.PodsByNode = nil
			byNode.BoundPods, byNode.RequestedByNode = newLeanNodePods(entries)
			byNode.NodeTables = triage.NewNodeTables()
			for _, pass := range []string{"first", "shared table"} {
				if d := cmp.Diff(want, triage.Evaluate(&byNode)); d != "" {
					t.Errorf("diagnosis read node by node (%s) differs (-full +node by node):\n%s", pass, d)
				}
			}
		})
	}
}

// richPod is a Deployment pod as a real API server stores it: a service account token volume
// with a random name, a sidecar, probes, env from secrets, statuses with history.
func richPod(i int, node string) *corev1.Pod {
	started := metav1.NewTime(time.Date(2026, 11, 30, 3, 0, i%60, 0, time.UTC).Local())
	token := fmt.Sprintf("kube-api-access-%05x", i*7919%0xfffff)
	mounts := []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
	always := corev1.ContainerRestartPolicyAlways
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: fmt.Sprintf("web-7d4b9c6f8d-%05d", i), UID: types.UID(fmt.Sprintf("3f1c2b4a-5d6e-4f70-8a9b-%012d", i)),
			ResourceVersion: fmt.Sprint(1000 + i), CreationTimestamp: started,
			Labels: map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/part-of": "shop", "pod-template-hash": "7d4b9c6f8d"},
			Annotations: map[string]string{
				"cni.projectcalico.org/containerID": fmt.Sprintf("%064x", i),
				"cni.projectcalico.org/podIP":       fmt.Sprintf("10.0.%d.%d/32", i/250, i%250),
				"cni.projectcalico.org/podIPs":      fmt.Sprintf("10.0.%d.%d/32", i/250, i%250),
				"kubectl.kubernetes.io/restartedAt": "2026-11-29T10:00:00Z",
				"sidecar.istio.io/inject":           "true",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c6f8d",
				UID: "3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b", Controller: new(true), BlockOwnerDeletion: new(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "web",
			InitContainers: []corev1.Container{{Name: "proxy", Image: "registry.example.com/proxy:1.2", RestartPolicy: &always,
				Ports:        []corev1.ContainerPort{{ContainerPort: 15001, HostPort: 15001, Protocol: corev1.ProtocolTCP}},
				VolumeMounts: mounts[1:]}},
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/shop/web:1.24.3", Command: []string{"/app", "--port=8080"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10},
				Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}},
				VolumeMounts:   mounts,
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}},
				{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64(3607))}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
			},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "web"}}, TopologyKey: "kubernetes.io/hostname"}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.%d.%d", i/250, i%250), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250)}},
			HostIP: "192.168.0.1", StartTime: &started, QOSClass: corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started, LastProbeTime: started},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Ready: true, Started: new(true), Image: "registry.example.com/proxy:1.2",
				ImageID: "registry.example.com/proxy@sha256:77aa", ContainerID: "containerd://" + fmt.Sprintf("%063x1", i),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Started: new(true), RestartCount: 2, Image: "registry.example.com/shop/web:1.24.3",
				ImageID: "registry.example.com/shop/web@sha256:9b2c", ContainerID: "containerd://" + fmt.Sprintf("%064x", i),
				State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: started, ContainerID: "containerd://old"}}}},
		},
	}
}

// TestLeanPod: the cache hands out exactly prunePod's fields (managedFields, unread
// annotations, env values, container IDs and lifecycle hooks gone; the token volume keeps its
// own name), pods of one ReplicaSet share one spec and one label set, and a cached pod is
// built once while in use.
func TestLeanPod(t *testing.T) {
	a, b := richPod(1, "node-1"), richPod(2, "node-2")
	la, lb := newLeanPod(a), newLeanPod(b)
	if d := cmp.Diff(prunePod(a), la.pod()); d != "" {
		t.Errorf("cached pod != prunePod (-want +got):\n%s", d)
	}
	got := lb.pod()
	if d := cmp.Diff(prunePod(b), got); d != "" {
		t.Errorf("cached pod != prunePod (-want +got):\n%s", d)
	}
	if got.Spec.Volumes[1].Name != b.Spec.Volumes[1].Name || got.Spec.Containers[0].VolumeMounts[1].Name != b.Spec.Volumes[1].Name ||
		got.Spec.InitContainers[0].VolumeMounts[0].Name != b.Spec.Volumes[1].Name {
		t.Errorf("token volume = %s (mounted as %s), want %s", got.Spec.Volumes[1].Name, got.Spec.Containers[0].VolumeMounts[1].Name, b.Spec.Volumes[1].Name)
	}
	if got.ManagedFields != nil || got.Annotations["cni.projectcalico.org/podIP"] != "" || got.Annotations["sidecar.istio.io/inject"] != "true" ||
		got.Spec.Containers[0].Env[0].Value != "" || got.Spec.Containers[0].Lifecycle != nil || got.Status.ContainerStatuses[0].ContainerID != "" {
		t.Errorf("cached pod keeps what it should not, or lost the injection annotation: %+v", got.ObjectMeta)
	}
	if la.spec != lb.spec || la.labels != lb.labels || la.owners != lb.owners {
		t.Error("two pods of one ReplicaSet do not share their spec, labels and owners")
	}
	if lb.pod() != got {
		t.Error("a cached pod in use was built twice")
	}
	if !la.ipam.ok || la.ipam.pending || len(la.ipam.ips) != 1 || la.ipam.ips[0].String() != "10.0.0.1" {
		t.Errorf("calico use = %+v, want 10.0.0.1", la.ipam)
	}
	runtime.KeepAlive(a)
}

// leanCacheBytesPerPod fills a store the way the pod informer does (transform, namespace and
// node indexes) with n pods of 100-pod ReplicaSets over 1,000 nodes, and returns the Go heap
// it takes per pod.
func leanCacheBytesPerPod(n int) float64 {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, podsByNodeIndex: indexPodByNode})
	before := heapInUse()
	for i := range n {
		p := richPod(i, fmt.Sprintf("node-%04d", i%1000))
		rs := fmt.Sprintf("web%d-7d4b9c6f8d", i/100)
		p.Labels = map[string]string{"app.kubernetes.io/name": rs, "app.kubernetes.io/part-of": "shop", "pod-template-hash": "7d4b9c6f8d"}
		p.OwnerReferences[0].Name = rs
		p.Spec.Containers[0].Image = "registry.example.com/shop/" + rs + ":1.24.3"
		obj, _ := leanPodTransform(p) // the informer then drops the decoded pod
		_ = indexer.Add(obj)
	}
	after := heapInUse()
	runtime.KeepAlive(indexer)
	return float64(after-before) / float64(n)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestLeanPodCacheCost: a cached pod costs at most 1.5 KB of heap (cache entry, interned
// share, store and indexes); BenchmarkLeanPodCache reports the figure.
func TestLeanPodCacheCost(t *testing.T) {
	if per := leanCacheBytesPerPod(5000); per > 1536 {
		t.Errorf("a cached pod costs %.0f bytes, want at most 1536", per)
	} else {
		t.Logf("a cached pod costs %.0f bytes of heap", per)
	}
}

// BenchmarkLeanPodCache reports the heap a cached pod costs (bytes/pod) with 100,000 pods.
//
//	go test ./triage/collect -run '^$' -bench BenchmarkLeanPodCache -benchtime 1x
func BenchmarkLeanPodCache(b *testing.B) {
	var per float64
	for b.Loop() {
		per = leanCacheBytesPerPod(100_000)
	}
	b.ReportMetric(per, "bytes/pod")
}

// BenchmarkNodeTable measures the answer about an unschedulable pod over a lean pod cache the
// size of the L fixture (120,800 pods of 100-pod ReplicaSets on 1,000 nodes), read two ways:
//
//   - all-pods: every cached pod built into Snapshot.PodsByNode (how the cached Collector
//     read it before NodePods);
//   - node-by-node: leanNodePods, as the cached Collector reads it now.
//
// held-MiB is the heap the question still holds when its answer is made (after a GC, beyond
// the cache): what it adds to the process's live heap, which the Go heap then doubles at
// most before collecting (GOGC=100). B/op is everything it allocates.
//
//	go test ./triage/collect -run '^$' -bench BenchmarkNodeTable -benchtime 3x -benchmem
func BenchmarkNodeTable(b *testing.B) {
	const nodes, pods = 1000, 120_800
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, podsByNodeIndex: indexPodByNode})
	var nodeList []*corev1.Node
	for i := range nodes {
		nodeList = append(nodeList, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i), Labels: map[string]string{corev1.LabelHostname: fmt.Sprintf("node-%04d", i)}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("250")}}})
	}
	for i := range pods {
		p := richPod(i, nodeList[i%nodes].Name)
		rs := fmt.Sprintf("web%d-7d4b9c6f8d", i/100)
		p.Labels = map[string]string{"app.kubernetes.io/name": rs, "app.kubernetes.io/part-of": "shop", "pod-template-hash": "7d4b9c6f8d"}
		p.OwnerReferences[0].Name = rs
		p.Spec.Affinity, p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil, nil // as the fixture's pods: no anti-affinity, no host port
		obj, _ := leanPodTransform(p)
		_ = indexer.Add(obj)
	}
	stuck := richPod(pods, "")
	stuck.Name, stuck.UID = "stuck", "stuck-uid"
	stuck.Spec.Affinity, stuck.Spec.InitContainers = nil, nil
	stuck.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("64")
	stuck.Status = corev1.PodStatus{Phase: corev1.PodPending}
	now := time.Now()
	ev := triage.Event{Type: corev1.EventTypeWarning, Reason: "FailedScheduling", Count: 1, LastSeen: now,
		Message: fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu. preemption: 0/%d nodes are available: %d No preemption victims found for incoming pod.", nodes, nodes, nodes, nodes)}
	snapshot := func(byNode bool) *triage.Snapshot {
		s := &triage.Snapshot{Now: now, Requested: triage.PodRef{Namespace: stuck.Namespace, Name: stuck.Name}, Pod: stuck, Events: []triage.Event{ev}, Nodes: nodeList}
		if byNode {
			s.BoundPods, s.RequestedByNode = newLeanNodePods(indexer.List())
			return s
		}
		all := map[string][]*corev1.Pod{}
		for _, o := range indexer.List() {
			if lp := leanPodOf(o); lp != nil {
				all[lp.node.Value()] = append(all[lp.node.Value()], lp.pod())
			}
		}
		s.PodsByNode = all
		return s
	}
	for _, mode := range []string{"all-pods", "node-by-node"} {
		b.Run(mode, func(b *testing.B) {
			var held float64
			var code triage.Code
			for b.Loop() {
				base := heapInUse()
				s := snapshot(mode == "node-by-node")
				d := triage.Evaluate(s)
				held = float64(heapInUse()-base) / (1 << 20)
				code = d.Primary().Code
				runtime.KeepAlive(s)
			}
			if code != triage.CodeInsufficientCPU {
				b.Fatalf("primary code %s, want %s", code, triage.CodeInsufficientCPU)
			}
			b.ReportMetric(held, "held-MiB")
		})
	}
}
