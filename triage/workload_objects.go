package triage

import (
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds what the workload rules share about the chain of objects between a workload
// and its pods: the workload's metadata, the controllers that create its pods (a Deployment's
// ReplicaSets, a CronJob's Jobs), their events, and how kubectl finds a workload's pods.

// meta returns the workload's metadata, nil when it does not exist.
func (ws *WorkloadSnapshot) meta() *metav1.ObjectMeta {
	switch {
	case ws.Deployment != nil:
		return &ws.Deployment.ObjectMeta
	case ws.ReplicaSet != nil:
		return &ws.ReplicaSet.ObjectMeta
	case ws.StatefulSet != nil:
		return &ws.StatefulSet.ObjectMeta
	case ws.DaemonSet != nil:
		return &ws.DaemonSet.ObjectMeta
	case ws.Job != nil:
		return &ws.Job.ObjectMeta
	case ws.CronJob != nil:
		return &ws.CronJob.ObjectMeta
	}
	return nil
}

// SetWorkload makes obj (a *Deployment, *ReplicaSet, *StatefulSet, *DaemonSet, *Job or
// *CronJob) the snapshot's workload; it is false for any other object.
func (ws *WorkloadSnapshot) SetWorkload(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		ws.Deployment = o
	case *appsv1.ReplicaSet:
		ws.ReplicaSet = o
	case *appsv1.StatefulSet:
		ws.StatefulSet = o
	case *appsv1.DaemonSet:
		ws.DaemonSet = o
	case *batchv1.Job:
		ws.Job = o
	case *batchv1.CronJob:
		ws.CronJob = o
	default:
		return false
	}
	return true
}

// creator is an object that creates the workload's pods (or Jobs): the workload itself, or one
// of a Deployment's ReplicaSets or a CronJob's Jobs.
type creator struct {
	// ref names it ("ReplicaSet shop/checkout-7d9f8b6c4").
	ref WorkloadRef
	// uid keys its events in WorkloadSnapshot.Events.
	uid types.UID
	// missing is how many pods (Jobs, for a CronJob) it lacks now: desired minus current, from
	// its status; 0 when it has all it wants.
	missing int32
	// failure is its ReplicaFailure condition when True (ReplicaSets and Deployments keep the
	// last pod creation error there after its event expires), else nil.
	failure *condition
}

// condition is the part of a workload condition the rules read.
type condition struct {
	Type, Reason, Message string
	LastTransition        metav1.Time
}

// creators returns the objects that create the workload's pods: for a Deployment, its
// ReplicaSets (newest revision first, where the controller writes FailedCreate) and then itself
// (its ReplicaFailure condition repeats their error); for a CronJob, itself (it creates Jobs)
// and its Jobs; else the workload.
func (ws *WorkloadSnapshot) creators() []creator {
	var out []creator
	ref := ws.Ref()
	self := creator{ref: ref, uid: types.UID(ref.UID)}
	switch {
	case ws.Deployment != nil:
		for _, rs := range ws.ReplicaSets {
			out = append(out, replicaSetCreator(rs))
		}
		self.failure = deploymentFailure(ws.Deployment)
		out = append(out, self)
	case ws.ReplicaSet != nil:
		out = append(out, replicaSetCreator(ws.ReplicaSet))
	case ws.StatefulSet != nil:
		st := ws.StatefulSet.Status
		self.missing = max(derefInt32(ws.StatefulSet.Spec.Replicas, 1)-st.Replicas, 0)
		out = append(out, self)
	case ws.DaemonSet != nil:
		st := ws.DaemonSet.Status
		self.missing = max(st.DesiredNumberScheduled-st.CurrentNumberScheduled, 0)
		out = append(out, self)
	case ws.Job != nil:
		out = append(out, jobCreator(ws.Job, ws.Pods))
	case ws.CronJob != nil:
		out = append(out, self)
		for _, j := range ws.Jobs {
			out = append(out, jobCreator(j, ws.Pods))
		}
	}
	return out
}

// replicaSetCreator is a ReplicaSet as a creator.
func replicaSetCreator(rs *appsv1.ReplicaSet) creator {
	c := creator{
		ref:     WorkloadRef{Kind: KindReplicaSet, Namespace: rs.Namespace, Name: rs.Name, UID: string(rs.UID)},
		uid:     rs.UID,
		missing: max(derefInt32(rs.Spec.Replicas, 1)-rs.Status.Replicas, 0),
	}
	for _, cond := range rs.Status.Conditions {
		if cond.Type == appsv1.ReplicaSetReplicaFailure && cond.Status == corev1.ConditionTrue {
			c.failure = &condition{Type: string(cond.Type), Reason: cond.Reason, Message: cond.Message, LastTransition: cond.LastTransitionTime}
		}
	}
	return c
}

// deploymentFailure is the Deployment's ReplicaFailure condition when True.
func deploymentFailure(d *appsv1.Deployment) *condition {
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentReplicaFailure && cond.Status == corev1.ConditionTrue {
			return &condition{Type: string(cond.Type), Reason: cond.Reason, Message: cond.Message, LastTransition: cond.LastTransitionTime}
		}
	}
	return nil
}

