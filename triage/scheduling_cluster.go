package triage

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// This file holds what the filters judge a node with, the way the scheduler's framework hands
// each Filter a NodeInfo and the cycle's pre-filter state: the pod's side (demand), the
// cluster's side (cluster) and the verdict table built from them (nodeVerdicts). Taints, node
// affinity and pod requests come from k8s.io/component-helpers, the code the plugins call
// themselves, so the table agrees with them.

// cluster is what the verdicts read besides the node itself: every node and the pods bound to
// each, from the Snapshot.
type cluster struct {
	nodes      []*corev1.Node
	nodeByName map[string]*corev1.Node
	// pods are the pods bound to each node (Snapshot.Bound), read node by node.
	pods NodePods
	// snap holds the storage parts the volume-limit check reads: CSINodes, NodeClaims, PVs,
	// StorageClasses (nil when not collected).
	snap *Snapshot
	// antiAffinity are the bound pods with required pod anti-affinity, with their node: the
	// only pods whose anti-affinity can reject the pod (found once, not per node).
	antiAffinity []boundPod
	// used memoises the requests of the pods on each node (RequestsByNode), unless the
	// Snapshot carries them (Snapshot.RequestedByNode).
	used map[string]corev1.ResourceList
	// spread memoises PodTopologySpread's pre-filter state for the pod under diagnosis (the
	// only pod a cluster judges), see spreadFor.
	spread *spreadState
}

// boundPod is a pod and the node it is bound to.
type boundPod struct {
	pod  *corev1.Pod
	node *corev1.Node
}

func newCluster(s *Snapshot) *cluster {
	return newClusterOf(s, s.Bound())
}

// newClusterOf is newCluster with pods in place of the Snapshot's bound pods.
func newClusterOf(s *Snapshot, pods NodePods) *cluster {
	c := &cluster{nodes: s.Nodes, nodeByName: map[string]*corev1.Node{}, pods: pods, snap: s, used: map[string]corev1.ResourceList{}}
	for _, n := range s.Nodes {
		c.nodeByName[n.Name] = n
		for _, p := range pods.Where(n.Name, func(p *corev1.Pod) bool { return HasRequiredAntiAffinity(&p.Spec) }) {
			c.antiAffinity = append(c.antiAffinity, boundPod{pod: p, node: n})
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
	used := podsRequests(c.pods.On(node))
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
	// pvZones are the zone and region labels of those PVs, by PV name (VolumeZone).
	pvZones map[string][]pvTopology
}

func newDemand(s *Snapshot) *demand {
	pod := s.Pod
	d := &demand{
		pod:            pod,
		requests:       resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}),
		hostPorts:      hostPorts(pod),
		affinity:       nodeaffinity.GetRequiredNodeAffinity(pod),
		pvNodeAffinity: map[string]*corev1.NodeSelector{},
		pvZones:        map[string][]pvTopology{},
	}
	for _, pvc := range s.PVCs { // the pod's own claims (s.PVs also holds other pods' PVs)
		if pvc == nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pv := s.PVs[pvc.Spec.VolumeName]
		if pv == nil {
			continue
		}
		if pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil {
			d.pvNodeAffinity[pv.Name] = pv.Spec.NodeAffinity.Required
		}
		if zones := pvTopologies(pv); len(zones) > 0 {
			d.pvZones[pv.Name] = zones
		}
	}
	return d
}

// nodeVerdicts returns one verdict per node of the cluster, sorted by node name.
func nodeVerdicts(d *demand, c *cluster) []NodeVerdict {
	out := make([]NodeVerdict, 0, len(c.nodes))
	for _, n := range c.nodes {
		reasons := nodeReasons(d, n, c)
		out = append(out, NodeVerdict{Node: n.Name, Fits: len(reasons) == 0, Reasons: reasons})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// withNode returns a copy of c in which the node named like changed replaces it (the pods
// stay): the cluster as it would be after a node fix.
func (c *cluster) withNode(changed *corev1.Node) *cluster {
	out := *c
	out.spread = nil // the changed node may count as another domain
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

// spreadFor returns the pod's topology spread state over c (newSpreadState), computed once.
func (c *cluster) spreadFor(d *demand) *spreadState {
	if c.spread == nil {
		c.spread = newSpreadState(d, c)
	}
	return c.spread
}
