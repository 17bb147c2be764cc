package triage

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// This file is the VolumeBinding filter: a bound PersistentVolume's node affinity must match
// the node, and a claim that waits for its first consumer must be provisionable there. Its
// PreFilter verdicts on missing and unbound claims are pod-level (claimFindings, claims.go).

// volumeBindingReasons judges n like the VolumeBinding filter: the node affinity of the PVs the
// pod's claims are bound to (volumeAffinityReasons), then where the claims that wait for a
// first consumer can be provisioned (provisioningReasons).
func volumeBindingReasons(d *demand, n *corev1.Node, c *cluster) []NodeReason {
	return append(volumeAffinityReasons(d, n), c.provisioningReasons(d, n)...)
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

// describeVolumeBinding explains a bound PersistentVolume whose node affinity rules nodes out;
// other VolumeBinding reasons (a WaitForFirstConsumer claim whose class's allowedTopologies
// exclude nodes) get the generic prose.
func (v *schedulingView) describeVolumeBinding(f *Finding) {
	if f.Code != CodeVolumeNodeAffinityConflict {
		v.describeGeneric(f)
		return
	}
	nodes, reasons := v.nodesWith(f.Code)
	f.Summary = fmt.Sprintf("The pod's bound PersistentVolume can only be used on nodes its node affinity allows, and that rules out %s.%s", v.ofNodes(len(nodes)), v.forExample(nodes, reasons))
	v.nodeEvidence(f, nodes, reasons, "spec.nodeAffinity")
	for _, pv := range sortedKeys(v.demand.pvNodeAffinity) {
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl get pv %s -o jsonpath='{.spec.nodeAffinity}'", shellQuote(pv)))
	}
	f.Fix = append(f.Fix, "Bring back a node in the volume's zone/host (the volume cannot move), or restore the data to a new volume where the pod can run.")
}
