package triage

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// This file is the NodeResourcesFit filter: the pod's requests must fit in what the node has
// allocatable minus what its pods request, and the node must have room for one more pod. Its
// prose names the closest nodes, tells fragmentation from a full cluster, and checks every
// fix (a lower request, a scale-down) against the other filters.

// resourceReasons compares the pod's requests with what the node has left (allocatable minus
// what the pods bound to it request), like NodeResourcesFit: the pod count first, then every
// requested resource that does not fit, with amounts in base units.
func resourceReasons(d *demand, n *corev1.Node, c *cluster) []NodeReason {
	pods, used := c.pods.Count(n.Name), c.usedOn(n.Name)
	var out []NodeReason
	alloc := n.Status.Allocatable
	maxPods := alloc.Pods().Value()
	if int64(pods)+1 > maxPods {
		out = append(out, NodeReason{
			Code:        CodeTooManyPods,
			Message:     fmt.Sprintf("too many pods: %d of %d pods already on the node", pods, maxPods),
			Resource:    string(corev1.ResourcePods),
			Requested:   1,
			Used:        int64(pods),
			Allocatable: maxPods,
		})
	}
	for _, name := range requestedResources(d.requests) {
		want := baseUnits(name, d.requests[name])
		if want <= 0 {
			continue
		}
		have := baseUnits(name, alloc[name])
		inUse := baseUnits(name, used[name])
		if want <= have-inUse {
			continue
		}
		out = append(out, NodeReason{
			Code:        resourceCode(name),
			Message:     shortfallMessage(name, want, inUse, have),
			Resource:    string(name),
			Requested:   want,
			Used:        inUse,
			Allocatable: have,
		})
	}
	return out
}

// requestedResources returns the resource names of reqs that the Fit plugin checks, in its
// order: cpu, memory, ephemeral-storage, then the others (extended resources, hugepages) by
// name. The pod count is checked separately.
func requestedResources(reqs corev1.ResourceList) []corev1.ResourceName {
	rank := map[corev1.ResourceName]int{corev1.ResourceCPU: 0, corev1.ResourceMemory: 1, corev1.ResourceEphemeralStorage: 2}
	var names []corev1.ResourceName
	for name := range reqs {
		if name == corev1.ResourcePods {
			continue
		}
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, iok := rank[names[i]]
		rj, jok := rank[names[j]]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok
		default:
			return names[i] < names[j]
		}
	})
	return names
}

