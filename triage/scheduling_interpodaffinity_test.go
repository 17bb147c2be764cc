package triage

import (
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
