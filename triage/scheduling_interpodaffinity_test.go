package triage

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInterPodAffinityReasons(t *testing.T) {
	term := func(key, app string) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}
	}
	near := func(app string) *corev1.Pod {
		p := podRequesting("web")
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("zone", app)}}}
		return p
	}
	apart := func(key string) *corev1.Pod {
		p := podRequesting("web")
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term(key, "web")}}}
		return p
	}
	exclusive := boundTo("n1", "exclusive")
	exclusive.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term("kubernetes.io/hostname", "web")}}}
	zone := func(z string) func(*corev1.Node) { return withLabel("zone", z) }
	cache := func(node string) *corev1.Pod { return withPodLabels(boundTo(node, "cache-"+node), "app", "cache") }
	testFilterReasons(t, "InterPodAffinity", []reasonsCase{
		{name: "affinity to a pod in another zone", pod: near("cache"), node: node("a1", zone("a")), others: []*corev1.Node{node("b1", zone("b"))},
			bound: []*corev1.Pod{cache("b1")}, want: []NodeReason{{Code: CodePodAffinityUnsatisfiable}}},
		{name: "affinity to a pod in the node's zone", pod: near("cache"), node: node("a1", zone("a")), others: []*corev1.Node{node("a2", zone("a"))},
			bound: []*corev1.Pod{cache("a2")}},
		{name: "affinity to its own kind with none running: the first replica may go anywhere", pod: near("web"), node: node("a1", zone("a"))},
		{name: "anti-affinity to a replica in the same zone", pod: apart("zone"), node: node("a1", zone("a")), others: []*corev1.Node{node("a2", zone("a"))},
			bound: []*corev1.Pod{withPodLabels(boundTo("a2", "web-1"), "app", "web")}, want: []NodeReason{{Code: CodePodAntiAffinityUnsatisfiable}}},
		{name: "anti-affinity by hostname to a replica on another node", pod: apart("kubernetes.io/hostname"), node: node("a1", zone("a")), others: []*corev1.Node{node("a2", zone("a"))},
			bound: []*corev1.Pod{withPodLabels(boundTo("a2", "web-1"), "app", "web")}},
		{name: "an existing pod's anti-affinity against the pod", pod: podRequesting("web"), node: node("n1"),
			bound: []*corev1.Pod{exclusive}, want: []NodeReason{{Code: CodePodAntiAffinityUnsatisfiable}}},
	})
}

// TestAntiAffinityAdviceNeverRepeatsTheKeyInUse is issue 17's kind 8 (anti-affinity bullet):
// the fix never suggests the topologyKey the rule already uses.
func TestAntiAffinityAdviceNeverRepeatsTheKeyInUse(t *testing.T) {
	apart := func(key string) *corev1.Pod {
		p := withPodLabels(podRequesting("web"), "app", "web")
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
		return p
	}
	zone := func(z string) func(*corev1.Node) { return withLabel("topology.kubernetes.io/zone", z) }
	replica := webReplica
	nodes := []*corev1.Node{node("n1", zone("a")), node("n2", zone("a")), node("n3", zone("b"))}
	tests := []struct {
		name      string
		key       string
		bound     []*corev1.Pod
		want, not string
	}{
		{name: "hostname, one replica on each node: no narrower key, say how many nodes hold one",
			key: "kubernetes.io/hostname", bound: []*corev1.Pod{replica("n1", "web-1"), replica("n2", "web-2"), replica("n3", "web-3")},
			want: "3 of the 3 nodes the pod may use already hold one", not: "topologyKey kubernetes.io/hostname"},
		{name: "zone, a replica in each zone: per node instead",
			key: "topology.kubernetes.io/zone", bound: []*corev1.Pod{replica("n1", "web-1"), replica("n3", "web-3")},
			want: "use topologyKey kubernetes.io/hostname", not: "topologyKey topology.kubernetes.io/zone"},
		{name: "region: zone or hostname",
			key: "topology.kubernetes.io/region", bound: []*corev1.Pod{replica("n1", "web-1")},
			want: "use topologyKey topology.kubernetes.io/zone or kubernetes.io/hostname", not: "topologyKey topology.kubernetes.io/region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := nodes
			if tt.key == "topology.kubernetes.io/region" {
				ns = []*corev1.Node{node("n1", withLabel(tt.key, "eu")), node("n2", withLabel(tt.key, "eu"))}
			}
			p := Evaluate(snap(apart(tt.key), ns, tt.bound)).Primary()
			if p.Code != CodePodAntiAffinityUnsatisfiable {
				t.Fatalf("primary = %s, want pod-anti-affinity-unsatisfiable: %s", p.Code, p.Summary)
			}
			all := strings.Join(p.Fix, "\n")
			if !strings.Contains(all, tt.want) {
				t.Errorf("fixes lack %q:\n%s", tt.want, all)
			}
			if strings.Contains(all, tt.not) {
				t.Errorf("fixes repeat the key in use (%q):\n%s", tt.not, all)
			}
		})
	}
	t.Run("an existing pod's rule is named as its", func(t *testing.T) {
		exclusive := boundTo("n1", "exclusive")
		exclusive.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
		p := Evaluate(snap(podRequesting("web"), []*corev1.Node{node("n1")}, []*corev1.Pod{exclusive})).Primary()
		if all := strings.Join(p.Fix, "\n"); !strings.Contains(all, "The anti-affinity of shop/exclusive (running pods) rejects this pod") || strings.Contains(all, "topologyKey kubernetes.io/hostname") {
			t.Errorf("fixes do not name the running pod's rule, or repeat its key:\n%s", all)
		}
	})
}
