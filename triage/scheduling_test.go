package triage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// testNow is the Snapshot time of the pure tests.
var testNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// node returns a Ready node with 4 cpu, 8Gi memory, 100Gi ephemeral-storage and 110 pods
// allocatable, then applies mods.
func node(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("4"),
				corev1.ResourceMemory:           resource.MustParse("8Gi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
				corev1.ResourcePods:             resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

// nodeWithTaints returns node(name) carrying taints ("key=value:Effect" or "key:Effect").
func nodeWithTaints(name string, taints ...string) *corev1.Node {
	return node(name, withTaints(taints...))
}

func withTaints(taints ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for _, t := range taints {
			kv, effect, _ := strings.Cut(t, ":")
			k, v, _ := strings.Cut(kv, "=")
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
		}
	}
}

func withAllocatable(name corev1.ResourceName, q string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if q == "" {
			delete(n.Status.Allocatable, name)
			return
		}
		n.Status.Allocatable[name] = resource.MustParse(q)
	}
}

func withLabel(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[k] = v }
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func notReady(n *corev1.Node) {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Message: "container runtime network not ready"}}
}

// podRequesting returns an unscheduled Pending pod in namespace "shop" with one container
// requesting reqs ("cpu=500m", "memory=1Gi", "nvidia.com/gpu=1"), created 5s before testNow
// (young enough that a missing scheduler event alone does not mean scheduler-not-running).
func podRequesting(name string, reqs ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(testNow.Add(-5 * time.Second)),
			Labels:            map[string]string{"app": name},
		},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: resourceList(reqs...)}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	return p
}

func resourceList(reqs ...string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for _, r := range reqs {
		k, v, _ := strings.Cut(r, "=")
		rl[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return rl
}

// boundTo returns a Running pod on node requesting reqs.
func boundTo(nodeName, name string, reqs ...string) *corev1.Pod {
	p := podRequesting(name, reqs...)
	p.Spec.NodeName = nodeName
	p.Status.Phase = corev1.PodRunning
	return p
}

func withHostPort(p *corev1.Pod, port int32) *corev1.Pod {
	p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: corev1.ProtocolTCP})
	return p
}

