package triage

import (
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
