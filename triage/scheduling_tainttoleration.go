package triage

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// This file is the TaintToleration filter: a NoSchedule or NoExecute taint the pod does not
// tolerate keeps it off the node. Its prose tells taints apart by owner: a controller's taint
// (fix the node), a control-plane or system taint (leave it), and an operator's own taint.

// isSystemTaint reports whether a taint key keeps ordinary workloads off control-plane or
// system nodes on purpose: node-role.kubernetes.io/* (control-plane, master, infra, …) and
// CriticalAddonsOnly (system node pools on AKS, EKS, GKE and kops). Removing such a taint to
// place a workload is never the fix.
func isSystemTaint(key string) bool {
	return strings.HasPrefix(key, "node-role.kubernetes.io/") || key == "CriticalAddonsOnly"
}

// tolerationReasons judges n like the TaintToleration filter (taintReasons), then adds the
// node's Ready condition as context (readyReasons): the scheduler sees a NotReady node only
// through the not-ready and unreachable taints the node lifecycle controller adds.
func tolerationReasons(d *demand, n *corev1.Node, _ *cluster) []NodeReason {
	return append(taintReasons(d, n), readyReasons(n)...)
}

// taintReasons reports every NoSchedule and NoExecute taint of n that the pod does not
// tolerate, one reason per taint (the scheduler names only the first). The unschedulable taint
// of a cordoned node is left to cordonReasons.
func taintReasons(d *demand, n *corev1.Node) []NodeReason {
	var out []NodeReason
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if t.Key == unschedulableTaintKey && n.Spec.Unschedulable {
			continue
		}
		if corev1helpers.TolerationsTolerateTaint(klog.Background(), d.pod.Spec.Tolerations, t, false) {
			continue
		}
		out = append(out, NodeReason{Code: CodeUntoleratedTaint, Message: "taint " + taintString(t)})
	}
	return out
}

// taintString renders a taint as kubectl does: key=value:Effect, or key:Effect.
func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// readyReasons reports a node whose Ready condition is not True. The scheduler itself only
// sees the not-ready/unreachable taints the node lifecycle controller adds, so this reason is
// context (CodeNodeNotReady) that never decides the primary code on its own.
func readyReasons(n *corev1.Node) []NodeReason {
	for _, cond := range n.Status.Conditions {
		if cond.Type != corev1.NodeReady {
			continue
		}
		if cond.Status == corev1.ConditionTrue {
			return nil
		}
		msg := "NotReady"
		if cond.Status == corev1.ConditionUnknown {
			msg = "NotReady (status Unknown: the kubelet stopped posting status)"
		} else if cond.Message != "" {
			msg = "NotReady: " + cond.Message
		}
		return []NodeReason{{Code: CodeNodeNotReady, Message: msg}}
	}
	return []NodeReason{{Code: CodeNodeNotReady, Message: "NotReady (no Ready condition)"}}
}

