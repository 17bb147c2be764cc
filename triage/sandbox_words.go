package triage

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file reads what a CNI plugin or the container runtime wrote into a FailedCreatePodSandBox
// event when that names its cause but no code of its own: a bridge that kept an old subnet, a
// sandbox (pause) image the runtime cannot pull, a CNI binary or a node agent that is missing,
// a full disk. The code stays sandbox-creation-failed, but the answer names the component and
// what its words mean, and the fix addresses that cause, not "describe the pod".

// sandboxWords is one message shape a CNI plugin or runtime writes into a sandbox failure.
type sandboxWords struct {
	re *regexp.Regexp
	// explain fills f.Summary (the cause first, the component named), evidence read from the
	// objects that explain it, and f.Fix; m is re's submatches of the event message e.
	explain func(s *Snapshot, e Event, m []string, f *Finding)
}

// sandboxTable lists the sandbox messages with a known meaning, most specific first.
var sandboxTable = []sandboxWords{
	// The bridge plugin (flannel, canal, kubenet-style bridge): the bridge kept an address from
	// an older pod subnet (flannel's lease expired while the node was down and it got a new one).
	{regexp.MustCompile(`failed to set bridge addr: "?([^"\s]+)"? already has an IP address different from ([0-9a-fA-F.:/]+)`), bridgeAddrWords},
	// containerd/CRI-O: the sandbox (pause) image cannot be pulled or is missing.
	{regexp.MustCompile(`failed to get sandbox image "([^"]+)"|failed to pull image "([^"]*pause[^"]*)"|failed to pull and unpack image "([^"]*pause[^"]*)"`), sandboxImageWords},
	// libcni: the CNI configuration names a plugin binary that is not on the node.
	{regexp.MustCompile(`failed to find plugin "([^"]+)" in path \[([^\]]*)\]`), cniBinaryWords},
	// flannel's CNI plugin: flanneld has not written its lease on this node.
	{regexp.MustCompile(`open (/run/flannel/subnet\.env): no such file or directory`), flannelLeaseWords},
	// Cilium's and Weave's CNI plugins: the node agent they call does not answer.
	{regexp.MustCompile(`(?i)unable to connect to Cilium daemon|cilium/cilium\.sock: connect: (?:no such file or directory|connection refused)|127\.0\.0\.1:6784: connect: connection refused`), cniAgentDownWords},
	// Antrea's CNI plugin: its agent does not answer on the node.
	{regexp.MustCompile(`/var/run/antrea/cni\.sock: connect: (?:connection refused|no such file or directory)`), func(s *Snapshot, e Event, m []string, f *Finding) {
		cniAgentNamed(s, e, "antrea", f)
	}},
	// OVN-Kubernetes (OpenShift's default): the node's ovnkube-node has not wired the port.
	{regexp.MustCompile(`timed out waiting for OVS port binding|failed to configure pod interface: .*ovn`), func(s *Snapshot, e Event, m []string, f *Finding) {
		cniAgentNamed(s, e, "ovnkube-node", f)
	}},
	// runc cannot apply the sandbox's cgroup settings: the runtime's cgroup driver does not
	// match the kubelet's (SystemdCgroup in containerd's runc options against cgroupDriver).
	{regexp.MustCompile(`error setting cgroup config for procHooks process|cgroup driver|expected cgroupsPath to be of format`), func(s *Snapshot, e Event, m []string, f *Finding) {
		node := s.Pod.Spec.NodeName
		f.Summary = fmt.Sprintf("runc on %s cannot apply the pod sandbox's cgroups (FailedCreatePodSandBox %s): the container runtime's cgroup driver most likely does not match the kubelet's (systemd against cgroupfs).", node, eventSeen(s, e))
		f.Fix = []string{
			fmt.Sprintf("On %s: grep -n SystemdCgroup /etc/containerd/config.toml; grep -n cgroupDriver /var/lib/kubelet/config.yaml   # both systemd on a systemd host with cgroup v2", shellQuote(node)),
			fmt.Sprintf("Set the same driver in both, then on %s: %s.", node, nodeRuntimeRestart(s)),
		}
	}},
	// The runtime did not finish the sandbox within the kubelet's deadline.
	{regexp.MustCompile(`code = DeadlineExceeded desc = context deadline exceeded`), func(s *Snapshot, e Event, m []string, f *Finding) {
		node := s.Pod.Spec.NodeName
		f.Summary = fmt.Sprintf("The container runtime on %s does not finish creating the pod's sandbox within the kubelet's deadline (FailedCreatePodSandBox %s: context deadline exceeded): an overloaded runtime or disk, or a CNI plugin that hangs.", node, eventSeen(s, e))
		f.Fix = []string{
			fmt.Sprintf("On %s: journalctl -u %s --since -15min | grep -iE 'sandbox|cni' | tail -20   # the step that hangs", shellQuote(node), runtimeUnit(s)),
			fmt.Sprintf("On %s: iostat -x 5 3; crictl pods | wc -l", shellQuote(node)),
		}
	}},
	// containerd: a sandbox of that name is still being created (a slow runtime or disk).
	{regexp.MustCompile(`failed to reserve sandbox name "([^"]+)"`), sandboxNameReservedWords},
	// The node's disk under the runtime or the kubelet is full.
	{regexp.MustCompile(`no space left on device`), noSpaceWords},
}

