package triage

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// terminatingRules explains a pod that was deleted (metadata.deletionTimestamp set) but still
// exists: finalizers that nobody removes (finalizer-blocking), a node whose kubelet cannot
// confirm the deletion (node-unreachable-terminating), or volumes the kubelet cannot tear down
// (volume-teardown-stuck). A pod the node controller marked NodeLost is left to evictedRules.
func terminatingRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil || pod.DeletionTimestamp == nil {
		return nil
	}
	del := deletionOf(s)
	var out []Finding
	if len(pod.Finalizers) > 0 {
		out = append(out, finalizerFinding(s, del))
	}
	node := s.Node(pod.Spec.NodeName)
	switch {
	case pod.Status.Reason == nodeLostReason:
		// evictedRules reports node-lost; a second finding would only repeat it.
	case node != nil && !NodeReady(node):
		out = append(out, nodeUnreachableFinding(s, node, del))
	case node != nil:
		if f, ok := volumeTeardownFinding(s, node, del); ok {
			out = append(out, f)
		}
	}
	return out
}

// deletion describes when and how a pod was deleted.
type deletion struct {
	// Requested is when the delete was issued: deletionTimestamp minus the grace period.
	Requested time.Time
	// Deadline is metadata.deletionTimestamp, when the grace period ends.
	Deadline time.Time
	// Grace is metadata.deletionGracePeriodSeconds.
	Grace time.Duration
	// Began is the earliest sign that the pod started to go away: Requested, or an earlier
	// kubelet Killing or TaintManagerEviction event (the object may have been re-deleted).
	Began time.Time
}

