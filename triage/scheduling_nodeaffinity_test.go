package triage

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

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

func TestNodeAffinityReasons(t *testing.T) {
	selecting := func(kv ...string) *corev1.Pod {
		p := podRequesting("web")
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
		return p
	}
	inZone := podRequesting("web")
	inZone.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}}}}}
	testFilterReasons(t, "NodeAffinity", []reasonsCase{
		{name: "a nodeSelector label the node lacks", pod: selecting("disk", "ssd"), node: node("n1"), want: []NodeReason{{Code: CodeNodeSelectorMismatch}}},
		{name: "a nodeSelector label with another value", pod: selecting("disk", "ssd"), node: node("n1", withLabel("disk", "hdd")), want: []NodeReason{{Code: CodeNodeSelectorMismatch}}},
		{name: "a matching nodeSelector", pod: selecting("disk", "ssd"), node: node("n1", withLabel("disk", "ssd"))},
		{name: "required node affinity that excludes the node", pod: inZone, node: node("n1", withLabel("zone", "a")), want: []NodeReason{{Code: CodeNodeSelectorMismatch}}},
		{name: "required node affinity that matches", pod: inZone, node: node("n1", withLabel("zone", "b"))},
		{name: "a DaemonSet pod on another node than its own", pod: daemonSetPod("n2"), node: node("n1"), others: []*corev1.Node{node("n2")}, want: []NodeReason{{Code: CodeNodeSelectorMismatch}}},
		{name: "a DaemonSet pod on its own node", pod: daemonSetPod("n1"), node: node("n1")},
	})
	if got := pinnedNode(daemonSetPod("n2")); got != "n2" {
		t.Errorf("pinnedNode(DaemonSet pod of n2) = %q, want n2", got)
	}
	if got := pinnedNode(inZone); got != "" {
		t.Errorf("pinnedNode(zone affinity) = %q, want none", got)
	}
}
