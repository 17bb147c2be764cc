package triage

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestStuckWorkloadsAreNeverHealthy asks, for every workload kind and every admission refusal
// the rules read (and one they do not), about a workload whose controller's newest FailedCreate
// is current, and about CronJobs whose schedules are skipped: no answer may be
// workload-healthy. The same refusals followed by a successful create are history, and those
// answers are healthy: the check tells the two apart.
func TestStuckWorkloadsAreNeverHealthy(t *testing.T) {
	refusals := []struct {
		name, msg string
		want      Code
	}{
		{"quota exceeded", `pods "x-" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=1200m, limited: requests.cpu=1500m`, CodeResourceQuotaExceeded},
		{"quota object count", `jobs.batch "x-29146080" is forbidden: exceeded quota: objects, requested: count/jobs.batch=1, used: count/jobs.batch=30, limited: count/jobs.batch=30`, CodeResourceQuotaExceeded},
		{"quota must specify", `pods "x-" is forbidden: failed quota: compute: must specify limits.memory for: app`, CodeResourceQuotaExceeded},
		{"pod security", `pods "x-" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false)`, CodePodSecurityViolation},
		{"webhook denial", `admission webhook "deny.example.com" denied the request: no`, CodeAdmissionWebhookDenied},
		{"webhook unreachable", `Internal error occurred: failed calling webhook "v.example.com": failed to call webhook: Post "https://hook.infra.svc:443/v?timeout=10s": no endpoints available for service "hook"`, CodeAdmissionWebhookDenied},
		{"missing ServiceAccount", `pods "x-" is forbidden: error looking up service account shop/runner: serviceaccount "runner" not found`, CodeServiceAccountNotFound},
		{"LimitRange", `pods "x-" is forbidden: maximum cpu usage per Container is 1, but limit is 2`, CodeLimitRangeViolation},
		{"OpenShift SCC", `pods "x-" is forbidden: unable to validate against any security context constraint: [provider "anyuid": Forbidden: not usable by user or serviceaccount, provider restricted-v2: .containers[0].runAsUser: Invalid value: 0: must be in the ranges: [1000680000, 1000689999]]`, CodeOpenShiftSCCDenied},
		{"a refusal no rule models", `pods "x-" is forbidden: node selector conflicts with its namespace node selector`, CodeUnknown},
	}
	kinds := []struct {
		name string
		// build returns the workload with a current refusal (current true) or one that a later
		// successful create made history, and the UID of the object the event is on.
		build func(current bool) (*WorkloadSnapshot, types.UID)
	}{
		{"Deployment", stuckDeployment},
		{"StatefulSet", stuckStatefulSet},
		{"DaemonSet", stuckDaemonSet},
		{"Job", stuckJob},
		{"CronJob", stuckCronJob},
	}
	for _, k := range kinds {
		for _, r := range refusals {
			t.Run(k.name+"/"+r.name, func(t *testing.T) {
				ws, uid := k.build(true)
				ws.Events[uid] = append([]Event{failedCreate(r.msg, 7, 2*time.Minute)}, ws.Events[uid]...)
				d := EvaluateWorkload(ws)
				if got := d.Primary().Code; got == CodeWorkloadHealthy || got != r.want {
					t.Errorf("%s with a current refusal (%s): primary = %s, want %s; summary: %s", k.name, r.name, got, r.want, d.Summary)
				}

				old, uid := k.build(false)
				old.Events[uid] = append(old.Events[uid], failedCreate(r.msg, 7, 3*time.Hour))
				if got := EvaluateWorkload(old).Primary().Code; got != CodeWorkloadHealthy {
					t.Errorf("%s whose refusal a later create followed: primary = %s, want workload-healthy (the check must tell history from now)", k.name, got)
				}
			})
		}
	}

	t.Run("CronJob/Forbid with a Job that never finishes", func(t *testing.T) {
		ws, _ := stuckCronJob(false)
		cj := ws.CronJob
		cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
		cj.Spec.Schedule = "*/15 * * * *" // eleven runs fall in the three hours the Job hangs
		hung := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "export-29146440", UID: "uid-hung", CreationTimestamp: metav1.NewTime(clock0.Add(-3 * time.Hour)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "export", UID: "uid-cj", Controller: isTrue()}}}}
		hung.Status.Active = 1
		hung.Status.StartTime = &hung.CreationTimestamp
		ws.Jobs = append([]*batchv1.Job{hung}, ws.Jobs...)
		cj.Status.Active = []corev1.ObjectReference{{Kind: "Job", Name: hung.Name, UID: hung.UID}}
		cj.Status.LastScheduleTime = &hung.CreationTimestamp
		pod := ownedPod("hung1", 3*time.Hour, imageMissing)
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: hung.Name, UID: hung.UID, Controller: isTrue()}}
		ws.PodSnapshots[pod.UID] = testSnapshot(pod)
		ws.Pods = PodsOf(ws, []*corev1.Pod{pod})
		for _, skippedEvent := range []bool{true, false} {
			ws.Events = map[types.UID][]Event{}
			if skippedEvent {
				ws.Events["uid-cj"] = []Event{ev(corev1.EventTypeNormal, jobAlreadyActive, "", "Not starting job because prior execution is running and concurrency policy is Forbid", 11, 5*time.Minute)}
			}
			d := EvaluateWorkload(ws)
			if got := d.Primary().Code; got != CodeCronJobBlockedByActiveJob {
				t.Errorf("JobAlreadyActive event %t: primary = %s, want cronjob-blocked-by-active-job; summary: %s", skippedEvent, got, d.Summary)
			}
			// Deleting the hung Job stops its pods: the fix says so.
			if fix := strings.Join(d.Primary().Fix, "\n"); !strings.Contains(fix, "kubectl delete job -n shop export-29146440") || !strings.Contains(fix, "this stops the Job's running pods, and what they did so far is lost") {
				t.Errorf("fix = %q, want the hung Job's delete and what it costs", fix)
			}
		}
	})

	t.Run("CronJob that missed its schedule with nothing to say why", func(t *testing.T) {
		ws, _ := stuckCronJob(false)
		last := metav1.NewTime(clock0.Add(-50 * time.Hour)) // a daily schedule: two runs missed
		ws.CronJob.Status.LastScheduleTime = &last
		for _, j := range ws.Jobs {
			j.Status.StartTime = &last
		}
		if got := EvaluateWorkload(ws).Primary().Code; got == CodeWorkloadHealthy {
			t.Errorf("a CronJob two runs behind its schedule: primary = %s, want anything but workload-healthy", got)
		}
	})
}