// baseUnits is q in the resource's base unit: millicores for cpu, else Value (bytes, count).
func baseUnits(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// resourceCode maps a resource name to its insufficient-* code.
func resourceCode(name corev1.ResourceName) Code {
	switch name {
	case corev1.ResourceCPU:
		return CodeInsufficientCPU
	case corev1.ResourceMemory:
		return CodeInsufficientMemory
	case corev1.ResourceEphemeralStorage:
		return CodeInsufficientEphemeralStorage
	case corev1.ResourcePods:
		return CodeTooManyPods
	default:
		return CodeInsufficientExtendedResource
	}
}

// shortfallMessage is the table's text for one resource shortfall.
func shortfallMessage(name corev1.ResourceName, want, used, alloc int64) string {
	if alloc == 0 {
		return fmt.Sprintf("Insufficient %s: the pod requests %s, the node has none allocatable", name, formatAmount(name, want))
	}
	free := max(alloc-used, 0)
	return fmt.Sprintf("Insufficient %s: the pod requests %s, %s of %s allocatable already requested (%s free)",
		name, formatAmount(name, want), formatAmount(name, used), formatAmount(name, alloc), formatAmount(name, free))
}

// formatAmount renders an amount in base units for a person: cpu in millicores (as kubectl
// describe node prints requests), from 10 cores on in cores first ("50 CPU (50000m)"),
// byte-sized resources with a unit, counts as integers.
func formatAmount(name corev1.ResourceName, v int64) string {
	switch {
	case name == corev1.ResourceCPU && (v >= 10000 || v <= -10000):
		return fmt.Sprintf("%s CPU (%dm)", strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", float64(v)/1000), "0"), "."), v)
	case name == corev1.ResourceCPU:
		return fmt.Sprintf("%dm", v)
	case name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		return formatBytes(v)
	default:
		return fmt.Sprintf("%d", v)
	}
}

// formatBytes renders bytes in the units a manifest would use: exact binary in its natural
// unit (512Mi, 3Gi), else exact decimal with fewer than five digits (1024M), else binary with
// one decimal (3.9Gi).
func formatBytes(v int64) string {
	if v < 1000 && v > -1000 {
		return fmt.Sprintf("%d", v)
	}
	exact := func(units []string, base, limit int64) string {
		for i := len(units) - 1; i >= 0; i-- {
			unit := int64(1)
			for range i + 1 {
				unit *= base
			}
			if q := v / unit; v%unit == 0 && q != 0 && q < limit && q > -limit {
				return fmt.Sprintf("%d%s", q, units[i])
			}
		}
		return ""
	}
	binary := []string{"Ki", "Mi", "Gi", "Ti", "Pi"}
	if s := exact(binary, 1024, 1024); s != "" {
		return s
	}
	if s := exact([]string{"k", "M", "G", "T", "P"}, 1000, 10000); s != "" {
		return s
	}
	f, unit := float64(v), ""
	for _, u := range binary {
		if f < 1024 && f > -1024 {
			break
		}
		f /= 1024
		unit = u
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") + unit
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
	ns := v.pod.Namespace

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
	lower := v.lowerRequestFixes(sf)
	if len(lower) > 0 && ParseFixStep(lower[0]).Command != "" {
		// A pasted change: say before it that making room (the steps after) is the other way.
		f.Fix = append(f.Fix, fmt.Sprintf("Either lower the %s request (the command below, if the app can live with it), or make room for the pod instead (the steps after it): one of them, not both.", res))
	}
	f.Fix = append(f.Fix, lower...)
	// Scaling another workload down is suggested only when freeing what its pods request on the
	// node would let the pod fit there (every other modelled filter re-checked); never for a pod
	// bigger than any node.
	if big := v.biggestConsumer(best.Node, name); big.name != "" && big.amount > 0 && !sf.TooBig &&
		v.fitsWithRequest(best.Node, name, max(sf.Requested-big.amount, 0)) {
		f.Fix = append(f.Fix, scaleDownFix(big, ns, formatAmount(name, big.amount), res, best.Node, v.snap.MayName(big.namespace)))
	}
	if v.pinned != "" {
		f.Fix = append(f.Fix, fmt.Sprintf("Free %s on %s (move or shrink the pods there), or give %s more allocatable %s: a new node gets its own pod of the DaemonSet and does not help this one.", res, v.pinned, v.pinned, res))
		return
	}
	f.Fix = append(f.Fix, fmt.Sprintf("Or add a node with at least %s allocatable %s (or let the cluster autoscaler add one).", formatAmount(name, sf.Requested), res))
}

// rejectedEarlier returns the nodes that have code among their reasons but that the scheduler
// counts under another reason (an earlier filter rejects them first).
func (v *schedulingView) rejectedEarlier(code Code) []string {
	var out []string
	for _, nv := range v.verdicts {
		if first := firstCode(nv); !nv.Fits && first != "" && first != code && v.nodeHas(nv.Node, code) {
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

// requestString renders a per-container request (base units, a multiple of requestUnit) in a
// unit kubectl accepts.
func requestString(name corev1.ResourceName, per int64) string {
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
	for _, p := range v.cluster.pods.On(node) {
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
// in another namespace is another team's, and the line says so; one in a namespace the asker
// cannot read (named false) is not named at all.
func scaleDownFix(big consumer, ns, amount, res, node string, named bool) string {
	if !named {
		return fmt.Sprintf("A workload in a namespace you cannot read has pods requesting %s of %s on %s, and without them the pod fits there: ask the cluster's admins whether it can be scaled down.", amount, res, node)
	}
	line := fmt.Sprintf("kubectl scale %s/%s -n %s --replicas=<fewer>   # its pods request %s of %s on %s, and without them the pod fits there; a scale-down removes its Pending pods first, so go below the number of its scheduled pods (kubectl get pods -n %s -o wide), and each one removed is a Ready replica of it fewer: only if it can spare them",
		big.kind, shellQuote(big.name), shellQuote(big.namespace), amount, res, node, shellQuote(big.namespace))
	if big.namespace != ns {
		line += fmt.Sprintf("; it is in namespace %s, not %s: another team's workload, ask its owners first", big.namespace, ns)
	}
	return line
}

// readyFirst is the condition every fix that names a Ready replica to delete states: deleting
// the last Ready replica takes the workload down (the property TestNoFixDeletesAReadyReplica
// checks it).
const readyFirst = "only once other replicas are Ready"

// surgeFreeCost says what the maxSurge 0 / maxUnavailable 1 patch costs: the controller then
// stops an old Ready replica before its replacement starts, and with one Ready replica that is
// the whole workload.
func surgeFreeCost(owner string, fit replicaFit) string {
	switch len(fit.ready) {
	case 0:
		return fmt.Sprintf("no replica of %s is Ready now, so stopping an old one first costs nothing that serves", owner)
	case 1:
		return fmt.Sprintf("costs: the rollout then stops %s, the only Ready replica, before its replacement starts, so %s serves nothing until the new pod is Ready; if it must stay up, make room on a node instead", fit.ready[0], owner)
	}
	return fmt.Sprintf("costs: the rollout then stops one old replica before each replacement starts, so %s runs with %d of its %d Ready replicas meanwhile", owner, len(fit.ready)-1, len(fit.ready))
}

// replaceRunningNote says how the workload's running replicas (fit.running), whose room the
// lower request counts on, get replaced: a Deployment's rollout and a StatefulSet's rolling
// update replace them by themselves (a Deployment never takes its Ready replicas below
// spec.replicas minus maxUnavailable, so nothing needs deleting); a ReplicaSet does not roll, so
// its pods that are not Ready are the ones to delete. A Ready replica is never offered for deletion
// except readyFirst, saying what it costs: deleting the only Ready one takes the workload down.
func replaceRunningNote(kind, ns, owner string, fit replicaFit) string {
	what := "the running replica " + fit.running[0]
	if n := len(fit.running); n > 1 {
		what = fmt.Sprintf("the %d running replicas (%s)", n, joinLimited(fit.running, 3))
	}
	var line string
	switch kind {
	case "deployment":
		line = fmt.Sprintf("They fit once the rollout has replaced %s. Nothing needs deleting now: the Deployment controller removes old replicas by itself, only while enough replicas stay Ready.", what)
	case "statefulset":
		line = fmt.Sprintf("They fit once the rolling update has replaced %s. The StatefulSet controller replaces its pods by itself, one at a time from the highest ordinal.", what)
	default:
		line = fmt.Sprintf("They fit once %s %s replaced: a ReplicaSet does not replace its pods when its template changes, so delete those of its pods that are not Ready (they serve nothing) to have them recreated with the new request.", what, plural(len(fit.running), "is", "are"))
	}
	switch n := len(fit.ready); {
	case n == 1:
		line += fmt.Sprintf(" %s is the only Ready replica of %s: deleting it now takes %s down. If new pods stay Pending beside it, delete it %s (it costs one Ready replica until its replacement starts in its room).", fit.ready[0], owner, owner, readyFirst)
	case n > 1:
		line += fmt.Sprintf(" %s %s Ready: if new pods stay Pending beside them, delete them one at a time and %s (each costs one Ready replica until its replacement starts in its room).", joinLimited(fit.ready, 3), plural(n, "is", "are"), readyFirst)
	}
	return line
}

// fitsWithRequest reports whether node would take the pod if its request of res were amount
// (base units), judged again with every modelled filter, as tryFix does for node fixes; false
// when the model is not complete for this pod (modelGaps), so a "lower the request" fix never
// names a node that something else rejects.
func (v *schedulingView) fitsWithRequest(node string, res corev1.ResourceName, amount int64) bool {
	n := v.cluster.nodeByName[node]
	if n == nil || v.modelGaps() != "" {
		return false
	}
	d := *v.demand
	d.requests = v.demand.requests.DeepCopy()
	if res == corev1.ResourceCPU {
		d.requests[res] = *resource.NewMilliQuantity(amount, resource.DecimalSI)
	} else {
		d.requests[res] = *resource.NewQuantity(amount, resource.BinarySI)
	}
	return len(nodeReasons(&d, n, v.cluster)) == 0
}

// lowerRequestFixes suggests a lower request of the shortfall's resource, only where nothing
// else rejects the pod. For a workload's pod it is the kubectl set resources line whose
// per-container value lets all the workload's replicas fit (lowerRequestFit), and says where;
// a Job's pod template cannot change, so it says what to recreate the Job with; a bare pod gets
// the amount the roomiest node that would take it has free.
func (v *schedulingView) lowerRequestFixes(sf shortfall) []string {
	name, res := sf.Resource, string(sf.Resource)
	ns, pod := v.pod.Namespace, v.pod.Name
	kind, owner := workloadOf(v.pod)
	if owner != "" && isCoreResource(name) {
		fit, ok := v.lowerRequestFit(name, kind, owner)
		switch {
		case !ok:
			return nil
		case fit.rollout && kind == "deployment":
			return []string{
				fmt.Sprintf("The room the pod needs is held by %s's own running %s (%s): its rollout waits to start new pods beside the old ones (maxUnavailable 0 keeps them). Let it replace them first:",
					owner, plural(len(fit.running), "replica", "replicas"), joinLimited(fit.running, 3)),
				fmt.Sprintf(`kubectl patch deployment %s -n %s -p '{"spec":{"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}'   # %s`, shellQuote(owner), shellQuote(ns), surgeFreeCost(owner, fit)),
			}
		case fit.rollout:
			return nil
		}
		per := requestString(name, fit.per)
		if kind == "job" {
			return []string{fmt.Sprintf("A Job's pod template cannot be changed (spec.template is immutable): recreate Job %s with a %s request of at most %s per container (it fits %s then), or lower it in its CronJob's jobTemplate, if the app can live with it.",
				owner, res, per, fit.firstNode(sf.Rooms))}
		}
		where := "fits " + fit.firstNode(sf.Rooms)
		switch {
		case fit.replicas > 1 && fit.known:
			where = fmt.Sprintf("all %d replicas fit then (%s)", fit.replicas, fit.placement())
		case fit.replicas > 1:
			where = fmt.Sprintf("the %d replicas seen fit then (%s)", fit.replicas, fit.placement())
		}
		out := []string{fmt.Sprintf("kubectl set resources %s -n %s --requests=%s   # per container: %s, if the app can live with it",
			shellQuote(kind+"/"+owner), shellQuote(ns), shellQuote(string(res)+"="+per), where)}
		if len(fit.running) > 0 {
			out = append(out, replaceRunningNote(kind, ns, owner, fit))
			if kind == "statefulset" {
				out = append(out, fmt.Sprintf("kubectl rollout status statefulset/%s -n %s   # follows the rolling update", shellQuote(owner), shellQuote(ns)))
			}
		}
		return out
	}
	for _, r := range sf.Rooms {
		if r.Free > 0 && v.fitsWithRequest(r.Node, name, r.Free) {
			return []string{fmt.Sprintf("Lower the %s request of pod %s/%s to at most %s (what %s has free), or free room on a node.",
				res, ns, pod, formatAmount(name, r.Free), r.Node)}
		}
	}
	return nil
}
