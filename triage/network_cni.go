package triage

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file reads two kinds of sandbox failure that every CNI plugin shares: a node-local IPAM
// range that is full (host-local, as flannel, canal, antrea and the bridge plugin use it), and a
// CNI plugin that cannot reach the Kubernetes API server from the node (proxy settings in the
// container runtime, the service IP unreachable, an expired CNI token, an untrusted CA).

// reRangeSet matches host-local's "no IP addresses available in range set: 10.244.1.1-10.244.1.254".
var reRangeSet = regexp.MustCompile(`range set: ?([0-9a-fA-F.:]+)-([0-9a-fA-F.:]+)`)

// rangeExhaustedDetail explains cni-ip-range-exhausted: the size of the node's range (from the
// message, else the node's spec.podCIDR) against the pods that really hold an address on the
// node. Far fewer pods than addresses means reservations leaked by failed CNI ADD/DEL calls.
func rangeExhaustedDetail(s *Snapshot, e Event, f *Finding) {
	pod := s.Pod
	node := pod.Spec.NodeName
	size, source := 0, ""
	if m := reRangeSet.FindStringSubmatch(e.Message); m != nil {
		if first, err1 := netip.ParseAddr(m[1]); err1 == nil {
			if last, err2 := netip.ParseAddr(m[2]); err2 == nil && first.Is4() && last.Is4() {
				a, b := first.As4(), last.As4()
				size = int(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) -
					int(uint32(a[0])<<24|uint32(a[1])<<16|uint32(a[2])<<8|uint32(a[3])) + 1
				source = fmt.Sprintf("the range %s-%s in the message", m[1], m[2])
			}
		}
	}
	n := s.Node(node)
	if size <= 0 && n != nil && n.Spec.PodCIDR != "" {
		if p, err := netip.ParsePrefix(n.Spec.PodCIDR); err == nil && p.Addr().Is4() {
			size = (1 << (32 - p.Bits())) - 3 // host-local keeps the network, gateway and broadcast addresses
			source = "the node's spec.podCIDR " + n.Spec.PodCIDR
		}
	}
	using := podsWithAddress(s.PodsByNode[node])
	f.Summary = fmt.Sprintf("The CNI's node-local IPAM on %s has no free address left in its range (%s %s)", node, e.Reason, eventSeen(s, e))
	if size > 0 {
		f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node), Field: "spec.podCIDR", Message: fmt.Sprintf("%d addresses (%s); %d pods on the node hold a pod IP", size, source, using)})
		if using < size*3/4 {
			f.Summary += fmt.Sprintf(", yet only %d of its %d addresses belong to pods running there: the rest are reservations leaked by failed CNI ADD/DEL calls (containers that went away without their IP being released).", using, size)
		} else {
			f.Summary += fmt.Sprintf(": %d of its %d addresses belong to pods running there, so the node's pod range really is full.", using, size)
		}
	} else {
		f.Summary += "; the range size is unknown (no range in the message and no spec.podCIDR on the node)."
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s | wc -l   # pods that really hold an address", shellQuote(node)),
		fmt.Sprintf("On %s: ls /var/lib/cni/networks/*/ | wc -l   # host-local's reservations, one file per address", shellQuote(node)),
		"Release the leaked reservations with the CNI's own cleanup: drain the node, stop the kubelet and container runtime, move /var/lib/cni/networks/<network> aside, start them again and uncordon (flannel, canal and bridge all keep host-local state there).",
		"If the range is really full, lower the kubelet's maxPods or give nodes a larger pod CIDR (kube-controller-manager --node-cidr-mask-size).",
	}
}

// podsWithAddress counts the pods that hold a pod-network address (not hostNetwork, not
// finished).
func podsWithAddress(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if !p.Spec.HostNetwork && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}

// reAPIURL matches a request from the CNI plugin to the Kubernetes API: an https URL whose
// path starts /api/ or /apis/.
var reAPIURL = regexp.MustCompile(`https://(\[[^\]]+\]|[^/\s"]+)(:\d+)?/apis?/`)

