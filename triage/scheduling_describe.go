package triage

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// maxNodeEvidence caps the per-node evidence lines of one finding; the full table is in
// Finding.Nodes.
const maxNodeEvidence = 5

// describe renders the finding for one per-node code from the verdict table: a summary that
// names the nodes, evidence (the scheduler's message, then the nodes' reasons) and fixes with
// real names.
func (v *schedulingView) describe(code Code, t codeTally) Finding {
	f := Finding{Code: code, Severity: SeverityBlocker, Evidence: v.schedulerEvidence()}
	switch code {
	case CodeInsufficientCPU, CodeInsufficientMemory, CodeInsufficientEphemeralStorage,
		CodeInsufficientExtendedResource, CodeTooManyPods:
		v.describeResource(&f)
	case CodeUntoleratedTaint:
		v.describeTaints(&f)
	case CodeNodeSelectorMismatch:
		v.describeSelector(&f)
	case CodeNodeUnschedulable:
		v.describeCordoned(&f)
	case CodeHostPortConflict:
		v.describeHostPorts(&f)
	case CodeVolumeAttachLimit:
		v.describeVolumeLimit(&f)
	case CodeUnknown:
		v.describeUnmodelled(&f)
	default:
		v.describeConstraint(&f)
	}
	if t.anywhere[code] == 0 && v.hasMsg {
		f.Summary += " (The node table shows no node with this reason; it rests on the scheduler's message.)"
	}
	return f
}

// nodeEvidence appends the reasons of code on up to maxNodeEvidence of the given nodes.
func (v *schedulingView) nodeEvidence(f *Finding, nodes []string, reasons map[string][]NodeReason, field string) {
	for i, n := range nodes {
		if i == maxNodeEvidence {
			break
		}
		for _, r := range reasons[n] {
			f.Evidence = append(f.Evidence, Evidence{Object: "Node " + n, Field: field, Message: r.Message})
		}
	}
}

// nodesVerb renders ofNodes(n) as a sentence subject with its verb: "The only node has",
// "All 3 nodes have".
func (v *schedulingView) nodesVerb(n int, singular, plural string) string {
	if n == 1 {
		return capitalize(v.ofNodes(n)) + " " + singular
	}
	return capitalize(v.ofNodes(n)) + " " + plural
}

// matchesNone renders "does not match the only node", "matches none of the 3 nodes" or
// "does not match 2 of 3 nodes".
func (v *schedulingView) matchesNone(n int) string {
	total := len(v.verdicts)
	switch {
	case total == 1 && n == 1:
		return "does not match the only node"
	case n == total:
		return fmt.Sprintf("matches none of the %d nodes", total)
	default:
		return fmt.Sprintf("does not match %d of %d nodes", n, total)
	}
}

// ofNodes renders "every node" or "2 of 3 nodes" for a count of nodes with a reason.
func (v *schedulingView) ofNodes(n int) string {
	total := len(v.verdicts)
	switch {
	case n == total && total == 1:
		return "the only node"
	case n == total:
		return fmt.Sprintf("all %d nodes", total)
	default:
		return fmt.Sprintf("%d of %d nodes", n, total)
	}
}

// shortfall is the numbers behind an insufficient-* or too-many-pods summary: one resource's
// room on the nodes that lack it.
type shortfall struct {
	// Resource is the resource most of the code's reasons are about.
	Resource corev1.ResourceName
	// Requested is what the pod requests, in base units.
	Requested int64
	// Rooms are the nodes lacking the resource, roomiest first.
	Rooms []nodeRoom
	// TotalFree is the free amount summed over the Eligible nodes: those this resource alone
	// keeps the pod from (the nodes where defragmenting would help).
	TotalFree int64
	Eligible  int
	// LargestAllocatable is the largest allocatable amount among Rooms, on LargestNode.
	LargestAllocatable int64
	LargestNode        string
	// Fragmented is true when more than one eligible node has room that together would fit
	// the pod.
	Fragmented bool
	// TooBig is true when the pod requests more than any node's allocatable.
	TooBig bool
}

// nodeRoom is one node's room for a resource, in base units.
type nodeRoom struct {
	Node                    string
	Free, Used, Allocatable int64
}

