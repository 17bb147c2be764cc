package triage

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// This file is the VolumeBinding filter: a bound PersistentVolume's node affinity must match
// the node, and a claim that waits for its first consumer must be provisionable there; and the
// VolumeZone filter: a bound PV's zone and region labels must match the node's. Their PreFilter
// verdicts on missing and unbound claims are pod-level (claimFindings, claims.go). The prose
// tells apart why a volume rules nodes out: no node is left where it is, the pod's own affinity
// excludes where it is (a claim bound Immediate, before the pod was placed), or two claims are
// in different zones; only the first is fixed by bringing back a node there.

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

// describeVolumeBinding explains bound volumes that rule nodes out (volume-node-affinity-
// conflict), by why: no node is left where a volume is (bring one back there, or restore the
// data elsewhere), the pod's own nodeSelector or affinity excludes where a volume is, or two
// claims sit in different zones. For the last two the fix is the binding mode: a StorageClass
// with volumeBindingMode WaitForFirstConsumer, or allowedTopologies, and a claim recreated
// where the pod may run; unless the class already waits for the first consumer, which then
// placed the volume for an earlier pod. Other VolumeBinding reasons (a WaitForFirstConsumer
// claim whose class's allowedTopologies exclude nodes) get the generic prose.
func (v *schedulingView) describeVolumeBinding(f *Finding) {
	if f.Code != CodeVolumeNodeAffinityConflict {
		v.describeGeneric(f)
		return
	}
	nodes, reasons := v.nodesWith(f.Code)
	v.nodeEvidence(f, nodes, reasons, "spec.nodeAffinity")
	vols := v.boundVolumes()
	for _, bv := range vols {
		f.Evidence = append(f.Evidence, Evidence{Object: "PersistentVolume " + bv.pv, Field: bv.field, Message: bv.where})
		if bv.class != nil {
			f.Evidence = append(f.Evidence, Evidence{Object: "StorageClass " + bv.class.Name, Field: "volumeBindingMode", Message: string(bindingMode(bv.class))})
		}
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl get pv %s -o jsonpath='{.spec.nodeAffinity}{\"\\n\"}{.metadata.labels}{\"\\n\"}'", shellQuote(bv.pv)))
	}
	var gone, excluded []boundVolume
	for _, bv := range vols {
		switch {
		case len(bv.nodes) == 0:
			gone = append(gone, bv)
		case !slices.ContainsFunc(bv.nodes, v.selectorAllows):
			excluded = append(excluded, bv)
		}
	}
	apart := len(vols) > 1 && !slices.ContainsFunc(v.cluster.nodes, func(n *corev1.Node) bool {
		return !slices.ContainsFunc(vols, func(bv boundVolume) bool { return !slices.Contains(bv.nodes, n.Name) })
	})
	switch {
	case len(gone) > 0:
		bv := gone[0]
		f.Summary = fmt.Sprintf("Claim %s is bound to PersistentVolume %s, which can only be used on nodes with %s, and no node has that: the node or zone it was made for is gone (a volume cannot move). It rules out %s.",
			bv.claim, bv.pv, bv.where, v.ofNodes(len(nodes)))
		f.Fix = append(f.Fix, fmt.Sprintf("Bring back a node with %s (scale up the node group there), or restore the data of %s into a new claim where the pod can run (VolumeSnapshot, then a claim from it), and point the pod at that claim.", bv.where, bv.pv))
	case len(excluded) > 0:
		bv := excluded[0]
		f.Summary = fmt.Sprintf("Claim %s is bound to PersistentVolume %s, which can only be used on nodes with %s, and the pod's own nodeSelector or node affinity excludes all of them (%s).",
			bv.claim, bv.pv, bv.where, joinLimited(bv.nodes, 3))
		f.Summary += bv.howBound(false)
		f.Fix = append(f.Fix, v.bindingModeFixes(bv, "recreate claim "+bv.claim+" with it", []string{bv.pv}, nil)...)
		f.Fix = append(f.Fix, fmt.Sprintf("Or let the pod's nodeSelector or node affinity allow %s, if the pod may run there.", bv.where))
	case apart:
		var parts []string
		for _, bv := range vols {
			parts = append(parts, fmt.Sprintf("%s (PersistentVolume %s, %s)", bv.claim, bv.pv, bv.where))
		}
		f.Summary = fmt.Sprintf("The pod's claims are bound to volumes in different places, so no node can use them all: %s.", strings.Join(parts, "; "))
		f.Summary += vols[0].howBound(true)
		var moved []string
		for _, bv := range vols[1:] {
			moved = append(moved, bv.pv)
		}
		f.Fix = append(f.Fix, v.bindingModeFixes(vols[0], fmt.Sprintf("recreate the other claims with it so they follow claim %s", vols[0].claim), moved, vols[0].nodes)...)
	default:
		f.Summary = fmt.Sprintf("The pod's bound PersistentVolume can only be used on nodes its node affinity allows, and that rules out %s.%s", v.ofNodes(len(nodes)), v.forExample(nodes, reasons))
		if len(vols) > 0 {
			f.Summary += fmt.Sprintf(" The nodes it allows (%s) reject the pod for other reasons: see the node table.", joinLimited(vols[0].nodes, 3))
		}
	}
}

