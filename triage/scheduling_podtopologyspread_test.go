package triage

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// spreading returns the Pending pod web (app=web) with one DoNotSchedule constraint of maxSkew 1
// over key for app=web pods, changed by mods.
func spreading(key string, mods ...func(*corev1.TopologySpreadConstraint)) *corev1.Pod {
	p := withPodLabels(podRequesting("web"), "app", "web")
	c := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	for _, m := range mods {
		m(&c)
	}
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c}
	return p
}

// webReplica is a Running app=web pod on node.
func webReplica(node, name string) *corev1.Pod {
	return withPodLabels(boundTo(node, name), "app", "web")
}

func TestTopologySpreadKnowsWhichDomainsCount(t *testing.T) {
	spreadPod := func(mods ...func(*corev1.TopologySpreadConstraint)) *corev1.Pod {
		return spreading("kubernetes.io/hostname", mods...)
	}
	replica := webReplica
	zone := func(z string) func(*corev1.Node) { return withLabel("topology.kubernetes.io/zone", z) }
	tests := []struct {
		name string
		s    *Snapshot
		// wantFix is a substring one fix must have; notFix one no fix may have.
		wantFix, notFix string
	}{
		{
			name: "tainted control planes count as empty hostname domains (nodeTaintsPolicy unset): suggest Honor",
			s: snap(spreadPod(), []*corev1.Node{
				nodeWithTaints("cp-1", "node-role.kubernetes.io/control-plane:NoSchedule"), nodeWithTaints("cp-2", "node-role.kubernetes.io/control-plane:NoSchedule"),
				node("w-1"), node("w-2")},
				[]*corev1.Pod{replica("w-1", "r1"), replica("w-2", "r2")},
				failedScheduling("0/4 nodes are available: 2 node(s) didn't match pod topology spread constraints, 2 node(s) had untolerated taint(s).", 1)),
			wantFix: "nodeTaintsPolicy: Honor", notFix: "cp-",
		},
		{
			name: "zones: a zone of only tainted GPU nodes holds the skew down (explicit Ignore)",
			s: snap(spreadPod(func(c *corev1.TopologySpreadConstraint) {
				c.TopologyKey = "topology.kubernetes.io/zone"
				c.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
			}), []*corev1.Node{
				node("gpu-c", zone("zone-c"), withTaints("nvidia.com/gpu=true:NoSchedule")),
				node("w-a", zone("zone-a")), node("w-b", zone("zone-b"))},
				[]*corev1.Pod{replica("w-a", "r1"), replica("w-b", "r2")},
				failedScheduling("0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match pod topology spread constraints.", 1)),
			wantFix: "nodeTaintsPolicy: Honor", notFix: "zone-c",
		},
		{
			name: "an empty zone the pod can run in: add capacity there (it is not the control plane)",
			s: snap(spreadPod(func(c *corev1.TopologySpreadConstraint) { c.TopologyKey = "topology.kubernetes.io/zone" }),
				[]*corev1.Node{
					node("w-a", zone("zone-a")), node("w-b", zone("zone-b")), node("w-c", zone("zone-c"), withAllocatable("pods", "1"))},
				[]*corev1.Pod{replica("w-a", "r1"), replica("w-b", "r2"), boundTo("w-c", "other")},
				failedScheduling("0/3 nodes are available: 1 Too many pods, 2 node(s) didn't match pod topology spread constraints.", 1)),
			wantFix: "zone-c", notFix: "nodeTaintsPolicy",
		},
		{
			name: "nodeAffinityPolicy Ignore counts nodes the pod's selector excludes: suggest Honor",
			s: func() *Snapshot {
				p := spreadPod(func(c *corev1.TopologySpreadConstraint) {
					c.NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
				})
				p.Spec.NodeSelector = map[string]string{"pool": "web"}
				return snap(p, []*corev1.Node{node("other-1"), node("w-1", withLabel("pool", "web")), node("w-2", withLabel("pool", "web"))},
					[]*corev1.Pod{replica("w-1", "r1"), replica("w-2", "r2")},
					failedScheduling("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't match pod topology spread constraints.", 1))
			}(),
			wantFix: "nodeAffinityPolicy: Honor", notFix: "other-1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(tt.s)
			p := d.Primary()
			if p.Code != CodeTopologySpreadUnsatisfiable {
				t.Fatalf("primary = %s, want topology-spread-unsatisfiable: %s", p.Code, p.Summary)
			}
			all := strings.Join(p.Fix, "\n")
			if !strings.Contains(all, tt.wantFix) {
				t.Errorf("fixes lack %q:\n%s", tt.wantFix, all)
			}
			if strings.Contains(all, tt.notFix) {
				t.Errorf("fixes name %q, where the pod cannot run:\n%s", tt.notFix, all)
			}
		})
	}
}

func TestPodTopologySpreadReasons(t *testing.T) {
	replica := webReplica
	zone := func(z string) func(*corev1.Node) { return withLabel("zone", z) }
	testFilterReasons(t, "PodTopologySpread", []reasonsCase{
		{name: "a domain one over the emptiest", pod: spreading("zone"), node: node("a1", zone("a")), others: []*corev1.Node{node("b1", zone("b"))},
			bound: []*corev1.Pod{replica("a1", "r1")}, want: []NodeReason{{Code: CodeTopologySpreadUnsatisfiable}}},
		{name: "the emptiest domain", pod: spreading("zone"), node: node("b1", zone("b")), others: []*corev1.Node{node("a1", zone("a"))},
			bound: []*corev1.Pod{replica("a1", "r1")}},
		{name: "a node without the topology key", pod: spreading("zone"), node: node("n1"), others: []*corev1.Node{node("a1", zone("a"))},
			want: []NodeReason{{Code: CodeTopologySpreadUnsatisfiable}}},
		{name: "ScheduleAnyway never rejects", pod: spreading("zone", func(c *corev1.TopologySpreadConstraint) { c.WhenUnsatisfiable = corev1.ScheduleAnyway }),
			node: node("a1", zone("a")), others: []*corev1.Node{node("b1", zone("b"))}, bound: []*corev1.Pod{replica("a1", "r1")}},
		{name: "minDomains above the domains there are: the emptiest counts as 0", pod: spreading("zone", func(c *corev1.TopologySpreadConstraint) { c.MinDomains = ptr.To[int32](3) }),
			node: node("a1", zone("a")), others: []*corev1.Node{node("b1", zone("b"))},
			bound: []*corev1.Pod{replica("a1", "r1"), replica("b1", "r2")}, want: []NodeReason{{Code: CodeTopologySpreadUnsatisfiable}}},
		{name: "a tainted domain counts with the default nodeTaintsPolicy Ignore", pod: spreading("zone"), node: node("a1", zone("a")),
			others: []*corev1.Node{node("b1", zone("b"), withTaints("gpu=true:NoSchedule"))},
			bound:  []*corev1.Pod{replica("a1", "r1")}, want: []NodeReason{{Code: CodeTopologySpreadUnsatisfiable}}},
		{name: "and does not count with nodeTaintsPolicy Honor", pod: spreading("zone", func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor) }),
			node: node("a1", zone("a")), others: []*corev1.Node{node("b1", zone("b"), withTaints("gpu=true:NoSchedule"))},
			bound: []*corev1.Pod{replica("a1", "r1")}},
	})
}