// shortfallOf computes the shortfall for code from the verdict table.
func (v *schedulingView) shortfallOf(code Code) shortfall {
	nodes, reasons := v.nodesWith(code)
	sf := shortfall{Resource: corev1.ResourceName(mainResource(code, reasons))}
	for _, n := range nodes {
		for _, r := range reasons[n] {
			if corev1.ResourceName(r.Resource) != sf.Resource || r.FromScheduler {
				continue // the scheduler's bare word carries no amounts
			}
			sf.Requested = r.Requested
			sf.Rooms = append(sf.Rooms, nodeRoom{Node: n, Free: max(r.Allocatable-r.Used, 0), Used: r.Used, Allocatable: r.Allocatable})
			if r.Allocatable > sf.LargestAllocatable || sf.LargestNode == "" {
				sf.LargestAllocatable, sf.LargestNode = r.Allocatable, n
			}
		}
	}
	sort.SliceStable(sf.Rooms, func(i, j int) bool { return sf.Rooms[i].Free > sf.Rooms[j].Free })
	for _, r := range sf.Rooms {
		if v.onlyBlockedBy(r.Node, code) {
			sf.TotalFree += r.Free
			sf.Eligible++
		}
	}
	sf.TooBig = len(sf.Rooms) > 0 && sf.Requested > sf.LargestAllocatable
	sf.Fragmented = !sf.TooBig && sf.Eligible > 1 && sf.TotalFree >= sf.Requested
	return sf
}