// jobCreator is a Job as a creator: it lacks pods while it runs with fewer active pods than
// its parallelism allows (and fewer than the completions still to go).
func jobCreator(j *batchv1.Job, pods []*corev1.Pod) creator {
	c := creator{ref: WorkloadRef{Kind: KindJob, Namespace: j.Namespace, Name: j.Name, UID: string(j.UID)}, uid: j.UID}
	if jobFinished(j) || derefBool(j.Spec.Suspend) {
		return c
	}
	want := derefInt32(j.Spec.Parallelism, 1)
	if comp := j.Spec.Completions; comp != nil {
		want = min(want, max(*comp-j.Status.Succeeded, 0))
	}
	c.missing = max(want-j.Status.Active, 0)
	return c
}

// jobCondition returns the Job's condition of type t when True, else nil.
func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// jobFinished reports whether the Job completed or failed.
func jobFinished(j *batchv1.Job) bool {
	return jobCondition(j, batchv1.JobComplete) != nil || jobCondition(j, batchv1.JobFailed) != nil
}

// controllerOf returns the pod's controlling ownerReference, nil for a bare pod.
func controllerOf(pod *corev1.Pod) *metav1.OwnerReference {
	return metav1.GetControllerOf(pod)
}

// eventsOf returns the events of the object with uid, newest first.
func (ws *WorkloadSnapshot) eventsOf(uid types.UID) []Event { return ws.Events[uid] }

// workloadEventEvidence returns up to n of the newest Warning events of the workload and its
// creators, as Evidence.
func workloadEventEvidence(ws *WorkloadSnapshot, n int) []Evidence {
	var out []Evidence
	for _, c := range ws.creators() {
		for _, e := range ws.eventsOf(c.uid) {
			if e.Type == corev1.EventTypeWarning && len(out) < n {
				out = append(out, objectEventEvidence(c.ref, e))
			}
		}
	}
	return out
}

// objectEventEvidence turns an event of a workload (or one of its creators) into Evidence.
func objectEventEvidence(ref WorkloadRef, e Event) Evidence {
	return Evidence{Object: ref.String(), Reason: e.Reason, Message: e.Message, Count: e.Count, LastSeen: e.LastSeen}
}

// SortReplicaSets sorts a Deployment's ReplicaSets newest revision first (the
// deployment.kubernetes.io/revision annotation, then creation time, then name), the order of
// WorkloadSnapshot.ReplicaSets.
func SortReplicaSets(rss []*appsv1.ReplicaSet) {
	rev := func(rs *appsv1.ReplicaSet) int64 {
		n, _ := strconv.ParseInt(rs.Annotations["deployment.kubernetes.io/revision"], 10, 64)
		return n
	}
	sort.SliceStable(rss, func(i, j int) bool {
		a, b := rss[i], rss[j]
		if ra, rb := rev(a), rev(b); ra != rb {
			return ra > rb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// SortPods sorts pods oldest first (creation time, then name), the order of
// WorkloadSnapshot.Pods: the pod stuck longest is a group's representative.
func SortPods(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// PodsOf returns, from pods (any pods of the namespace), the workload's current pods the way
// kubectl finds them: pods whose controller ownerReference is the workload, or one of the
// Deployment's ReplicaSets or the CronJob's Jobs in ws (by UID), sorted with SortPods.
func PodsOf(ws *WorkloadSnapshot, pods []*corev1.Pod) []*corev1.Pod {
	owners := map[types.UID]bool{}
	if m := ws.meta(); m != nil {
		owners[m.UID] = true
	}
	for _, rs := range ws.ReplicaSets {
		owners[rs.UID] = true
	}
	for _, j := range ws.Jobs {
		owners[j.UID] = true
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if ref := controllerOf(p); ref != nil && owners[ref.UID] {
			out = append(out, p)
		}
	}
	SortPods(out)
	return out
}

// ownedBy reports whether obj's controller ownerReference has uid.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == uid
}

// OwnedReplicaSets returns the ReplicaSets of rss that Deployment d controls, sorted with
// SortReplicaSets.
func OwnedReplicaSets(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if ownedBy(rs, d.UID) {
			out = append(out, rs)
		}
	}
	SortReplicaSets(out)
	return out
}

// OwnedJobs returns the Jobs of jobs that CronJob cj controls, newest first.
func OwnedJobs(cj *batchv1.CronJob, jobs []*batchv1.Job) []*batchv1.Job {
	var out []*batchv1.Job
	for _, j := range jobs {
		if ownedBy(j, cj.UID) {
			out = append(out, j)
		}
	}
	sort.SliceStable(out, func(i, k int) bool {
		a, b := out[i], out[k]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name > b.Name
	})
	return out
}

// podTemplate returns the pod spec the workload creates pods from (a CronJob's job template's),
// nil when the workload does not exist.
func (ws *WorkloadSnapshot) podTemplate() *corev1.PodSpec {
	switch {
	case ws.Deployment != nil:
		return &ws.Deployment.Spec.Template.Spec
	case ws.ReplicaSet != nil:
		return &ws.ReplicaSet.Spec.Template.Spec
	case ws.StatefulSet != nil:
		return &ws.StatefulSet.Spec.Template.Spec
	case ws.DaemonSet != nil:
		return &ws.DaemonSet.Spec.Template.Spec
	case ws.Job != nil:
		return &ws.Job.Spec.Template.Spec
	case ws.CronJob != nil:
		return &ws.CronJob.Spec.JobTemplate.Spec.Template.Spec
	}
	return nil
}