// deletionOf reads the deletion times of s.Pod.
func deletionOf(s *Snapshot) deletion {
	pod := s.Pod
	d := deletion{Deadline: pod.DeletionTimestamp.Time}
	if pod.DeletionGracePeriodSeconds != nil {
		d.Grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	d.Requested = d.Deadline.Add(-d.Grace)
	d.Began = d.Requested
	for _, e := range eventsWithReason(s, "Killing", "TaintManagerEviction", "Preempting") {
		first := e.FirstSeen
		if first.IsZero() {
			first = e.LastSeen
		}
		if !first.IsZero() && first.Before(d.Began) {
			d.Began = first
		}
	}
	return d
}

// describe says how long ago the pod was deleted against its grace period.
func (d deletion) describe(s *Snapshot) string {
	txt := fmt.Sprintf("deleted %s ago with a %s grace period", FormatAge(age(s, d.Requested)), FormatAge(d.Grace))
	if s.Now.Before(d.Deadline) {
		txt += fmt.Sprintf(" (%s of it left)", FormatAge(d.Deadline.Sub(s.Now)))
	} else {
		txt += fmt.Sprintf(" (overdue by %s)", FormatAge(s.Now.Sub(d.Deadline)))
	}
	if d.Began.Before(d.Requested) {
		txt += fmt.Sprintf("; shutdown began %s ago", FormatAge(age(s, d.Began)))
	}
	return txt
}

// evidence is the deletion as Evidence on metadata.deletionTimestamp.
func (d deletion) evidence(s *Snapshot) Evidence {
	return Evidence{
		Object:  podObject(s.Pod),
		Field:   "metadata.deletionTimestamp",
		Message: fmt.Sprintf("%s (%s)", d.Deadline.UTC().Format(time.RFC3339), d.describe(s)),
	}
}

// finalizerOwners names, for well-known finalizers, the controller or webhook that removes
// them. Keys are exact finalizer names; see finalizerOwner for prefixes.
var finalizerOwners = map[string]string{
	"batch.kubernetes.io/job-tracking":            "the Job controller in kube-controller-manager (it removes the finalizer once it has counted the pod)",
	"kubernetes.io/pvc-protection":                "the PVC protection controller in kube-controller-manager",
	"kubernetes.io/pv-protection":                 "the PV protection controller in kube-controller-manager",
	"foregroundDeletion":                          "the garbage collector in kube-controller-manager (foreground deletion of dependents)",
	"orphan":                                      "the garbage collector in kube-controller-manager (orphaning dependents)",
	"cni.projectcalico.org/finalizer":             "Calico",
	"service.kubernetes.io/load-balancer-cleanup": "the service controller in the cloud controller manager",
}

// finalizerOwner names the controller behind finalizer f, or "" when it cannot be known.
func finalizerOwner(f string) string {
	if o, ok := finalizerOwners[f]; ok {
		return o
	}
	// A domain-qualified finalizer is owned by whatever serves that domain.
	if i := strings.IndexByte(f, '/'); i > 0 && strings.Contains(f[:i], ".") {
		return "the controller that owns the " + f[:i] + " API group or domain"
	}
	return ""
}

// finalizerFinding reports finalizer-blocking for a deleted pod that still has finalizers.
func finalizerFinding(s *Snapshot, del deletion) Finding {
	pod := s.Pod
	names := append([]string(nil), pod.Finalizers...)
	sort.Strings(names)
	f := Finding{
		Code:     CodeFinalizerBlocking,
		Severity: SeverityBlocker,
		Summary: fmt.Sprintf("The pod was %s, but %s %s %s still set; the API server keeps the pod until %s removed.",
			del.describe(s), plural(len(names), "finalizer", "finalizers"), strings.Join(names, ", "),
			plural(len(names), "is", "are"), plural(len(names), "it is", "they are")),
	}
	f.Evidence = append(f.Evidence, del.evidence(s))
	for i, name := range pod.Finalizers {
		msg := name
		if o := finalizerOwner(name); o != "" {
			msg += ": removed by " + o
		} else {
			msg += ": no known controller; whoever added it must remove it"
		}
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: fmt.Sprintf("metadata.finalizers[%d]", i), Message: msg})
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			f.Evidence = append(f.Evidence, Evidence{
				Object:  podObject(pod),
				Field:   "metadata.ownerReferences",
				Message: fmt.Sprintf("controlled by %s %s (uid %s); if that object is gone, nothing will remove its finalizer", ref.Kind, ref.Name, ref.UID),
			})
		}
	}
	for k, v := range pod.Annotations {
		// Mutating webhooks that inject containers can reject the controller's update that
		// drops the finalizer ("pod updates may not add or remove containers").
		if strings.Contains(k, "inject") && (v == "true" || v == "injected") {
			f.Evidence = append(f.Evidence, Evidence{
				Object:  podObject(pod),
				Field:   "metadata.annotations[" + k + "]",
				Message: v + ": a mutating webhook injects containers into this pod; if it also acts on UPDATE it can reject the update that removes the finalizer",
			})
		}
	}
	sort.SliceStable(f.Evidence[1:], func(i, j int) bool { return f.Evidence[1+i].Field < f.Evidence[1+j].Field })
	for _, e := range eventsMatching(s, func(e Event) bool { return e.Type == corev1.EventTypeWarning }) {
		if len(f.Evidence) >= 8 {
			break
		}
		f.Evidence = append(f.Evidence, EventEvidence(pod, e))
	}
	if s.Now.Before(del.Deadline) {
		// The kubelet may still be stopping the containers: the finalizers only keep the pod
		// once that is done, so this is not yet a pod stuck on them.
		f.Uncertain = true
		f.Summary += fmt.Sprintf(" Its grace period is not over (%s left), so it may still be shutting down as it should; it is stuck on the finalizers only if it is still here after that.", FormatAge(del.Deadline.Sub(s.Now)))
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl get pod %s %s -o jsonpath='{.metadata.finalizers}'", nsFlag(pod), shellQuote(pod.Name)),
		"Find out why the owning controller does not remove the finalizer (its logs; a mutating webhook that rejects pod updates), and fix that first.",
	}
	f.Fix = append(f.Fix, removeFinalizersFix(pod))
	return f
}