func withPodLabels(p *corev1.Pod, kv ...string) *corev1.Pod {
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

// failedScheduling is the scheduler's event with msg, seen count times, last 10s ago.
func failedScheduling(msg string, count int32) Event {
	return Event{Type: "Warning", Reason: "FailedScheduling", Message: msg, Count: count,
		LastSeen: testNow.Add(-10 * time.Second), Source: "default-scheduler"}
}

// snap builds a Snapshot of pod with nodes, bound pods and events.
func snap(pod *corev1.Pod, nodes []*corev1.Node, bound []*corev1.Pod, events ...Event) *Snapshot {
	s := &Snapshot{Now: testNow, Requested: PodRef{Namespace: pod.Namespace, Name: pod.Name}, Pod: pod,
		Nodes: nodes, PodsByNode: map[string][]*corev1.Pod{}, Events: events}
	for _, p := range bound {
		s.PodsByNode[p.Spec.NodeName] = append(s.PodsByNode[p.Spec.NodeName], p)
	}
	return s
}

// ignoreProse leaves the human text out of structured comparisons.
var ignoreProse = cmpopts.IgnoreFields(NodeReason{}, "Message")

func TestSchedulingPrimaryCode(t *testing.T) {
	sched := func(msg string) Event { return failedScheduling(msg, 3) }
	tests := []struct {
		name string
		s    *Snapshot
		want Code
	}{
		{
			name: "pod requesting more cpu than any node has free is insufficient-cpu",
			s: snap(podRequesting("web", "cpu=500m"),
				[]*corev1.Node{node("n1", withAllocatable("cpu", "2")), node("n2", withAllocatable("cpu", "2"))},
				[]*corev1.Pod{boundTo("n1", "a", "cpu=1800m"), boundTo("n2", "b", "cpu=1800m")},
				sched("0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")),
			want: CodeInsufficientCPU,
		},
		{
			name: "full workers and a tainted control plane is insufficient-memory, not untolerated-taint",
			s: snap(podRequesting("web", "memory=2Gi"),
				[]*corev1.Node{nodeWithTaints("cp", "node-role.kubernetes.io/control-plane:NoSchedule"), node("w1"), node("w2")},
				[]*corev1.Pod{boundTo("w1", "a", "memory=7Gi"), boundTo("w2", "b", "memory=7Gi")},
				sched("0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient memory.")),
			want: CodeInsufficientMemory,
		},
		{
			name: "nodes that report no ephemeral-storage reject a pod requesting it",
			s: snap(podRequesting("web", "ephemeral-storage=1G"),
				[]*corev1.Node{node("n1", withAllocatable("ephemeral-storage", "")), node("n2", withAllocatable("ephemeral-storage", ""))}, nil),
			want: CodeInsufficientEphemeralStorage,
		},
		{
			name: "a pod asking for more GPUs than any node advertises is insufficient-extended-resource",
			s: snap(podRequesting("train", "nvidia.com/gpu=4"),
				[]*corev1.Node{node("g1", withAllocatable("nvidia.com/gpu", "1")), node("g2", withAllocatable("nvidia.com/gpu", "1"))}, nil),
			want: CodeInsufficientExtendedResource,
		},
		{
			name: "a node at its pods capacity is too-many-pods",
			s: snap(podRequesting("web", "cpu=10m"),
				[]*corev1.Node{node("n1", withAllocatable("pods", "2"))},
				[]*corev1.Pod{boundTo("n1", "a"), boundTo("n1", "b")}),
			want: CodeTooManyPods,
		},
		{
			name: "pod with no tolerations is rejected by tainted nodes",
			s: snap(podRequesting("nginx"),
				[]*corev1.Node{nodeWithTaints("n1", "key1=value1:NoSchedule"), nodeWithTaints("n2", "key1=value1:NoSchedule")}, nil,
				sched("0/2 nodes are available: 2 node(s) had untolerated taint(s).")),
			want: CodeUntoleratedTaint,
		},
		{
			name: "a PreferNoSchedule taint does not block",
			s: snap(podRequesting("nginx"),
				[]*corev1.Node{nodeWithTaints("n1", "key1=value1:PreferNoSchedule")}, nil),
			want: CodeSchedulerNotRunning,
		},
		{
			name: "nodeSelector naming a label no node has is node-selector-mismatch",
			s: func() *Snapshot {
				p := podRequesting("dns")
				p.Spec.NodeSelector = map[string]string{"beta.kubernetes.io/os": "linux"}
				return snap(p, []*corev1.Node{node("n1"), node("n2")}, nil)
			}(),
			want: CodeNodeSelectorMismatch,
		},
		{
			name: "required node affinity matching no node is node-selector-mismatch",
			s: func() *Snapshot {
				p := podRequesting("dns")
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}},
					}}}}}
				return snap(p, []*corev1.Node{node("n1", withLabel("zone", "a"))}, nil)
			}(),
			want: CodeNodeSelectorMismatch,
		},
		{
			name: "cordoned nodes are node-unschedulable",
			s:    snap(podRequesting("web"), []*corev1.Node{node("n1", cordoned), node("n2", cordoned)}, nil),
			want: CodeNodeUnschedulable,
		},
		{
			name: "a host port held on every node is host-port-conflict",
			s: snap(withHostPort(podRequesting("frontend"), 80),
				[]*corev1.Node{node("n1"), node("n2")},
				[]*corev1.Pod{withHostPort(boundTo("n1", "proxy-1"), 80), withHostPort(boundTo("n2", "proxy-2"), 80)}),
			want: CodeHostPortConflict,
		},
		{
			name: "a claim that does not exist is pvc-not-found",
			s: func() *Snapshot {
				s := snap(podRequesting("db"), []*corev1.Node{node("n1")}, nil,
					sched(`0/1 nodes are available: persistentvolumeclaim "data" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`))
				s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data": nil}
				return s
			}(),
			want: CodePVCNotFound,
		},
		{
			name: "an unbound claim the scheduler names is pvc-unbound even though a node has a taint",
			s: func() *Snapshot {
				s := snap(podRequesting("hub"), []*corev1.Node{nodeWithTaints("cp", "node-role.kubernetes.io/control-plane:NoSchedule"), node("w1")}, nil,
					sched("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."))
				s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data": {ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "shop"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}}
				return s
			}(),
			want: CodePVCUnbound,
		},
		{
			name: "a bound PV pinned to another node is volume-node-affinity-conflict",
			s: func() *Snapshot {
				s := snap(podRequesting("db"), []*corev1.Node{node("n1"), node("n2")}, nil)
				s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data": {
					ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "shop"},
					Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"},
					Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}}
				s.PVs = map[string]*corev1.PersistentVolume{"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
					Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
							Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"n9"}}}}}}}}}}
				return s
			}(),
			want: CodeVolumeNodeAffinityConflict,
		},
		{
			name: "a pod with scheduling gates is scheduling-gated",
			s: func() *Snapshot {
				p := podRequesting("batch")
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
				return snap(p, []*corev1.Node{node("n1")}, nil)
			}(),
			want: CodeSchedulingGated,
		},
		{
			name: "a cluster without nodes is no-nodes",
			s:    snap(podRequesting("web"), nil, nil, sched("no nodes available to schedule pods")),
			want: CodeNoNodes,
		},
		{
			name: "a pod that fits a node but has no scheduler event is scheduler-not-running",
			s: func() *Snapshot {
				p := podRequesting("nginx")
				p.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Second))
				return snap(p, []*corev1.Node{node("n1")}, nil)
			}(),
			want: CodeSchedulerNotRunning,
		},
		{
			name: "an old pod nothing fits with no scheduler event is scheduler-not-running",
			s: func() *Snapshot {
				p := podRequesting("web", "cpu=64")
				p.CreationTimestamp = metav1.NewTime(testNow.Add(-10 * time.Minute))
				return snap(p, []*corev1.Node{node("n1")}, nil)
			}(),
			want: CodeSchedulerNotRunning,
		},
		{
			name: "a brand-new pod nothing fits is judged by the table while the scheduler catches up",
			s: func() *Snapshot {
				p := podRequesting("web", "cpu=64")
				p.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * time.Second))
				return snap(p, []*corev1.Node{node("n1")}, nil)
			}(),
			want: CodeInsufficientCPU,
		},
		{
			name: "zone spread with minDomains 2 and only one zone is topology-spread-unsatisfiable",
			s: func() *Snapshot {
				p := podRequesting("cm")
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, MinDomains: ptr.To[int32](2),
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cm"}}}}
				return snap(p,
					[]*corev1.Node{node("a1", withLabel("zone", "a")), node("a2", withLabel("zone", "a"))},
					[]*corev1.Pod{withPodLabels(boundTo("a1", "cm-1"), "app", "cm")})
			}(),
			want: CodeTopologySpreadUnsatisfiable,
		},
		{
			name: "required anti-affinity on a key every node shares is pod-anti-affinity-unsatisfiable",
			s: func() *Snapshot {
				p := podRequesting("cm")
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey:   "node.kubernetes.io/instance-type",
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cm"}}}}}}
				return snap(p,
					[]*corev1.Node{node("n1", withLabel("node.kubernetes.io/instance-type", "m5")), node("n2", withLabel("node.kubernetes.io/instance-type", "m5"))},
					[]*corev1.Pod{withPodLabels(boundTo("n1", "cm-1"), "app", "cm")})
			}(),
			want: CodePodAntiAffinityUnsatisfiable,
		},
		{
			name: "an existing pod's anti-affinity against this pod is pod-anti-affinity-unsatisfiable",
			s: func() *Snapshot {
				other := boundTo("n1", "exclusive")
				other.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey:   "kubernetes.io/hostname",
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
				return snap(podRequesting("web"), []*corev1.Node{node("n1")}, []*corev1.Pod{other})
			}(),
			want: CodePodAntiAffinityUnsatisfiable,
		},
		{
			name: "required affinity to a pod that runs nowhere, which the pod itself does not match, is pod-affinity-unsatisfiable",
			s: func() *Snapshot {
				p := podRequesting("web")
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey:   "kubernetes.io/hostname",
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}}}}}
				return snap(p, []*corev1.Node{node("n1"), node("n2")}, nil)
			}(),
			want: CodePodAffinityUnsatisfiable,
		},
		{
			name: "when the table finds room but the scheduler says memory, the scheduler's code wins",
			s: snap(podRequesting("web", "memory=1Gi"), []*corev1.Node{node("n1")}, nil,
				sched("0/1 nodes are available: 1 Insufficient memory.")),
			want: CodeInsufficientMemory,
		},
		{
			name: "a DaemonSet pod pinned to a full node is insufficient-cpu, not node-selector-mismatch for the others",
			s: func() *Snapshot {
				p := podRequesting("agent-x7k2p", "cpu=200m")
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}},
					}}}}}
				return snap(p, []*corev1.Node{node("n1"), node("n2"), node("n3")}, []*corev1.Pod{boundTo("n2", "big", "cpu=3900m")},
					sched("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."))
			}(),
			want: CodeInsufficientCPU,
		},
		{
			name: "the only node matching the selector has a taint: untolerated-taint",
			s: func() *Snapshot {
				p := podRequesting("web")
				p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
				return snap(p, []*corev1.Node{node("n1"), node("n2"), node("n3", withLabel("disk", "ssd"), withTaints("dedicated=db:NoSchedule"))}, nil)
			}(),
			want: CodeUntoleratedTaint,
		},
		{
			name: "when nodes cannot be listed, the scheduler's counts decide",
			s: func() *Snapshot {
				s := snap(podRequesting("web", "cpu=1"), nil, nil,
					sched("0/5 nodes are available: 1 node(s) had untolerated taint(s), 4 Insufficient cpu."))
				s.NodesErr = errors.New(`nodes is forbidden: User "dev" cannot list resource "nodes"`)
				return s
			}(),
			want: CodeInsufficientCPU,
		},
		{
			name: "taints on every node plus cpu on one: the taint blocks more nodes alone",
			s: snap(podRequesting("web", "cpu=1"),
				[]*corev1.Node{nodeWithTaints("n1", "gpu=true:NoSchedule"), nodeWithTaints("n2", "gpu=true:NoSchedule"), nodeWithTaints("n3", "gpu=true:NoSchedule")},
				[]*corev1.Pod{boundTo("n1", "a", "cpu=3500m")}),
			want: CodeUntoleratedTaint,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := schedulingRules(tt.s)
			if len(got) == 0 {
				t.Fatalf("schedulingRules() = no findings, want %s first", tt.want)
			}
			if got[0].Code != tt.want || got[0].Severity != SeverityBlocker {
				t.Errorf("schedulingRules()[0] = %s (%s), want %s (blocker); summary: %s", got[0].Code, got[0].Severity, tt.want, got[0].Summary)
			}
			if tt.want != CodeSchedulingGated && len(got[0].Nodes) != len(tt.s.Nodes) {
				t.Errorf("schedulingRules()[0].Nodes has %d rows, want one per node (%d)", len(got[0].Nodes), len(tt.s.Nodes))
			}
			for _, f := range got {
				if f.Summary == "" {
					t.Errorf("finding %s has no summary", f.Code)
				}
			}
		})
	}
}