// describeTaints groups the untolerated taints by taint and names the nodes of each.
func (v *schedulingView) describeTaints(f *Finding) {
	nodes, reasons := v.nodesWith(CodeUntoleratedTaint)
	byTaint := map[string][]string{}
	for _, n := range nodes {
		for _, r := range reasons[n] {
			taint := strings.TrimPrefix(r.Message, "taint ")
			byTaint[taint] = append(byTaint[taint], n)
		}
	}
	taints := sortedKeys(byTaint)
	var parts []string
	for _, t := range taints {
		parts = append(parts, fmt.Sprintf("%s on %s", t, joinLimited(byTaint[t], 3)))
	}
	f.Summary = fmt.Sprintf("%s a taint the pod does not tolerate: %s.", v.nodesVerb(len(nodes), "has", "have"), strings.Join(parts, "; "))
	notReady := 0
	for _, nv := range v.verdicts {
		for _, r := range nv.Reasons {
			if r.Code == CodeNodeNotReady {
				notReady++
				break
			}
		}
	}
	if notReady == len(v.verdicts) {
		f.Summary += fmt.Sprintf(" None of the %d nodes is Ready, so no node can take pods until the nodes recover.", len(v.verdicts))
	}
	f.Summary += v.taintOwners(taints, byTaint)
	v.nodeEvidence(f, nodes, reasons, "spec.taints")
	for _, t := range taints {
		key, effect := taintKeyEffect(t)
		tainted := byTaint[t]
		toleration := fmt.Sprintf("{key: %s, operator: Exists, effect: %s}", key, effect)
		switch owned := ownedTaintOf(key); {
		case owned != nil:
			f.Fix = append(f.Fix, owned.fix(v, key, tainted)...)
		case isSystemTaint(key):
			f.Fix = append(f.Fix, v.systemTaintFix(key, effect, tainted, toleration)...)
		default:
			res := v.tryFix(tainted, func(n *corev1.Node) {
				n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return taintString(&tn) == t })
			})
			helped := res.helped
			switch {
			case res.unsure != "":
				f.Fix = append(f.Fix, fmt.Sprintf("Whether tolerating or removing %s would place the pod cannot be told: %s. Tolerate it on purpose only if the pod belongs on %s: %s", t, res.unsure, joinLimited(tainted, 3), toleration))
				continue
			case len(helped) == 0:
				f.Fix = append(f.Fix, fmt.Sprintf("Tolerating or removing %s alone would not place the pod: %s would still reject it for %s.", t, joinLimited(tainted, 3), strings.Join(res.left, ", ")))
				continue
			}
			f.Fix = append(f.Fix, fmt.Sprintf("Either, if the pod may run on %s, tolerate the taint on purpose: %s; or, only if the taint is no longer wanted, remove it:", joinLimited(helped, 3), toleration))
			for i, n := range helped {
				if i == 3 {
					break
				}
				f.Fix = append(f.Fix, fmt.Sprintf("kubectl taint nodes %s %s-   # only if the taint is no longer wanted; the pod fits there otherwise", shellQuote(n), shellQuote(key+":"+effect)))
			}
		}
	}
}

// taintKeyEffect splits "key=value:Effect" or "key:Effect".
func taintKeyEffect(t string) (key, effect string) {
	i := strings.LastIndex(t, ":")
	if i < 0 {
		return t, ""
	}
	key, effect = t[:i], t[i+1:]
	if j := strings.Index(key, "="); j >= 0 {
		key = key[:j]
	}
	return key, effect
}

// ownedTaint is a taint a controller or agent sets and removes itself, from what it sees of the
// node: the fix is that owner, never removing the taint by hand (the owner puts it back, or
// the node is not ready for pods).
type ownedTaint struct {
	// matches reports whether a taint key is this one.
	matches func(key string) bool
	// owner names who the taint belongs to; means is a clause on when it is set and removed.
	// The summary says "KEY belongs to OWNER: MEANS."
	owner, means string
	// fix returns the fixes for the nodes that carry taint key.
	fix func(v *schedulingView, key string, nodes []string) []string
}

// is matches one key exactly.
func is(key string) func(string) bool { return func(k string) bool { return k == key } }

