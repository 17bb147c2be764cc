package triage

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Builders for the workload tables: Deployment shop/checkout (uid-deploy) with ReplicaSet
// checkout-7d9f8b6c4 (uid-rs), pods named checkout-7d9f8b6c4-<suffix> owned by it, each read
// in full as a testSnapshot.

const rsName = "checkout-7d9f8b6c4"

func isTrue() *bool { b := true; return &b }

// ownedPod is a pod of ReplicaSet checkout-7d9f8b6c4, created age before clock0.
func ownedPod(suffix string, age time.Duration, opts ...podOpt) *corev1.Pod {
	p := testPod(opts...)
	p.Name = rsName + "-" + suffix
	p.UID = types.UID("uid-" + suffix)
	p.CreationTimestamp = metav1.NewTime(clock0.Add(-age))
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rsName, UID: "uid-rs", Controller: isTrue()}}
	return p
}

func testReplicaSet(replicas, current int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: rsName, UID: "uid-rs",
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "checkout", UID: "uid-deploy", Controller: isTrue()}}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: &replicas},
		Status: appsv1.ReplicaSetStatus{Replicas: current},
	}
}

// deploymentWS is the snapshot of Deployment checkout (replicas) whose ReplicaSet has the pods,
// each read in full.
func deploymentWS(replicas int32, pods ...*corev1.Pod) *WorkloadSnapshot {
	ws := &WorkloadSnapshot{
		Now:          clock0,
		Requested:    WorkloadRef{Kind: KindDeployment, Namespace: "shop", Name: "checkout"},
		Deployment:   &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", UID: "uid-deploy"}, Spec: appsv1.DeploymentSpec{Replicas: &replicas}},
		ReplicaSets:  []*appsv1.ReplicaSet{testReplicaSet(replicas, int32(len(pods)))},
		PodSnapshots: map[types.UID]*Snapshot{},
		Events:       map[types.UID][]Event{},
	}
	ws.Pods = PodsOf(ws, pods)
	for _, p := range pods {
		ws.PodSnapshots[p.UID] = testSnapshot(p)
	}
	return ws
}

func crashLooping(p *corev1.Pod) { crashLoop("app", 5, 1, "Error", "boom")(p) }

func imageMissing(p *corev1.Pod) {
	pending("ImagePullBackOff", `Back-off pulling image "registry.example.com/shop/app:1.0"`)(p)
}