// describeResource explains a resource shortfall: which nodes come closest, whether the total
// free amount would fit the pod if it were not fragmented, and whether any node could ever
// take it.
func (v *schedulingView) describeResource(f *Finding) {
	sf := v.shortfallOf(f.Code)
	nodes, reasons := v.nodesWith(f.Code)
	rank := map[string]int{}
	for i, r := range sf.Rooms {
		rank[r.Node] = i
	}
	sort.SliceStable(nodes, func(i, j int) bool { return rank[nodes[i]] < rank[nodes[j]] })
	name, res := sf.Resource, string(sf.Resource)
	v.nodeEvidence(f, nodes, reasons, "status.allocatable."+res)
	if len(sf.Rooms) == 0 {
		f.Summary = fmt.Sprintf("The scheduler reports %s for this pod.", f.Code)
		return
	}
	best := sf.Rooms[0]
	ns, pod := v.pod.Namespace, v.pod.Name

	if f.Code == CodeTooManyPods {
		var parts []string
		for i, r := range sf.Rooms {
			if i == 3 {
				break
			}
			parts = append(parts, fmt.Sprintf("%s runs %d of %d pods", r.Node, r.Used, r.Allocatable))
		}
		f.Summary = fmt.Sprintf("%s at the pod limit (%s).", v.nodesVerb(len(nodes), "is", "are"), strings.Join(parts, ", "))
		f.Fix = []string{
			fmt.Sprintf("kubectl describe node %s", shellQuote(best.Node)),
			fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s", shellQuote(best.Node)),
			fmt.Sprintf("Remove finished or unneeded pods from %s, add a node, or raise the kubelet's maxPods (it allows %d now).", best.Node, best.Allocatable),
		}
		if v.pinned != "" {
			f.Fix[2] = fmt.Sprintf("Remove finished or unneeded pods from %s or raise its kubelet's maxPods (it allows %d now): the pod can only run there.", best.Node, best.Allocatable)
		}
		return
	}

	// Nodes with the same room are named together: "node-1, node-2 each have 200m free".
	var closest []string
	for i := 0; i < len(sf.Rooms) && len(closest) < 3; {
		j := i
		var names []string
		for j < len(sf.Rooms) && sf.Rooms[j].Free == sf.Rooms[i].Free && sf.Rooms[j].Used == sf.Rooms[i].Used && sf.Rooms[j].Allocatable == sf.Rooms[i].Allocatable {
			names = append(names, sf.Rooms[j].Node)
			j++
		}
		r := sf.Rooms[i]
		verb := "has"
		if len(names) > 1 {
			verb = "each have"
		}
		closest = append(closest, fmt.Sprintf("%s %s %s free (%s of %s allocatable already requested)", joinLimited(names, 3), verb,
			formatAmount(name, r.Free), formatAmount(name, r.Used), formatAmount(name, r.Allocatable)))
		i = j
	}
	var b strings.Builder
	switch {
	case sf.LargestAllocatable == 0:
		fmt.Fprintf(&b, "The pod requests %s %s, but %s no allocatable %s at all", formatAmount(name, sf.Requested), res,
			strings.ToLower(v.nodesVerb(len(sf.Rooms), "reports", "report")[:1])+v.nodesVerb(len(sf.Rooms), "reports", "report")[1:], res)
		if name == corev1.ResourceEphemeralStorage {
			b.WriteString(" (kubelets that do not isolate local storage report none)")
		}
		b.WriteString(", so no node can take it.")
	case v.pinned != "":
		fmt.Fprintf(&b, "The pod can only run on %s (its required node affinity names that node, as the DaemonSet controller sets it), and %s lacks %s: the pod requests %s, %s has %s free (%s of %s allocatable already requested).",
			v.pinned, v.pinned, res, formatAmount(name, sf.Requested), best.Node, formatAmount(name, best.Free), formatAmount(name, best.Used), formatAmount(name, best.Allocatable))
		if sf.TooBig {
			fmt.Fprintf(&b, " The pod requests more %s than %s has allocatable, so it cannot fit even if the node were empty.", res, v.pinned)
		}
	default:
		amount := formatAmount(name, sf.Requested)
		if !strings.Contains(amount, "CPU") { // "50 CPU (50000m)" names its resource already
			amount += " " + res
		}
		fmt.Fprintf(&b, "No node has %s free for the pod (Insufficient %s on %s). Closest: %s.",
			amount, res, v.ofNodes(len(nodes)), strings.Join(closest, "; "))
		if earlier := v.rejectedEarlier(f.Code); len(earlier) > 0 {
			fmt.Fprintf(&b, " The scheduler counts %s under an earlier filter's reason (see the table).", joinLimited(earlier, 3))
		}
		switch {
		case sf.TooBig:
			fmt.Fprintf(&b, " The pod requests more %s than any node has allocatable (largest: %s on %s), so it cannot fit even on an empty node.",
				res, formatAmount(name, sf.LargestAllocatable), sf.LargestNode)
		case sf.Fragmented:
			fmt.Fprintf(&b, " Together those %d nodes have %s free, so the pod would fit if that room were not fragmented across nodes.",
				sf.Eligible, formatAmount(name, sf.TotalFree))
		case sf.Eligible == 2:
			fmt.Fprintf(&b, " Even both of those nodes together have only %s free: the cluster is out of %s, not fragmented.",
				formatAmount(name, sf.TotalFree), res)
		case sf.Eligible > 2:
			fmt.Fprintf(&b, " Even all %d of those nodes together have only %s free: the cluster is out of %s, not fragmented.",
				sf.Eligible, formatAmount(name, sf.TotalFree), res)
		}
	}
	f.Summary = b.String()

	f.Fix = append(f.Fix, fmt.Sprintf("kubectl describe node %s   # see Allocated resources", shellQuote(best.Node)))
	f.Fix = append(f.Fix, fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s", shellQuote(best.Node)))
	// Lowering the request is suggested only for a node where nothing else rejects the pod.
	lower := nodeRoom{}
	for _, r := range sf.Rooms {
		if r.Free > 0 && v.fitsWithRequest(r.Node, name, r.Free) {
			lower = r
			break
		}
	}
	if kind, owner := workloadOf(v.pod); owner != "" && lower.Node != "" && isCoreResource(name) {
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl set resources %s/%s -n %s --requests=%s=%s   # per container: fits %s, if the app can live with it",
			kind, owner, ns, res, requestString(name, lower.Free, len(v.pod.Spec.Containers)), lower.Node))
	} else if lower.Node != "" {
		f.Fix = append(f.Fix, fmt.Sprintf("Lower the %s request of pod %s/%s to at most %s (what %s has free), or free room on a node.",
			res, ns, pod, formatAmount(name, lower.Free), lower.Node))
	}
	// Scaling another workload down is suggested only when freeing what its pods request on the
	// node would let the pod fit there (every other modelled filter re-checked); never for a pod
	// bigger than any node.
	if big := v.biggestConsumer(best.Node, name); big.name != "" && big.amount > 0 && !sf.TooBig &&
		v.fitsWithRequest(best.Node, name, max(sf.Requested-big.amount, 0)) {
		f.Fix = append(f.Fix, scaleDownFix(big, ns, formatAmount(name, big.amount), res, best.Node))
	}
	if v.pinned != "" {
		f.Fix = append(f.Fix, fmt.Sprintf("Free %s on %s (move or shrink the pods there), or give %s more allocatable %s: a new node gets its own pod of the DaemonSet and does not help this one.", res, v.pinned, v.pinned, res))
		return
	}
	f.Fix = append(f.Fix, fmt.Sprintf("Or add a node with at least %s allocatable %s (or let the cluster autoscaler add one).", formatAmount(name, sf.Requested), res))
}

// rejectedEarlier returns the nodes that do not fit the pod and that the scheduler counts under
// another reason than code (an earlier filter rejects them first).
func (v *schedulingView) rejectedEarlier(code Code) []string {
	var out []string
	for _, nv := range v.verdicts {
		if first := firstCode(nv); !nv.Fits && first != "" && first != code {
			out = append(out, nv.Node)
		}
	}
	return out
}

// isCoreResource reports whether kubectl set resources can change name (cpu, memory,
// ephemeral-storage).
func isCoreResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage
}

// requestString renders a per-container request that keeps the pod within free when split over
// n containers, in a unit kubectl accepts.
func requestString(name corev1.ResourceName, free int64, n int) string {
	per := free / int64(max(n, 1))
	if name == corev1.ResourceCPU {
		return fmt.Sprintf("%dm", per)
	}
	return fmt.Sprintf("%dMi", per/(1024*1024))
}