// removeFinalizersFix is the last resort of finalizer-blocking: a JSON patch that removes only
// the finalizers no Kubernetes controller owns (finalizerOwners: the Job controller's
// job-tracking, for one, must stay for the Job to count the pod), each behind a test op on its
// index, so the patch fails instead of removing another finalizer if the list changed. When
// every finalizer is a Kubernetes controller's, it says to look at that controller instead.
func removeFinalizersFix(pod *corev1.Pod) string {
	var ops, names []string
	for i := len(pod.Finalizers) - 1; i >= 0; i-- { // from the end: a remove shifts the later indexes
		name := pod.Finalizers[i]
		if _, known := finalizerOwners[name]; known {
			continue
		}
		v, _ := json.Marshal(name)
		ops = append(ops,
			fmt.Sprintf(`{"op":"test","path":"/metadata/finalizers/%d","value":%s}`, i, v),
			fmt.Sprintf(`{"op":"remove","path":"/metadata/finalizers/%d"}`, i))
		names = append([]string{name}, names...)
	}
	if len(ops) == 0 {
		return "Every finalizer left belongs to a Kubernetes controller (see the evidence): do not remove it by hand; check that controller runs (kube-controller-manager's log) instead."
	}
	return fmt.Sprintf("kubectl patch pod %s %s --type=json -p %s  # removes only %s, and fails if the list changed; only once you know nothing still needs the cleanup",
		nsFlag(pod), shellQuote(pod.Name), shellQuote("["+strings.Join(ops, ",")+"]"), strings.Join(names, ", "))
}

// nodeUnreachableFinding reports node-unreachable-terminating: the pod's node is not Ready, so
// its kubelet never confirms that the containers stopped.
func nodeUnreachableFinding(s *Snapshot, node *corev1.Node, del deletion) Finding {
	pod := s.Pod
	ready := nodeReadyCondition(node)
	state := "has no Ready condition"
	if ready != nil {
		state = fmt.Sprintf("has been Ready=%s (%s) for %s", ready.Status, ready.Reason, FormatAge(age(s, ready.LastTransitionTime.Time)))
	}
	f := Finding{
		Code:     CodeNodeUnreachableTerminating,
		Severity: SeverityBlocker,
		Summary: fmt.Sprintf("The pod was %s, but its node %s %s, so no kubelet can confirm that its containers stopped; the pod stays Terminating until the node returns or the pod is force-deleted.",
			del.describe(s), node.Name, state),
	}
	f.Evidence = append(f.Evidence, del.evidence(s))
	if ready != nil {
		f.Evidence = append(f.Evidence, Evidence{
			Object: nodeObject(node.Name), Field: "status.conditions[Ready]", Reason: ready.Reason,
			Message:  fmt.Sprintf("status %s: %s (last heartbeat %s ago)", ready.Status, ready.Message, FormatAge(age(s, ready.LastHeartbeatTime.Time))),
			LastSeen: ready.LastHeartbeatTime.Time,
		})
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady {
			f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node.Name), Field: "spec.taints", Message: fmt.Sprintf("%s:%s", t.Key, t.Effect)})
		}
	}
	if c := podCondition(pod, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "status.conditions[DisruptionTarget]", Reason: c.Reason, Message: c.Message})
	}
	for _, e := range eventsWithReason(s, "NodeNotReady", "TaintManagerEviction") {
		f.Evidence = append(f.Evidence, EventEvidence(pod, e))
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl describe node %s", shellQuote(node.Name)),
		fmt.Sprintf("kubectl delete pod %s %s --grace-period=0 --force  # only if the node is really gone or its containers are known to be stopped (StatefulSet pods may otherwise run twice)", nsFlag(pod), shellQuote(pod.Name)),
		fmt.Sprintf("kubectl delete node %s  # if the machine will not come back: the pods bound to it are then removed", shellQuote(node.Name)),
	}
	return f
}

