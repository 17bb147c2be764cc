package triage

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// This file builds the per-node "why not here" table the way the kube-scheduler's filter
// plugins judge a node (NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
// NodeResourcesFit, NodeVolumeLimits, VolumeBinding's PV node affinity, PodTopologySpread,
// InterPodAffinity), with
// one difference: the scheduler stops at the first failing plugin, the table keeps every reason
// (like Fit keeps every shortfall), in filter order. Counts in the answers follow the
// scheduler: a node counts under its first reason (firstCode). Taints, node affinity and pod requests come from
// k8s.io/component-helpers, the code the plugins call themselves, so the table agrees with them.

// unschedulableTaintKey is the taint the node lifecycle controller adds to a cordoned node.
const unschedulableTaintKey = "node.kubernetes.io/unschedulable"

// cluster is what the verdicts read besides the node itself: every node and the pods bound to
// each, from the Snapshot.
type cluster struct {
	nodes      []*corev1.Node
	nodeByName map[string]*corev1.Node
	podsByNode map[string][]*corev1.Pod
	// snap holds the storage parts the volume-limit check reads: CSINodes, NodeClaims, PVs,
	// StorageClasses (nil when not collected).
	snap *Snapshot
	// antiAffinity are the bound pods with required pod anti-affinity, with their node: the
	// only pods whose anti-affinity can reject the pod (found once, not per node).
	antiAffinity []boundPod
	// used memoises the requests of the pods on each node (RequestsByNode), unless the
	// Snapshot carries them (Snapshot.RequestedByNode).
	used map[string]corev1.ResourceList
}

// boundPod is a pod and the node it is bound to.
type boundPod struct {
	pod  *corev1.Pod
	node *corev1.Node
}

func newCluster(s *Snapshot) *cluster {
	c := &cluster{nodes: s.Nodes, nodeByName: map[string]*corev1.Node{}, podsByNode: s.PodsByNode, snap: s, used: map[string]corev1.ResourceList{}}
	for _, n := range s.Nodes {
		c.nodeByName[n.Name] = n
		for _, p := range s.PodsByNode[n.Name] {
			if p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil && len(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
				c.antiAffinity = append(c.antiAffinity, boundPod{pod: p, node: n})
			}
		}
	}
	return c
}

// usedOn returns what the pods bound to node request, summed per resource.
func (c *cluster) usedOn(node string) corev1.ResourceList {
	if used, ok := c.snap.RequestedByNode[node]; ok {
		return used
	}
	if used, ok := c.used[node]; ok {
		return used
	}
	used := podsRequests(c.podsByNode[node])
	c.used[node] = used
	return used
}

// RequestsByNode sums, for each node of podsByNode, the requests of its pods (component-helpers'
// PodRequests, as the NodeResourcesFit filter counts them): what Snapshot.RequestedByNode
// holds. A Collector that shares one PodsByNode among many Snapshots computes it once.
func RequestsByNode(podsByNode map[string][]*corev1.Pod) map[string]corev1.ResourceList {
	out := make(map[string]corev1.ResourceList, len(podsByNode))
	for node, pods := range podsByNode {
		out[node] = podsRequests(pods)
	}
	return out
}

// podsRequests sums the requests of pods.
func podsRequests(pods []*corev1.Pod) corev1.ResourceList {
	used := corev1.ResourceList{}
	for _, p := range pods {
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	return used
}

// demand is the pod-side input of the verdicts, computed once.
type demand struct {
	pod *corev1.Pod
	// requests is component-helpers' PodRequests: containers, init containers (sidecars
	// included), pod-level resources and overhead.
	requests corev1.ResourceList
	// hostPorts are the host ports the pod binds (containers and sidecar init containers).
	hostPorts []corev1.ContainerPort
	// affinity is nodeSelector plus required node affinity.
	affinity nodeaffinity.RequiredNodeAffinity
	// pvNodeAffinity are the node affinities of the PVs the pod's own bound claims use, by PV
	// name.
	pvNodeAffinity map[string]*corev1.NodeSelector
}

func newDemand(s *Snapshot) *demand {
	pod := s.Pod
	d := &demand{
		pod:            pod,
		requests:       resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
		hostPorts:      hostPorts(pod),
		affinity:       nodeaffinity.GetRequiredNodeAffinity(pod),
		pvNodeAffinity: map[string]*corev1.NodeSelector{},
	}
	for _, pvc := range s.PVCs { // the pod's own claims (s.PVs also holds other pods' PVs)
		if pvc == nil || pvc.Spec.VolumeName == "" {
			continue
		}
		if pv := s.PVs[pvc.Spec.VolumeName]; pv != nil && pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
			d.pvNodeAffinity[pv.Name] = pv.Spec.NodeAffinity.Required
		}
	}
	return d
}

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