// mainResource returns the resource name most of code's reasons are about.
func mainResource(code Code, reasons map[string][]NodeReason) string {
	counts := map[string]int{}
	for _, rs := range reasons {
		for _, r := range rs {
			if r.Code == code {
				counts[r.Resource]++
			}
		}
	}
	best := ""
	for _, k := range sortedKeys(counts) {
		if best == "" || counts[k] > counts[best] {
			best = k
		}
	}
	return best
}

// consumer is a workload that holds part of a node's resources.
type consumer struct {
	kind, namespace, name string
	amount                int64
}

// biggestConsumer returns the workload (Deployment, StatefulSet, …) whose pods request the
// most of res on node; bare pods, DaemonSets and the stuck pod's own workload are left out
// (scaling them is not an answer: fewer of the pod's own replicas does not place this one).
func (v *schedulingView) biggestConsumer(node string, res corev1.ResourceName) consumer {
	ownKind, ownName := workloadOf(v.pod)
	amounts := map[[3]string]int64{}
	for _, p := range v.cluster.podsByNode[node] {
		kind, name := workloadOf(p)
		if name == "" || kind == "daemonset" || (p.Namespace == v.pod.Namespace && kind == ownKind && name == ownName) {
			continue
		}
		reqs := newDemand(&Snapshot{Pod: p}).requests
		amounts[[3]string{kind, p.Namespace, name}] += baseUnits(res, reqs[res])
	}
	var best consumer
	for k, amt := range amounts {
		if amt > best.amount || (amt == best.amount && amt > 0 && k[2] < best.name) {
			best = consumer{kind: k[0], namespace: k[1], name: k[2], amount: amt}
		}
	}
	return best
}

// scaleDownFix suggests scaling big down to free amount of res on node for a pod in namespace
// ns. It names no replica count: the pods on nodes are not spec.replicas (some may be Pending),
// so --current-replicas or a computed --replicas could be refused or scale too far. A workload
// in another namespace is another team's, and the line says so.
func scaleDownFix(big consumer, ns, amount, res, node string) string {
	line := fmt.Sprintf("kubectl scale %s/%s -n %s --replicas=<fewer>   # its pods request %s of %s on %s, and without them the pod fits there; a scale-down removes its Pending pods first, so go below the number of its scheduled pods (kubectl get pods -n %s -o wide)",
		big.kind, shellQuote(big.name), shellQuote(big.namespace), amount, res, node, shellQuote(big.namespace))
	if big.namespace != ns {
		line += fmt.Sprintf("; it is in namespace %s, not %s: another team's workload, ask its owners first", big.namespace, ns)
	}
	return line
}