// boundVolume is one of the pod's claims bound to a PV that only some nodes may use.
type boundVolume struct {
	claim, pv string
	// where renders what the PV requires of a node: its node affinity ("topology.kubernetes.io/
	// zone in (eu-west-1a)") or zone labels; field is where that was read.
	where, field string
	// nodes are the nodes of the cluster the PV allows.
	nodes []string
	// zoneKey is the node label the PV's requirement is about ("" when it has several).
	zoneKey string
	// class is the claim's StorageClass, nil when unknown (not read, or none).
	class *storagev1.StorageClass
}

// boundVolumes returns the pod's claims bound to PVs with node affinity or zone labels, by
// claim name.
func (v *schedulingView) boundVolumes() []boundVolume {
	var out []boundVolume
	for _, claim := range sortedKeys(v.snap.PVCs) {
		pvc := v.snap.PVCs[claim]
		if pvc == nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pvName := pvc.Spec.VolumeName
		aff, zones := v.demand.pvNodeAffinity[pvName], v.demand.pvZones[pvName]
		if aff == nil && len(zones) == 0 {
			continue
		}
		bv := boundVolume{claim: claim, pv: pvName, class: claimClass(v.snap, pvc)}
		one := &demand{pod: v.pod, pvNodeAffinity: map[string]*corev1.NodeSelector{}, pvZones: map[string][]pvTopology{}}
		if aff != nil {
			bv.where, bv.field, bv.zoneKey = nodeSelectorString(aff), "spec.nodeAffinity", selectorKey(aff)
			one.pvNodeAffinity[pvName] = aff
		} else {
			var parts []string
			for _, z := range zones {
				parts = append(parts, z.key+" in ("+strings.Join(z.values, ", ")+")")
			}
			bv.where, bv.field = strings.Join(parts, ", "), "metadata.labels"
			if len(zones) == 1 {
				bv.zoneKey = gaTopologyLabel(zones[0].key)
			}
		}
		one.pvZones[pvName] = zones
		for _, n := range v.cluster.nodes {
			if len(volumeAffinityReasons(one, n)) == 0 && len(volumeZoneReasons(one, n, nil)) == 0 {
				bv.nodes = append(bv.nodes, n.Name)
			}
		}
		out = append(out, bv)
	}
	return out
}

// howBound says how the volume came to be where it is, from its claim's StorageClass: bound
// Immediate (before the pod was placed), or for an earlier first consumer; several says the
// claims' volumes are in different places.
func (bv boundVolume) howBound(several bool) string {
	switch {
	case bv.class == nil:
		return ""
	case bindingMode(bv.class) == storagev1.VolumeBindingWaitForFirstConsumer && several:
		return fmt.Sprintf(" Their StorageClass %s already waits for the first consumer, so they were provisioned for different pods.", bv.class.Name)
	case bindingMode(bv.class) == storagev1.VolumeBindingWaitForFirstConsumer:
		return fmt.Sprintf(" Its StorageClass %s already waits for the first consumer, so the volume was provisioned where an earlier pod was placed; the pod's placement rules have changed since.", bv.class.Name)
	case several:
		return fmt.Sprintf(" Claim %s's StorageClass %s binds Immediate: each volume was provisioned on its own before any pod was scheduled, in a zone chosen without the pod.", bv.claim, bv.class.Name)
	default:
		return fmt.Sprintf(" Its StorageClass %s binds Immediate, so the volume was provisioned before any pod was scheduled, in a place chosen without the pod's rules.", bv.class.Name)
	}
}

