package triage

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestNodePortsReasons(t *testing.T) {
	withPort := func(p *corev1.Pod, port corev1.ContainerPort) *corev1.Pod {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, port)
		return p
	}
	sidecar := podRequesting("web")
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Ports: []corev1.ContainerPort{{ContainerPort: 15000, HostPort: 15000}}}}
	testFilterReasons(t, "NodePorts", []reasonsCase{
		{name: "the same port and protocol held by a pod on the node", pod: withHostPort(podRequesting("web"), 80), node: node("n1"),
			bound: []*corev1.Pod{withHostPort(boundTo("n1", "proxy"), 80)}, want: []NodeReason{{Code: CodeHostPortConflict}}},
		{name: "another protocol does not conflict", pod: withPort(podRequesting("web"), corev1.ContainerPort{HostPort: 53, Protocol: corev1.ProtocolUDP}), node: node("n1"),
			bound: []*corev1.Pod{withPort(boundTo("n1", "dns"), corev1.ContainerPort{HostPort: 53, Protocol: corev1.ProtocolTCP})}},
		{name: "two host IPs do not conflict", pod: withPort(podRequesting("web"), corev1.ContainerPort{HostPort: 80, HostIP: "10.0.0.1"}), node: node("n1"),
			bound: []*corev1.Pod{withPort(boundTo("n1", "proxy"), corev1.ContainerPort{HostPort: 80, HostIP: "10.0.0.2"})}},
		{name: "0.0.0.0 conflicts with any host IP", pod: withPort(podRequesting("web"), corev1.ContainerPort{HostPort: 80, HostIP: "10.0.0.1"}), node: node("n1"),
			bound: []*corev1.Pod{withHostPort(boundTo("n1", "proxy"), 80)}, want: []NodeReason{{Code: CodeHostPortConflict}}},
		{name: "a sidecar's host port counts", pod: sidecar, node: node("n1"),
			bound: []*corev1.Pod{withHostPort(boundTo("n1", "envoy"), 15000)}, want: []NodeReason{{Code: CodeHostPortConflict}}},
		{name: "a port held on another node does not count", pod: withHostPort(podRequesting("web"), 80), node: node("n1"), others: []*corev1.Node{node("n2")},
			bound: []*corev1.Pod{withHostPort(boundTo("n2", "proxy"), 80)}},
	})
}

// TestHostPortFixReadsTheHolderFirst: who holds the port decides the change, so the pods on the
// nodes are listed first; when the holder is an older pod of the same Deployment, the patch that
// loosens its rollout comes after a step that says it is one of two ways and what it costs.
func TestHostPortFixReadsTheHolderFirst(t *testing.T) {
	pod := ofDeployment(withHostPort(podRequesting("web-5d8f-new"), 80), "default", "web")
	old := ofDeployment(withHostPort(boundTo("n1", "web-5d8f-old"), 80), "default", "web")
	fs := schedulingRules(snap(pod, []*corev1.Node{node("n1")}, []*corev1.Pod{old}))
	if len(fs) == 0 || fs[0].Code != CodeHostPortConflict {
		t.Fatalf("codes = %v, want host-port-conflict first", codesOf(fs))
	}
	fix := fs[0].Fix
	if !strings.HasPrefix(fix[0], "kubectl get pods -A -o wide --field-selector spec.nodeName=n1") {
		t.Errorf("fix[0] = %q, want the node's pods", fix[0])
	}
	checkBefore(t, fix, "Either let the deployment's rollout stop an old pod", `"maxSurge":0`)
	if i := stepIndex(fix, "Either let the deployment's rollout"); i >= 0 && !strings.Contains(fix[i], "costs") {
		t.Errorf("the rollout change does not say what it costs: %q", fix[i])
	}
}