// workloadOf names the controller a person would scale or edit for pod, as kubectl resource
// kind and name: a ReplicaSet's Deployment (its name minus the pod-template-hash), a
// StatefulSet, a DaemonSet or a Job; for a pod without owner references, a Deployment is
// inferred from the pod-template-hash label and the generated name. Empty for a bare pod.
func workloadOf(pod *corev1.Pod) (kind, name string) {
	hash := pod.Labels["pod-template-hash"]
	for _, o := range pod.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		switch o.Kind {
		case "ReplicaSet":
			if hash != "" && strings.HasSuffix(o.Name, "-"+hash) {
				return "deployment", strings.TrimSuffix(o.Name, "-"+hash)
			}
			return "replicaset", o.Name
		case "StatefulSet":
			return "statefulset", o.Name
		case "DaemonSet":
			return "daemonset", o.Name
		case "Job":
			return "job", o.Name
		}
	}
	return "", "" // no controller owns it (a bare pod): there is nothing to scale or edit
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
	v.nodeEvidence(f, nodes, reasons, "spec.taints")
	for _, t := range taints {
		key, effect := taintKeyEffect(t)
		tainted := byTaint[t]
		first := tainted[0]
		toleration := fmt.Sprintf("{key: %s, operator: Exists, effect: %s}", key, effect)
		switch {
		case isLifecycleTaint(key):
			f.Fix = append(f.Fix, fmt.Sprintf("kubectl describe node %s   # %s is set by a controller from the node's state: fix the node (kubelet, runtime, CNI, disk or memory pressure), don't remove the taint", shellQuote(first), key))
		case isSystemTaint(key):
			f.Fix = append(f.Fix, fmt.Sprintf("%s keeps ordinary workloads off control-plane and system nodes (%s): leave it in place. Only if this pod is a system add-on that belongs there, tolerate it on purpose: %s; otherwise the pod needs room on the other nodes.", key, joinLimited(tainted, 3), toleration))
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
			f.Fix = append(f.Fix, fmt.Sprintf("If the pod may run on %s, tolerate the taint on purpose: %s", joinLimited(helped, 3), toleration))
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

// describeSelector explains a nodeSelector / required node affinity that matches no node.
func (v *schedulingView) describeSelector(f *Finding) {
	nodes, reasons := v.nodesWith(CodeNodeSelectorMismatch)
	// Whether the selector matches a node is a fact about every node, also those an earlier
	// filter rejects first; the scheduler's count is said next to it.
	all := nodes
	if v.pinned == "" {
		all = v.nodesWithAnywhere(CodeNodeSelectorMismatch)
	}
	counted := ""
	if earlier := len(all) - len(nodes); earlier > 0 {
		counted = fmt.Sprintf(" (the scheduler counts %d of them under an earlier filter's reason)", earlier)
	}
	ns, pod := v.pod.Namespace, v.pod.Name
	sel := v.pod.Spec.NodeSelector
	if len(sel) > 0 {
		var pairs []string
		for _, k := range sortedKeys(sel) {
			pairs = append(pairs, k+"="+sel[k])
		}
		f.Summary = fmt.Sprintf("The pod's nodeSelector %s %s%s", strings.Join(pairs, ","), v.matchesNone(len(all)), counted)
		if len(nodes) > 0 && len(reasons[nodes[0]]) > 0 {
			f.Summary += ": e.g. " + nodes[0] + ": " + reasons[nodes[0]][0].Message
		}
		f.Summary += "."
		keys := strings.Join(sortedKeys(sel), ",")
		f.Fix = []string{
			fmt.Sprintf("kubectl get nodes -L %s", shellQuote(keys)),
			fmt.Sprintf("Fix spec.nodeSelector of pod %s/%s (or its workload) to labels the nodes carry.", ns, pod),
		}
		// Only labels a person may add: missing on the node, and not in a namespace Kubernetes
		// or the cloud provider owns (arch, os, zone, instance type, role), where a new value
		// would lie about the node.
		var labelable []string
		for _, name := range nodes {
			if n := v.cluster.nodeByName[name]; n != nil && len(missingLabels(n, sel)) > 0 && !changesLabels(n, sel) {
				labelable = append(labelable, name)
			}
		}
		var owned []string
		for _, k := range sortedKeys(sel) {
			if reservedLabel(k) {
				owned = append(owned, k)
			}
		}
		if len(owned) > 0 {
			f.Fix = append(f.Fix, fmt.Sprintf("%s %s set by Kubernetes or the cloud provider from what the node is: change the selector, never the nodes' labels.",
				strings.Join(owned, ", "), plural(len(owned), "is", "are")))
		}
		helped := v.tryFix(labelable, func(n *corev1.Node) {
			for k, val := range missingLabels(n, sel) {
				n.Labels[k] = val
			}
		}).helped
		for i, n := range helped {
			if i == 0 {
				f.Fix = append(f.Fix, fmt.Sprintf("Or, if %s is meant for this pod, label it (the pod fits there otherwise):", joinLimited(helped, 3)))
			}
			if i == 3 {
				break
			}
			var labels []string
			for _, k := range sortedKeys(missingLabels(v.cluster.nodeByName[n], sel)) {
				labels = append(labels, shellQuote(k+"="+sel[k]))
			}
			f.Fix = append(f.Fix, fmt.Sprintf("kubectl label node %s %s", shellQuote(n), strings.Join(labels, " ")))
		}
	} else {
		f.Summary = fmt.Sprintf("The pod's required node affinity %s%s.", v.matchesNone(len(all)), counted)
		f.Fix = []string{
			fmt.Sprintf("kubectl get pod -n %s %s -o jsonpath='{.spec.affinity.nodeAffinity}'", shellQuote(ns), shellQuote(pod)),
			"kubectl get nodes --show-labels",
		}
	}
	v.nodeEvidence(f, nodes, reasons, "metadata.labels")
}

// missingLabels returns the labels of sel the node lacks (key absent).
func missingLabels(n *corev1.Node, sel map[string]string) map[string]string {
	out := map[string]string{}
	for k, val := range sel {
		if _, has := n.Labels[k]; !has {
			out[k] = val
		}
	}
	return out
}

// changesLabels reports whether matching sel would change a label the node already has, or
// add one in a namespace Kubernetes or the cloud provider owns: a fix that would falsify what
// the node is.
func changesLabels(n *corev1.Node, sel map[string]string) bool {
	for k, val := range sel {
		if have, has := n.Labels[k]; (has && have != val) || (!has && reservedLabel(k)) {
			return true
		}
	}
	return false
}

// reservedLabel reports whether a label key is in a namespace that Kubernetes, the kubelet or
// the cloud provider owns (kubernetes.io/arch, topology.kubernetes.io/zone,
// node-role.kubernetes.io/…, node.kubernetes.io/instance-type, *.k8s.io/…), except
// node-restriction.kubernetes.io/, which is meant for administrators.
func reservedLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	if prefix == "node-restriction.kubernetes.io" {
		return false // the namespace meant for labels administrators set on nodes
	}
	for _, domain := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return false
}

// describeCordoned names the cordoned nodes.
func (v *schedulingView) describeCordoned(f *Finding) {
	nodes, reasons := v.nodesWith(CodeNodeUnschedulable)
	f.Summary = fmt.Sprintf("%s cordoned (spec.unschedulable): %s.", v.nodesVerb(len(nodes), "is", "are"), joinLimited(nodes, 5))
	v.nodeEvidence(f, nodes, reasons, "spec.unschedulable")
	// Uncordoning also lifts the node.kubernetes.io/unschedulable taint the node lifecycle
	// controller keeps on a cordoned node.
	res := v.tryFix(nodes, func(n *corev1.Node) {
		n.Spec.Unschedulable = false
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == unschedulableTaintKey })
	})
	for _, n := range res.helped {
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl uncordon %s   # if its maintenance is over; the pod fits there otherwise", shellQuote(n)))
	}
	switch {
	case res.unsure != "":
		f.Fix = append(f.Fix, fmt.Sprintf("Whether uncordoning would place the pod cannot be told: %s.", res.unsure))
	case len(res.helped) == 0:
		f.Fix = append(f.Fix, fmt.Sprintf("Uncordoning %s alone would not place the pod: they would still reject it for %s.", joinLimited(nodes, 3), strings.Join(res.left, ", ")))
	}
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
		for _, p := range v.cluster.podsByNode[n] {
			if k, o := workloadOf(p); owner != "" && k == kind && o == owner {
				sameWorkload = true
			}
		}
	}
	if sameWorkload {
		f.Summary += fmt.Sprintf(" The holder is an older pod of the same %s: a rolling update with maxSurge cannot place the new pod while the old one keeps the ports.", kind)
		f.Fix = append(f.Fix, fmt.Sprintf(`kubectl patch %s %s -n %s -p '{"spec":{"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}'`, shellQuote(kind), shellQuote(owner), shellQuote(v.pod.Namespace)))
	}
	for i, n := range nodes {
		if i == maxNodeEvidence {
			f.Fix = append(f.Fix, fmt.Sprintf("# and %d more nodes with the port taken: see the node table", len(nodes)-i))
			break
		}
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s", shellQuote(n)))
	}
	f.Fix = append(f.Fix, "Drop hostPort (expose the pod through a Service) or pick a port no other pod binds, or remove the pod holding it.")
}

