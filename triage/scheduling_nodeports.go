package triage

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file is the NodePorts filter: a host port (protocol, port, host IP) the pod binds must
// be free on the node.

// hostPorts returns the ports with a hostPort that pod binds on its node: every container's and
// every restartable (sidecar) init container's, like the NodePorts plugin.
func hostPorts(pod *corev1.Pod) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				out = append(out, p)
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

// hostPortReasons reports each host port of the pod that a pod already on the node holds
// (same protocol and port, overlapping host IP), naming the holder.
func hostPortReasons(d *demand, n *corev1.Node, c *cluster) []NodeReason {
	var out []NodeReason
	for _, want := range d.hostPorts {
		for _, p := range c.pods.On(n.Name) {
			if held, ok := holdsPort(p, want); ok {
				out = append(out, NodeReason{
					Code:    CodeHostPortConflict,
					Message: fmt.Sprintf("hostPort %s held by %s", portString(held), c.snap.PodName(p)),
				})
				break
			}
		}
	}
	return out
}

// holdsPort reports whether pod binds a host port that conflicts with want, as the scheduler's
// HostPortInfo.CheckConflict decides: same protocol and port, and either side binding 0.0.0.0
// or both the same IP.
func holdsPort(pod *corev1.Pod, want corev1.ContainerPort) (corev1.ContainerPort, bool) {
	wantIP, wantProto := sanitizePort(want)
	for _, have := range hostPorts(pod) {
		haveIP, haveProto := sanitizePort(have)
		if have.HostPort != want.HostPort || haveProto != wantProto {
			continue
		}
		if wantIP == "0.0.0.0" || haveIP == "0.0.0.0" || wantIP == haveIP {
			return have, true
		}
	}
	return corev1.ContainerPort{}, false
}

func sanitizePort(p corev1.ContainerPort) (ip string, proto corev1.Protocol) {
	ip, proto = p.HostIP, p.Protocol
	if ip == "" {
		ip = "0.0.0.0"
	}
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	return ip, proto
}

func portString(p corev1.ContainerPort) string {
	ip, proto := sanitizePort(p)
	s := fmt.Sprintf("%d/%s", p.HostPort, proto)
	if ip != "0.0.0.0" {
		s = ip + ":" + s
	}
	return s
}

// describeHostPorts names the pods that hold the pod's host ports on each node.
func (v *schedulingView) describeHostPorts(f *Finding) {
	nodes, reasons := v.nodesWith(CodeHostPortConflict)
	var holders []string
	for i, n := range nodes {
		if i == 3 {
			holders = append(holders, fmt.Sprintf("and %d more node(s)", len(nodes)-3))
			break
		}
		holders = append(holders, fmt.Sprintf("%s (%s)", n, reasons[n][0].Message))
	}
	var ports []string
	for _, p := range v.demand.hostPorts {
		ports = append(ports, portString(p))
	}
	f.Summary = fmt.Sprintf("The pod needs host port(s) %s, already taken on %s: %s.",
		strings.Join(ports, ", "), v.ofNodes(len(nodes)), strings.Join(holders, "; "))
	v.nodeEvidence(f, nodes, reasons, "spec.containers[].ports[].hostPort")
	kind, owner := workloadOf(v.pod)
	sameWorkload := false
	for _, n := range nodes {
		for _, p := range v.cluster.pods.On(n) {
			if k, o := workloadOf(p); owner != "" && p.Namespace == v.pod.Namespace && k == kind && o == owner {
				sameWorkload = true
			}
		}
	}
	// The pods on the nodes show who holds the port, which decides the change: they come first.
	for i, n := range nodes {
		if i == maxNodeEvidence {
			f.Fix = append(f.Fix, fmt.Sprintf("# and %d more nodes with the port taken: see the node table", len(nodes)-i))
			break
		}
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s", shellQuote(n)))
	}
	if sameWorkload {
		f.Summary += fmt.Sprintf(" The holder is an older pod of the same %s: a rolling update with maxSurge cannot place the new pod while the old one keeps the ports.", kind)
		f.Fix = append(f.Fix,
			fmt.Sprintf("Either let the %s's rollout stop an old pod before it starts its replacement (the patch below; it costs capacity: each rollout then runs one replica short, and a single replica serves nothing meanwhile), or change the ports (the last step):", kind),
			fmt.Sprintf(`kubectl patch %s %s -n %s -p '{"spec":{"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}'`, shellQuote(kind), shellQuote(owner), shellQuote(v.pod.Namespace)))
	}
	f.Fix = append(f.Fix, "Drop hostPort (expose the pod through a Service) or pick a port no other pod binds, or remove the pod holding it.")
}