func TestNodeVerdictsKeepEveryReason(t *testing.T) {
	p := withHostPort(podRequesting("web", "cpu=1", "memory=2Gi"), 80)
	p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	s := snap(p,
		[]*corev1.Node{
			node("full", withTaints("key1=value1:NoSchedule", "dedicated=db:NoExecute"), cordoned, notReady,
				withAllocatable("cpu", "2"), withAllocatable("memory", "4Gi"), withAllocatable("pods", "1")),
			node("fits", withLabel("disk", "ssd")),
		},
		[]*corev1.Pod{withHostPort(boundTo("full", "proxy", "cpu=1500m", "memory=3Gi"), 80)})
	v := newSchedulingView(s)
	want := []NodeVerdict{
		{Node: "fits", Fits: true},
		{Node: "full", Reasons: []NodeReason{
			{Code: CodeNodeUnschedulable},
			{Code: CodeUntoleratedTaint},
			{Code: CodeUntoleratedTaint},
			{Code: CodeNodeNotReady},
			{Code: CodeNodeSelectorMismatch},
			{Code: CodeHostPortConflict},
			{Code: CodeTooManyPods, Resource: "pods", Requested: 1, Used: 1, Allocatable: 1},
			{Code: CodeInsufficientCPU, Resource: "cpu", Requested: 1000, Used: 1500, Allocatable: 2000},
			{Code: CodeInsufficientMemory, Resource: "memory", Requested: 2 << 30, Used: 3 << 30, Allocatable: 4 << 30},
		}},
	}
	if diff := cmp.Diff(want, v.verdicts, ignoreProse); diff != "" {
		t.Errorf("nodeVerdicts() mismatch (-want +got):\n%s", diff)
	}
}

