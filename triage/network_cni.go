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

// rangeExhaustedDetail explains cni-ip-range-exhausted in the words of the CNI that wrote it:
// Cilium's agent (ciliumExhaustedDetail), another agent-based IPAM (agentExhaustedDetail), or
// host-local's node range (hostLocalExhaustedDetail).
func rangeExhaustedDetail(s *Snapshot, e Event, f *Finding) {
	plugin := cniPluginOf(e.Message)
	switch {
	case reRangeSet.MatchString(e.Message) || containsAny(e.Message, "in range set") || plugin == "host-local" || plugin == "bridge" || plugin == "flannel":
		hostLocalExhaustedDetail(s, e, f)
	case strings.Contains(plugin, "cilium"):
		ciliumExhaustedDetail(s, e, f)
	default:
		agentExhaustedDetail(s, e, plugin, f)
	}
}

// ipamWords is the IPAM's own answer in a sandbox message: the part after the last
// "failed (add): " or the gRPC prefix.
func ipamWords(msg string) string {
	if i := strings.LastIndex(msg, "failed (add): "); i >= 0 {
		return strings.TrimSpace(msg[i+len("failed (add): "):])
	}
	return strings.TrimSpace(reSandboxPrefix.ReplaceAllString(msg, ""))
}

// ciliumExhaustedDetail explains a Cilium agent that has no address left for the node: its
// allocator's CIDRs (cluster-pool podCIDRs, multi-pool pools, ENI/Azure interfaces) against the
// pods that hold an address there. The agent answers the CNI; the CiliumNode holds what the
// operator assigned to the node, and the two disagree when the agent released a CIDR it never
// took back.
func ciliumExhaustedDetail(s *Snapshot, e Event, f *Finding) {
	pod := s.Pod
	node := pod.Spec.NodeName
	using := podsHoldingIP(s.Bound().On(node))
	words := ipamWords(e.Message)
	f.Summary = fmt.Sprintf("The Cilium agent on %s has no free pod address for the node: it answers every CNI ADD with %q (%s %s), while %d other %s on the node hold a pod IP.",
		node, truncateStart(words, 160), e.Reason, eventSeen(s, e), using, plural(using, "pod", "pods"))
	switch {
	case containsAny(words, "all CIDR ranges are exhausted"):
		f.Summary += " That is multi-pool IPAM: every CIDR the agent holds for this node is full. When the CiliumNode still lists more pool CIDRs than the agent uses, the agent released a CIDR and never took it back (fixed in later Cilium releases); restarting the agent rebuilds its allocator from the CiliumNode."
	case containsAny(words, "range is full"):
		f.Summary += " That is cluster-pool IPAM: the node's podCIDR from the operator is full."
	case containsAny(words, "No more IPs available"):
		f.Summary += " In ENI or Azure mode the agent has no free address on the node's interfaces and the operator has not attached more."
	}
	agentEvidence(s, "cilium", f)
	f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node), Field: "pods", Message: fmt.Sprintf("%d pods bound to the node have a pod IP in status.podIP (hostNetwork pods excluded)", using)})
	// The two views decide between a leak (the agent holds fewer CIDRs than the CiliumNode
	// lists: restart it) and a full node (a restart only cuts new pods off while it runs), so
	// they come before the restart.
	agent := nodeAgent(s, "cilium")
	f.Fix = []string{fmt.Sprintf("kubectl get ciliumnode %s -o jsonpath='{.spec.ipam}{\"\\n\"}{.status.ipam}'   # what the operator assigned to the node", shellQuote(node))}
	if agent != nil {
		ns, name := shellQuote(agent.Namespace), shellQuote(agent.Name)
		f.Fix = append(f.Fix,
			fmt.Sprintf("kubectl exec -n %s %s -c cilium-agent -- cilium-dbg status --all-addresses   # the agent's CIDRs and the addresses it handed out (cilium status on releases before 1.15): compare with the CiliumNode's", ns, name),
			"If the agent holds fewer CIDRs than the CiliumNode lists, it released one and never took it back: restart it as a stop-gap, then upgrade Cilium (later releases reclaim released CIDRs):",
			fmt.Sprintf("kubectl delete pod -n %s %s   # stop-gap: the DaemonSet restarts the agent, which rebuilds its allocator from the CiliumNode; until it is Ready again no new pod on the node gets networking, while running pods keep theirs", ns, name),
		)
	} else {
		f.Fix = append(f.Fix, fmt.Sprintf("If the Cilium agent on %s holds fewer CIDRs than the CiliumNode lists (cilium-dbg status --all-addresses in its pod), it released one and never took it back: restart the agent (delete its pod; the DaemonSet recreates it) as a stop-gap, then upgrade Cilium (later releases reclaim released CIDRs). Until it is Ready again no new pod on the node gets networking, while running pods keep theirs.", node))
	}
	f.Fix = append(f.Fix,
		"If the node really uses every address: add CIDRs to the pool (CiliumPodIPPool spec.ipv4.cidrs, or clusterPoolIPv4PodCIDRList), give nodes a larger mask, or lower the kubelet's maxPods.",
	)
}

// agentExhaustedDetail explains another CNI's IPAM with no address left (Azure CNI,
// whereabouts, Kube-OVN, …): its own words, its node agent, and the pods holding addresses.
func agentExhaustedDetail(s *Snapshot, e Event, plugin string, f *Finding) {
	node := s.Pod.Spec.NodeName
	using := podsHoldingIP(s.Bound().On(node))
	who := "The CNI's IPAM"
	if plugin != "" {
		who = fmt.Sprintf("The IPAM of CNI plugin %q", plugin)
	}
	f.Summary = fmt.Sprintf("%s has no free pod address for %s: it says %q (%s %s); %d other %s on the node hold a pod IP.",
		who, node, truncateStart(ipamWords(e.Message), 160), e.Reason, eventSeen(s, e), using, plural(using, "pod", "pods"))
	f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node), Field: "pods", Message: fmt.Sprintf("%d pods bound to the node have a pod IP in status.podIP (hostNetwork pods excluded)", using)})
	f.Fix = []string{
		fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s   # the pods that hold addresses, and the CNI's own agent on the node", shellQuote(node)),
		"Compare the pool or subnet the CNI allocates from with the pods that really use it: leaked reservations (pods gone, addresses kept) need the CNI's own cleanup; a pool that is really full needs more addresses or fewer pods per node.",
	}
}

// hostLocalExhaustedDetail explains host-local's full node range: the size of the node's range
// (from the message, else the node's spec.podCIDR) against the pods that really hold an
// address on the node. Far fewer pods than addresses means reservations leaked by failed CNI
// ADD/DEL calls.
func hostLocalExhaustedDetail(s *Snapshot, e Event, f *Finding) {
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
	using := podsWithAddress(s.Bound().On(node))
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
		"If the reservations far outnumber the pods, they leaked: release them with the CNI's own cleanup: drain the node, stop the kubelet and container runtime, move /var/lib/cni/networks/<network> aside, start them again and uncordon (flannel, canal and bridge all keep host-local state there).",
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

// podsHoldingIP counts the pods that have a pod-network address now: status.podIP set, not
// hostNetwork, not finished.
func podsHoldingIP(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if !p.Spec.HostNetwork && p.Status.PodIP != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
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
			fmt.Sprintf("Add the service CIDR (the range %s is in), the pod CIDR, .svc and .cluster.local to NO_PROXY in the container runtime's (and kubelet's) systemd drop-in, then reload systemd and restart the runtime:", host),
			fmt.Sprintf("On %s: systemctl daemon-reload && systemctl restart containerd", shellQuote(node)),
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