// describeVolumeLimit names the nodes at their CSI attachable-volume limit and the driver.
func (v *schedulingView) describeVolumeLimit(f *Finding) {
	nodes, reasons := v.nodesWith(CodeVolumeAttachLimit)
	if len(nodes) == 0 {
		f.Summary = "The scheduler reports nodes that exceed their attachable-volume count, but the CSINode limits could not be read to say which."
		f.Fix = []string{"kubectl get csinodes -o custom-columns=NODE:.metadata.name,DRIVERS:.spec.drivers[*].name,LIMITS:.spec.drivers[*].allocatable.count"}
		return
	}
	r := reasons[nodes[0]][0]
	if r.FromScheduler {
		f.Summary = fmt.Sprintf("The scheduler says %s exceed their attachable-volume count (CSINode limits); the limits themselves could not be read to say which driver.", v.ofNodes(len(nodes)))
		v.nodeEvidence(f, nodes, reasons, "FailedScheduling")
		f.Fix = []string{"kubectl get csinodes -o custom-columns=NODE:.metadata.name,DRIVERS:.spec.drivers[*].name,LIMITS:.spec.drivers[*].allocatable.count",
			"Add a node (check that the cluster autoscaler's node group is not at its maximum), or use an instance type that attaches more volumes."}
		return
	}
	f.Summary = fmt.Sprintf("%s at the attachable-volume limit of CSI driver %s (%d volumes per node, CSINode allocatable.count): the pod needs %d more volume(s) there.",
		v.nodesVerb(len(nodes), "is", "are"), r.Resource, r.Allocatable, r.Requested)
	if helped := v.onlyReasonIs(nodes, func(r NodeReason) bool { return r.Code == CodeVolumeAttachLimit }); len(helped) < len(nodes) {
		f.Summary += fmt.Sprintf(" %d of them also reject the pod for other reasons (see the node table).", len(nodes)-len(helped))
	}
	v.nodeEvidence(f, nodes, reasons, "CSINode spec.drivers[].allocatable.count")
	f.Fix = []string{
		fmt.Sprintf("kubectl get csinode %s -o jsonpath='{range .spec.drivers[*]}{.name}{\" \"}{.allocatable.count}{\"\\n\"}{end}'", shellQuote(nodes[0])),
		fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s   # which pods hold the node's volumes", shellQuote(nodes[0])),
		"Add a node (check that the cluster autoscaler's node group is not at its maximum), or use an instance type that attaches more volumes.",
		"Or need fewer volumes per node: spread the volume-heavy pods, or share a volume (ReadWriteMany) instead of one per replica.",
	}
}

