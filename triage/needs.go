package triage

// The Collector (package triage/collect) asks the rules what to read: the optional reads of a
// Snapshot are expensive (Calico IPAM, container logs), so these pure functions decide, from
// what is already in the Snapshot, whether the pod's state calls for them.

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
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
		case CodeCalicoIPAMExhausted, CodeCalicoIPAMBlockLimit, CodeCalicoDatastoreLocked, CodeCalicoNodeNotReady:
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
