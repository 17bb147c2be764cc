package triage

import corev1 "k8s.io/api/core/v1"

// NodePods is the pods bound to the nodes of a Snapshot that still hold resources (phase
// neither Succeeded nor Failed), without the pod under diagnosis, read one node at a time.
// The node table of an unscheduled pod judges every node, and a large cluster has over
// 100,000 pods: the cached Collector builds the pods of a node when a rule asks for them
// (from its lean pod cache, collect/leanpod.go), and answers Count and Where without
// building the others, so one question holds the pods of a few nodes at a time, not of the
// whole cluster. A NodePods is read-only and safe for concurrent use; every call on the same
// node returns the same pods.
type NodePods interface {
	// On returns the pods bound to node, sorted by namespace and name. They may be built on
	// each call: read them, do not keep them beyond the judgement of that node.
	On(node string) []*corev1.Pod
	// Count is len(On(node)), without building the pods.
	Count(node string) int
	// Where returns the pods of On(node) that keep accepts, building only those. keep sees
	// each pod as a scratch value that it must not keep or change, with its metadata
	// (namespace, name, labels, owner references) and spec but no status: enough to find the
	// pods with required anti-affinity, or a workload's own pods, without building the
	// others.
	Where(node string, keep func(*corev1.Pod) bool) []*corev1.Pod
}

// PodMap is a NodePods held whole: pods by node name (Snapshot.PodsByNode).
type PodMap map[string][]*corev1.Pod

// On implements NodePods.
func (m PodMap) On(node string) []*corev1.Pod { return m[node] }

// Count implements NodePods.
func (m PodMap) Count(node string) int { return len(m[node]) }

// Where implements NodePods.
func (m PodMap) Where(node string, keep func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range m[node] {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// HasRequiredAntiAffinity reports whether spec has a required pod anti-affinity term.
func HasRequiredAntiAffinity(spec *corev1.PodSpec) bool {
	a := spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// Bound returns the pods bound to the Snapshot's nodes: BoundPods when set, else PodsByNode.
func (s *Snapshot) Bound() NodePods {
	if s.BoundPods != nil {
		return s.BoundPods
	}
	return PodMap(s.PodsByNode)
}