// describeUnmodelled explains a rejection the rules do not model: the scheduler's own words,
// verbatim, on the nodes the table found no other reason for. It is never a confident cause.
func (v *schedulingView) describeUnmodelled(f *Finding) {
	nodes, reasons := v.nodesWith(CodeUnknown)
	f.Uncertain = true
	var text string
	if len(nodes) > 0 {
		text = reasons[nodes[0]][0].Message
	}
	f.Summary = fmt.Sprintf("The scheduler rejects %s for a reason whypending does not model, so this is its verdict, not a diagnosis: %s.", v.ofNodes(len(nodes)), text)
	v.nodeEvidence(f, nodes, reasons, "FailedScheduling")
	f.Fix = []string{
		fmt.Sprintf("kubectl describe pod -n %s %s   # the scheduler's full message", shellQuote(v.pod.Namespace), shellQuote(v.pod.Name)),
		fmt.Sprintf("kubectl describe node %s", shellQuote(firstOr(nodes, "NODE"))),
		"Search the scheduler's message in the docs of the scheduler plugin that writes it (a CSI driver's limits, DRA, a custom plugin).",
	}
}

// firstOr returns names[0], or fallback when names is empty.
func firstOr(names []string, fallback string) string {
	if len(names) == 0 {
		return fallback
	}
	return names[0]
}

// describeConstraint covers the placement constraints that depend on other pods or volumes:
// topology spread, inter-pod (anti-)affinity and PV node affinity.
func (v *schedulingView) describeConstraint(f *Finding) {
	nodes, reasons := v.nodesWith(f.Code)
	ns, pod := v.pod.Namespace, v.pod.Name
	example := ""
	if len(nodes) > 0 && len(reasons[nodes[0]]) > 0 {
		example = " For example " + nodes[0] + ": " + reasons[nodes[0]][0].Message + "."
	}
	switch f.Code {
	case CodeTopologySpreadUnsatisfiable:
		f.Summary = fmt.Sprintf("The pod's topologySpreadConstraints (whenUnsatisfiable: DoNotSchedule) rule out %s.%s", v.ofNodes(len(nodes)), example)
		v.nodeEvidence(f, nodes, reasons, "spec.topologySpreadConstraints")
		f.Fix = []string{
			fmt.Sprintf("kubectl get pod -n %s %s -o jsonpath='{.spec.topologySpreadConstraints}'", shellQuote(ns), shellQuote(pod)),
			fmt.Sprintf("kubectl get pods -n %s -o wide -l %s", shellQuote(ns), shellQuote(v.spreadSelector())),
		}
		v.describeSpreadDomains(f)
	case CodePodAntiAffinityUnsatisfiable:
		f.Summary = fmt.Sprintf("Required pod anti-affinity rules out %s.%s", v.ofNodes(len(nodes)), example)
		v.nodeEvidence(f, nodes, reasons, "spec.affinity.podAntiAffinity")
		f.Fix = []string{
			fmt.Sprintf("kubectl get pod -n %s %s -o jsonpath='{.spec.affinity.podAntiAffinity}'", shellQuote(ns), shellQuote(pod)),
			"Use a narrower topologyKey (kubernetes.io/hostname), preferredDuringSchedulingIgnoredDuringExecution, fewer replicas, or more nodes/domains.",
		}
	case CodePodAffinityUnsatisfiable:
		f.Summary = fmt.Sprintf("Required pod affinity rules out %s: no pod it must run next to is in their topology domain.%s", v.ofNodes(len(nodes)), example)
		v.nodeEvidence(f, nodes, reasons, "spec.affinity.podAffinity")
		f.Fix = []string{
			fmt.Sprintf("kubectl get pod -n %s %s -o jsonpath='{.spec.affinity.podAffinity}'", shellQuote(ns), shellQuote(pod)),
			"Start the pods it must run next to first, or relax the rule to preferredDuringSchedulingIgnoredDuringExecution.",
		}
	case CodeVolumeNodeAffinityConflict:
		f.Summary = fmt.Sprintf("The pod's bound PersistentVolume can only be used on nodes its node affinity allows, and that rules out %s.%s", v.ofNodes(len(nodes)), example)
		v.nodeEvidence(f, nodes, reasons, "spec.nodeAffinity")
		for _, pv := range sortedKeys(v.demand.pvNodeAffinity) {
			f.Fix = append(f.Fix, fmt.Sprintf("kubectl get pv %s -o jsonpath='{.spec.nodeAffinity}'", shellQuote(pv)))
		}
		f.Fix = append(f.Fix, "Bring back a node in the volume's zone/host (the volume cannot move), or restore the data to a new volume where the pod can run.")
	default:
		f.Summary = fmt.Sprintf("%s rule out %s.%s", f.Code, v.ofNodes(len(nodes)), example)
	}
}

