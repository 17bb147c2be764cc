package triage

// The Collector (package triage/collect) asks the rules what to read: the optional reads of a
// Snapshot are expensive (Calico IPAM, container logs), so these pure functions decide, from
// what is already in the Snapshot, whether the pod's state calls for them.

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NeedsCalicoNodePods reports whether the Collector should read the calico-node pods of the
// pod's node (Snapshot.CalicoNodePods): the pod is bound, not being deleted, and waits for its
// sandbox.
func NeedsCalicoNodePods(pod *corev1.Pod) bool {
	return pod != nil && pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && awaitingSandbox(pod)
}

// NeedsIPAM reports whether the pod's state calls for reading Calico IPAM: it waits for its
// sandbox and a sandbox event names Calico or one of Calico's IPAM failures. Reading IPAM is
// the most expensive read triage does, so any other pod skips it.
func NeedsIPAM(s *Snapshot) bool {
	pod := s.Pod
	if pod == nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !awaitingSandbox(pod) {
		return false
	}
	for _, e := range eventsWithReason(s, "FailedCreatePodSandBox", "FailedCreatePodSandbox") {
		switch sandboxCode(e.Message) {
		case CodeCalicoIPAMExhausted, CodeCalicoIPAMBlockLimit, CodeCalicoDatastoreLocked, CodeCalicoNodeNotReady, CodeCalicoWindowsStrictAffinity:
			return true
		}
		if containsAny(e.Message, "calico") {
			return true
		}
	}
	return false
}

// LogCandidates returns the names of the containers whose previous log explains something,
// most telling first: crash-looping, then terminated with a non-zero code, then any other
// recent restart. Unbound pods and pods being deleted have none, and so do containers that
// wait for anything but a crash back-off now (their last run is history), containers whose last
// run the node or runtime lost (lostTermination), and containers whose last attempt never ran a
// process (StartError, ContainerCannotRun: there is no log).
func LogCandidates(s *Snapshot) []string {
	pod := s.Pod
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return nil
	}
	type ranked struct {
		c    containerStatus
		rank int
	}
	var rs []ranked
	for _, c := range containerStatuses(pod) {
		st := c.Status
		last := st.LastTerminationState.Terminated
		if last == nil {
			continue // previous=true needs a previous instance
		}
		if w := st.State.Waiting; w != nil && w.Reason != "CrashLoopBackOff" || lostTermination(last) || last.Reason == "StartError" || last.Reason == "ContainerCannotRun" {
			continue
		}
		switch {
		case st.State.Waiting != nil && st.State.Waiting.Reason == "CrashLoopBackOff":
			rs = append(rs, ranked{c, 0})
		case st.LastTerminationState.Terminated.ExitCode != 0:
			rs = append(rs, ranked{c, 1})
		case st.RestartCount > 0 && age(s, st.LastTerminationState.Terminated.FinishedAt.Time) < recentRestart:
			rs = append(rs, ranked{c, 2})
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].rank < rs[j].rank })
	var out []string
	for _, r := range rs {
		out = append(out, r.c.Status.Name)
	}
	return out
}

// NeedsStorageClasses reports whether the Collector should read the StorageClasses: one of the
// pod's claims exists but is not bound, and the rules explain why from its class (binding mode,
// provisioner, a class that does not exist); or the pod is unscheduled and a claim is bound to
// a PV that only some nodes may use (node affinity, zone labels), and the rules say how it got
// there from its class's binding mode.
func NeedsStorageClasses(s *Snapshot) bool {
	for _, pvc := range s.PVCs {
		if pvc != nil && (pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "") {
			return true
		}
		if pvc == nil || !isUnscheduled(s.Pod) {
			continue
		}
		if pv := s.PVs[pvc.Spec.VolumeName]; pv != nil && ((pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil) || len(pvTopologies(pv)) > 0) {
			return true
		}
	}
	return false
}

// NeedsVolumeLimits reports whether the Collector should read CSINodes and the claims of the
// pods on the nodes (Snapshot.CSINodes, NodeClaims): the pod is unscheduled and mounts claims
// or CSI volumes. The NodeVolumeLimits filter runs after the taint, affinity and resource
// filters, so the scheduler's message hides a node's volume limit behind an earlier reason; a
// node fix (untaint, uncordon) can only be judged with the limits known.
func NeedsVolumeLimits(s *Snapshot) bool {
	if !isUnscheduled(s.Pod) {
		return false
	}
	for _, v := range s.Pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil || v.CSI != nil {
			return true
		}
	}
	return false
}

