package triage

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestResourcesFixLetsEveryReplicaFit is issue 22's item 6 (first bullet): the kubectl set
// resources fix of a workload's Pending pod names a request with which all the workload's
// replicas fit, not only the one pod ("1000m" fitted 4 of 5 replicas, 666m fits all five).
func TestResourcesFixLetsEveryReplicaFit(t *testing.T) {
	two := withAllocatable(corev1.ResourceCPU, "2")
	nodes := func() []*corev1.Node {
		return []*corev1.Node{node("node-1", two), node("node-2", two), node("node-3", two)}
	}
	// checkout is a replica of Deployment checkout (5 replicas of 1500m), one of which runs on
	// node-1; node-2 and node-3 hold 1 CPU of other pods.
	checkout := func(name string, reqs ...string) *corev1.Pod {
		return ofDeployment(podRequesting(name, reqs...), "shop", "checkout")
	}
	others := []*corev1.Pod{boundTo("node-2", "reports-0", "cpu=1"), boundTo("node-3", "search-0", "cpu=1")}
	world := func(pod *corev1.Pod, replicas *int32, mods ...func(*Snapshot)) *Snapshot {
		running := ofDeployment(boundTo("node-1", "checkout-5d8f-aaaaa", "cpu=1500m"), "shop", "checkout")
		running.Spec.Containers = pod.DeepCopy().Spec.Containers
		running.Spec.InitContainers = pod.DeepCopy().Spec.InitContainers
		s := snap(pod, nodes(), append([]*corev1.Pod{running}, others...),
			failedScheduling("0/3 nodes are available: 3 Insufficient cpu.", 4))
		s.WorkloadReplicas = replicas
		for _, m := range mods {
			m(s)
		}
		return s
	}
	tests := []struct {
		name string
		s    *Snapshot
		// want are substrings of one fix; none a substring no fix may have.
		want []string
		none string
	}{
		{
			name: "five replicas of 1500m on three 2-CPU nodes: 666m, and where they go",
			s:    world(checkout("checkout-5d8f-bbbbb", "cpu=1500m"), ptr.To[int32](5)),
			want: []string{"kubectl set resources deployment/checkout -n shop --requests=cpu=666m", "all 5 replicas fit then (room for 3 on node-1, 1 on node-2, 1 on node-3)"},
			none: "cpu=1000m",
		},
		{
			name: "the replica running on node-1 makes its room only once it is replaced: said",
			s:    world(checkout("checkout-5d8f-bbbbb", "cpu=1500m"), ptr.To[int32](5)),
			want: []string{"once the rollout has replaced the running replica checkout-5d8f-aaaaa"},
		},
		{
			name: "two containers share the pod's room: the value is per container",
			s: world(func() *corev1.Pod {
				p := checkout("checkout-5d8f-bbbbb", "cpu=750m")
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "proxy", Resources: corev1.ResourceRequirements{Requests: resourceList("cpu=750m")}})
				return p
			}(), ptr.To[int32](5)),
			want: []string{"--requests=cpu=333m", "all 5 replicas fit then"},
		},
		{
			name: "a sidecar gets the value too (kubectl set resources sets init containers)",
			s: world(func() *corev1.Pod {
				p := checkout("checkout-5d8f-bbbbb", "cpu=1400m")
				p.Spec.InitContainers = []corev1.Container{{Name: "mesh", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Resources: corev1.ResourceRequirements{Requests: resourceList("cpu=100m")}}}
				return p
			}(), ptr.To[int32](5)),
			want: []string{"--requests=cpu=333m", "all 5 replicas fit then"},
		},
		{
			name: "one replica and nothing of it running: the value the roomiest node has free, as before",
			s: snap(checkout("checkout-5d8f-bbbbb", "cpu=1500m"), nodes(), append([]*corev1.Pod{boundTo("node-1", "batch-0", "cpu=1800m")}, others...),
				failedScheduling("0/3 nodes are available: 3 Insufficient cpu.", 4)),
			want: []string{"--requests=cpu=1000m", "# per container: fits node-2, if the app can live with it"},
		},
		{
			name: "one replica whose old pod holds the room: the rollout waits on it, no lower request",
			s:    world(checkout("checkout-5d8f-bbbbb", "cpu=1500m"), ptr.To[int32](1)),
			want: []string{"held by checkout's own running replica (checkout-5d8f-aaaaa)", `"maxSurge":0,"maxUnavailable":1`},
			none: "kubectl set resources",
		},
		{
			name: "one Ready replica whose old pod holds the room: the patch says it takes checkout down meanwhile",
			s: world(checkout("checkout-5d8f-bbbbb", "cpu=1500m"), ptr.To[int32](1), func(s *Snapshot) {
				s.PodsByNode["node-1"][0].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			}),
			want: []string{`"maxSurge":0,"maxUnavailable":1}}}}'   # costs: the rollout then stops checkout-5d8f-aaaaa, the only Ready replica, before its replacement starts, so checkout serves nothing until the new pod is Ready`},
		},
		{
			name: "spec.replicas not read: the replicas seen (the one on node-1 and this one)",
			s:    world(checkout("checkout-5d8f-bbbbb", "cpu=1500m"), nil),
			want: []string{"the 2 replicas seen fit then"},
		},
		{
			name: "hostname anti-affinity: one replica per node, so 5 cannot fit 3 nodes at any request",
			s: world(func() *corev1.Pod {
				p := checkout("checkout-5d8f-bbbbb", "cpu=1500m")
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "checkout-5d8f-bbbbb"}}}}}}
				return p
			}(), ptr.To[int32](5)),
			none: "kubectl set resources",
		},
		{
			name: "a pod left by a deleted StatefulSet of the same name is no replica of this one",
			s: func() *Snapshot {
				ofSts := func(p *corev1.Pod, uid types.UID) *corev1.Pod {
					p.Namespace = "shop"
					p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: uid, Controller: ptr.To(true)}}
					return p
				}
				pod := ofSts(podRequesting("db-1", "cpu=1500m"), "u-new")
				running := ofSts(boundTo("node-1", "db-0", "cpu=1500m"), "u-new")
				stale := ofSts(boundTo("node-2", "db-old-0", "cpu=500m"), "u-old")
				s := snap(pod, nodes(), append([]*corev1.Pod{running, stale}, others...), failedScheduling("0/3 nodes are available: 3 Insufficient cpu.", 4))
				s.WorkloadReplicas = ptr.To[int32](2)
				return s
			}(),
			want: []string{"the running replica db-0"},
			none: "db-old-0",
		},
		{
			name: "a Job's pod template is immutable: no kubectl set resources on it",
			s: func() *Snapshot {
				p := podRequesting("report-x7k2p", "cpu=2500m")
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "report", Controller: ptr.To(true)}}
				return snap(p, nodes(), others, failedScheduling("0/3 nodes are available: 3 Insufficient cpu.", 4))
			}(),
			want: []string{"recreate Job report with a cpu request of at most 2000m per container"},
			none: "kubectl set resources job/",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(tt.s)
			p := d.Primary()
			if p.Code != CodeInsufficientCPU {
				t.Fatalf("primary = %s, want insufficient-cpu: %s", p.Code, p.Summary)
			}
			all := strings.Join(p.Fix, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("fixes lack %q:\n%s", w, all)
				}
			}
			if tt.none != "" && strings.Contains(all, tt.none) {
				t.Errorf("fixes have %q:\n%s", tt.none, all)
			}
			if !looksFirst(p.Fix) {
				t.Errorf("fix acts before it looks:\n%s", all)
			}
			// Lowering the request and making room are alternatives: said before the command.
			if strings.Contains(all, "kubectl set resources") {
				checkBefore(t, p.Fix, "Either lower the cpu request", "kubectl set resources")
			}
		})
	}
}

// TestResourcesFixForMemoryIsInMi: the per-container memory request is in whole Mi and lets all
// replicas fit: 3 nodes with 7Gi (7168Mi) free each take 10 replicas of 1792Mi (4 each), while
// 1793Mi fits only 3 each, 9 in all.
func TestResourcesFixForMemoryIsInMi(t *testing.T) {
	var nodes []*corev1.Node
	var bound []*corev1.Pod
	for _, n := range []string{"m1", "m2", "m3"} {
		nodes = append(nodes, node(n))
		bound = append(bound, boundTo(n, "other-"+n, "memory=1Gi"))
	}
	pod := ofDeployment(podRequesting("api-5d8f-zzzzz", "memory=8Gi"), "shop", "api")
	s := snap(pod, nodes, bound, failedScheduling("0/3 nodes are available: 3 Insufficient memory.", 2))
	s.WorkloadReplicas = ptr.To[int32](10)
	fix := strings.Join(Evaluate(s).Primary().Fix, "\n")
	if want := "--requests=memory=1792Mi   # per container: all 10 replicas fit then (room for 4 on m1, 4 on m2, 4 on m3)"; !strings.Contains(fix, want) {
		t.Errorf("fixes lack %q:\n%s", want, fix)
	}
}