// explainSandbox fills f from the table entry matching e's message; ok is false when none does.
func explainSandbox(s *Snapshot, e Event, f *Finding) bool {
	for _, w := range sandboxTable {
		if m := w.re.FindStringSubmatch(e.Message); m != nil {
			w.explain(s, e, m, f)
			return true
		}
	}
	return false
}

// reCNIPluginType matches the plugin libcni names in its error: `plugin type="cilium-cni" failed (add)`.
var reCNIPluginType = regexp.MustCompile(`plugin type="([^"]+)"`)

// cniPluginOf names the CNI plugin a sandbox message comes from: the `plugin type` libcni
// quotes, else a plugin the message names, else "".
func cniPluginOf(msg string) string {
	if m := reCNIPluginType.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	for _, p := range []string{"cilium", "flannel", "calico", "weave", "antrea", "azure-vnet", "kube-ovn", "ovn", "multus", "whereabouts", "host-local", "bridge"} {
		if containsAny(msg, p) {
			return p
		}
	}
	return ""
}

// genericSandboxSummary is the answer for a sandbox message no table row explains: it still
// names the CNI plugin when libcni names it, and quotes the plugin's own last words.
func genericSandboxSummary(s *Snapshot, e Event) string {
	node := s.Pod.Spec.NodeName
	words := strings.TrimSpace(reSandboxPrefix.ReplaceAllString(e.Message, ""))
	if p := cniPluginOf(e.Message); p != "" {
		return fmt.Sprintf("The CNI plugin %q on %s cannot set up the pod's network (FailedCreatePodSandBox %s); it says: %q.", p, node, eventSeen(s, e), truncateStart(words, 240))
	}
	return fmt.Sprintf("The container runtime on %s cannot create the pod's sandbox (FailedCreatePodSandBox %s); it says: %q.", node, eventSeen(s, e), truncateStart(words, 240))
}

// reSandboxPrefix strips the kubelet's and gRPC's wrapping from a sandbox message.
var reSandboxPrefix = regexp.MustCompile(`^(?:\(combined from similar events\): )?(?:Failed to create pod sandbox: |Failed create pod sandbox: )?(?:rpc error: code = \w+ desc = )?`)

// nodeRuntimeRestart is the command that restarts the node's container runtime and kubelet.
func nodeRuntimeRestart(s *Snapshot) string {
	return fmt.Sprintf("systemctl restart %s kubelet", runtimeUnit(s))
}

func bridgeAddrWords(s *Snapshot, e Event, m []string, f *Finding) {
	pod := s.Pod
	node, bridge, want := pod.Spec.NodeName, m[1], m[2]
	f.Summary = fmt.Sprintf("The CNI bridge plugin on %s refuses every new pod network: bridge %s still carries an address from an older pod subnet, not the node's current gateway %s (FailedCreatePodSandBox %s). The node's pod subnet changed (for flannel: its subnet lease expired, e.g. while the node was down, and it got a new one) but %s kept the old address, so no pod can get a sandbox there until the bridge is recreated.",
		node, bridge, want, eventSeen(s, e), bridge)
	if pfx, err := netip.ParsePrefix(want); err == nil {
		if ip, err := netip.ParseAddr(pod.Status.PodIP); err == nil && !pfx.Masked().Contains(ip) {
			f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "status.podIP",
				Message: fmt.Sprintf("%s, from the old subnet (the node's subnet is now %s)", ip, pfx.Masked())})
		}
	}
	if n := s.Node(node); n != nil && n.Spec.PodCIDR != "" {
		f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node), Field: "spec.podCIDR", Message: n.Spec.PodCIDR})
	}
	recreate := fmt.Sprintf("If the address of %s is not the gateway %s (in the current lease), recreate the bridge:", bridge, want)
	if runtimeUnit(s) == "docker" {
		recreate = fmt.Sprintf("If the address of %s is not the gateway %s (in the current lease), recreate the bridge; restarting Docker stops the node's running containers unless its live-restore is on, so drain the node first:", bridge, want)
	}
	f.Fix = []string{
		fmt.Sprintf("On %s: ip -4 addr show %s; cat /run/flannel/subnet.env   # the bridge's old address against the current lease", shellQuote(node), shellQuote(bridge)),
		recreate,
		fmt.Sprintf("On %s: ip link set %s down && ip link delete %s && %s   # the bridge plugin recreates %s with the current subnet on the next sandbox; with Docker also remove the network state it keeps for the bridge", shellQuote(node), shellQuote(bridge), shellQuote(bridge), nodeRuntimeRestart(s), bridge),
		"Do the same on every node that shows this event; to stop it recurring, keep the subnet lease from expiring while nodes are off (flannel's kube subnet manager keeps it in the Node's podCIDR) and let the CNI plugin, not Docker, own the bridge.",
	}
}