// NeedsWorkloadReplicas reports whether the Collector should read the spec.replicas of the
// pod's workload (Snapshot.WorkloadReplicas): the pod is unscheduled and a ReplicaSet or
// StatefulSet controls it, so a fix that lowers its requests changes every replica.
func NeedsWorkloadReplicas(s *Snapshot) bool {
	if !isUnscheduled(s.Pod) {
		return false
	}
	ref := metav1.GetControllerOf(s.Pod)
	return ref != nil && (ref.Kind == "ReplicaSet" || ref.Kind == "StatefulSet")
}

// missingObjectResources maps the codes of a missing object to the resource whose names the
// rules compare with the missing name.
var missingObjectResources = map[Code]string{
	CodeConfigMapNotFound: "configmaps",
	CodeSecretNotFound:    "secrets",
	CodePVCNotFound:       "persistentvolumeclaims",
}

// NeedsNames returns the resources ("configmaps", "secrets", "persistentvolumeclaims") whose
// names in the pod's namespace the Collector should read into Snapshot.NamesInNamespace (and
// CreatedInNamespace): those of an object a rule reports missing, so the answer can tell
// whether it exists now (the report may be older than the object: existsNowFinding) and
// suggest the closest existing names. When a ConfigMap or Secret is reported missing, the other
// of the two kinds is read too if the pod needs one, so that an answer that the reported one
// exists now can tell whether the pod's next try fails on another. It evaluates the rules on s,
// but only when an event or a container state says "not found".
func NeedsNames(s *Snapshot) []string {
	if s.Pod == nil {
		return nil
	}
	var out []string
	if len(eventsWithReason(s, "FailedToRetrieveImagePullSecret")) > 0 {
		out = append(out, "secrets") // a pull secret the pod names that the kubelet could not read
	}
	if !mentionsNotFound(s) {
		return out
	}
	for _, f := range Evaluate(s).Findings {
		if r, ok := missingObjectResources[f.Code]; ok && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	if slices.Contains(out, "configmaps") || slices.Contains(out, "secrets") {
		for _, ref := range podObjectRefs(s.Pod, true) {
			if r := resourceOf(ref.kind); !ref.optional && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	sort.Strings(out)
	return out
}

// maxConfigMapKeyReads bounds the ConfigMaps one question reads for their keys.
const maxConfigMapKeyReads = 5

// NeedsConfigMapKeys returns the ConfigMaps of the pod's namespace whose keys the Collector
// should read into Snapshot.ConfigMapKeys, after NamesInNamespace: each one the pod reads keys
// of by name (env configMapKeyRef, volume items) that a kubelet report (a waiting container's
// message, a Warning event) calls not found while NamesInNamespace shows it exists now, or says
// lacks a key. Sorted, at most maxConfigMapKeyReads.
func NeedsConfigMapKeys(s *Snapshot) []string {
	if s.Pod == nil {
		return nil
	}
	reads := map[string]bool{}
	for _, ref := range podObjectRefs(s.Pod, true) {
		if ref.kind == "ConfigMap" && ref.key != "" && !ref.optional {
			reads[ref.name] = true
		}
	}
	if len(reads) == 0 {
		return nil
	}
	var out []string
	check := func(msg string) {
		name := ""
		if m := reMissingKey.FindStringSubmatch(msg); m != nil && m[2] == "ConfigMap" {
			name = m[4]
		} else if kind, n, _, _, ok := volumeKeyReport(s.Pod, msg); ok && kind == "ConfigMap" {
			name = n
		} else if n := quoted(msg, "configmap "); n != "" && containsAny(msg, "not found") {
			if p, _ := objectPresence(s, "configmaps", n); p == presenceExists {
				name = n
			}
		}
		if reads[name] && !slices.Contains(out, name) && len(out) < maxConfigMapKeyReads {
			out = append(out, name)
		}
	}
	for _, c := range containerStatuses(s.Pod) {
		if w := c.Status.State.Waiting; w != nil {
			check(w.Message)
		}
	}
	for _, e := range s.Events {
		if e.Type == corev1.EventTypeWarning {
			check(e.Message)
		}
	}
	sort.Strings(out)
	return out
}

// mentionsNotFound reports whether a Warning event or a waiting container says "not found".
func mentionsNotFound(s *Snapshot) bool {
	for _, e := range s.Events {
		if e.Type == corev1.EventTypeWarning && containsAny(e.Message, "not found") {
			return true
		}
	}
	for _, c := range containerStatuses(s.Pod) {
		if w := c.Status.State.Waiting; w != nil && containsAny(w.Message, "not found") {
			return true
		}
	}
	return false
}