// nodeVerdicts returns one verdict per node of the cluster, sorted by node name; spread is the
// pod's topology spread state over c (newSpreadState).
func nodeVerdicts(d *demand, c *cluster, spread *spreadState) []NodeVerdict {
	out := make([]NodeVerdict, 0, len(c.nodes))
	for _, n := range c.nodes {
		reasons := nodeReasons(d, n, c, spread)
		out = append(out, NodeVerdict{Node: n.Name, Fits: len(reasons) == 0, Reasons: reasons})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// nodeReasons returns every reason node n rejects the pod, in filter order.
func nodeReasons(d *demand, n *corev1.Node, c *cluster, spread *spreadState) []NodeReason {
	var reasons []NodeReason
	reasons = append(reasons, cordonReasons(d, n)...)
	reasons = append(reasons, taintReasons(d, n)...)
	reasons = append(reasons, readyReasons(n)...)
	reasons = append(reasons, affinityReasons(d, n)...)
	reasons = append(reasons, hostPortReasons(d, n, c.podsByNode[n.Name])...)
	reasons = append(reasons, resourceReasons(d, n, len(c.podsByNode[n.Name]), c.usedOn(n.Name))...)
	reasons = append(reasons, c.volumeLimitReasons(d, n)...)
	reasons = append(reasons, volumeAffinityReasons(d, n)...)
	reasons = append(reasons, c.provisioningReasons(d, n)...)
	reasons = append(reasons, spread.reasons(n)...)
	reasons = append(reasons, interPodReasons(d, n, c)...)
	return reasons
}

// matchesTopology reports whether node labels match any of a StorageClass's allowedTopologies
// terms (ORed; within a term every expression must hold: the label has one of its values), as
// the PV controller and the scheduler read them.
func matchesTopology(terms []corev1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	for _, term := range terms {
		if len(term.MatchLabelExpressions) == 0 {
			continue // an empty term selects nothing
		}
		ok := true
		for _, e := range term.MatchLabelExpressions {
			if v, has := nodeLabels[e.Key]; !has || !slices.Contains(e.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// withNode returns a copy of c in which the node named like changed replaces it (the pods
// stay): the cluster as it would be after a node fix.
func (c *cluster) withNode(changed *corev1.Node) *cluster {
	out := *c
	out.nodes = make([]*corev1.Node, len(c.nodes))
	out.nodeByName = make(map[string]*corev1.Node, len(c.nodeByName))
	for i, n := range c.nodes {
		if n.Name == changed.Name {
			n = changed
		}
		out.nodes[i] = n
		out.nodeByName[n.Name] = n
	}
	return &out
}

// provisioningReasons judges n like VolumeBinding does for the pod's claims that wait for a
// first consumer: a dynamically provisioned volume can only be made where the StorageClass's
// allowedTopologies allow.
func (c *cluster) provisioningReasons(d *demand, n *corev1.Node) []NodeReason {
	var out []NodeReason
	for _, name := range sortedKeys(c.snap.PVCs) {
		pvc := c.snap.PVCs[name]
		if pvc == nil || pvc.Spec.VolumeName != "" {
			continue
		}
		sc := claimClass(c.snap, pvc)
		if sc == nil || bindingMode(sc) != storagev1.VolumeBindingWaitForFirstConsumer || len(sc.AllowedTopologies) == 0 {
			continue
		}
		if !matchesTopology(sc.AllowedTopologies, n.Labels) {
			out = append(out, NodeReason{Code: CodePVCUnbound,
				Message: fmt.Sprintf("StorageClass %s's allowedTopologies exclude the node, so claim %s cannot be provisioned there", sc.Name, name)})
		}
	}
	return out
}

// cordonReasons reports a cordoned node (spec.unschedulable) unless the pod tolerates the
// node.kubernetes.io/unschedulable taint, as the NodeUnschedulable plugin does.
func cordonReasons(d *demand, n *corev1.Node) []NodeReason {
	if !n.Spec.Unschedulable {
		return nil
	}
	taint := &corev1.Taint{Key: unschedulableTaintKey, Effect: corev1.TaintEffectNoSchedule}
	if corev1helpers.TolerationsTolerateTaint(klog.Background(), d.pod.Spec.Tolerations, taint, false) {
		return nil
	}
	return []NodeReason{{Code: CodeNodeUnschedulable, Message: "cordoned (spec.unschedulable)"}}
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

// affinityReasons reports a node that the pod's nodeSelector or required node affinity
// rejects, naming the nodeSelector labels the node lacks.
func affinityReasons(d *demand, n *corev1.Node) []NodeReason {
	if ok, _ := d.affinity.Match(n); ok {
		return nil
	}
	var missing []string
	for _, k := range sortedKeys(d.pod.Spec.NodeSelector) {
		want := d.pod.Spec.NodeSelector[k]
		if have, ok := n.Labels[k]; !ok {
			missing = append(missing, fmt.Sprintf("nodeSelector %s=%s (node has no %s label)", k, want, k))
		} else if have != want {
			missing = append(missing, fmt.Sprintf("nodeSelector %s=%s (node has %s=%s)", k, want, k, have))
		}
	}
	if len(missing) == 0 {
		return []NodeReason{{Code: CodeNodeSelectorMismatch, Message: "required node affinity does not match the node's labels"}}
	}
	return []NodeReason{{Code: CodeNodeSelectorMismatch, Message: strings.Join(missing, "; ")}}
}

// hostPortReasons reports each host port of the pod that a pod already on the node holds
// (same protocol and port, overlapping host IP), naming the holder.
func hostPortReasons(d *demand, n *corev1.Node, pods []*corev1.Pod) []NodeReason {
	var out []NodeReason
	for _, want := range d.hostPorts {
		for _, p := range pods {
			if held, ok := holdsPort(p, want); ok {
				out = append(out, NodeReason{
					Code:    CodeHostPortConflict,
					Message: fmt.Sprintf("hostPort %s held by pod %s/%s", portString(held), p.Namespace, p.Name),
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

// resourceReasons compares the pod's requests with what the node has left (allocatable minus
// used, the requests of the pods bound to it, of which there are pods), like NodeResourcesFit:
// the pod count first, then every requested resource that does not fit, with amounts in base
// units.
func resourceReasons(d *demand, n *corev1.Node, pods int, used corev1.ResourceList) []NodeReason {
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

// volumeLimitReasons judges n like the NodeVolumeLimits filter: for each CSI driver with an
// attachable-volume limit on the node (CSINode spec.drivers[].allocatable.count), the distinct
// volumes the node's pods already use plus the pod's new ones must not exceed it. It says
// nothing when the CSINodes were not collected (triage.NeedsVolumeLimits).
func (c *cluster) volumeLimitReasons(d *demand, n *corev1.Node) []NodeReason {
	csiNode := c.snap.CSINodes[n.Name]
	if csiNode == nil {
		return nil
	}
	want := c.csiVolumes(d.pod, true)
	if len(want) == 0 {
		return nil
	}
	inUse := map[string]sets.Set[string]{}
	for _, p := range c.podsByNode[n.Name] {
		for driver, ids := range c.csiVolumes(p, false) {
			if inUse[driver] == nil {
				inUse[driver] = sets.New[string]()
			}
			inUse[driver] = inUse[driver].Union(ids)
		}
	}
	var out []NodeReason
	for _, drv := range csiNode.Spec.Drivers {
		ids, ok := want[drv.Name]
		if !ok || drv.Allocatable == nil || drv.Allocatable.Count == nil {
			continue
		}
		limit := int64(*drv.Allocatable.Count)
		used := int64(inUse[drv.Name].Len())
		added := int64(ids.Difference(inUse[drv.Name]).Len())
		if added == 0 || used+added <= limit {
			continue
		}
		out = append(out, NodeReason{
			Code: CodeVolumeAttachLimit,
			Message: fmt.Sprintf("attachable-volume limit of %s: %d of %d volumes already in use, the pod needs %d more (CSINode allocatable.count %d)",
				drv.Name, used, limit, added, limit),
			Resource:    drv.Name,
			Requested:   added,
			Used:        used,
			Allocatable: limit,
		})
	}
	return out
}

// csiVolumes returns the CSI volumes pod mounts, by driver, as the NodeVolumeLimits filter
// identifies them: a bound claim by its PV's volumeHandle, an unbound claim by the claim (its
// driver is the StorageClass provisioner), an inline CSI volume by pod and volume. self says
// the pod is the one under diagnosis (its claims are in Snapshot.PVCs, others' in NodeClaims).
func (c *cluster) csiVolumes(pod *corev1.Pod, self bool) map[string]sets.Set[string] {
	out := map[string]sets.Set[string]{}
	add := func(driver, id string) {
		if out[driver] == nil {
			out[driver] = sets.New[string]()
		}
		out[driver].Insert(id)
	}
	for _, v := range pod.Spec.Volumes {
		claimName := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claimName = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claimName = pod.Name + "-" + v.Name
		case v.CSI != nil:
			add(v.CSI.Driver, pod.Namespace+"/"+pod.Name+"/"+v.Name)
			continue
		default:
			continue
		}
		var pvc *corev1.PersistentVolumeClaim
		if self {
			pvc = c.snap.PVCs[claimName]
		} else {
			pvc = c.snap.NodeClaims[pod.Namespace+"/"+claimName]
		}
		if pvc == nil {
			continue
		}
		if pv := c.snap.PVs[pvc.Spec.VolumeName]; pvc.Spec.VolumeName != "" && pv != nil {
			if pv.Spec.CSI != nil {
				add(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
			}
			continue
		}
		if sc := claimClass(c.snap, pvc); sc != nil {
			add(sc.Provisioner, "claim:"+pvc.Namespace+"/"+pvc.Name)
		}
	}
	return out
}

// claimClass returns the StorageClass a claim uses: the one it names, else the default class
// (storageclass.kubernetes.io/is-default-class) for a claim that names none; nil when unknown.
func claimClass(s *Snapshot, pvc *corev1.PersistentVolumeClaim) *storagev1.StorageClass {
	if pvc.Spec.StorageClassName != nil {
		return s.StorageClasses[*pvc.Spec.StorageClassName]
	}
	for _, name := range sortedKeys(s.StorageClasses) {
		if sc := s.StorageClasses[name]; sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			return sc
		}
	}
	return nil
}

// volumeAffinityReasons reports a node that the node affinity of a PV the pod's claims are
// bound to does not match (VolumeBinding's "volume node affinity conflict").
func volumeAffinityReasons(d *demand, n *corev1.Node) []NodeReason {
	var out []NodeReason
	for _, name := range sortedKeys(d.pvNodeAffinity) {
		sel, err := nodeaffinity.NewNodeSelector(d.pvNodeAffinity[name])
		if err != nil || sel.Match(n) {
			continue
		}
		out = append(out, NodeReason{
			Code:    CodeVolumeNodeAffinityConflict,
			Message: fmt.Sprintf("PersistentVolume %s's node affinity does not match the node", name),
		})
	}
	return out
}

// spreadState is PodTopologySpread's pre-filter state: for each DoNotSchedule constraint, the
// number of matching pods in each topology domain of the eligible nodes.
type spreadState struct {
	pod         *corev1.Pod
	constraints []spreadConstraint
}

type spreadConstraint struct {
	src      corev1.TopologySpreadConstraint
	selector labels.Selector
	// counts is the number of matching pods per domain (topology value) of the nodes the
	// constraint's node inclusion policies admit; domains lists those nodes per domain.
	counts   map[string]int
	domains  map[string][]string
	minMatch int
}

// newSpreadState counts matching pods per domain. Eligible nodes have every constraint's
// topology key and pass the pod's required node affinity (the default nodeAffinityPolicy
// Honor; nodeTaintsPolicy Honor also skips nodes with untolerated taints).
func newSpreadState(d *demand, c *cluster) *spreadState {
	st := &spreadState{pod: d.pod}
	for _, tsc := range d.pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
		if err != nil {
			continue
		}
		st.constraints = append(st.constraints, spreadConstraint{src: tsc, selector: sel, counts: map[string]int{}, domains: map[string][]string{}})
	}
	if len(st.constraints) == 0 {
		return st
	}
	for _, n := range c.nodes {
		if !hasAllKeys(n, st.constraints) {
			continue
		}
		for i := range st.constraints {
			sc := &st.constraints[i]
			if !spreadEligible(d, n, sc.src) {
				continue
			}
			value := n.Labels[sc.src.TopologyKey]
			count := 0
			if !sc.selector.Empty() {
				for _, p := range c.podsByNode[n.Name] {
					if p.DeletionTimestamp == nil && p.Namespace == d.pod.Namespace && sc.selector.Matches(labels.Set(p.Labels)) {
						count++
					}
				}
			}
			sc.counts[value] += count
			sc.domains[value] = append(sc.domains[value], n.Name)
		}
	}
	for i := range st.constraints {
		sc := &st.constraints[i]
		first := true
		for _, n := range sc.counts {
			if first || n < sc.minMatch {
				sc.minMatch, first = n, false
			}
		}
		if sc.src.MinDomains != nil && len(sc.counts) < int(*sc.src.MinDomains) {
			sc.minMatch = 0
		}
	}
	return st
}

func hasAllKeys(n *corev1.Node, cs []spreadConstraint) bool {
	for _, c := range cs {
		if _, ok := n.Labels[c.src.TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// spreadEligible applies a constraint's node inclusion policies to n.
func spreadEligible(d *demand, n *corev1.Node, tsc corev1.TopologySpreadConstraint) bool {
	if tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		if ok, _ := d.affinity.Match(n); !ok {
			return false
		}
	}
	if tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, d.pod.Spec.Tolerations,
			func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}, false)
		if untolerated {
			return false
		}
	}
	return true
}

// reasons judges n against every constraint: the node lacks the topology key, or placing the
// pod there would make its domain exceed maxSkew over the least loaded domain.
func (st *spreadState) reasons(n *corev1.Node) []NodeReason {
	var out []NodeReason
	for _, sc := range st.constraints {
		value, ok := n.Labels[sc.src.TopologyKey]
		if !ok {
			out = append(out, NodeReason{
				Code:    CodeTopologySpreadUnsatisfiable,
				Message: fmt.Sprintf("topology spread: node has no %s label", sc.src.TopologyKey),
			})
			continue
		}
		self := 0
		if sc.selector.Matches(labels.Set(st.pod.Labels)) {
			self = 1
		}
		skew := sc.counts[value] + self - sc.minMatch
		if skew > int(sc.src.MaxSkew) {
			out = append(out, NodeReason{
				Code: CodeTopologySpreadUnsatisfiable,
				Message: fmt.Sprintf("topology spread on %s: %s=%s already has %d matching pod(s), the emptiest domain %d; placing it here gives skew %d > maxSkew %d",
					sc.src.TopologyKey, sc.src.TopologyKey, value, sc.counts[value], sc.minMatch, skew, sc.src.MaxSkew),
			})
		}
	}
	return out
}

// interPodReasons judges n like the InterPodAffinity filter: the pod's required affinity terms
// need a matching pod in n's topology domain (unless no pod matches anywhere and the pod matches
// its own term, so the first replica can start), its required anti-affinity terms forbid one,
// and existing pods' required anti-affinity terms may forbid the pod.
func interPodReasons(d *demand, n *corev1.Node, c *cluster) []NodeReason {
	var out []NodeReason
	pod := d.pod
	aff := pod.Spec.Affinity
	if aff != nil && aff.PodAffinity != nil {
		for _, term := range aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			value, ok := n.Labels[term.TopologyKey]
			if ok && c.anyMatchingPod(pod, term, func(node *corev1.Node) bool { return node.Labels[term.TopologyKey] == value }) {
				continue
			}
			if !c.anyMatchingPod(pod, term, nil) && termMatches(pod, term, pod) {
				continue // self-affinity: the first pod of a group may go anywhere
			}
			out = append(out, NodeReason{
				Code:    CodePodAffinityUnsatisfiable,
				Message: fmt.Sprintf("pod affinity: no pod matching %s in this node's %s domain", selectorString(term.LabelSelector), term.TopologyKey),
			})
		}
	}
	if aff != nil && aff.PodAntiAffinity != nil {
		for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			value, ok := n.Labels[term.TopologyKey]
			if !ok {
				continue
			}
			if holder := c.firstMatchingPod(pod, term, func(node *corev1.Node) bool { return node.Labels[term.TopologyKey] == value }); holder != nil {
				out = append(out, NodeReason{
					Code: CodePodAntiAffinityUnsatisfiable,
					Message: fmt.Sprintf("pod anti-affinity: pod %s/%s matches %s in the same %s=%s domain",
						holder.Namespace, holder.Name, selectorString(term.LabelSelector), term.TopologyKey, value),
				})
			}
		}
	}
	// Existing pods' anti-affinity towards this pod.
	for _, bp := range c.antiAffinity {
		p, other := bp.pod, bp.node
		for _, term := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			value, ok := n.Labels[term.TopologyKey]
			if !ok || other.Labels[term.TopologyKey] != value || !termMatches(p, term, pod) {
				continue
			}
			out = append(out, NodeReason{
				Code: CodePodAntiAffinityUnsatisfiable,
				Message: fmt.Sprintf("existing pod %s/%s's anti-affinity rejects this pod in the %s=%s domain",
					p.Namespace, p.Name, term.TopologyKey, value),
			})
		}
	}
	return out
}

// anyMatchingPod reports whether a bound pod on a node accepted by inDomain (all nodes when
// nil) matches term as seen from owner.
func (c *cluster) anyMatchingPod(owner *corev1.Pod, term corev1.PodAffinityTerm, inDomain func(*corev1.Node) bool) bool {
	return c.firstMatchingPod(owner, term, inDomain) != nil
}

func (c *cluster) firstMatchingPod(owner *corev1.Pod, term corev1.PodAffinityTerm, inDomain func(*corev1.Node) bool) *corev1.Pod {
	for _, n := range c.nodes {
		if inDomain != nil && !inDomain(n) {
			continue
		}
		for _, p := range c.podsByNode[n.Name] {
			if p.DeletionTimestamp == nil && termMatches(owner, term, p) {
				return p
			}
		}
	}
	return nil
}

// termMatches reports whether candidate matches owner's affinity term: its namespace is one the
// term covers and its labels match the term's selector. The term covers its namespaces list,
// all namespaces for an empty namespaceSelector, else owner's namespace. A non-empty
// namespaceSelector is matched against the kubernetes.io/metadata.name label only (the
// Snapshot holds no Namespace objects).
func termMatches(owner *corev1.Pod, term corev1.PodAffinityTerm, candidate *corev1.Pod) bool {
	nsOK := false
	switch {
	case len(term.Namespaces) == 0 && term.NamespaceSelector == nil:
		nsOK = candidate.Namespace == owner.Namespace
	default:
		nsOK = sets.New(term.Namespaces...).Has(candidate.Namespace)
		if !nsOK && term.NamespaceSelector != nil {
			if sel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector); err == nil {
				nsOK = sel.Empty() || sel.Matches(labels.Set{"kubernetes.io/metadata.name": candidate.Namespace})
			}
		}
	}
	if !nsOK {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(candidate.Labels))
}

// selectorString renders a label selector as kubectl's -l syntax.
func selectorString(ls *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || sel.Empty() {
		return "any labels"
	}
	return sel.String()
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