// describeSpreadDomains says, per DoNotSchedule constraint, which domains hold the skew down
// and whether the pod can run in them at all. With nodeTaintsPolicy Ignore (the default) a
// tainted node still counts as a domain with 0 matching pods, so a control-plane node the pod
// can never use can make every worker's skew too large; with nodeAffinityPolicy Ignore the same
// holds for nodes the pod's affinity excludes. Fixes name domains that can take the pod, or the
// policy and maxSkew/whenUnsatisfiable trade-offs, never nodes that would still reject it.
func (v *schedulingView) describeSpreadDomains(f *Finding) {
	for _, sc := range v.spread.constraints {
		key := sc.src.TopologyKey
		var emptiest, blockedEmptiest []string
		why := map[string]string{}
		for _, dom := range sortedKeys(sc.domains) {
			placeable := false
			for _, node := range sc.domains[dom] {
				if other := v.nonSpreadReasons(node); len(other) == 0 {
					placeable = true
				} else if why[dom] == "" {
					why[dom] = other[0].Message
				}
			}
			if sc.counts[dom] == sc.minMatch {
				emptiest = append(emptiest, dom)
				if !placeable {
					blockedEmptiest = append(blockedEmptiest, dom)
				}
			}
		}
		if len(emptiest) == 0 {
			continue
		}
		if len(blockedEmptiest) == len(emptiest) {
			f.Summary += fmt.Sprintf(" The emptiest %s domains (%s, %d matching pods) hold the skew down, but the pod cannot run in any of them (e.g. %s: %s), so this skew can never be met.",
				key, joinLimited(emptiest, 3), sc.minMatch, blockedEmptiest[0], why[blockedEmptiest[0]])
			policy := false
			if (sc.src.NodeTaintsPolicy == nil || *sc.src.NodeTaintsPolicy == corev1.NodeInclusionPolicyIgnore) && strings.HasPrefix(why[blockedEmptiest[0]], "taint ") {
				f.Fix = append(f.Fix, fmt.Sprintf("Set nodeTaintsPolicy: Honor on the %s constraint, so nodes with taints the pod does not tolerate stop counting as domains (they count with the default Ignore).", key))
				policy = true
			}
			if sc.src.NodeAffinityPolicy != nil && *sc.src.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore && strings.HasPrefix(why[blockedEmptiest[0]], "nodeSelector") {
				f.Fix = append(f.Fix, fmt.Sprintf("Set nodeAffinityPolicy: Honor on the %s constraint, so nodes the pod's node affinity excludes stop counting as domains.", key))
				policy = true
			}
			if !policy {
				f.Fix = append(f.Fix, fmt.Sprintf("Make the pod able to run in %s (see the node table), or the skew cannot be met.", joinLimited(blockedEmptiest, 3)))
			}
		} else {
			var open []string
			for _, dom := range emptiest {
				if !slices.Contains(blockedEmptiest, dom) {
					open = append(open, dom)
				}
			}
			f.Fix = append(f.Fix, fmt.Sprintf("Add capacity in the emptiest %s domains the pod can run in: %s.", key, joinLimited(open, 3)))
		}
		f.Fix = append(f.Fix, fmt.Sprintf("Or trade spread for placement: raise maxSkew (now %d) or use whenUnsatisfiable: ScheduleAnyway on the %s constraint.", sc.src.MaxSkew, key))
	}
}

// nonSpreadReasons returns node's reasons other than topology spread: what keeps the pod off it
// even where the skew allows it (a NotReady node counts: it runs no new pods).
func (v *schedulingView) nonSpreadReasons(node string) []NodeReason {
	var out []NodeReason
	for _, nv := range v.verdicts {
		if nv.Node != node {
			continue
		}
		for _, r := range nv.Reasons {
			if r.Code != CodeTopologySpreadUnsatisfiable {
				out = append(out, r)
			}
		}
	}
	return out
}

// spreadSelector renders the first topology spread constraint's selector for kubectl -l.
func (v *schedulingView) spreadSelector() string {
	for _, c := range v.pod.Spec.TopologySpreadConstraints {
		return selectorString(c.LabelSelector)
	}
	return ""
}

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