// stuckDeployment is Deployment shop/checkout (3 replicas) whose ReplicaSet has 2 healthy
// pods; current false adds a SuccessfulCreate after the refusal (and all 3 pods).
func stuckDeployment(current bool) (*WorkloadSnapshot, types.UID) {
	pods := []*corev1.Pod{ownedPod("aaaaa", time.Hour), ownedPod("bbbbb", time.Hour)}
	if !current {
		pods = append(pods, ownedPod("ccccc", time.Hour))
	}
	ws := deploymentWS(3, pods...)
	ws.Deployment.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
	if !current {
		ws.Events["uid-rs"] = []Event{ev(corev1.EventTypeNormal, "SuccessfulCreate", "", "Created pod: checkout-7d9f8b6c4-ccccc", 1, time.Hour)}
	}
	return ws, "uid-rs"
}

// stuckStatefulSet is StatefulSet shop/ledger (2 replicas) with ledger-0 healthy.
func stuckStatefulSet(current bool) (*WorkloadSnapshot, types.UID) {
	replicas := int32(2)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ledger", UID: "uid-sts"}, Spec: appsv1.StatefulSetSpec{Replicas: &replicas}}
	sts.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
	ws := &WorkloadSnapshot{Now: clock0, Requested: WorkloadRef{Kind: KindStatefulSet, Namespace: "shop", Name: "ledger"}, StatefulSet: sts,
		PodSnapshots: map[types.UID]*Snapshot{}, Events: map[types.UID][]Event{}}
	n := 1
	if !current {
		n = 2
		ws.Events["uid-sts"] = []Event{ev(corev1.EventTypeNormal, "SuccessfulCreate", "", "create Pod ledger-1 in StatefulSet ledger successful", 1, time.Hour)}
	}
	var pods []*corev1.Pod
	for i := range n {
		p := ownedPod("s"+string(rune('0'+i)), time.Hour)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "ledger", UID: "uid-sts", Controller: isTrue()}}
		pods = append(pods, p)
		ws.PodSnapshots[p.UID] = testSnapshot(p)
	}
	sts.Status.Replicas = int32(n)
	ws.Pods = PodsOf(ws, pods)
	return ws, "uid-sts"
}

