package triage

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodRequestsCountInitContainersSidecarsAndOverhead(t *testing.T) {
	tests := []struct {
		name string
		pod  func(p *corev1.Pod)
		want int64 // millicores requested
	}{
		{
			name: "an init container larger than the app containers sets the request",
			pod: func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: resourceList("cpu=2")}}}
			},
			want: 2000,
		},
		{
			name: "a sidecar (restartable init container) adds to the app containers",
			pod: func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Resources: corev1.ResourceRequirements{Requests: resourceList("cpu=250m")}}}
			},
			want: 750,
		},
		{
			name: "pod overhead adds to the requests",
			pod:  func(p *corev1.Pod) { p.Spec.Overhead = resourceList("cpu=100m") },
			want: 600,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podRequesting("web", "cpu=500m")
			tt.pod(p)
			s := snap(p, []*corev1.Node{node("n1", withAllocatable("cpu", "100m"))}, nil)
			v := newSchedulingView(s)
			var got int64
			for _, r := range v.verdicts[0].Reasons {
				if r.Code == CodeInsufficientCPU {
					got = r.Requested
				}
			}
			if got != tt.want {
				t.Errorf("requested cpu = %dm, want %dm", got, tt.want)
			}
		})
	}
}

func TestShortfall(t *testing.T) {
	three := []*corev1.Node{node("n1", withAllocatable("cpu", "2")), node("n2", withAllocatable("cpu", "2")), node("n3", withAllocatable("cpu", "2"))}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		nodes []*corev1.Node
		bound []*corev1.Pod
		want  shortfall
	}{
		{
			name:  "free room spread over nodes that together would fit is fragmented",
			pod:   podRequesting("web", "cpu=500m"),
			nodes: three,
			bound: []*corev1.Pod{boundTo("n1", "a", "cpu=1800m"), boundTo("n2", "b", "cpu=1700m"), boundTo("n3", "c", "cpu=1900m")},
			want: shortfall{Resource: "cpu", Requested: 500,
				Rooms:     []nodeRoom{{"n2", 300, 1700, 2000}, {"n1", 200, 1800, 2000}, {"n3", 100, 1900, 2000}},
				TotalFree: 600, Eligible: 3, LargestAllocatable: 2000, LargestNode: "n1", Fragmented: true},
		},
		{
			name:  "too little room even in total is not fragmented",
			pod:   podRequesting("web", "cpu=1"),
			nodes: three,
			bound: []*corev1.Pod{boundTo("n1", "a", "cpu=1800m"), boundTo("n2", "b", "cpu=1800m"), boundTo("n3", "c", "cpu=1800m")},
			want: shortfall{Resource: "cpu", Requested: 1000,
				Rooms:     []nodeRoom{{"n1", 200, 1800, 2000}, {"n2", 200, 1800, 2000}, {"n3", 200, 1800, 2000}},
				TotalFree: 600, Eligible: 3, LargestAllocatable: 2000, LargestNode: "n1"},
		},
		{
			name:  "a request larger than any node is too big",
			pod:   podRequesting("web", "cpu=3"),
			nodes: three,
			want: shortfall{Resource: "cpu", Requested: 3000,
				Rooms:     []nodeRoom{{"n1", 2000, 0, 2000}, {"n2", 2000, 0, 2000}, {"n3", 2000, 0, 2000}},
				TotalFree: 6000, Eligible: 3, LargestAllocatable: 2000, LargestNode: "n1", TooBig: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newSchedulingView(snap(tt.pod, tt.nodes, tt.bound))
			if diff := cmp.Diff(tt.want, v.shortfallOf(CodeInsufficientCPU)); diff != "" {
				t.Errorf("shortfallOf(insufficient-cpu) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatAmount(t *testing.T) {
	tests := []struct {
		name corev1.ResourceName
		v    int64
		want string
	}{
		{"cpu", 1500, "1500m"},
		{"cpu", 2000, "2000m"},
		{"cpu", 9999, "9999m"},
		{"cpu", 50000, "50 CPU (50000m)"},
		{"cpu", 12500, "12.5 CPU (12500m)"},
		{"memory", 3<<30 + 900<<20, "3.9Gi"},
		{"memory", 4164943873, "3.9Gi"},
		{"memory", 512 << 20, "512Mi"},
		{"ephemeral-storage", 1024000000, "1024M"},
		{"memory", 1234567, "1.2Mi"},
		{"nvidia.com/gpu", 4, "4"},
	}
	for _, tt := range tests {
		if got := formatAmount(tt.name, tt.v); got != tt.want {
			t.Errorf("formatAmount(%s, %d) = %q, want %q", tt.name, tt.v, got, tt.want)
		}
	}
}

// tester10Nodes are the issue-10 tester's nodes: n1 and n2 with 2 cpu, n3 with 2 cpu and a
// dedicated=gpu:NoSchedule taint.
func tester10Nodes() []*corev1.Node {
	two := withAllocatable(corev1.ResourceCPU, "2")
	return []*corev1.Node{node("n1", two), node("n2", two), node("n3", two, withTaints("dedicated=gpu:NoSchedule"))}
}

// TestResourceShortfallCountsNodesAsTheSchedulerDoes: a node an earlier filter rejects (here
// TaintToleration) is counted under that reason, like the scheduler's message, and no fix names it.
func TestResourceShortfallCountsNodesAsTheSchedulerDoes(t *testing.T) {
	pod := podRequesting("checkout", "cpu=50")
	s := snap(pod, tester10Nodes(), nil,
		failedScheduling("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.", 3))
	fs := schedulingRules(s)
	if len(fs) == 0 || fs[0].Code != CodeInsufficientCPU {
		t.Fatalf("codes = %v, want insufficient-cpu first", codesOf(fs))
	}
	f := fs[0]
	if f.Uncertain {
		t.Errorf("the table agrees with the scheduler, yet the finding is uncertain: %s", f.Summary)
	}
	for _, bad := range []string{"all 3 nodes", "50000m cpu free"} {
		if strings.Contains(f.Summary, bad) {
			t.Errorf("summary says %q: %s", bad, f.Summary)
		}
	}
	for _, want := range []string{"Insufficient cpu on 2 of 3 nodes", "50 CPU (50000m)", "n3 under an earlier filter"} {
		if !strings.Contains(f.Summary, want) {
			t.Errorf("summary lacks %q: %s", want, f.Summary)
		}
	}
	for _, fix := range f.Fix {
		if strings.Contains(fix, "n3") {
			t.Errorf("fix names the tainted node n3: %s", fix)
		}
	}
	if !slicesContain(f.Fix, "(what n1 has free)") {
		t.Errorf("no lower-the-request fix naming n1: %q", f.Fix)
	}
	if len(fs) < 2 || fs[1].Code != CodeUntoleratedTaint {
		t.Errorf("codes = %v, want the taint of n3 as a secondary finding", codesOf(fs))
	}
}

// TestLowerRequestFixOnlyNamesNodesWhereItFits: the roomiest node for cpu also lacks memory,
// so lowering the cpu request to its free cpu would not place the pod; the fix names the
// node where cpu is the only obstacle.
func TestLowerRequestFixOnlyNamesNodesWhereItFits(t *testing.T) {
	pod := podRequesting("api", "cpu=3", "memory=6Gi")
	nodes := []*corev1.Node{node("n1"), node("n2")}
	bound := []*corev1.Pod{boundTo("n1", "hog", "cpu=2500m", "memory=4Gi"), boundTo("n2", "busy", "cpu=3")}
	fs := schedulingRules(snap(pod, nodes, bound))
	if len(fs) == 0 || fs[0].Code != CodeInsufficientCPU {
		t.Fatalf("codes = %v, want insufficient-cpu first", codesOf(fs))
	}
	for _, fix := range fs[0].Fix {
		if strings.Contains(fix, "what n1 has free") {
			t.Errorf("fix lowers cpu to n1's room, but n1 also lacks memory: %s", fix)
		}
	}
	if !slicesContain(fs[0].Fix, "at most 1000m (what n2 has free)") {
		t.Errorf("no fix lowering cpu to n2's room: %q", fs[0].Fix)
	}
}

// ofDeployment makes p a pod of Deployment name (through ReplicaSet name-5d8f) in namespace ns.
func ofDeployment(p *corev1.Pod, ns, name string) *corev1.Pod {
	p.Namespace = ns
	p.Labels["pod-template-hash"] = "5d8f"
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-5d8f", Controller: isTrue()}}
	return p
}

func TestScaleFixNeverScalesThePodsOwnWorkloadNorGuessesReplicas(t *testing.T) {
	pod := ofDeployment(podRequesting("big-5d8f-zzzzz", "cpu=900m"), "shop", "big")
	nodes := []*corev1.Node{node("n1", withAllocatable("cpu", "2"))}
	bound := []*corev1.Pod{
		ofDeployment(boundTo("n1", "big-5d8f-aaaaa", "cpu=900m"), "shop", "big"),
		ofDeployment(boundTo("n1", "web-5d8f-bbbbb", "cpu=600m"), "other", "web"),
	}
	s := snap(pod, nodes, bound, failedScheduling("0/1 nodes are available: 1 Insufficient cpu.", 3))
	var scale []string
	for _, f := range schedulingRules(s) {
		for _, fix := range f.Fix {
			if strings.HasPrefix(fix, "kubectl scale ") {
				scale = append(scale, fix)
			}
		}
	}
	if len(scale) != 1 {
		t.Fatalf("scale fixes = %q, want exactly one", scale)
	}
	got := scale[0]
	if strings.Contains(got, "--current-replicas") || strings.Contains(got, "deployment/big ") {
		t.Errorf("scale fix %q guesses the replica count or scales the pod's own Deployment", got)
	}
	if !strings.HasPrefix(got, "kubectl scale deployment/web -n other --replicas=<fewer>") || !strings.Contains(got, "another team's workload") {
		t.Errorf("scale fix = %q, want Deployment other/web flagged as another namespace's", got)
	}
	if !strings.Contains(got, "each one removed is a Ready replica of it fewer: only if it can spare them") {
		t.Errorf("scale fix = %q, want what the scale-down costs web", got)
	}
}

// TestScaleFixOnlyWhenItFreesEnough checks that scaling another workload down is suggested only
// when what its pods request on the node would let the pod fit there, and never for a pod
// bigger than any node.
func TestScaleFixOnlyWhenItFreesEnough(t *testing.T) {
	tests := []struct {
		name, request string
		want          bool
	}{
		{"freeing web's 600m makes room for 900m", "cpu=900m", true},
		{"freeing web's 600m still leaves too little for 1500m", "cpu=1500m", false},
		{"bigger than any node", "cpu=50", false},
	}
	for _, tt := range tests {
		pod := ofDeployment(podRequesting("big-5d8f-zzzzz", tt.request), "shop", "big")
		nodes := []*corev1.Node{node("n1", withAllocatable("cpu", "2"))}
		bound := []*corev1.Pod{
			ofDeployment(boundTo("n1", "big-5d8f-aaaaa", "cpu=900m"), "shop", "big"),
			ofDeployment(boundTo("n1", "web-5d8f-bbbbb", "cpu=600m"), "other", "web"),
		}
		s := snap(pod, nodes, bound, failedScheduling("0/1 nodes are available: 1 Insufficient cpu.", 3))
		got := false
		for _, f := range schedulingRules(s) {
			for _, fix := range f.Fix {
				got = got || strings.HasPrefix(fix, "kubectl scale ")
			}
		}
		if got != tt.want {
			t.Errorf("%s: a kubectl scale fix = %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestNodeResourcesFitReasons(t *testing.T) {
	testFilterReasons(t, "NodeResourcesFit", []reasonsCase{
		{name: "cpu and memory short, each with its amounts", pod: podRequesting("web", "cpu=1", "memory=2Gi"),
			node:  node("n1", withAllocatable("cpu", "2"), withAllocatable("memory", "4Gi")),
			bound: []*corev1.Pod{boundTo("n1", "a", "cpu=1500m", "memory=3Gi")},
			want: []NodeReason{
				{Code: CodeInsufficientCPU, Resource: "cpu", Requested: 1000, Used: 1500, Allocatable: 2000},
				{Code: CodeInsufficientMemory, Resource: "memory", Requested: 2 << 30, Used: 3 << 30, Allocatable: 4 << 30},
			}},
		{name: "exactly the free amount fits", pod: podRequesting("web", "cpu=500m"), node: node("n1", withAllocatable("cpu", "2")),
			bound: []*corev1.Pod{boundTo("n1", "a", "cpu=1500m")}},
		{name: "the pod count comes first", pod: podRequesting("web", "cpu=10m"), node: node("n1", withAllocatable("pods", "1")),
			bound: []*corev1.Pod{boundTo("n1", "a")},
			want:  []NodeReason{{Code: CodeTooManyPods, Resource: "pods", Requested: 1, Used: 1, Allocatable: 1}}},
		{name: "an extended resource the node does not advertise", pod: podRequesting("train", "nvidia.com/gpu=1"), node: node("n1"),
			want: []NodeReason{{Code: CodeInsufficientExtendedResource, Resource: "nvidia.com/gpu", Requested: 1}}},
		{name: "ephemeral-storage on a node that reports none", pod: podRequesting("web", "ephemeral-storage=1Gi"), node: node("n1", withAllocatable("ephemeral-storage", "")),
			want: []NodeReason{{Code: CodeInsufficientEphemeralStorage, Resource: "ephemeral-storage", Requested: 1 << 30}}},
		{name: "requests of pods on other nodes do not count", pod: podRequesting("web", "cpu=1"), node: node("n1"), others: []*corev1.Node{node("n2")},
			bound: []*corev1.Pod{boundTo("n2", "a", "cpu=4")}},
	})
}