func sandboxImageWords(s *Snapshot, e Event, m []string, f *Finding) {
	node := s.Pod.Spec.NodeName
	image := m[1] + m[2] + m[3]
	f.Summary = fmt.Sprintf("The container runtime on %s cannot get its sandbox (pause) image %s, so it can create no pod sandbox at all (FailedCreatePodSandBox %s): the pod's own images are not the problem.", node, image, eventSeen(s, e))
	if words := runtimeWords(e.Message); words != "" {
		f.Summary += fmt.Sprintf(" It says: %q.", truncateStart(words, 200))
	}
	f.Fix = []string{
		fmt.Sprintf("On %s: crictl pull %s   # the runtime's own error for the sandbox image", shellQuote(node), shellQuote(image)),
		fmt.Sprintf("If the registry is unreachable from the node, mirror the image and point the runtime at the copy: sandbox_image (containerd 1.x) or [plugins.\"io.containerd.cri.v1.images\".pinned_images] sandbox (containerd 2.x) in /etc/containerd/config.toml, pause_image in CRI-O's crio.conf; then %s.", nodeRuntimeRestart(s)),
	}
}

func cniBinaryWords(s *Snapshot, e Event, m []string, f *Finding) {
	node := s.Pod.Spec.NodeName
	f.Summary = fmt.Sprintf("The CNI configuration on %s names plugin %q, but its binary is not in %s on the node, so no pod network can be set up there (FailedCreatePodSandBox %s).", node, m[1], orDefault(m[2], "the CNI bin directory"), eventSeen(s, e))
	f.Fix = []string{
		fmt.Sprintf("On %s: ls %s; ls /etc/cni/net.d/   # which plugin binaries exist, and which config names %s", shellQuote(node), strings.Fields(orDefault(m[2], "/opt/cni/bin"))[0], m[1]),
		fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s   # the CNI DaemonSet's pod copies its binaries with an install init container: check it ran on this node", shellQuote(node)),
		fmt.Sprintf("Install the missing plugin (the containernetworking plugins package, or the CNI's own binary) into the CNI bin directory on %s, or remove the stale config in /etc/cni/net.d that names it.", node),
	}
}

func flannelLeaseWords(s *Snapshot, e Event, m []string, f *Finding) {
	node := s.Pod.Spec.NodeName
	f.Summary = fmt.Sprintf("Flannel's CNI plugin on %s finds no subnet lease (%s is missing): flanneld is not running on the node or has not got a subnet yet, so no pod network can be set up (FailedCreatePodSandBox %s).", node, m[1], eventSeen(s, e))
	agentEvidence(s, "flannel", f)
	f.Fix = []string{
		fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s | grep -i flannel", shellQuote(node)),
		"kubectl logs -n kube-flannel -l app=flannel --tail=30   # a flanneld that cannot get a lease says why (no podCIDR on the Node, no access to the API)",
		fmt.Sprintf("If the Node has no spec.podCIDR, flannel's kube subnet manager has nothing to lease: run kube-controller-manager with --allocate-node-cidrs and --cluster-cidr, or set podCIDR on %s.", node),
	}
}

func cniAgentDownWords(s *Snapshot, e Event, m []string, f *Finding) {
	agent := "cilium"
	if containsAny(e.Message, "6784") {
		agent = "weave"
	}
	cniAgentNamed(s, e, agent, f)
}