// bindingModeFixes is the fix for volumes provisioned where the pod may not run: a StorageClass
// that waits for the first consumer (or allowedTopologies limited to where the pod may run,
// named from the nodes its selector allows, and within (when set) the nodes of the volume the
// others must follow), then what to do with the claims (then), and that the data of the PVs
// moved has to be copied. A class that already waits for the first consumer gets no such
// advice: the data has to move.
func (v *schedulingView) bindingModeFixes(bv boundVolume, then string, moved, within []string) []string {
	if bv.class != nil && bindingMode(bv.class) == storagev1.VolumeBindingWaitForFirstConsumer {
		return []string{fmt.Sprintf("The binding mode is already WaitForFirstConsumer: move the data of %s into a new claim where the pod may run (VolumeSnapshot, then a claim from it), and point the pod at it.", strings.Join(moved, ", "))}
	}
	like, show := "the claim's", "kubectl get storageclass -o yaml   # the classes to copy from"
	if bv.class != nil {
		like, show = bv.class.Name, fmt.Sprintf("kubectl get storageclass %s -o yaml   # the class to copy", shellQuote(bv.class.Name))
	}
	allowed := ""
	if bv.zoneKey != "" {
		var values []string
		for _, n := range v.cluster.nodes {
			if val, ok := n.Labels[bv.zoneKey]; ok && v.selectorAllows(n.Name) && (within == nil || slices.Contains(within, n.Name)) && !slices.Contains(values, val) {
				values = append(values, val)
			}
		}
		sort.Strings(values)
		if len(values) > 0 {
			allowed = fmt.Sprintf(" (%s in %s)", bv.zoneKey, strings.Join(values, ", "))
		}
	}
	return []string{
		fmt.Sprintf("Provision the volumes where the pod is scheduled: a StorageClass with volumeBindingMode: WaitForFirstConsumer, or with allowedTopologies limited to where the pod may run%s. A class's binding mode cannot be changed: create a new class like %s, then %s. %s stays where it is: copy its data first if it matters (VolumeSnapshot, restore).",
			allowed, like, then, plural(len(moved), "PersistentVolume "+strings.Join(moved, ""), "PersistentVolumes "+strings.Join(moved, ", "))),
		show,
	}
}

// selectorAllows reports whether the pod's nodeSelector and node affinity accept node.
func (v *schedulingView) selectorAllows(node string) bool {
	return !v.nodeHas(node, CodeNodeSelectorMismatch)
}

// nodeSelectorString renders a node selector as "key in (a, b)" requirements, terms joined by
// " or ".
func nodeSelectorString(sel *corev1.NodeSelector) string {
	var terms []string
	for _, t := range sel.NodeSelectorTerms {
		var reqs []string
		for _, e := range append(slices.Clone(t.MatchExpressions), t.MatchFields...) {
			op := strings.ToLower(string(e.Operator))
			switch e.Operator {
			case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
				reqs = append(reqs, e.Key+" "+op)
			default:
				reqs = append(reqs, fmt.Sprintf("%s %s (%s)", e.Key, op, strings.Join(e.Values, ", ")))
			}
		}
		terms = append(terms, strings.Join(reqs, ", "))
	}
	return strings.Join(terms, " or ")
}

// selectorKey is the one label key a node selector's In requirements are about, "" when there
// are several.
func selectorKey(sel *corev1.NodeSelector) string {
	key := ""
	for _, t := range sel.NodeSelectorTerms {
		for _, e := range t.MatchExpressions {
			if e.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			if key != "" && key != e.Key {
				return ""
			}
			key = e.Key
		}
	}
	return key
}

// pvTopology is one zone or region label of a PV: the node must have key with one of values.
type pvTopology struct {
	key    string
	values []string
}

// topologyLabels are the labels the VolumeZone filter compares, with their beta names.
var topologyLabels = []string{corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion, corev1.LabelTopologyZone, corev1.LabelTopologyRegion}

// pvTopologies returns pv's zone and region labels (a value may list zones joined by "__").
func pvTopologies(pv *corev1.PersistentVolume) []pvTopology {
	var out []pvTopology
	for _, key := range topologyLabels {
		if v, ok := pv.Labels[key]; ok {
			out = append(out, pvTopology{key: key, values: strings.Split(v, "__")})
		}
	}
	return out
}

// volumeZoneReasons judges n like the VolumeZone filter: a node with any zone or region label
// must have each zone and region label of the pod's bound PVs (the GA or beta name) with one of
// its values.
func volumeZoneReasons(d *demand, n *corev1.Node, _ *cluster) []NodeReason {
	if !slices.ContainsFunc(topologyLabels, func(k string) bool { _, ok := n.Labels[k]; return ok }) {
		return nil
	}
	var out []NodeReason
	for _, name := range sortedKeys(d.pvZones) {
		for _, z := range d.pvZones[name] {
			v, ok := n.Labels[z.key]
			if !ok {
				v, ok = n.Labels[gaTopologyLabel(z.key)]
			}
			if ok && slices.Contains(z.values, v) {
				continue
			}
			out = append(out, NodeReason{Code: CodeVolumeNodeAffinityConflict,
				Message: fmt.Sprintf("PersistentVolume %s's label %s=%s does not match the node's", name, z.key, strings.Join(z.values, "__"))})
			break
		}
	}
	return out
}

// gaTopologyLabel is the GA name of a beta zone or region label.
func gaTopologyLabel(key string) string {
	switch key {
	case corev1.LabelFailureDomainBetaZone:
		return corev1.LabelTopologyZone
	case corev1.LabelFailureDomainBetaRegion:
		return corev1.LabelTopologyRegion
	}
	return key
}