// ownedTaints are the well-known taints Kubernetes components, cloud providers and node
// autoscalers own. Keys under node.kubernetes.io/, node.cloudprovider.kubernetes.io/,
// node.cluster.x-k8s.io/ and karpenter.sh/ that are not listed get the last, general entry.
var ownedTaints = []ownedTaint{
	{matches: is("node.kubernetes.io/not-ready"),
		owner: "the node lifecycle controller (kube-controller-manager)",
		means: "it taints a node while its Ready condition is False (the kubelet says the node cannot run pods: container runtime, CNI, PLEG) and lifts the taint when the kubelet reports Ready again",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				fmt.Sprintf("kubectl describe node %s   # Conditions: Ready and its message say what the kubelet lacks", shellQuote(nodes[0])),
				fmt.Sprintf("On %s: systemctl status kubelet containerd; journalctl -u kubelet --since -15min | tail -50", nodes[0]),
				fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s", shellQuote(nodes[0])),
				fmt.Sprintf("Fix what the Ready condition names, often the CNI agent's pod on the node (the node's pods above); don't remove %s, the controller sets it again.", key),
			}
		}},
	{matches: is("node.kubernetes.io/unreachable"),
		owner: "the node lifecycle controller (kube-controller-manager)",
		means: "it taints a node while its Ready condition is Unknown, i.e. its kubelet stopped posting status (the machine is down, cut off from the API server, or the kubelet is not running), and lifts the taint when the kubelet reports again",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				fmt.Sprintf("kubectl get node %s -o wide   # is the machine up, and when did its kubelet last report (kubectl describe node: Conditions, LastHeartbeatTime)?", shellQuote(nodes[0])),
				fmt.Sprintf("On %s: systemctl status kubelet", nodes[0]),
				fmt.Sprintf("Bring the machine or its kubelet back, or delete the Node if the machine is gone for good; don't remove %s.", key),
			}
		}},
	{matches: is("node.kubernetes.io/memory-pressure"),
		owner: "the node lifecycle controller",
		means: "it taints a node while the kubelet reports MemoryPressure (free memory below its eviction threshold) and lifts the taint when the pressure is gone",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				fmt.Sprintf("kubectl describe node %s   # Conditions: MemoryPressure; Allocated resources", shellQuote(nodes[0])),
				fmt.Sprintf("kubectl top pods -A --sort-by=memory   # who uses the memory of %s (pods above their requests are evicted first)", nodes[0]),
				fmt.Sprintf("Free memory on the node (move or limit the biggest users) or add nodes; don't remove %s.", key),
			}
		}},
	{matches: is("node.kubernetes.io/disk-pressure"),
		owner: "the node lifecycle controller",
		means: "it taints a node while the kubelet reports DiskPressure (its root or image filesystem below the eviction threshold) and lifts the taint when the pressure is gone",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				fmt.Sprintf("kubectl describe node %s   # Conditions: DiskPressure", shellQuote(nodes[0])),
				fmt.Sprintf("On %s: df -h /var/lib/kubelet /var/lib/containerd   # which filesystem is full", nodes[0]),
				fmt.Sprintf("On %s: crictl rmi --prune   # unused images; then large container logs and emptyDir volumes", nodes[0]),
				fmt.Sprintf("Free disk on the node or give it a bigger disk; don't remove %s.", key),
			}
		}},
	{matches: is("node.kubernetes.io/pid-pressure"),
		owner: "the node lifecycle controller",
		means: "it taints a node while the kubelet reports PIDPressure (the node is short of process IDs) and lifts the taint when the pressure is gone",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				fmt.Sprintf("kubectl describe node %s   # Conditions: PIDPressure", shellQuote(nodes[0])),
				fmt.Sprintf("On %s: ps -eLf | wc -l   # the node's threads", nodes[0]),
				fmt.Sprintf("Find the pod that forks without end and fix or limit it (the kubelet's podPidsLimit); don't remove %s.", key),
			}
		}},
	{matches: is("node.kubernetes.io/network-unavailable"),
		owner: "the node lifecycle controller",
		means: "it taints a node while its NetworkUnavailable condition is True, until the CNI agent (Calico, Cilium, …) or the cloud controller manager's route controller has set up the node's pod network",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s   # is the CNI agent's pod (calico-node, cilium, …) there and Ready?", shellQuote(nodes[0])),
				fmt.Sprintf("kubectl get node %s -o jsonpath='{.status.conditions[?(@.type==\"NetworkUnavailable\")]}'", shellQuote(nodes[0])),
				fmt.Sprintf("Fix the CNI agent on the node (its logs), or the cloud's route controller; don't remove %s.", key),
			}
		}},
	{matches: is("node.kubernetes.io/out-of-service"),
		owner: "an administrator",
		means: "it marks a node that was shut down (non-graceful node shutdown) so its pods and volumes move, and is removed by hand once the node is repaired",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				fmt.Sprintf("kubectl describe node %s   # is the node back and Ready?", shellQuote(nodes[0])),
				fmt.Sprintf("Remove %s only once %s is repaired and its old pods are gone; until then the pod needs another node.", key, joinLimited(nodes, 3)),
			}
		}},
	{matches: is("node.cloudprovider.kubernetes.io/uninitialized"),
		owner: "the cloud controller manager",
		means: "the kubelet sets it at registration (--cloud-provider=external) and the cloud controller manager's node controller removes it once it has initialised the node (providerID, addresses, zone labels), so no cloud controller manager has initialised these nodes",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				"kubectl get pods -A -o wide | grep -i cloud-controller   # is a cloud controller manager running, and Ready?",
				fmt.Sprintf("kubectl get node %s -o jsonpath='{.spec.providerID}{\"\\n\"}'   # empty until the cloud controller manager has initialised it", shellQuote(nodes[0])),
				fmt.Sprintf("Deploy or fix the cloud controller manager for your cloud (its logs name the node it cannot initialise: credentials, the instance in the cloud API); don't remove %s by hand, the node would lack its providerID, addresses and zone labels.", key),
			}
		}},
	{matches: is("node.cloudprovider.kubernetes.io/shutdown"),
		owner: "the cloud controller manager",
		means: "its node lifecycle controller taints a node while the cloud reports its instance shut down",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{fmt.Sprintf("Start the instance of %s again, or delete the Node if it is gone for good; the pod needs another node until then.", joinLimited(nodes, 3))}
		}},
	{matches: is("ToBeDeletedByClusterAutoscaler"),
		owner: "the cluster autoscaler",
		means: "it is scaling these nodes down, and drains and deletes them",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				fmt.Sprintf("kubectl -n kube-system logs deploy/cluster-autoscaler | grep %s   # the scale-down, and whether it adds a node for the Pending pod", shellQuote(nodes[0])),
				"The nodes are going away: the pod needs another node, which the autoscaler adds when a node group can fit it (check the group's maximum size).",
			}
		}},
	{matches: is("karpenter.sh/disruption"),
		owner: "Karpenter",
		means: "it is disrupting these nodes (consolidation, drift or expiry), and deletes them once drained",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{
				"kubectl get nodeclaims -o wide   # the nodes Karpenter is removing and launching",
				"The nodes are going away: Karpenter launches a node for the Pending pod if a NodePool allows it (its limits, requirements and taints):",
				"kubectl describe nodepools",
			}
		}},
	{matches: is("karpenter.sh/unregistered"),
		owner: "Karpenter",
		means: "it removes the taint once the node has registered with its NodeClaim",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{"kubectl get nodeclaims -o wide   # kubectl describe nodeclaim NAME for the node's: is it Registered and Initialized?"}
		}},
	{matches: is("node.cluster.x-k8s.io/uninitialized"),
		owner: "Cluster API",
		means: "its Machine controller removes the taint once it has linked the node to its Machine (providerID)",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{"kubectl get machines -A -o wide   # on the management cluster: the Machine of the node, and why it is not linked"}
		}},
	{matches: func(k string) bool { return strings.HasSuffix(k, "/agent-not-ready") },
		owner: "a node agent (a CSI driver's node plugin, Cilium)",
		means: "it removes this startup taint once its pod on the node is ready",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s   # is the agent's pod (%s) there and Ready? Its logs say why not", shellQuote(nodes[0]), strings.TrimSuffix(key, "/agent-not-ready"))}
		}},
	{matches: func(k string) bool {
		return k == "kubernetes.azure.com/scalesetpriority" || k == "cloud.google.com/gke-spot" || k == "cloud.google.com/gke-preemptible"
	},
		owner: "the cloud's node pool (spot or preemptible VMs)",
		means: "it keeps pods that do not accept being evicted at short notice off spot VMs, and puts it back on every node of the pool",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{fmt.Sprintf("If the pod may run on spot VMs, tolerate it on purpose: {key: %s, operator: Exists, effect: NoSchedule}; otherwise it needs a regular node pool.", key)}
		}},
	{matches: func(k string) bool {
		for _, p := range []string{"node.kubernetes.io/", "node.cloudprovider.kubernetes.io/", "node.cluster.x-k8s.io/", "karpenter.sh/"} {
			if strings.HasPrefix(k, p) {
				return true
			}
		}
		return k == "DeletionCandidateOfClusterAutoscaler"
	},
		owner: "a controller, from the node's state or lifecycle",
		means: "it sets and removes the taint itself",
		fix: func(v *schedulingView, key string, nodes []string) []string {
			return []string{fmt.Sprintf("kubectl describe node %s   # %s is set by a controller from the node's state: fix the node (kubelet, runtime, CNI, disk or memory pressure), don't remove the taint", shellQuote(nodes[0]), key)}
		}},
}