// cniAgentNamed explains a CNI plugin whose node agent (agent: the name its pods carry) does
// not answer on the pod's node.
func cniAgentNamed(s *Snapshot, e Event, agent string, f *Finding) {
	node := s.Pod.Spec.NodeName
	f.Summary = fmt.Sprintf("The %s CNI plugin on %s cannot reach its node agent, so no pod network can be set up there (FailedCreatePodSandBox %s): the %s agent pod on that node is not running or not ready.", agent, node, eventSeen(s, e), agent)
	agentEvidence(s, agent, f)
	f.Fix = []string{fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s | grep -i %s", shellQuote(node), agent)}
	if p := nodeAgent(s, agent); p != nil {
		f.Fix = append(f.Fix,
			fmt.Sprintf("kubectl logs -n %s %s --previous --tail=30", shellQuote(p.Namespace), shellQuote(p.Name)),
			fmt.Sprintf("kubectl describe pod -n %s %s", shellQuote(p.Namespace), shellQuote(p.Name)))
	}
}

func sandboxNameReservedWords(s *Snapshot, e Event, m []string, f *Finding) {
	node := s.Pod.Spec.NodeName
	f.Summary = fmt.Sprintf("The container runtime on %s is still creating an earlier sandbox of this pod (sandbox name %q is reserved), so each retry is refused (FailedCreatePodSandBox %s): the runtime or its disk is too slow, not the pod.", node, m[1], eventSeen(s, e))
	f.Fix = []string{
		fmt.Sprintf("On %s: crictl pods --name %s; journalctl -u %s --since -15min | tail -30", shellQuote(node), shellQuote(s.Pod.Name), runtimeUnit(s)),
		fmt.Sprintf("On %s: iostat -x 5 3   # a saturated disk under /var/lib/%s makes sandbox creation time out", shellQuote(node), runtimeUnit(s)),
	}
}

func noSpaceWords(s *Snapshot, e Event, m []string, f *Finding) {
	node := s.Pod.Spec.NodeName
	f.Summary = fmt.Sprintf("The disk of %s under the container runtime or the kubelet is full (no space left on device), so the runtime cannot create the pod's sandbox (FailedCreatePodSandBox %s).", node, eventSeen(s, e))
	f.Fix = []string{
		fmt.Sprintf("On %s: df -h /var/lib/kubelet /var/lib/%s /run; df -i /var/lib/%s", shellQuote(node), runtimeUnit(s), runtimeUnit(s)),
		fmt.Sprintf("On %s: crictl rmi --prune   # remove unused images; then find what else fills the disk (logs, emptyDir volumes)", shellQuote(node)),
	}
}

// nodeAgent returns the pod of a node agent (a CNI's DaemonSet pod) on the pod's node whose
// name or k8s-app/app label contains agent, or nil; nil too when the answer may not name its
// namespace (Snapshot.MayName), so fixes never name it.
func nodeAgent(s *Snapshot, agent string) *corev1.Pod {
	if p := anyNodeAgent(s, agent); p != nil && s.MayName(p.Namespace) {
		return p
	}
	return nil
}

// anyNodeAgent is nodeAgent whatever the pod's namespace.
func anyNodeAgent(s *Snapshot, agent string) *corev1.Pod {
	for _, p := range s.Bound().On(s.Pod.Spec.NodeName) {
		if strings.Contains(p.Name, "operator") {
			continue
		}
		if strings.Contains(p.Name, agent) || strings.Contains(p.Labels["k8s-app"], agent) || strings.Contains(p.Labels["app"], agent) {
			return p
		}
	}
	return nil
}

// agentEvidence adds the state of the node agent's pod on the pod's node, or says none runs.
func agentEvidence(s *Snapshot, agent string, f *Finding) {
	node := s.Pod.Spec.NodeName
	p := anyNodeAgent(s, agent)
	if p != nil && !s.MayName(p.Namespace) {
		f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node), Field: "pods", Message: fmt.Sprintf("a %s agent pod runs on the node in a namespace you cannot read, so its state is not shown: ask the cluster's admins", agent)})
		return
	}
	if p == nil {
		if s.NodesErr == nil {
			f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node), Field: "pods", Message: fmt.Sprintf("no %s pod is bound to the node", agent)})
		}
		return
	}
	ready := "not ready"
	if c := podCondition(p, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
		ready = "ready"
	}
	f.Evidence = append(f.Evidence, Evidence{Object: podObject(p), Field: "status", Reason: PodState(p), Message: fmt.Sprintf("the node's %s agent is %s", agent, ready)})
}