func TestEvaluateWorkloadGroupsPodsByCode(t *testing.T) {
	ws := deploymentWS(5,
		ownedPod("aaaaa", 3*time.Hour, crashLooping),
		ownedPod("bbbbb", 2*time.Hour),
		ownedPod("ccccc", time.Hour, crashLooping),
		ownedPod("ddddd", 4*time.Hour, crashLooping),
		ownedPod("eeeee", 90*time.Minute, imageMissing),
	)
	ws.PodSnapshots["uid-eeeee"].Events = []Event{warning("Failed", `Failed to pull image "registry.example.com/shop/app:1.0": manifest unknown`, 3, time.Minute)}
	d := EvaluateWorkload(ws)

	type group struct {
		Code  Code
		Label string
		Rep   string
		Pods  []string
	}
	var got []group
	for _, g := range d.Groups {
		gr := group{Code: g.Code, Label: g.Label, Rep: g.Diagnosis.Pod.Name}
		for _, p := range g.Pods {
			gr.Pods = append(gr.Pods, p.Name)
		}
		got = append(got, gr)
		if g.Diagnosis.Primary().Code != g.Code {
			t.Errorf("group %s: representative's code = %s", g.Code, g.Diagnosis.Primary().Code)
		}
	}
	want := []group{
		{CodeAppError, "3 of 5 pods CrashLoopBackOff: app-error", rsName + "-ddddd", []string{rsName + "-ddddd", rsName + "-aaaaa", rsName + "-ccccc"}},
		{CodeImageNotFound, "1 of 5 pods ImagePullBackOff: image-not-found", rsName + "-eeeee", []string{rsName + "-eeeee"}},
		{CodePodHealthy, "1 Running and Ready", rsName + "-bbbbb", []string{rsName + "-bbbbb"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EvaluateWorkload groups mismatch (-want +got):\n%s", diff)
	}
	p := d.Primary()
	if p.Code != CodeAppError || p.Severity != SeverityBlocker {
		t.Errorf("primary = %s/%s, want app-error/blocker (the largest stuck group)", p.Code, p.Severity)
	}
	if !strings.HasPrefix(d.Summary, "3 of 5 pods CrashLoopBackOff: app-error; 1 of 5 pods ImagePullBackOff: image-not-found; 1 Running and Ready.") {
		t.Errorf("summary = %q, want it to lead with the groups", d.Summary)
	}
	if d.Ready != 1 || d.Pods != 5 || d.Desired == nil || *d.Desired != 5 {
		t.Errorf("ready/pods/desired = %d/%d/%v, want 1/5/5", d.Ready, d.Pods, d.Desired)
	}
	if len(p.Evidence) != 3 || p.Evidence[0].Object != "Pod shop/"+rsName+"-ddddd" {
		t.Errorf("primary evidence = %+v, want one line per pod of the group, the representative first", p.Evidence)
	}
}

func TestPodsToDiagnoseCapsAndKeepsOneHealthy(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 40 {
		pods = append(pods, ownedPod(fmt.Sprintf("c%04d", i), time.Duration(100-i)*time.Minute, crashLooping))
	}
	for i := range 5 {
		pods = append(pods, ownedPod(fmt.Sprintf("h%04d", i), time.Duration(200-i)*time.Minute))
	}
	ws := deploymentWS(45, pods...)
	got := PodsToDiagnose(ws)
	if len(got) != MaxDiagnosedPods+1 {
		t.Fatalf("PodsToDiagnose = %d pods, want %d stuck + 1 healthy", len(got), MaxDiagnosedPods)
	}
	if last := got[len(got)-1]; last.Name != rsName+"-h0000" {
		t.Errorf("last pod read = %s, want the oldest healthy pod", last.Name)
	}
	ws.PodSnapshots = map[types.UID]*Snapshot{}
	for _, p := range got {
		ws.PodSnapshots[p.UID] = testSnapshot(p)
	}
	d := EvaluateWorkload(ws)
	if len(d.NotDiagnosed) != 10 || d.Ready != 5 {
		t.Errorf("not diagnosed = %d, ready = %d, want 10 and 5 (healthy pods are counted without a read)", len(d.NotDiagnosed), d.Ready)
	}
	if len(d.Groups) != 2 || d.Groups[0].Label != "40 of 45 pods CrashLoopBackOff: app-error (30 read in full)" || d.Groups[1].Label != "5 Running and Ready" {
		t.Errorf("group labels = %q, want every CrashLoopBackOff pod counted", []string{d.Groups[0].Label, d.Groups[len(d.Groups)-1].Label})
	}
}

// failedCreate is the FailedCreate event the ReplicaSet controller writes.
func failedCreate(msg string, count int32, ago time.Duration) Event {
	return warning("FailedCreate", "Error creating: "+msg, count, ago)
}

func TestFailedCreateCauses(t *testing.T) {
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "compute"}}
	quota.Status.Hard = corev1.ResourceList{"requests.cpu": resource.MustParse("1500m")}
	quota.Status.Used = corev1.ResourceList{"requests.cpu": resource.MustParse("1200m")}
	limits := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bounds"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"cpu": resource.MustParse("1")}}}}}
	restricted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	tests := []struct {
		name          string
		msg           string
		wantCode      Code
		wantUncertain bool
		wantEvidence  string // an Evidence.Object the finding must name
		wantFix       string // a fix line the finding must hold
	}{
		{"quota exceeded names the quota, its status and what is left",
			`pods "checkout-7d9f8b6c4-" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=1200m, limited: requests.cpu=1500m`,
			CodeResourceQuotaExceeded, false, "ResourceQuota shop/compute", "kubectl describe resourcequota -n shop compute"},
		{"a quota that requires requests the template lacks",
			`pods "checkout-7d9f8b6c4-" is forbidden: failed quota: compute: must specify requests.cpu for: app; requests.memory for: app`,
			CodeResourceQuotaExceeded, false, "ResourceQuota shop/compute", "kubectl describe resourcequota -n shop compute"},
		{"pod security names the level and each field",
			`pods "checkout-7d9f8b6c4-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or container "app" must set securityContext.runAsNonRoot=true)`,
			CodePodSecurityViolation, false, "Namespace shop", `In the pod template, set securityContext.allowPrivilegeEscalation=false on container "app".`},
		{"a webhook's denial",
			`admission webhook "deny.policy.example.com" denied the request: images from docker.io are not allowed`,
			CodeAdmissionWebhookDenied, false, "ReplicaSet shop/" + rsName,
			"kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations -o custom-columns=CONFIG:.metadata.name,WEBHOOKS:.webhooks[*].name | grep -F deny.policy.example.com"},
		{"a webhook the API server cannot call",
			`Internal error occurred: failed calling webhook "mutate.istio.io": failed to call webhook: Post "https://istiod.istio-system.svc:443/inject": dial tcp 10.96.4.2:443: connect: connection refused`,
			CodeAdmissionWebhookDenied, false, "ReplicaSet shop/" + rsName,
			"kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations -o custom-columns=CONFIG:.metadata.name,WEBHOOKS:.webhooks[*].name | grep -F mutate.istio.io"},
		{"a missing ServiceAccount, with the closest existing names",
			`pods "checkout-7d9f8b6c4-" is forbidden: error looking up service account shop/checkout-sa: serviceaccount "checkout-sa" not found`,
			CodeServiceAccountNotFound, false, "Namespace shop", "kubectl create serviceaccount -n shop checkout-sa   # the controller's next retry creates the pods"},
		{"a missing ServiceAccount whose name is a typo of one that exists",
			`pods "checkout-7d9f8b6c4-" is forbidden: error looking up service account shop/chekout: serviceaccount "chekout" not found`,
			CodeServiceAccountNotFound, false, "Namespace shop", "kubectl create serviceaccount -n shop chekout   # the controller's next retry creates the pods"},
		{"a LimitRange bound",
			`pods "checkout-7d9f8b6c4-" is forbidden: [maximum cpu usage per Container is 1, but limit is 2, minimum memory usage per Container is 64Mi, but request is 32Mi]`,
			CodeLimitRangeViolation, false, "LimitRange shop/bounds", "kubectl describe limitrange -n shop"},
		{"an admission error no rule models is an honest unknown",
			`pods "checkout-7d9f8b6c4-" is forbidden: node selector conflicts with its namespace node selector`,
			CodeUnknown, true, "ReplicaSet shop/" + rsName, "kubectl describe rs/checkout-7d9f8b6c4 -n shop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := deploymentWS(3, ownedPod("aaaaa", time.Hour))
			ws.Events["uid-rs"] = []Event{failedCreate(tt.msg, 12, time.Minute)}
			ws.ResourceQuotas = []*corev1.ResourceQuota{quota}
			ws.LimitRanges = []*corev1.LimitRange{limits}
			ws.Namespace = restricted
			ws.ServiceAccountNames = []string{"checkout", "default"}
			d := EvaluateWorkload(ws)
			p := d.Primary()
			if p.Code != tt.wantCode || p.Severity != SeverityBlocker || p.Uncertain != tt.wantUncertain {
				t.Fatalf("primary = %s/%s uncertain=%t, want %s/blocker uncertain=%t: %s", p.Code, p.Severity, p.Uncertain, tt.wantCode, tt.wantUncertain, p.Summary)
			}
			if p.Evidence[0].Reason != "FailedCreate" || p.Evidence[0].Count != 12 || p.Evidence[0].Object != "ReplicaSet shop/"+rsName {
				t.Errorf("first evidence = %+v, want the ReplicaSet's FailedCreate event", p.Evidence[0])
			}
			if !slices.ContainsFunc(p.Evidence, func(e Evidence) bool { return e.Object == tt.wantEvidence }) {
				t.Errorf("evidence %+v lacks %s", p.Evidence, tt.wantEvidence)
			}
			if !slices.Contains(p.Fix, tt.wantFix) {
				t.Errorf("fix = %q, want %q among it", p.Fix, tt.wantFix)
			}
			if !looksFirst(p.Fix) {
				t.Errorf("fix acts before it looks:\n%s", strings.Join(p.Fix, "\n"))
			}
			switch tt.wantCode {
			case CodePodSecurityViolation:
				// The namespace's labels are read before the template or the level changes.
				checkBefore(t, p.Fix, "kubectl get namespace shop --show-labels", "In the pod template")
			case CodeServiceAccountNotFound:
				// Creating the account and pointing at the near name are one choice.
				if strings.Contains(tt.name, "typo") {
					checkBefore(t, p.Fix, "Either create ServiceAccount chekout", "kubectl create serviceaccount")
					checkBefore(t, p.Fix, "kubectl create serviceaccount", "kubectl set serviceaccount")
				}
			case CodeResourceQuotaExceeded:
				if stepIndex(p.Fix, "Free room") >= 0 && (stepIndex(p.Fix, "kubectl set resources") >= 0 || stepIndex(p.Fix, "kubectl patch resourcequota") >= 0) {
					t.Errorf("fix frees room and offers other changes without saying they are alternatives:\n%s", strings.Join(p.Fix, "\n"))
				}
			}
			if NeedsServiceAccountNames(ws) != (tt.wantCode == CodeServiceAccountNotFound) {
				t.Errorf("NeedsServiceAccountNames = %t", NeedsServiceAccountNames(ws))
			}
		})
	}
}