// stuckDaemonSet is DaemonSet shop/agent over two nodes with a pod on node-1.
func stuckDaemonSet(current bool) (*WorkloadSnapshot, types.UID) {
	nodes := []*corev1.Node{testNode("node-1", true, "v1.37.2"), testNode("node-2", true, "v1.37.2")}
	pods := []*corev1.Pod{daemonPodFor("node-1", false)}
	if !current {
		pods = append(pods, daemonPodFor("node-2", false))
	}
	ws := testDaemonSet(nodes, pods...)
	ws.DaemonSet.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
	ws.DaemonSet.Status.DesiredNumberScheduled = 2
	ws.DaemonSet.Status.CurrentNumberScheduled = int32(len(pods))
	ws.Events = map[types.UID][]Event{}
	if !current {
		ws.Events["uid-ds"] = []Event{ev(corev1.EventTypeNormal, "SuccessfulCreate", "", "Created pod: agent-x", 1, time.Hour)}
	}
	return ws, "uid-ds"
}

// stuckJob is Job shop/migrate that runs (current: no pod yet) or has completed.
func stuckJob(current bool) (*WorkloadSnapshot, types.UID) {
	ws := testJob(nil)
	ws.Job.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
	ws.Job.Status.Failed = 0
	ws.Events = map[types.UID][]Event{}
	if !current {
		ws.Job.Status.Succeeded = 1
		ws.Job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		ws.Events["uid-job"] = []Event{ev(corev1.EventTypeNormal, "SuccessfulCreate", "", "Created pod: migrate-x", 1, time.Hour)}
	}
	return ws, "uid-job"
}

// stuckCronJob is CronJob shop/export (daily at 08:00, Allow) with a completed Job; current
// false makes its last schedule (and that Job) newer than the refusal.
func stuckCronJob(current bool) (*WorkloadSnapshot, types.UID) {
	lastRun := clock0.Add(-26 * time.Hour)
	if !current {
		lastRun = clock0.Add(-time.Hour)
	}
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "export", UID: "uid-cj"}, Spec: batchv1.CronJobSpec{Schedule: "0 8 * * *"}}
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
	if !current {
		// Between runs: it ran at 11:00 (an hour before clock0), the next run is tomorrow.
		cj.Spec.Schedule = "0 11 * * *"
	}
	ls := metav1.NewTime(lastRun)
	cj.Status.LastScheduleTime = &ls
	done := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "export-1", UID: "uid-done",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "export", UID: "uid-cj", Controller: isTrue()}}}}
	done.Status.StartTime = &ls
	done.Status.Succeeded = 1
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	ws := &WorkloadSnapshot{Now: clock0, Requested: WorkloadRef{Kind: KindCronJob, Namespace: "shop", Name: "export"}, CronJob: cj, Jobs: []*batchv1.Job{done},
		PodSnapshots: map[types.UID]*Snapshot{}, Events: map[types.UID][]Event{}}
	return ws, "uid-cj"
}
