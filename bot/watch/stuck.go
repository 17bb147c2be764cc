package watch

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/whypending/whypending/triage"
)

// Thresholds say how long a pod stays in a state before it counts as stuck (config
// watch.thresholds).
type Thresholds struct {
	// Pending is for a pod not scheduled yet, or scheduled and still creating its
	// containers (ContainerCreating, PodInitializing), counted from its creation.
	Pending time.Duration
	// ImagePull is for a container waiting in ImagePullBackOff or ErrImagePull.
	ImagePull time.Duration
	// CrashLoopRestarts is the restart count from which a container in CrashLoopBackOff is
	// stuck.
	CrashLoopRestarts int32
	// Terminating is how long past its grace period a deleted pod may linger.
	Terminating time.Duration
	// FailedCreate is how long a workload's controller may be refused its pods (a quota, Pod
	// Security, a webhook, a missing ServiceAccount, a LimitRange) before it is stuck.
	FailedCreate time.Duration
}

// DefaultThresholds are the defaults. A Deployment past its progress deadline is stuck
// at once: progressDeadlineSeconds is its own threshold.
var DefaultThresholds = Thresholds{Pending: 5 * time.Minute, ImagePull: 3 * time.Minute, CrashLoopRestarts: 3, Terminating: 10 * time.Minute,
	FailedCreate: 2 * time.Minute}

// OptOut is the annotation that keeps a pod, a workload or a namespace out of the watch.
const OptOut = "whypending.io/watch"

// state is what the watch sees of one pod: the state it is in (empty for a pod that is
// fine), since when, and when it becomes stuck (due; zero for a pod that never will in this
// state).
type state struct {
	name  string
	since time.Time
	due   time.Time
}

// podState is the watch's reading of pod at now. It reads only what the lean cache keeps.
func podState(p *corev1.Pod, th Thresholds, now time.Time) state {
	created := p.CreationTimestamp.Time
	if p.DeletionTimestamp != nil {
		// The API server sets deletionTimestamp to the end of the grace period.
		return state{name: "Terminating", since: p.DeletionTimestamp.Time, due: p.DeletionTimestamp.Add(th.Terminating)}
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return state{}
	}
	for _, statuses := range [2][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range statuses {
			w := cs.State.Waiting
			if w == nil {
				continue
			}
			switch w.Reason {
			case "ImagePullBackOff", "ErrImagePull":
				since := created
				if c := condition(p, corev1.ContainersReady); c != nil && c.LastTransitionTime.After(since) {
					since = c.LastTransitionTime.Time
				}
				return state{name: "ImagePullBackOff", since: since, due: since.Add(th.ImagePull)}
			case "CrashLoopBackOff":
				if cs.RestartCount >= th.CrashLoopRestarts {
					return state{name: "CrashLoopBackOff", since: created, due: now}
				}
				return state{name: "CrashLoopBackOff", since: created}
			}
		}
	}
	if p.Status.Phase == corev1.PodPending {
		return state{name: "Pending", since: created, due: created.Add(th.Pending)}
	}
	return state{}
}

// workloadState is the watch's reading of a workload object (a Deployment, ReplicaSet,
// StatefulSet, DaemonSet or Job) and its own events, newest first: a Deployment past its
// progress deadline is stuck at once; a controller refused its pods (triage.CreateRefused:
// ReplicaFailure, or a current FailedCreate) is stuck th.FailedCreate after that began. It is
// empty for a controller that is fine: its pods have states of their own.
func workloadState(obj runtime.Object, events []triage.Event, th Thresholds) state {
	if d, ok := obj.(*appsv1.Deployment); ok && !d.Spec.Paused {
		if c := triage.RolloutStalled(d); c != nil {
			since := c.LastTransitionTime.Time
			return state{name: "ProgressDeadlineExceeded", since: since, due: since}
		}
	}
	if since, ok := triage.CreateRefused(obj, events); ok {
		return state{name: "FailedCreate", since: since, due: since.Add(th.FailedCreate)}
	}
	return state{}
}

func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Workload is what one post is about: a pod's owning workload, or the bare pod.
type Workload struct {
	Cluster   string      `json:"cluster"`
	Kind      triage.Kind `json:"kind"`
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
}

// Subject is the ledger subject: cluster/Kind/namespace/name.
func (w Workload) Subject() string {
	return w.Cluster + "/" + string(w.Kind) + "/" + w.Namespace + "/" + w.Name
}

// Target is the /why-pending question about it.
func (w Workload) Target() triage.Target {
	t := triage.Target{Namespace: w.Namespace, Kind: w.Kind, Name: w.Name, NamespaceGiven: true}
	return t
}

// Arg is how a person asks about it: "deploy/checkout", or the pod's name.
func (w Workload) Arg() string {
	if w.Kind == triage.KindPod {
		return w.Name
	}
	return w.Kind.Short() + "/" + w.Name
}

func (w Workload) String() string { return fmt.Sprintf("%s -n %s", w.Arg(), w.Namespace) }

// workloadOfObject is the workload a workload object's post is about: a ReplicaSet that a
// Deployment controls is that Deployment (as its pods are, workloadOf); the others are
// themselves.
func workloadOfObject(cluster string, kind triage.Kind, m metav1.Object) Workload {
	w := Workload{Cluster: cluster, Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}
	if kind == triage.KindReplicaSet {
		if o := metav1.GetControllerOfNoCopy(m); o != nil && o.Kind == "Deployment" {
			w.Kind, w.Name = triage.KindDeployment, o.Name
		}
	}
	return w
}

// workloadOf is the workload of the pod with metadata p: its controller, with a ReplicaSet named
// "<deployment>-<pod-template-hash>" read as its Deployment; the pod itself when it has no
// controller of a workload kind.
func workloadOf(cluster string, p *metav1.ObjectMeta) Workload {
	w := Workload{Cluster: cluster, Kind: triage.KindPod, Namespace: p.Namespace, Name: p.Name}
	for _, o := range p.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		switch o.Kind {
		case "ReplicaSet":
			if h := p.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(o.Name, "-"+h) {
				w.Kind, w.Name = triage.KindDeployment, strings.TrimSuffix(o.Name, "-"+h)
			} else {
				w.Kind, w.Name = triage.KindReplicaSet, o.Name
			}
		case "StatefulSet":
			w.Kind, w.Name = triage.KindStatefulSet, o.Name
		case "DaemonSet":
			w.Kind, w.Name = triage.KindDaemonSet, o.Name
		case "Job":
			w.Kind, w.Name = triage.KindJob, o.Name
		}
	}
	return w
}

// scaledToZero reports whether obj is a Deployment, StatefulSet or ReplicaSet asked for no
// replicas: with no pods it ended, it did not recover.
func scaledToZero(obj runtime.Object) bool {
	var r *int32
	switch o := obj.(type) {
	case *appsv1.Deployment:
		r = o.Spec.Replicas
	case *appsv1.StatefulSet:
		r = o.Spec.Replicas
	case *appsv1.ReplicaSet:
		r = o.Spec.Replicas
	default:
		return false
	}
	return r != nil && *r == 0
}
