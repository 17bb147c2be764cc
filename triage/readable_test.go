package triage

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAnswersNameOtherNamespacesOnlyWhenReadable checks Snapshot.Readable across every rule
// that names a pod or workload on the nodes: a host port's holder, the workload a scale-down
// would free room from, and the pods of both pod anti-affinity directions. Another
// namespace's object is named only when Readable holds it (nil: always, as with authorization
// off); otherwise nothing in the diagnosis (summary, evidence, fix, node table) names it or
// its namespace, and it is called "a pod in a namespace you cannot read".
func TestAnswersNameOtherNamespacesOnlyWhenReadable(t *testing.T) {
	inPayments := func(p *corev1.Pod) *corev1.Pod { p.Namespace = "payments"; return p }
	antiWeb := func(p *corev1.Pod, key string) *corev1.Pod {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Namespaces: []string{"shop", "payments"}}}}}
		return p
	}
	hostname := "kubernetes.io/hostname"
	tests := []struct {
		name, secret, hidden string
		snap                 func() *Snapshot
	}{
		{"host port", "secret-payments-proxy", "hostPort 80/TCP held by " + UnreadablePod, func() *Snapshot {
			return snap(withHostPort(podRequesting("web"), 80), []*corev1.Node{node("n1")},
				[]*corev1.Pod{inPayments(withHostPort(boundTo("n1", "secret-payments-proxy"), 80))})
		}},
		{"scale down", "ledger", "A workload in a namespace you cannot read has pods requesting 600m", func() *Snapshot {
			return snap(ofDeployment(podRequesting("big-5d8f-zzzzz", "cpu=900m"), "shop", "big"), []*corev1.Node{node("n1", withAllocatable("cpu", "2"))},
				[]*corev1.Pod{ofDeployment(boundTo("n1", "big-5d8f-aaaaa", "cpu=900m"), "shop", "big"),
					ofDeployment(boundTo("n1", "ledger-5d8f-bbbbb", "cpu=600m"), "payments", "ledger")},
				failedScheduling("0/1 nodes are available: 1 Insufficient cpu.", 3))
		}},
		{"the pod's anti-affinity", "secret-web", "pod anti-affinity: " + UnreadablePod + " matches", func() *Snapshot {
			return snap(antiWeb(withPodLabels(podRequesting("web"), "app", "web"), hostname), []*corev1.Node{node("n1")},
				[]*corev1.Pod{inPayments(webReplica("n1", "secret-web"))})
		}},
		{"an existing pod's anti-affinity", "secret-guard", "the anti-affinity of " + UnreadablePod + " rejects this pod", func() *Snapshot {
			return snap(withPodLabels(podRequesting("web"), "app", "web"), []*corev1.Node{node("n1")},
				[]*corev1.Pod{inPayments(antiWeb(boundTo("n1", "secret-guard"), hostname))})
		}},
	}
	render := func(s *Snapshot) string {
		b, err := json.Marshal(Evaluate(s))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if open := render(tt.snap()); !strings.Contains(open, tt.secret) || !strings.Contains(open, "payments") || strings.Contains(open, UnreadablePod) {
				t.Errorf("Readable nil: the answer must name %s in payments as before:\n%s", tt.secret, open)
			}
			s := tt.snap()
			s.Readable = map[string]bool{"payments": true}
			if got := render(s); !strings.Contains(got, tt.secret) {
				t.Errorf("payments readable: the answer must name %s:\n%s", tt.secret, got)
			}
			s = tt.snap()
			s.Readable = map[string]bool{}
			got := render(s)
			if strings.Contains(got, tt.secret) || strings.Contains(got, "payments") {
				t.Errorf("payments not readable: the answer names it:\n%s", got)
			}
			if !strings.Contains(got, tt.hidden) {
				t.Errorf("payments not readable: the answer lacks %q:\n%s", tt.hidden, got)
			}
		})
	}
}

// TestKnownRegistriesNameOnlyReadablePods checks that a registry learnt from another
// namespace's pod on the node names that pod and its image only when Readable allows.
func TestKnownRegistriesNameOnlyReadablePods(t *testing.T) {
	pod := boundTo("n1", "web")
	other := boundTo("n1", "secret-payments-proxy")
	other.Namespace = "payments"
	other.Spec.Containers[0].Image = "registry.payments.internal/proxy:1"
	s := snap(pod, []*corev1.Node{node("n1")}, []*corev1.Pod{other})
	source := func() string {
		for _, c := range knownRegistries(s) {
			if c.host == "registry.payments.internal" {
				return c.source
			}
		}
		t.Fatalf("registry.payments.internal not among %+v", knownRegistries(s))
		return ""
	}
	if got := source(); got != "image registry.payments.internal/proxy:1 of pod payments/secret-payments-proxy on the node" {
		t.Errorf("Readable nil: source %q, want the pod and image named", got)
	}
	s.Readable = map[string]bool{}
	if got := source(); got != "an image of "+UnreadablePod+" on the node" {
		t.Errorf("payments not readable: source %q, want the pod unnamed", got)
	}
}
