package triage

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

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

// daemonSetPod returns a Pending pod of DaemonSet agent pinned to node as the DaemonSet
// controller pins it (required node affinity, matchFields metadata.name).
func daemonSetPod(node string, reqs ...string) *corev1.Pod {
	p := podRequesting("agent-"+node, reqs...)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}}
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}},
	}}}
	return p
}

// TestDaemonSetPodFixesAreAboutItsNode: a DaemonSet pod pinned to a full node gets fixes about
// that node only: no other node as "closest" or "fits", no "add a node", no selector-mismatch
// warning for the nodes it is not meant for.
func TestDaemonSetPodFixesAreAboutItsNode(t *testing.T) {
	pod := daemonSetPod("n1", "cpu=500m")
	nodes := []*corev1.Node{node("n1"), node("n2"), node("n3")}
	bound := []*corev1.Pod{boundTo("n1", "hog", "cpu=4"), boundTo("n2", "web", "cpu=1")}
	fs := schedulingRules(snap(pod, nodes, bound,
		failedScheduling("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.", 2)))
	if len(fs) == 0 || fs[0].Code != CodeInsufficientCPU {
		t.Fatalf("codes = %v, want insufficient-cpu first", codesOf(fs))
	}
	for _, f := range fs[1:] {
		if f.Code == CodeNodeSelectorMismatch {
			t.Errorf("selector mismatch reported for the nodes a DaemonSet pod is not meant for: %s", f.Summary)
		}
	}
	f := fs[0]
	if !strings.Contains(f.Summary, "only run on n1") || strings.Contains(f.Summary, "n2") || strings.Contains(f.Summary, "n3") {
		t.Errorf("summary is not about n1 alone: %s", f.Summary)
	}
	for _, fix := range f.Fix {
		if strings.Contains(fix, "n2") || strings.Contains(fix, "n3") || strings.Contains(fix, "add a node") {
			t.Errorf("fix for a pod pinned to n1: %s", fix)
		}
	}
}

// TestDaemonSetPodOnTaintedNode: the pinned node's taint is the cause; the fix tolerates it.
func TestDaemonSetPodOnTaintedNode(t *testing.T) {
	pod := daemonSetPod("n3", "cpu=100m")
	fs := schedulingRules(snap(pod, tester10Nodes(), nil,
		failedScheduling("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.", 2)))
	if len(fs) == 0 || fs[0].Code != CodeUntoleratedTaint {
		t.Fatalf("codes = %v, want untolerated-taint first", codesOf(fs))
	}
	if len(fs) != 1 {
		t.Errorf("codes = %v, want only the taint of n3", codesOf(fs))
	}
	if !slicesContain(fs[0].Fix, "tolerate the taint") {
		t.Errorf("no toleration fix: %q", fs[0].Fix)
	}
}

func slicesContain(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// TestSelectorNoNodeMatchesBehindTaints: a nodeSelector no node matches stays the primary
// cause when taints reject most nodes first; the summary gives both counts.
func TestSelectorNoNodeMatchesBehindTaints(t *testing.T) {
	pod := podRequesting("web", "cpu=1")
	pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	nodes := []*corev1.Node{nodeWithTaints("n1", "dedicated=batch:NoSchedule"), nodeWithTaints("n2", "team=ml:NoExecute"), node("n3")}
	fs := schedulingRules(snap(pod, nodes, nil,
		failedScheduling("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) had untolerated taint(s). preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.", 2)))
	if len(fs) == 0 || fs[0].Code != CodeNodeSelectorMismatch {
		t.Fatalf("codes = %v, want node-selector-mismatch first", codesOf(fs))
	}
	if want := "matches none of the 3 nodes (the scheduler counts 2 of them under an earlier filter's reason)"; !strings.Contains(fs[0].Summary, want) {
		t.Errorf("summary lacks %q: %s", want, fs[0].Summary)
	}
	if fs[0].Uncertain {
		t.Errorf("the table agrees with the scheduler, yet the finding is uncertain: %s", fs[0].Summary)
	}
}
