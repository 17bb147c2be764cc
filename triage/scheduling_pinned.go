package triage

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// pinnedNode returns the one node pod's required node affinity allows by name, "" when there
// is none: the DaemonSet controller pins each of its pods to its node with a matchFields term
// on metadata.name (and a pod may be written that way by hand). Such a pod can only ever run
// there, so every fix is about that node.
func pinnedNode(pod *corev1.Pod) string {
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 {
		return ""
	}
	for _, f := range terms[0].MatchFields {
		if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
			return f.Values[0]
		}
	}
	return ""
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
	return len(nodeReasons(&d, n, v.cluster, v.spread)) == 0
}