func TestSchedulingUnreadableNodesAreNotNoNodes(t *testing.T) {
	s := snap(podRequesting("web"), nil, nil)
	s.NodesErr = errors.New("nodes is forbidden")
	for _, f := range schedulingRules(s) {
		if f.Code == CodeNoNodes {
			t.Errorf("schedulingRules() = %s although the nodes could not be read, want no such finding", f.Code)
		}
	}
}

func TestSchedulingRulesSkipScheduledPods(t *testing.T) {
	bound := boundTo("n1", "web", "cpu=64")
	deleting := podRequesting("gone", "cpu=64")
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(testNow))
	for _, p := range []*corev1.Pod{bound, deleting} {
		if got := schedulingRules(snap(p, []*corev1.Node{node("n1")}, nil)); len(got) != 0 {
			t.Errorf("schedulingRules(%s) = %d findings, want none", p.Name, len(got))
		}
	}
}

func TestSchedulingFixesNameRealObjects(t *testing.T) {
	p := podRequesting("nginx")
	s := snap(p, []*corev1.Node{nodeWithTaints("node-1", "key1=value1:NoSchedule"), node("node-2", cordoned)}, nil,
		failedScheduling("0/2 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable.", 1))
	got := schedulingRules(s)
	var fixes []string
	for _, f := range got {
		fixes = append(fixes, f.Fix...)
	}
	for _, want := range []string{"kubectl taint nodes node-1 key1:NoSchedule-", "kubectl uncordon node-2   # if its maintenance is over"} {
		found := false
		for _, fix := range fixes {
			if strings.HasPrefix(fix, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("fixes = %q, want one to be %q", fixes, want)
		}
	}
}

// randomSchedulingSnapshot builds a random cluster of up to 4 nodes (taints of every sort,
// cordons, NotReady, cpu and pod limits, labels; bound pods, some with a host port) and a
// Pending pod (cpu and memory requests, maybe a host port, a nodeSelector, anti-affinity and
// topology spread), with or without a FailedScheduling event.
func randomSchedulingSnapshot(rng *rand.Rand) *Snapshot {
	pick := func(options ...string) string { return options[rng.IntN(len(options))] }
	var nodes []*corev1.Node
	var bound []*corev1.Pod
	for n := range rng.IntN(5) {
		name := fmt.Sprintf("n%d", n)
		var mods []func(*corev1.Node)
		if rng.IntN(3) == 0 {
			mods = append(mods, withTaints(pick("key1=v:NoSchedule", "node-role.kubernetes.io/control-plane:NoSchedule", "node.kubernetes.io/not-ready:NoExecute", "x:PreferNoSchedule")))
		}
		if rng.IntN(5) == 0 {
			mods = append(mods, cordoned)
		}
		if rng.IntN(5) == 0 {
			mods = append(mods, notReady)
		}
		mods = append(mods, withAllocatable("cpu", pick("1", "2", "4")), withAllocatable("pods", pick("1", "3", "110")),
			withLabel("zone", pick("a", "b")), withLabel("disk", pick("ssd", "hdd")))
		nodes = append(nodes, node(name, mods...))
		for j := range rng.IntN(3) {
			p := boundTo(name, fmt.Sprintf("p%d-%d", n, j), "cpu="+pick("100m", "900m", "1500m"))
			if rng.IntN(3) == 0 {
				withHostPort(p, 80)
			}
			withPodLabels(p, "app", pick("web", "db"))
			bound = append(bound, p)
		}
	}
	pod := podRequesting("web", "cpu="+pick("100m", "1", "3"), "memory="+pick("1Gi", "16Gi"))
	if rng.IntN(3) == 0 {
		withHostPort(pod, 80)
	}
	if rng.IntN(3) == 0 {
		pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	}
	if rng.IntN(3) == 0 {
		pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "zone",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
	}
	if rng.IntN(3) == 0 {
		pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	}
	var events []Event
	if rng.IntN(2) == 0 {
		events = append(events, failedScheduling(fmt.Sprintf("0/%d nodes are available: %d %s.", len(nodes), len(nodes),
			pick("Insufficient cpu", "node(s) had untolerated taint(s)", "node(s) didn't match Pod's node affinity/selector")), 2))
	}
	return snap(pod, nodes, bound, events...)
}

// TestSchedulingInvariants runs the scheduling rules over many random clusters and checks what
// must hold for any input: one verdict per node sorted by name, Fits exactly when there is no
// reason, resource reasons that really do not fit, and a Pending code first.
func TestSchedulingInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		s := randomSchedulingSnapshot(rng)
		nodes := s.Nodes
		got := schedulingRules(s)
		for _, f := range got {
			if f.Nodes == nil {
				continue
			}
			if len(f.Nodes) != len(nodes) {
				t.Fatalf("case %d: %s has %d verdicts for %d nodes", i, f.Code, len(f.Nodes), len(nodes))
			}
			for k, nv := range f.Nodes {
				if k > 0 && f.Nodes[k-1].Node >= nv.Node {
					t.Fatalf("case %d: verdicts not sorted by node: %s before %s", i, f.Nodes[k-1].Node, nv.Node)
				}
				if nv.Fits != (len(nv.Reasons) == 0) {
					t.Fatalf("case %d: node %s Fits = %v with %d reasons", i, nv.Node, nv.Fits, len(nv.Reasons))
				}
				for _, r := range nv.Reasons {
					if r.Resource != "" && r.Requested <= r.Allocatable-r.Used {
						t.Fatalf("case %d: node %s reason %s: requested %d fits in %d-%d", i, nv.Node, r.Code, r.Requested, r.Allocatable, r.Used)
					}
				}
			}
		}
		if len(got) > 0 && got[0].Severity == SeverityBlocker && !got[0].Code.Pending() {
			t.Fatalf("case %d: first finding %s is not a Pending code", i, got[0].Code)
		}
	}
}