// ownedTaintOf returns the owned taint a key is, nil for a taint an operator sets.
func ownedTaintOf(key string) *ownedTaint {
	for i := range ownedTaints {
		if ownedTaints[i].matches(key) {
			return &ownedTaints[i]
		}
	}
	return nil
}

// taintOwners says, for each of taints a controller owns, who owns it and what it means, and
// for the not-ready taint what the node's Ready condition says: " node.cloudprovider.…/
// uninitialized is the cloud controller manager's: the kubelet sets it … ."
func (v *schedulingView) taintOwners(taints []string, byTaint map[string][]string) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, t := range taints {
		key, _ := taintKeyEffect(t)
		owned := ownedTaintOf(key)
		if owned == nil || seen[key] {
			continue
		}
		seen[key] = true
		fmt.Fprintf(&b, " %s belongs to %s: %s", key, owned.owner, owned.means)
		if key == "node.kubernetes.io/not-ready" || key == "node.kubernetes.io/unreachable" {
			if ready := v.readyMessage(byTaint[t][0]); ready != "" {
				fmt.Fprintf(&b, " (%s: %s)", byTaint[t][0], ready)
			}
		}
		b.WriteString(".")
	}
	return b.String()
}

// readyMessage returns the table's NotReady reason of node ("" when it is Ready).
func (v *schedulingView) readyMessage(node string) string {
	for _, nv := range v.verdicts {
		if nv.Node != node {
			continue
		}
		for _, r := range nv.Reasons {
			if r.Code == CodeNodeNotReady {
				return r.Message
			}
		}
	}
	return ""
}

