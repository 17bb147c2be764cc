package watch

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/whypending/whypending/triage"
)

// TestWorkloadState reads the controller states the watch follows from workload objects and
// their events alone: a refused controller (FailedCreate) is stuck th.FailedCreate after its
// refusal began, a Deployment past its progress deadline at once, and a controller that is
// fine, or whose refusal is history, is in no state.
func TestWorkloadState(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	th := DefaultThresholds
	meta := metav1.ObjectMeta{Namespace: "shop", Name: "checkout", UID: "u1"}
	replicas := func(n int32) *int32 { return &n }
	quota := `pods "checkout-7d9f8b6c4-x2" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=0, limited: pods=0`
	failedCreate := triage.Event{Type: corev1.EventTypeWarning, Reason: "FailedCreate", Message: "create Pod checkout-0 in StatefulSet checkout failed error: " + quota,
		Count: 5, FirstSeen: t0, LastSeen: t0.Add(time.Minute)}
	created := func(at time.Time) triage.Event {
		return triage.Event{Type: corev1.EventTypeNormal, Reason: "SuccessfulCreate", Message: "create Pod checkout-0 in StatefulSet checkout successful", Count: 1, FirstSeen: at, LastSeen: at}
	}
	deployment := func(conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: replicas(3)}, Status: appsv1.DeploymentStatus{Conditions: conds}}
	}
	replicaFailure := appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
		Message: quota, LastTransitionTime: metav1.NewTime(t0)}
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
		Message: `ReplicaSet "checkout-7d9f8b6c4" has timed out progressing.`, LastTransitionTime: metav1.NewTime(t0.Add(30 * time.Second))}
	progressing := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
		LastTransitionTime: metav1.NewTime(t0)}
	statefulSet := func(want, have int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: replicas(want)}, Status: appsv1.StatefulSetStatus{Replicas: have}}
	}
	paused := deployment(deadline)
	paused.Spec.Paused = true
	job := &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Parallelism: replicas(2), Completions: replicas(2)}}
	doneJob := job.DeepCopy()
	doneJob.Status = batchv1.JobStatus{Succeeded: 2, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}

	tests := []struct {
		name      string
		obj       runtime.Object
		events    []triage.Event
		wantState string
		wantSince time.Time
		wantDue   time.Time
	}{
		{"a Deployment whose ReplicaSet is refused its pods is stuck failedCreate after the condition turned True",
			deployment(progressing, replicaFailure), nil, "FailedCreate", t0, t0.Add(th.FailedCreate)},
		{"a Deployment past its progress deadline is stuck at once",
			deployment(deadline), nil, "ProgressDeadlineExceeded", deadline.LastTransitionTime.Time, deadline.LastTransitionTime.Time},
		{"a Deployment past its deadline because it is refused its pods reads as past the deadline (due first)",
			deployment(deadline, replicaFailure), nil, "ProgressDeadlineExceeded", deadline.LastTransitionTime.Time, deadline.LastTransitionTime.Time},
		{"a paused Deployment has no deadline", paused, nil, "", time.Time{}, time.Time{}},
		{"a Deployment that progresses is in no state", deployment(progressing), nil, "", time.Time{}, time.Time{}},
		{"a bare ReplicaSet with ReplicaFailure True is refused",
			&appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: replicas(1)}, Status: appsv1.ReplicaSetStatus{Conditions: []appsv1.ReplicaSetCondition{
				{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: quota, LastTransitionTime: metav1.NewTime(t0)}}}},
			nil, "FailedCreate", t0, t0.Add(th.FailedCreate)},
		{"a StatefulSet short of pods with a FailedCreate event is refused since the event's first time",
			statefulSet(3, 0), []triage.Event{failedCreate}, "FailedCreate", t0, t0.Add(th.FailedCreate)},
		{"a StatefulSet whose FailedCreate a later SuccessfulCreate followed is in no state",
			statefulSet(3, 1), []triage.Event{created(t0.Add(2 * time.Minute)), failedCreate}, "", time.Time{}, time.Time{}},
		{"a StatefulSet with all its pods is in no state, whatever its old events say",
			statefulSet(3, 3), []triage.Event{failedCreate}, "", time.Time{}, time.Time{}},
		{"a StatefulSet short of pods with no FailedCreate is in no state (its pods, or the scheduler, say why)",
			statefulSet(3, 1), []triage.Event{created(t0)}, "", time.Time{}, time.Time{}},
		{"a DaemonSet short of pods with a FailedCreate event is refused",
			&appsv1.DaemonSet{ObjectMeta: meta, Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, CurrentNumberScheduled: 1}},
			[]triage.Event{failedCreate}, "FailedCreate", t0, t0.Add(th.FailedCreate)},
		{"a running Job with no active pod and a FailedCreate event is refused",
			job, []triage.Event{failedCreate}, "FailedCreate", t0, t0.Add(th.FailedCreate)},
		{"a completed Job is in no state", doneJob, []triage.Event{failedCreate}, "", time.Time{}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := workloadState(tt.obj, tt.events, th)
			if st.name != tt.wantState || !st.since.Equal(tt.wantSince) || !st.due.Equal(tt.wantDue) {
				t.Errorf("state = %q since %s due %s; want %q since %s due %s", st.name, st.since, st.due, tt.wantState, tt.wantSince, tt.wantDue)
			}
		})
	}
}

// TestWorkloadOfObject: a ReplicaSet a Deployment controls is posted as that Deployment, like
// its pods; other workload objects are themselves.
func TestWorkloadOfObject(t *testing.T) {
	yes := true
	rs := &metav1.ObjectMeta{Namespace: "shop", Name: "checkout-7d9f8b6c4",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "checkout", Controller: &yes}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout-7d9f8b6c4-x2", Labels: map[string]string{"pod-template-hash": "7d9f8b6c4"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "checkout-7d9f8b6c4", Controller: &yes}}}}
	if got, want := workloadOfObject("prod", triage.KindReplicaSet, rs), workloadOf("prod", &pod.ObjectMeta); got != want || got.Kind != triage.KindDeployment || got.Name != "checkout" {
		t.Errorf("ReplicaSet's workload = %+v, its pod's %+v; want both Deployment checkout", got, want)
	}
	bare := &metav1.ObjectMeta{Namespace: "shop", Name: "legacy"}
	if got := workloadOfObject("prod", triage.KindReplicaSet, bare); got.Kind != triage.KindReplicaSet || got.Name != "legacy" {
		t.Errorf("bare ReplicaSet's workload = %+v, want itself", got)
	}
	if got := workloadOfObject("prod", triage.KindStatefulSet, &metav1.ObjectMeta{Namespace: "db", Name: "pg"}); got.Kind != triage.KindStatefulSet || got.Name != "pg" || got.Namespace != "db" {
		t.Errorf("StatefulSet's workload = %+v, want itself", got)
	}
}