// cniAPIDetail explains a sandbox failure in which the CNI plugin on the node (run by the
// container runtime, with its environment) cannot talk to the Kubernetes API: the API server
// itself is fine (this answer was read through it), so the cause lies between the node and it.
func cniAPIDetail(s *Snapshot, e Event, f *Finding) {
	host, target := "the API server", "<service IP>:443"
	if m := reAPIURL.FindStringSubmatch(e.Message); m != nil {
		host, target = strings.Trim(m[1], "[]"), m[1]+m[2]
	} else if !containsAny(e.Message, "error getting ClusterInformation", "connection is unauthorized") {
		return // not a request to the API (Calico words its API reads without the URL)
	}
	node := s.Pod.Spec.NodeName
	msg := e.Message
	switch {
	case containsAny(msg, "Service Unavailable", " 503", "Bad Gateway", " 502", "proxyconnect", "Proxy Authentication Required", " 407"):
		f.Summary += fmt.Sprintf(" The CNI plugin's own request to the API server (%s) got a proxy's answer (%s): the container runtime on %s most likely runs with HTTP_PROXY/HTTPS_PROXY set and the service CIDR missing from NO_PROXY, so the plugin it starts sends cluster traffic to the proxy. The API server itself answers (this diagnosis was read through it).",
			host, proxyWords(msg), node)
		f.Fix = []string{
			fmt.Sprintf("On %s: systemctl show containerd kubelet --property=Environment   # look for HTTP_PROXY/HTTPS_PROXY and NO_PROXY", shellQuote(node)),
			fmt.Sprintf("Add the service CIDR (the range %s is in), the pod CIDR, .svc and .cluster.local to NO_PROXY in the container runtime's (and kubelet's) systemd drop-in, then: systemctl daemon-reload && systemctl restart containerd", host),
			fmt.Sprintf("kubectl describe pod %s %s", nsFlag(s.Pod), shellQuote(s.Pod.Name)),
		}
	case containsAny(msg, "Unauthorized", "401"):
		f.Summary += fmt.Sprintf(" The CNI plugin on %s is refused by the API server (Unauthorized): the token in its kubeconfig has expired or was revoked.", node)
		f.Fix = []string{
			fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s | grep -Ei 'calico|cilium|flannel|antrea|multus'", shellQuote(node)),
			"Restart the CNI's node agent on that node (for Calico: delete the node's calico-node pod) so it writes a fresh token into /etc/cni/net.d/*kubeconfig.",
		}
	case containsAny(msg, "x509", "certificate"):
		f.Summary += fmt.Sprintf(" The CNI plugin on %s does not trust the API server's certificate: its kubeconfig carries an old or wrong CA.", node)
		f.Fix = []string{"Restart the CNI's node agent so it rewrites its kubeconfig with the cluster CA (/etc/cni/net.d/*kubeconfig)."}
	case containsAny(msg, "i/o timeout", "connection refused", "no route to host", "context deadline exceeded"):
		f.Summary += fmt.Sprintf(" The CNI plugin on %s cannot reach the API server at %s: the node's path to the service IP is broken (kube-proxy or the CNI's service handling on that node, or a firewall), not the API server.", node, host)
		f.Fix = []string{
			fmt.Sprintf("kubectl get pods -n kube-system -o wide --field-selector spec.nodeName=%s | grep -E 'kube-proxy|cilium'", shellQuote(node)),
			fmt.Sprintf("On %s: curl -k https://%s/version   # from the node, as the CNI plugin does", shellQuote(node), target),
		}
	}
}

// proxyWords names what the proxy answered.
func proxyWords(msg string) string {
	for _, w := range []string{"Service Unavailable", "Bad Gateway", "Proxy Authentication Required", "proxyconnect"} {
		if containsAny(msg, w) {
			return w
		}
	}
	return "a proxy error"
}