// TestMixedCausesLeadWithTheNodesMeantForThePod is issue 22's item 7: on many nodes with mixed
// causes, the primary cause is ranked on the nodes the pod could otherwise use (those its
// nodeSelector, affinity and tolerations allow), not on the node count, and the summary says in
// one line how many nodes fail each reason.
func TestMixedCausesLeadWithTheNodesMeantForThePod(t *testing.T) {
	many := func(prefix string, n int, mods ...func(*corev1.Node)) []*corev1.Node {
		var out []*corev1.Node
		for i := range n {
			out = append(out, node(fmt.Sprintf("%s-%02d", prefix, i+1), mods...))
		}
		return out
	}
	fill := func(nodes []*corev1.Node, reqs ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, n := range nodes {
			out = append(out, boundTo(n.Name, "filler-"+n.Name, reqs...))
		}
		return out
	}
	selecting := func(p *corev1.Pod, k, v string) *corev1.Pod {
		p.Spec.NodeSelector = map[string]string{k: v}
		return p
	}
	gpu := many("gpu", 30, withTaints("nvidia.com/gpu=present:NoSchedule"), withLabel("pool", "gpu"))
	general := many("node", 10, withLabel("pool", "general"))
	canary := many("web", 4, withLabel("pool", "web"), withTaints("dedicated=canary:NoSchedule"))
	web := many("web-x", 4, withLabel("pool", "web"))
	tests := []struct {
		name string
		s    *Snapshot
		want Code
		// counts is the one line of counts the summary must hold.
		counts string
	}{
		{
			name: "30 tainted GPU nodes with room, 10 general nodes without cpu: insufficient-cpu, not untaint the GPU nodes",
			s: snap(podRequesting("api", "cpu=1"), append(gpu, general...), fill(general, "cpu=3800m"),
				failedScheduling("0/40 nodes are available: 10 Insufficient cpu, 30 node(s) had untolerated taint(s).", 2)),
			want:   CodeInsufficientCPU,
			counts: "Nodes failing each reason (40 in all): 30 untolerated-taint, 10 insufficient-cpu; the cause is ranked on the 10 nodes the pod's nodeSelector, affinity and tolerations allow.",
		},
		{
			name: "the same with the reasons the other way round in the scheduler's message",
			s: snap(podRequesting("api", "cpu=1"), append(general, gpu...), fill(general, "cpu=3800m"),
				failedScheduling("0/40 nodes are available: 30 node(s) had untolerated taint {nvidia.com/gpu: present}, 10 Insufficient cpu.", 2)),
			want:   CodeInsufficientCPU,
			counts: "30 untolerated-taint, 10 insufficient-cpu",
		},
		{
			name: "25 tainted batch nodes with room and 5 cordoned nodes meant for the pod: node-unschedulable",
			s: snap(podRequesting("api", "cpu=1"), append(many("batch", 25, withTaints("dedicated=batch:NoSchedule")), many("w", 5, cordoned)...), nil,
				failedScheduling("0/30 nodes are available: 25 node(s) had untolerated taint(s), 5 node(s) were unschedulable.", 2)),
			want:   CodeNodeUnschedulable,
			counts: "25 untolerated-taint, 5 node-unschedulable; the cause is ranked on the 5 nodes",
		},
		{
			name: "a nodeSelector that 8 of 38 nodes match, 4 of them tainted, 4 short of memory: insufficient-memory",
			s: snap(selecting(podRequesting("web", "memory=4Gi"), "pool", "web"), append(append(many("other", 30), canary...), web...), fill(web, "memory=6Gi"),
				failedScheduling("0/38 nodes are available: 30 node(s) didn't match Pod's node affinity/selector, 4 Insufficient memory, 4 node(s) had untolerated taint(s).", 2)),
			want:   CodeInsufficientMemory,
			counts: "30 node-selector-mismatch, 4 insufficient-memory, 4 untolerated-taint; the cause is ranked on the 4 nodes",
		},
		{
			name: "every node the selector matches is tainted: the taint is the cause, ranked on those nodes",
			s: snap(selecting(podRequesting("web"), "pool", "web"), append(many("other", 30), canary...), nil,
				failedScheduling("0/34 nodes are available: 30 node(s) didn't match Pod's node affinity/selector, 4 node(s) had untolerated taint(s).", 2)),
			want:   CodeUntoleratedTaint,
			counts: "30 node-selector-mismatch, 4 untolerated-taint; the cause is ranked on the 4 nodes the pod's nodeSelector and affinity allow.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(tt.s)
			p := d.Primary()
			if p.Code != tt.want {
				t.Fatalf("primary = %s, want %s: %s", p.Code, tt.want, p.Summary)
			}
			if !strings.Contains(p.Summary, tt.counts) {
				t.Errorf("summary lacks the counts %q: %s", tt.counts, p.Summary)
			}
			for _, fix := range p.Fix {
				if strings.HasPrefix(fix, "kubectl taint") && tt.want != CodeUntoleratedTaint {
					t.Errorf("the primary %s finding's fix untaints a node: %s", p.Code, fix)
				}
			}
		})
	}
}