// systemTaintFix is the fix for a control-plane or system taint (isSystemTaint) on nodes:
// leave it in place, tolerate it only for a system add-on, and find the pod room elsewhere;
// when no node the pod's selector allows is without such a taint there is nowhere else, so it
// says to add a worker node, and for a cluster whose only node is its control plane (a
// single-machine cluster) what kubeadm documents for running workloads there.
func (v *schedulingView) systemTaintFix(key, effect string, nodes []string, toleration string) []string {
	cands, _ := v.candidates()
	elsewhere := false
	for _, nv := range cands {
		if !slices.ContainsFunc(nv.Reasons, func(r NodeReason) bool {
			k, _ := taintKeyEffect(strings.TrimPrefix(r.Message, "taint "))
			return r.Code == CodeUntoleratedTaint && isSystemTaint(k)
		}) {
			elsewhere = true
		}
	}
	keep := fmt.Sprintf("%s keeps ordinary workloads off control-plane and system nodes (%s): leave it in place. Only if this pod is a system add-on that belongs there, tolerate it on purpose: %s", key, joinLimited(nodes, 3), toleration)
	switch {
	case elsewhere:
		return []string{keep + "; otherwise the pod needs room on the other nodes."}
	case len(v.verdicts) == 1 && strings.HasPrefix(key, "node-role.kubernetes.io/"):
		return []string{
			fmt.Sprintf("The cluster's only node, %s, is its control plane, so there is no other node for the pod: add a worker node, or, for a single-machine cluster meant to run workloads on its control plane, remove the taint (kubeadm's documented step):", nodes[0]),
			fmt.Sprintf("kubectl taint nodes %s %s-   # single-machine clusters only", shellQuote(nodes[0]), shellQuote(key+":"+effect)),
		}
	default:
		return []string{keep + fmt.Sprintf("; otherwise add a node for workloads: every node the pod may use carries %s or another system taint.", key)}
	}
}