func TestFailedCreateThatASuccessFollowedIsHistory(t *testing.T) {
	ws := deploymentWS(1, ownedPod("aaaaa", time.Hour))
	ws.Events["uid-rs"] = []Event{
		warning("FailedCreate", `Error creating: pods "checkout-7d9f8b6c4-" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=1200m, limited: requests.cpu=1500m`, 4, 20*time.Minute),
		ev(corev1.EventTypeNormal, "SuccessfulCreate", "", "Created pod: checkout-7d9f8b6c4-aaaaa", 1, 10*time.Minute),
	}
	d := EvaluateWorkload(ws)
	if got := codesOf(d.Findings); !slices.Equal(got, []Code{CodeWorkloadHealthy, CodeUnknown}) || d.Findings[1].Severity != SeverityInfo {
		t.Errorf("findings = %v (second %s), want workload-healthy then the refusal as info history", got, d.Findings[len(d.Findings)-1].Severity)
	}
}

func TestRolloutStalledNamesTheNewReplicaSetsPods(t *testing.T) {
	ws := deploymentWS(2, ownedPod("aaaaa", time.Hour, crashLooping))
	ws.Deployment.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "checkout-7d9f8b6c4" has timed out progressing.`}}
	d := EvaluateWorkload(ws)
	p := d.Primary()
	if p.Code != CodeRolloutStalled || p.Evidence[0].Field != "status.conditions[Progressing]" {
		t.Fatalf("primary = %s (evidence %+v), want rollout-stalled from the Progressing condition", p.Code, p.Evidence)
	}
	if !strings.Contains(p.Summary, "1 pod CrashLoopBackOff: app-error") {
		t.Errorf("summary = %q, want the new ReplicaSet's pod cause in it", p.Summary)
	}
	if slices.ContainsFunc(p.Fix, func(f string) bool { return strings.HasPrefix(f, "kubectl rollout undo") }) {
		t.Errorf("fix = %q, want no rollout undo for the first revision", p.Fix)
	}
	old := testReplicaSet(0, 0)
	old.Name, old.UID, old.Annotations["deployment.kubernetes.io/revision"] = "checkout-5c6d7e8f9", "uid-rs-old", "0"
	ws.ReplicaSets = append(ws.ReplicaSets, old)
	if p := EvaluateWorkload(ws).Primary(); !slices.Contains(p.Fix, "kubectl rollout undo deploy/checkout -n shop  # back to the previous revision, if the new one is at fault") {
		t.Errorf("with an earlier revision: fix = %q, want rollout undo", p.Fix)
	}
}

func TestNeverRestartedPodsGetNoPreviousLogs(t *testing.T) {
	ws := testJob(&batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded}, failedRun("aaaaa"))
	d := EvaluateWorkload(ws)
	if len(d.Groups) != 1 {
		t.Fatalf("groups = %+v", d.Groups)
	}
	fix := d.Groups[0].Diagnosis.Primary().Fix
	for _, f := range fix {
		if strings.Contains(f, "--previous") || strings.Contains(f, "roll out again") {
			t.Errorf("fix %q does not work for a restartPolicy Never Job pod", f)
		}
	}
	if !slices.Contains(fix, "kubectl logs -n shop checkout-7d9f8b6c4-aaaaa -c app") {
		t.Errorf("fix = %q, want the current container's logs", fix)
	}
}

// testJob is Job shop/migrate with pods owned by it.
func testJob(failed *batchv1.JobCondition, pods ...*corev1.Pod) *WorkloadSnapshot {
	limit := int32(3)
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "migrate", UID: "uid-job"}, Spec: batchv1.JobSpec{BackoffLimit: &limit}}
	j.Status.Failed = int32(len(pods))
	if failed != nil {
		j.Status.Conditions = []batchv1.JobCondition{*failed}
	}
	ws := &WorkloadSnapshot{Now: clock0, Requested: WorkloadRef{Kind: KindJob, Namespace: "shop", Name: "migrate"}, Job: j, PodSnapshots: map[types.UID]*Snapshot{}}
	for _, p := range pods {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "migrate", UID: "uid-job", Controller: isTrue()}}
		ws.PodSnapshots[p.UID] = testSnapshot(p)
	}
	ws.Pods = PodsOf(ws, pods)
	return ws
}

func failedRun(name string) *corev1.Pod {
	p := ownedPod(name, time.Hour)
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Status.Phase = corev1.PodFailed
	unready(p)
	status(p, "app").State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
		StartedAt: metav1.NewTime(clock0.Add(-50 * time.Minute)), FinishedAt: metav1.NewTime(clock0.Add(-49 * time.Minute))}}
	return p
}

func TestJobFailures(t *testing.T) {
	backoff := &batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit"}
	deadline := &batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline"}
	tests := []struct {
		name string
		ws   *WorkloadSnapshot
		want Code
	}{
		{"backoffLimit reached", testJob(backoff, failedRun("aaaaa"), failedRun("bbbbb"), failedRun("ccccc"), failedRun("ddddd")), CodeJobBackoffLimit},
		{"activeDeadlineSeconds reached", testJob(deadline, failedRun("aaaaa")), CodeJobFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := EvaluateWorkload(tt.ws)
			if p := d.Primary(); p.Code != tt.want || p.Evidence[0].Field != "status.conditions[Failed]" {
				t.Errorf("primary = %s (evidence %+v), want %s from the Failed condition", p.Code, p.Evidence, tt.want)
			}
			if len(d.Groups) != 1 || !d.Groups[0].Stuck() {
				t.Errorf("groups = %+v, want the failed pods in one stuck group", d.Groups)
			}
		})
	}
	t.Run("a CronJob is judged by its newest Job", func(t *testing.T) {
		ws := testJob(backoff, failedRun("aaaaa"))
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nightly", UID: "uid-cj"}}
		ws.Job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "uid-cj", Controller: isTrue()}}
		ws.Jobs, ws.Job, ws.CronJob = OwnedJobs(cj, []*batchv1.Job{ws.Job}), nil, cj
		ws.Requested = WorkloadRef{Kind: KindCronJob, Namespace: "shop", Name: "nightly"}
		ws.Pods = PodsOf(ws, ws.Pods)
		d := EvaluateWorkload(ws)
		if p := d.Primary(); p.Code != CodeJobBackoffLimit || !slices.Contains(p.Fix, "kubectl create job -n shop --from=cronjob/nightly nightly-manual  # run it once now") {
			t.Errorf("primary = %s, fix %q, want job-backoff-limit with a manual run", p.Code, p.Fix)
		}
	})
}

// testDaemonSet is DaemonSet shop/agent over nodes, with its pods.
func testDaemonSet(nodes []*corev1.Node, pods ...*corev1.Pod) *WorkloadSnapshot {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "agent", UID: "uid-ds"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}
	ds.Status.DesiredNumberScheduled = int32(len(pods))
	ws := &WorkloadSnapshot{Now: clock0, Requested: WorkloadRef{Kind: KindDaemonSet, Namespace: "shop", Name: "agent"}, DaemonSet: ds, Nodes: nodes, PodSnapshots: map[types.UID]*Snapshot{}}
	for _, p := range pods {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "uid-ds", Controller: isTrue()}}
		ws.PodSnapshots[p.UID] = testSnapshot(p)
	}
	ws.Pods = PodsOf(ws, pods)
	return ws
}

// daemonPodFor is a daemon pod pinned to node as the controller pins it; gated makes it wait on
// a scheduling gate, unscheduled.
func daemonPodFor(node string, gated bool) *corev1.Pod {
	p := ownedPod("for-"+node, time.Hour)
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	if gated {
		p.Spec.NodeName = ""
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}}}
	} else {
		p.Spec.NodeName = node
	}
	return p
}

func TestDaemonSetUnplaced(t *testing.T) {
	tainted := testNode("node-3", true, "v1.37.2")
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	cordoned := testNode("node-4", true, "v1.37.2")
	cordoned.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	nodes := []*corev1.Node{testNode("node-1", true, "v1.37.2"), testNode("node-2", true, "v1.37.2"), tainted, cordoned}

	t.Run("a wanted node without a scheduled pod is a blocker, with each node's reason", func(t *testing.T) {
		ws := testDaemonSet(nodes, daemonPodFor("node-1", false), daemonPodFor("node-2", true), daemonPodFor("node-4", false))
		d := EvaluateWorkload(ws)
		p := d.Primary()
		if p.Code != CodeDaemonSetUnplaced || p.Severity != SeverityBlocker {
			t.Fatalf("primary = %s/%s, want daemonset-unplaced/blocker: %s", p.Code, p.Severity, p.Summary)
		}
		var rows []string
		for _, nv := range p.Nodes {
			rows = append(rows, fmt.Sprintf("%s %s", nv.Node, nv.Reasons[0].Code))
		}
		if want := []string{"node-2 scheduling-gated", "node-3 untolerated-taint"}; !slices.Equal(rows, want) {
			t.Errorf("node rows = %q, want %q (the cordoned node-4 is tolerated by every daemon pod)", rows, want)
		}
		if !slices.ContainsFunc(p.Fix, func(f string) bool {
			return strings.HasPrefix(f, `kubectl patch daemonset -n shop agent --type=json -p '[{"op":"add","path":"/spec/template/spec/tolerations","value":[{"key":"dedicated","operator":"Equal","value":"gpu","effect":"NoSchedule"}]}]'`)
		}) {
			t.Errorf("fix = %q, want the toleration patch for dedicated=gpu", p.Fix)
		}
		// Its pods and where they run are read first.
		if !strings.HasPrefix(p.Fix[0], "kubectl get pods -n shop -o wide -l ") {
			t.Errorf("fix[0] = %q, want the DaemonSet's pods", p.Fix[0])
		}
	})
	t.Run("nodes its own rules skip are context when every wanted node has a pod", func(t *testing.T) {
		ws := testDaemonSet(nodes, daemonPodFor("node-1", false), daemonPodFor("node-2", false), daemonPodFor("node-4", false))
		d := EvaluateWorkload(ws)
		if got := codesOf(d.Findings); !slices.Equal(got, []Code{CodeWorkloadHealthy, CodeDaemonSetUnplaced}) || d.Findings[1].Severity != SeverityInfo {
			t.Errorf("findings = %v, want workload-healthy with daemonset-unplaced as info", got)
		}
	})
}

func TestWorkloadWithoutPodsOrObject(t *testing.T) {
	t.Run("not found suggests close names", func(t *testing.T) {
		ws := &WorkloadSnapshot{Now: clock0, Requested: WorkloadRef{Kind: KindStatefulSet, Namespace: "shop", Name: "checkout"},
			SimilarWorkloads: ClosestWorkloadNames([]WorkloadRef{{Kind: KindDeployment, Name: "checkout"}, {Kind: KindStatefulSet, Name: "checkouts"}, {Kind: KindDaemonSet, Name: "agent"}},
				WorkloadRef{Kind: KindStatefulSet, Name: "checkout"}, 5)}
		d := EvaluateWorkload(ws)
		if p := d.Primary(); p.Code != CodeWorkloadNotFound || !slices.Equal(ws.SimilarWorkloads, []string{"deploy/checkout", "sts/checkouts"}) {
			t.Errorf("primary = %s, similar = %q, want workload-not-found suggesting deploy/checkout, sts/checkouts", p.Code, ws.SimilarWorkloads)
		}
	})
	t.Run("scaled to zero is healthy", func(t *testing.T) {
		d := EvaluateWorkload(deploymentWS(0))
		if p := d.Primary(); p.Code != CodeWorkloadHealthy || p.Severity != SeverityInfo {
			t.Errorf("primary = %s/%s, want workload-healthy/info", p.Code, p.Severity)
		}
	})
	t.Run("wanting pods with none and no event is an honest unknown", func(t *testing.T) {
		d := EvaluateWorkload(deploymentWS(3))
		if p := d.Primary(); p.Code != CodeUnknown || !p.Uncertain || !d.Uncertain {
			t.Errorf("primary = %s uncertain=%t, want an uncertain unknown", p.Code, p.Uncertain)
		}
	})
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		arg     string
		all     bool
		want    Target
		wantErr bool
	}{
		{arg: "web-7f9c", want: Target{Namespace: "shop", Name: "web-7f9c"}},
		{arg: "prod/web-7f9c", want: Target{Namespace: "prod", Name: "web-7f9c"}},
		{arg: "deploy/checkout", want: Target{Namespace: "shop", Kind: KindDeployment, Name: "checkout", OtherReading: &PodRef{Namespace: "deploy", Name: "checkout"}}},
		{arg: "Deployments.apps/checkout", want: Target{Namespace: "shop", Kind: KindDeployment, Name: "checkout"}},
		{arg: "sts/db", want: Target{Namespace: "shop", Kind: KindStatefulSet, Name: "db", OtherReading: &PodRef{Namespace: "sts", Name: "db"}}},
		{arg: "ds/agent", want: Target{Namespace: "shop", Kind: KindDaemonSet, Name: "agent", OtherReading: &PodRef{Namespace: "ds", Name: "agent"}}},
		{arg: "cj/nightly", want: Target{Namespace: "shop", Kind: KindCronJob, Name: "nightly", OtherReading: &PodRef{Namespace: "cj", Name: "nightly"}}},
		{arg: "rs/checkout-7d9f8b6c4", want: Target{Namespace: "shop", Kind: KindReplicaSet, Name: "checkout-7d9f8b6c4", OtherReading: &PodRef{Namespace: "rs", Name: "checkout-7d9f8b6c4"}}},
		{arg: "po/web", want: Target{Namespace: "shop", Kind: KindPod, Name: "web", OtherReading: &PodRef{Namespace: "po", Name: "web"}}},
		{arg: "jobs/migrate", want: Target{Namespace: "shop", Kind: KindJob, Name: "migrate", OtherReading: &PodRef{Namespace: "jobs", Name: "migrate"}}},
		{all: true, want: Target{Namespace: "shop", All: true}},
		{arg: "web", all: true, wantErr: true},
		{arg: "", wantErr: true},
		{arg: "deploy/Checkout_1", wantErr: true},
		{arg: "Shop/web", wantErr: true},
		{arg: "prod/deploy/cart", wantErr: true},
		{arg: "/cart", wantErr: true},
		{arg: "deploy/", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseTarget(tt.arg, "shop", tt.all)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseTarget(%q, all=%t) error = %v, want error %t", tt.arg, tt.all, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); err == nil && diff != "" {
			t.Errorf("ParseTarget(%q) mismatch (-want +got):\n%s", tt.arg, diff)
		}
	}
}

// TestParseTargetNamespaceKindName: NAMESPACE/KIND/NAME ("shop/deploy/cart", for kubectl's
// -n shop deploy/cart) is refused with the -n form to ask instead, never read as some other
// object; a part that no object can have is refused as such, and a KIND kubectl does not
// know keeps the invalid-name error.
func TestParseTargetNamespaceKindName(t *testing.T) {
	// An empty side of the '/' is named as such, not as an invalid namespace "".
	if _, err := ParseTarget("/cart", "shop", false); err == nil || !strings.Contains(err.Error(), "nothing on one side") {
		t.Errorf(`ParseTarget("/cart") error = %v, want one that names the empty side of '/'`, err)
	}
	tests := []struct {
		name    string
		arg     string
		want    *NamespaceKindNameError // nil: another error
		wantErr string
	}{
		{name: "a deployment after its namespace", arg: "prod/deploy/cart",
			want:    &NamespaceKindNameError{Arg: "prod/deploy/cart", Namespace: "prod", Kind: KindDeployment, Name: "cart"},
			wantErr: `"prod/deploy/cart" puts the namespace before the kind: use -n prod deploy/cart (namespace first, then kind/name)`},
		{name: "a group-qualified plural in capitals is the same kind, hinted by its short name", arg: "prod/Deployments.apps/cart",
			want:    &NamespaceKindNameError{Arg: "prod/Deployments.apps/cart", Namespace: "prod", Kind: KindDeployment, Name: "cart"},
			wantErr: `"prod/Deployments.apps/cart" puts the namespace before the kind: use -n prod deploy/cart (namespace first, then kind/name)`},
		{name: "a statefulset", arg: "shop/sts/db",
			want:    &NamespaceKindNameError{Arg: "shop/sts/db", Namespace: "shop", Kind: KindStatefulSet, Name: "db"},
			wantErr: `"shop/sts/db" puts the namespace before the kind: use -n shop sts/db (namespace first, then kind/name)`},
		{name: "a pod", arg: "shop/pod/web-7f9c",
			want:    &NamespaceKindNameError{Arg: "shop/pod/web-7f9c", Namespace: "shop", Kind: KindPod, Name: "web-7f9c"},
			wantErr: `"shop/pod/web-7f9c" puts the namespace before the kind: use -n shop po/web-7f9c (namespace first, then kind/name)`},
		{name: "the namespace between the kind and the name", arg: "deploy/shop/cart",
			want:    &NamespaceKindNameError{Arg: "deploy/shop/cart", Namespace: "shop", Kind: KindDeployment, Name: "cart", KindFirst: true},
			wantErr: `"deploy/shop/cart" puts the namespace between the kind and the name: use -n shop deploy/cart (namespace first, then kind/name)`},
		{name: "kind first with a name no deployment can have", arg: "deploy/shop/Cart_1",
			wantErr: `"Cart_1" is not a valid deployment name (lower-case letters, digits, '-' and '.')`},
		{name: "a name no deployment can have is refused as such", arg: "prod/deploy/Cart_1",
			wantErr: `"Cart_1" is not a valid deployment name (lower-case letters, digits, '-' and '.')`},
		{name: "a namespace no namespace can have is refused as such", arg: "Prod/deploy/cart",
			wantErr: `"Prod" is not a valid namespace name (lower-case letters, digits and '-', at most 63 characters)`},
		{name: "a kind whypending does not know keeps the invalid-name error", arg: "prod/svc/web",
			wantErr: `"svc/web" is not a valid pod or workload name (lower-case letters, digits, '-' and '.')`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTarget(tt.arg, "default", false)
			if err == nil {
				t.Fatalf("ParseTarget(%q) = %+v, want an error", tt.arg, got)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("ParseTarget(%q) error = %q, want %q", tt.arg, err, tt.wantErr)
			}
			var nkn *NamespaceKindNameError
			errors.As(err, &nkn) // nkn stays nil for another error
			if diff := cmp.Diff(tt.want, nkn); diff != "" {
				t.Errorf("ParseTarget(%q) NamespaceKindNameError mismatch (-want +got):\n%s", tt.arg, diff)
			}
			if nkn == nil {
				return
			}
			// The hint is a question that parses, and asks about what the argument named.
			hinted, err := ParseTarget(nkn.Kind.Short()+"/"+nkn.Name, nkn.Namespace, false) // -n sets the namespace
			if err == nil {
				hinted, err = hinted.Given(nkn.Namespace)
			}
			if err != nil || hinted.Namespace != nkn.Namespace || hinted.Kind != nkn.Kind || hinted.Name != nkn.Name {
				t.Errorf("the hint -n %s %s/%s reads as %+v, %v; want %s %s in %s", nkn.Namespace, nkn.Kind.Short(), nkn.Name, hinted, err, nkn.Kind, nkn.Name, nkn.Namespace)
			}
		})
	}
}

func TestEvaluateNamespaceGroupsByCause(t *testing.T) {
	quotaBlocked := deploymentWS(3, ownedPod("aaaaa", time.Hour))
	quotaBlocked.Events["uid-rs"] = []Event{failedCreate(`pods "checkout-7d9f8b6c4-" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=1200m, limited: requests.cpu=1500m`, 3, time.Minute)}
	crashy := deploymentWS(3, ownedPod("bbbbb", time.Hour, crashLooping), ownedPod("ccccc", time.Hour, crashLooping), ownedPod("ddddd", time.Hour))
	crashy.Requested.Name, crashy.Deployment.Name = "payments", "payments"
	bare := testPod(imageMissing)
	bare.Name, bare.UID = "debug", "uid-debug"
	ns := &NamespaceSnapshot{Now: clock0, Namespace: "shop", Workloads: []*WorkloadSnapshot{quotaBlocked, crashy},
		Pods: []*corev1.Pod{bare}, PodSnapshots: map[types.UID]*Snapshot{"uid-debug": testSnapshot(bare)}}
	d := EvaluateNamespace(ns)
	type item struct {
		Code  Code
		Pods  int
		Items []string
	}
	var got []item
	for _, c := range d.Causes {
		it := item{Code: c.Code, Pods: c.Pods}
		for _, i := range c.Items {
			it.Items = append(it.Items, fmt.Sprintf("%s %s %d", i.Kind, i.Name, i.Count))
		}
		got = append(got, it)
	}
	want := []item{ // most pods first, ties by code
		{CodeAppError, 2, []string{"Deployment payments 2"}},
		{CodeResourceQuotaExceeded, 2, []string{"Deployment checkout 2"}},
		{CodeImagePullFailed, 1, []string{"Pod debug 1"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("causes mismatch (-want +got):\n%s", diff)
	}
	if d.Pods != 5 || d.Ready != 2 || d.Stuck != 3 || d.Failing != 2 {
		t.Errorf("pods/ready/stuck/failing = %d/%d/%d/%d, want 5/2/3/2", d.Pods, d.Ready, d.Stuck, d.Failing)
	}

	healthy := EvaluateNamespace(&NamespaceSnapshot{Now: clock0, Namespace: "shop", Workloads: []*WorkloadSnapshot{deploymentWS(1, ownedPod("eeeee", time.Hour))}})
	if len(healthy.Causes) != 0 || !strings.HasPrefix(healthy.Summary, "Nothing is stuck in namespace shop: 1 of 1 pod is Running and Ready") {
		t.Errorf("healthy sweep = %d causes, summary %q, want none and \"Nothing is stuck…\"", len(healthy.Causes), healthy.Summary)
	}
}

func TestSiblingKey(t *testing.T) {
	unscheduled := func(suffix, token string) *Snapshot {
		p := ownedPod(suffix, time.Hour)
		p.Spec.NodeName = ""
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."}}}
		p.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-" + token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-" + token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
		return testSnapshot(p, warning("FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.", int32(len(suffix)), time.Minute))
	}
	a, okA := siblingKey(unscheduled("aaaaa", "x1y2z"))
	b, okB := siblingKey(unscheduled("bbbbbb", "q7w8e"))
	if !okA || !okB || a != b {
		t.Errorf("two replicas waiting for the same reason: keys differ (%t %t)", okA, okB)
	}
	withClaim := unscheduled("ccccc", "r5t6y")
	withClaim.Pod.Spec.Volumes = append(withClaim.Pod.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-0"}}})
	if c, _ := siblingKey(withClaim); c == a {
		t.Error("a pod with its own claim shares its sibling's key")
	}
	otherReason := unscheduled("ddddd", "u1i2o")
	otherReason.Events[0].Message = "0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: gpu}."
	if d, _ := siblingKey(otherReason); d == a {
		t.Error("a pod the scheduler rejected for another reason shares its sibling's key")
	}
	if _, ok := siblingKey(testSnapshot(ownedPod("eeeee", time.Hour))); ok {
		t.Error("a bound pod has a sibling key")
	}
}

func TestQuotaThatRequiresFieldsFixesTheTemplate(t *testing.T) {
	ws := deploymentWS(1)
	ws.Requested.Namespace, ws.Deployment.Namespace = "q2", "q2"
	ws.Deployment.Spec.Template.Spec.Containers = []corev1.Container{
		{Name: "c"},
		{Name: "side", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": resource.MustParse("64Mi")}}},
	}
	ws.ReplicaSets[0].Namespace = "q2"
	ws.Events["uid-rs"] = []Event{failedCreate(`pods "checkout-7d9f8b6c4-x" is forbidden: failed quota: mem: must specify limits.memory for: c,side; requests.cpu for: c`, 5, time.Minute)}
	p := EvaluateWorkload(ws).Primary()
	if p.Code != CodeResourceQuotaExceeded {
		t.Fatalf("primary = %s, want resource-quota-exceeded", p.Code)
	}
	want := []string{
		"kubectl describe resourcequota -n q2 mem",
		"Set limits.memory and requests.cpu on container c to what it needs: it sets no other bound of that resource and no LimitRange gives a value to copy.",
		"kubectl set resources deploy/checkout -n q2 -c side --limits=memory=64Mi  # set what the quota requires on container side",
		"Or give every container in q2 that sets none a default: a LimitRange of type Container with default.memory and defaultRequest.cpu, applied to namespace q2.",
	}
	if diff := cmp.Diff(want, p.Fix); diff != "" {
		t.Errorf("fix mismatch (-want +got):\n%s", diff)
	}
	for _, l := range p.Fix {
		if strings.Contains(l, "resourcequota") && !strings.HasPrefix(l, "kubectl describe") || strings.Contains(l, "Free room") {
			t.Errorf("a quota that requires fields is fixed by setting them, never by freeing or raising it: %q", l)
		}
	}

	// A LimitRange's bounds are values the answer knows: they replace the guess.
	ws.LimitRanges = []*corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Namespace: "q2", Name: "bounds"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{"memory": resource.MustParse("1Gi"), "cpu": resource.MustParse("2")}, DefaultRequest: corev1.ResourceList{"cpu": resource.MustParse("100m")},
	}}}}}
	p = EvaluateWorkload(ws).Primary()
	if got, want := p.Fix[1], "kubectl set resources deploy/checkout -n q2 -c c --limits=memory=1Gi --requests=cpu=100m  # set what the quota requires on container c"; got != want {
		t.Errorf("fix with a LimitRange = %q, want %q", got, want)
	}
}

// TestQuotaThatRequiresFieldsOfAnInjectedSidecar: a "must specify" quota that names a container
// the template lacks (Istio's istio-proxy) is answered with the injector, never with a kubectl
// set resources for a container the template does not have (kubectl would refuse it), while the
// template's own containers keep their fix.
func TestQuotaThatRequiresFieldsOfAnInjectedSidecar(t *testing.T) {
	ws := deploymentWS(1)
	ws.Deployment.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": resource.MustParse("64Mi")}}}}
	ws.Events["uid-rs"] = []Event{failedCreate(`pods "checkout-7d9f8b6c4-x" is forbidden: failed quota: mem: must specify limits.memory for: app,istio-proxy; limits.cpu for: istio-proxy`, 5, time.Minute)}
	p := EvaluateWorkload(ws).Primary()
	if p.Code != CodeResourceQuotaExceeded {
		t.Fatalf("primary = %s, want resource-quota-exceeded", p.Code)
	}
	fix := strings.Join(p.Fix, "\n")
	for _, want := range []string{`container "istio-proxy" is not in the pod template`, "Istio's sidecar injector added it to the pod"} {
		if !strings.Contains(p.Summary+fix, want) {
			t.Errorf("answer lacks %q:\n%s\n%s", want, p.Summary, fix)
		}
	}
	if !strings.Contains(fix, "kubectl set resources deploy/checkout -n shop -c app --limits=memory=64Mi") {
		t.Errorf("the template's own container lost its fix:\n%s", fix)
	}
	if strings.Contains(fix, "-c istio-proxy") || strings.Contains(fix, "on container istio-proxy") {
		t.Errorf("a fix edits the injected container in the template that lacks it:\n%s", fix)
	}
	// The injectors are listed before the step that says to change what they inject.
	checkBefore(t, p.Fix, "kubectl get mutatingwebhookconfigurations", "Change the injected parts")
}

func TestQuotaAmountsShareAUnit(t *testing.T) {
	ws := deploymentWS(3, ownedPod("aaaaa", time.Hour))
	ws.Events["uid-rs"] = []Event{failedCreate(`pods "checkout-7d9f8b6c4-" is forbidden: exceeded quota: compute, requested: requests.cpu=500m,requests.memory=512Mi, used: requests.cpu=800m,requests.memory=1Gi, limited: requests.cpu=1,requests.memory=1536Mi`, 2, time.Minute)}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "compute"}}
	q.Status.Hard = corev1.ResourceList{"requests.cpu": resource.MustParse("1")}
	q.Status.Used = corev1.ResourceList{"requests.cpu": resource.MustParse("800m")}
	ws.ResourceQuotas = []*corev1.ResourceQuota{q}
	p := EvaluateWorkload(ws).Primary()
	for _, want := range []string{
		"each pod asks requests.cpu=500m but only 200m of the 1 CPU (1000m) allowed is left (800m used)",
		"each pod asks requests.memory=512Mi but only 512Mi of the 1536Mi allowed is left (1Gi (1024Mi) used)",
	} {
		if !strings.Contains(p.Summary, want) {
			t.Errorf("summary = %q, want %q in it", p.Summary, want)
		}
	}
	if !slices.ContainsFunc(p.Evidence, func(e Evidence) bool { return e.Message == "requests.cpu: used 800m of 1 CPU (1000m)" }) {
		t.Errorf("evidence = %+v, want the quota status in one unit", p.Evidence)
	}
}

func TestPodSecurityFixSaysWhatToChange(t *testing.T) {
	tests := []struct{ control, detail, want string }{
		{"host namespaces", "hostNetwork=true, hostPID=true", "In the pod template, remove spec.hostNetwork (or set it to false); remove spec.hostPID (or set it to false)."},
		{"privileged", `container "c" must not set securityContext.privileged=true`, `In the pod template, remove securityContext.privileged from container "c" (or set it to false).`},
		{"non-default capabilities", `container "c" must not include "NET_ADMIN" in securityContext.capabilities.add`, `In the pod template, remove "NET_ADMIN" from securityContext.capabilities.add of container "c".`},
		{"unrestricted capabilities", `container "a" must set securityContext.capabilities.drop=["ALL"]; container "b" must not include "SYS_TIME" in securityContext.capabilities.add`,
			`In the pod template, set securityContext.capabilities.drop=["ALL"] on container "a"; remove "SYS_TIME" from securityContext.capabilities.add of container "b".`},
		{"runAsNonRoot != true", `pod or container "app" must set securityContext.runAsNonRoot=true`, `In the pod template, set securityContext.runAsNonRoot=true on the pod (spec.securityContext) or on container "app".`},
		{"runAsUser=0", `pod must not set runAsUser=0`, `In the pod template, remove runAsUser from pod, or change it from 0 to a value the level allows.`},
		{"hostPort", `containers "a", "b" use hostPorts 80, 443`, `In the pod template, remove hostPort 80, 443 from the ports of containers "a", "b" (reach the pods through a Service instead).`},
		{"hostPath volumes", `volume "data"`, `In the pod template, replace the hostPath volume "data" with an allowed volume type (configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected or secret), and drop their volumeMounts if the containers do not need them.`},
		{"restricted volume types", `volume "x" uses restricted volume type "gcePersistentDisk"`, `In the pod template, replace volume "x" (type "gcePersistentDisk") with an allowed volume type: configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected or secret.`},
		{"forbidden sysctls", "kernel.msgmax", "In the pod template, remove the sysctls kernel.msgmax from spec.securityContext.sysctls."},
	}
	for _, tt := range tests {
		if got := podSecurityFix(tt.control, tt.detail); got != tt.want {
			t.Errorf("podSecurityFix(%q, %q)\n got %q\nwant %q", tt.control, tt.detail, got, tt.want)
		}
	}
}

func TestPodSecurityLooserLevelIsTheNextOne(t *testing.T) {
	msg := `pods "checkout-7d9f8b6c4-x" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true)`
	for _, tt := range []struct{ enforce, want string }{{"baseline", "privileged"}, {"restricted", "baseline"}} {
		ws := deploymentWS(1)
		ws.Namespace = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"pod-security.kubernetes.io/enforce": tt.enforce}}}
		ws.Events["uid-rs"] = []Event{failedCreate(msg, 3, time.Minute)}
		p := EvaluateWorkload(ws).Primary()
		// The policy change is a prose step that says whose decision it is, then the command.
		var policy []string
		for i, f := range p.Fix {
			if strings.Contains(f, "pod-security.kubernetes.io/enforce=") {
				if i == 0 || !strings.HasPrefix(p.Fix[i-1], "Policy change, for the owner of namespace shop") {
					t.Errorf("enforce=%s: fix %q does not follow the policy change's prose (fix %q)", tt.enforce, f, p.Fix)
				}
				policy = append(policy, f)
			}
			if strings.Contains(f, "hostNetwork=true") {
				t.Errorf("fix %q restates the violation", f)
			}
		}
		if len(policy) != 1 || !strings.HasPrefix(policy[0], "kubectl label namespace shop ") || !strings.Contains(policy[0], "enforce="+tt.want+" --overwrite") {
			t.Errorf("enforce=%s: policy fix = %q, want one policy change to %s", tt.enforce, policy, tt.want)
		}
	}
}

func TestDaemonSetThatNoNodeAcceptsIsNotHealthy(t *testing.T) {
	var nodes []*corev1.Node
	for _, n := range []string{"n1", "n2"} {
		node := testNode(n, true, "v1.37.2")
		node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		nodes = append(nodes, node)
	}
	plain := testNode("n3", true, "v1.37.2")
	ws := testDaemonSet(append(nodes, plain))
	ws.DaemonSet.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	ws.DaemonSet.Spec.Template.Spec.Tolerations = nil
	ws.Nodes[0].Labels, ws.Nodes[1].Labels = map[string]string{"disk": "ssd"}, map[string]string{"disk": "ssd"}
	d := EvaluateWorkload(ws)
	p := d.Primary()
	if p.Code != CodeDaemonSetUnplaced || p.Severity != SeverityBlocker || strings.Contains(d.Summary, "scaled to zero") {
		t.Fatalf("primary = %s/%s %q, want a daemonset-unplaced blocker", p.Code, p.Severity, d.Summary)
	}
	var rows []string
	for _, nv := range p.Nodes {
		rows = append(rows, nv.Node+" "+string(nv.Reasons[0].Code))
	}
	if want := []string{"n1 untolerated-taint", "n2 untolerated-taint", "n3 node-selector-mismatch"}; !slices.Equal(rows, want) {
		t.Errorf("rows = %q, want %q", rows, want)
	}
	if !slices.ContainsFunc(p.Fix, func(f string) bool { return strings.HasPrefix(f, "kubectl patch daemonset -n shop agent") }) ||
		!slices.ContainsFunc(p.Fix, func(f string) bool { return strings.HasPrefix(f, "kubectl get nodes --show-labels") }) {
		t.Errorf("fix = %q, want the toleration patch and the selector check", p.Fix)
	}
	if !looksFirst(p.Fix) {
		t.Errorf("fix patches the DaemonSet before it reads the nodes:\n%s", strings.Join(p.Fix, "\n"))
	}

	t.Run("a Deployment at spec.replicas 0 is still scaled to zero", func(t *testing.T) {
		if s := EvaluateWorkload(deploymentWS(0)).Summary; !strings.Contains(s, "scaled to zero") {
			t.Errorf("summary = %q", s)
		}
	})
}

func TestSweepCountsAddUp(t *testing.T) {
	// A quota refuses the third pod; the two it admitted are stuck on their image.
	quota := deploymentWS(3, ownedPod("aaaaa", time.Hour, imageMissing), ownedPod("bbbbb", time.Hour, imageMissing))
	quota.Events["uid-rs"] = []Event{failedCreate(`pods "checkout-7d9f8b6c4-" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=1000m, limited: requests.cpu=1`, 3, time.Minute)}
	// Pod Security refuses every pod: nothing exists.
	psa := deploymentWS(2)
	psa.Requested.Name, psa.Deployment.Name = "priv", "priv"
	psa.Events["uid-rs"] = []Event{failedCreate(`pods "priv-1-" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`, 3, time.Minute)}
	d := EvaluateNamespace(&NamespaceSnapshot{Now: clock0, Namespace: "shop", Workloads: []*WorkloadSnapshot{quota, psa}})
	got := map[Code]int{}
	sum := 0
	for _, c := range d.Causes {
		got[c.Code] = c.Pods
		sum += c.Pods
	}
	want := map[Code]int{CodeResourceQuotaExceeded: 1, CodePodSecurityViolation: 2, CodeImagePullFailed: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods per cause mismatch (-want +got):\n%s", diff)
	}
	if d.Stuck != 2 || d.Missing != 3 || sum != d.Stuck+d.Missing {
		t.Errorf("stuck %d + missing %d, causes add up to %d: want 2 + 3 = 5", d.Stuck, d.Missing, sum)
	}
	if !strings.Contains(d.Summary, "2 of 2 pods are stuck, 3 more pods are wanted but not created,") {
		t.Errorf("summary = %q", d.Summary)
	}
}

func TestJSONListsAreNeverNull(t *testing.T) {
	for name, v := range map[string]any{
		"empty sweep":        EvaluateNamespace(&NamespaceSnapshot{Now: clock0, Namespace: "empty"}),
		"workload, no pods":  EvaluateWorkload(deploymentWS(2)),
		"workload with pods": EvaluateWorkload(deploymentWS(2, ownedPod("aaaaa", time.Hour, imageMissing), ownedPod("bbbbb", time.Hour))),
		"no such workload":   EvaluateWorkload(&WorkloadSnapshot{Now: clock0, Requested: WorkloadRef{Kind: KindDeployment, Namespace: "shop", Name: "x"}}),
		"sweep, refused pod": EvaluateNamespace(&NamespaceSnapshot{Now: clock0, Namespace: "shop", Workloads: []*WorkloadSnapshot{psaBlocked()}}),
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "null") {
			t.Errorf("%s: JSON has null: %s", name, b)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		for _, key := range []string{"groups", "notDiagnosed", "causes"} {
			if _, isWorkload := v.(*WorkloadDiagnosis); (key == "causes") == isWorkload {
				continue
			}
			if _, ok := m[key]; !ok {
				t.Errorf("%s: JSON lacks %q: %s", name, key, b)
			}
		}
	}
}

// psaBlocked is Deployment shop/checkout, 2 replicas, whose pods Pod Security refuses.
func psaBlocked() *WorkloadSnapshot {
	ws := deploymentWS(2)
	ws.Events["uid-rs"] = []Event{failedCreate(`pods "checkout-7d9f8b6c4-" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`, 3, time.Minute)}
	return ws
}

func TestFailedCreateTextAndEvidence(t *testing.T) {
	msg := `admission webhook "deny.policy.example.com" denied the request: images from docker.io are not allowed`
	ws := deploymentWS(3)
	ws.ReplicaSets[0].Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: msg}}
	ws.Deployment.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: msg}}
	ws.Events["uid-rs"] = []Event{failedCreate(msg, 4, time.Minute)}
	p := EvaluateWorkload(ws).Primary()
	if !strings.Contains(p.Summary, "are not allowed. It lacks 3 pods.") {
		t.Errorf("summary = %q, want a sentence break before It lacks", p.Summary)
	}
	quoted := 0
	for _, e := range p.Evidence {
		if strings.Contains(e.Message, "images from docker.io") {
			quoted++
		}
	}
	if quoted != 1 {
		t.Errorf("evidence quotes the error %d times, want once: %+v", quoted, p.Evidence)
	}
}

func TestFailedJobWantsNothing(t *testing.T) {
	d := EvaluateWorkload(testJob(&batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded}, failedRun("aaaaa")))
	if d.Desired != nil {
		t.Errorf("desired = %d, want none for a finished Job", *d.Desired)
	}
	done := testJob(nil)
	done.Job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if p := EvaluateWorkload(done).Primary(); p.Code != CodeWorkloadHealthy {
		t.Errorf("a completed Job whose pods are gone: primary = %s, want workload-healthy", p.Code)
	}
}

// TestTargetGiven: -n with a NAMESPACE/NAME of another namespace is refused with both
// readings; the same namespace twice, TYPE/NAME and a bare NAME take -n. A NAMESPACE named like
// a kind whypending does not diagnose (svc/web -n shop) is left for the answer to decide, as
// without -n, and is asked again with both.
func TestTargetGiven(t *testing.T) {
	for _, tt := range []struct {
		arg, given string
		wantNS     string
		wantFlag   string
		wantErr    string
	}{
		{arg: "payments/web", given: "shop", wantErr: "two namespaces given: -n shop, and payments in payments/web; give one (-n shop web, or payments/web)"},
		{arg: "shop/web", given: "shop", wantNS: "shop"},
		{arg: "deploy/checkout", given: "shop", wantNS: "shop"},
		{arg: "web", given: "shop", wantNS: "shop"},
		{arg: "svc/web", given: "shop", wantNS: "svc", wantFlag: "shop"},
		{arg: "pvc/data", given: "shop", wantNS: "pvc", wantFlag: "shop"},
		{arg: "svc/web", given: "svc", wantNS: "svc"},
	} {
		parsed, err := ParseTarget(tt.arg, tt.given, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parsed.Given(tt.given)
		switch {
		case tt.wantErr != "":
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%s -n %s: err = %v, want %q", tt.arg, tt.given, err, tt.wantErr)
			}
		case err != nil || got.Namespace != tt.wantNS || !got.NamespaceGiven || got.FlagNamespace != tt.wantFlag:
			t.Errorf("%s -n %s: %+v, %v; want namespace %s, given, flag namespace %q", tt.arg, tt.given, got, err, tt.wantNS, tt.wantFlag)
		}
	}
	got, err := ParseTarget("svc/web", "shop", false)
	if err == nil {
		got, err = got.Given("shop")
	}
	if err != nil {
		t.Fatal(err)
	}
	if s := got.String(); s != "svc/web -n shop" {
		t.Errorf("String() = %q, want svc/web -n shop", s)
	}
	want := "two namespaces given: -n shop, and svc in svc/web; give one (-n shop web, or svc/web)"
	if err := got.TwoNamespaces(); err == nil || err.Error() != want {
		t.Errorf("TwoNamespaces() = %v, want %q", err, want)
	}
}
