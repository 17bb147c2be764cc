package triage

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// This file is the NodeVolumeLimits filter: the CSI volumes the node's pods and the pod use
// must stay within each driver's attachable-volume limit (CSINode allocatable.count).

// volumeLimitReasons judges n like the NodeVolumeLimits filter: for each CSI driver with an
// attachable-volume limit on the node (CSINode spec.drivers[].allocatable.count), the distinct
// volumes the node's pods already use plus the pod's new ones must not exceed it. It says
// nothing when the CSINodes were not collected (triage.NeedsVolumeLimits).
func volumeLimitReasons(d *demand, n *corev1.Node, c *cluster) []NodeReason {
	csiNode := c.snap.CSINodes[n.Name]
	if csiNode == nil {
		return nil
	}
	want := c.csiVolumes(d.pod, true)
	if len(want) == 0 {
		return nil
	}
	inUse := map[string]sets.Set[string]{}
	for _, p := range c.pods.On(n.Name) {
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