// volumeTeardownFinding reports volume-teardown-stuck: the node's kubelet is alive and the
// containers have stopped, but the pod's volumes are still mounted or attached (unmount or
// detach errors, or the volume still listed in node.status.volumesInUse).
func volumeTeardownFinding(s *Snapshot, node *corev1.Node, del deletion) (Finding, bool) {
	pod := s.Pod
	var ev []Evidence
	failures := eventsMatching(s, func(e Event) bool {
		switch e.Reason {
		case "FailedUnmount", "FailedUnMount", "FailedDetachVolume", "FailedMapVolume", "FailedUnmapDevice", "VolumeFailedUnmount":
			return true
		}
		return e.Type == corev1.EventTypeWarning && containsAny(e.Message, "UnmountVolume", "UnmapVolume", "UnmapBlockVolume", "DetachVolume", "UnmountDevice")
	})
	for _, e := range failures {
		ev = append(ev, EventEvidence(pod, e))
	}
	inUse := podVolumesInUse(s, node)
	for _, v := range inUse {
		ev = append(ev, Evidence{Object: nodeObject(node.Name), Field: "status.volumesInUse", Message: v + " is still in use on the node"})
	}
	if len(ev) == 0 {
		return Finding{}, false
	}
	running := false
	for _, c := range containerStatuses(pod) {
		if c.Status.State.Running != nil {
			running = true
		}
	}
	if running && len(failures) == 0 {
		// Containers still run: the kubelet has not got to volume teardown yet.
		return Finding{}, false
	}
	f := Finding{
		Code:     CodeVolumeTeardownStuck,
		Severity: SeverityBlocker,
		Summary: fmt.Sprintf("The pod was %s and its containers have stopped, but the kubelet on %s (Ready) has not finished tearing down %s, so it cannot confirm the deletion.",
			del.describe(s), node.Name, volumeList(pod)),
	}
	f.Evidence = append([]Evidence{del.evidence(s)}, ev...)
	for _, c := range containerStatuses(pod) {
		if t := c.Status.State.Terminated; t != nil {
			f.Evidence = append(f.Evidence, terminatedEvidence(pod, c.field("state.terminated"), t))
		}
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl get volumeattachments -o wide | grep %s", shellQuote(node.Name)),
		fmt.Sprintf("On %s: journalctl -u kubelet | grep -E 'UnmountVolume|UnmapVolume|DetachVolume' | tail", shellQuote(node.Name)),
		"Fix the mount or device on the node (e.g. unmount the stale bind mount, reconnect the block device), or restart the CSI node plugin there.",
		fmt.Sprintf("kubectl delete pod %s %s --grace-period=0 --force  # last resort: the volume may still be attached to %s", nsFlag(pod), shellQuote(pod.Name), shellQuote(node.Name)),
	}
	return f, true
}

// podVolumesInUse returns the unique volume names (as the kubelet reports them in
// node.status.volumesInUse) of the pod's bound PersistentVolumes that the node still lists.
func podVolumesInUse(s *Snapshot, node *corev1.Node) []string {
	if len(node.Status.VolumesInUse) == 0 {
		return nil
	}
	inUse := map[string]bool{}
	for _, v := range node.Status.VolumesInUse {
		inUse[string(v)] = true
	}
	var out []string
	for _, v := range s.Pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc := s.PVCs[v.PersistentVolumeClaim.ClaimName]
		if pvc == nil || pvc.Spec.VolumeName == "" {
			continue
		}
		pv := s.PVs[pvc.Spec.VolumeName]
		if name, ok := volumeInUse(inUse, pvc.Spec.VolumeName, pv); ok {
			out = append(out, name)
		}
	}
	return out
}

// volumeInUse finds the PV among the node's volumesInUse names. Without the PV object it
// falls back to a name that ends in the PV name (CSI handles often equal it).
func volumeInUse(inUse map[string]bool, pvName string, pv *corev1.PersistentVolume) (string, bool) {
	for _, name := range uniqueVolumeNames(pvName, pv) {
		if inUse[name] {
			return name, true
		}
	}
	if pv == nil {
		for name := range inUse {
			if strings.HasSuffix(name, "^"+pvName) || strings.HasSuffix(name, "/"+pvName) {
				return name, true
			}
		}
	}
	return "", false
}

// uniqueVolumeNames returns the names a kubelet may use for a PV in volumesInUse: for CSI
// "kubernetes.io/csi/<driver>^<volumeHandle>", else names that end in the PV name.
func uniqueVolumeNames(pvName string, pv *corev1.PersistentVolume) []string {
	var out []string
	if pv != nil && pv.Spec.CSI != nil {
		out = append(out, "kubernetes.io/csi/"+pv.Spec.CSI.Driver+"^"+pv.Spec.CSI.VolumeHandle)
	}
	for _, plugin := range []string{"kubernetes.io/local-volume/", "kubernetes.io/host-path/", "kubernetes.io/nfs/"} {
		out = append(out, plugin+pvName)
	}
	return out
}

// volumeList names the pod's volumes that need teardown (PVCs and other non-projected kinds).
func volumeList(pod *corev1.Pod) string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			names = append(names, fmt.Sprintf("volume %q (PVC %s)", v.Name, v.PersistentVolumeClaim.ClaimName))
		}
	}
	if len(names) == 0 {
		return "its volumes"
	}
	return strings.Join(names, ", ")
}
