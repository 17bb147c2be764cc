package triage

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file reads what a workload's controller concluded about its own progress: a Deployment
// whose rollout passed progressDeadlineSeconds, a Job that failed (backoffLimit, deadline, pod
// failure policy). The pods' own causes stay in the groups; these findings say what the
// controller gave up on and point at the group that explains it.

// rolloutRules reports rollout-stalled for a Deployment whose Progressing condition is False
// with reason ProgressDeadlineExceeded, naming the cause of its newest ReplicaSet's pods.
func rolloutRules(v *workloadView) []Finding {
	d := v.ws.Deployment
	if d == nil {
		return nil
	}
	cond := RolloutStalled(d)
	if cond == nil {
		return nil
	}
	ref := v.ws.Ref()
	deadline := derefInt32(d.Spec.ProgressDeadlineSeconds, 600)
	f := Finding{
		Code:     CodeRolloutStalled,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("The rollout of %s stalled: %s (progressDeadlineSeconds %d, %s).", ref, strings.TrimSuffix(cond.Message, "."), deadline, workloadStatusLine(v.ws)),
		Evidence: []Evidence{{Object: ref.String(), Field: "status.conditions[Progressing]", Reason: cond.Reason, Message: cond.Message, LastSeen: cond.LastUpdateTime.Time}},
	}
	if len(v.ws.ReplicaSets) > 0 {
		newest := v.ws.ReplicaSets[0]
		if g, ok := v.groupOf(newest.UID); ok {
			f.Summary += fmt.Sprintf(" Its new ReplicaSet %s: %s.", newest.Name, g)
		}
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl rollout status %s", ref.kubectl()),
		fmt.Sprintf("kubectl rollout history %s", ref.kubectl()),
	}
	if len(v.ws.ReplicaSets) > 1 {
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl rollout undo %s  # back to the previous revision, if the new one is at fault", ref.kubectl()))
	} else {
		f.Fix = append(f.Fix, "This is its only revision, so there is nothing to undo to: fix the pod template (the cause above) and apply it again.")
	}
	return []Finding{f}
}

// RolloutStalled returns the Deployment's Progressing condition when it is False with reason
// ProgressDeadlineExceeded (its rollout passed progressDeadlineSeconds), else nil.
func RolloutStalled(d *appsv1.Deployment) *appsv1.DeploymentCondition {
	var cond *appsv1.DeploymentCondition
	for i := range d.Status.Conditions {
		c := &d.Status.Conditions[i]
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			cond = c
		}
	}
	return cond
}

// groupOf summarises the stuck pods the creator with uid controls by their codes: "2 pods
// CrashLoopBackOff: app-error"; ok is false when none of its pods is stuck.
func (v *workloadView) groupOf(uid types.UID) (string, bool) {
	counts := map[Code]int{}
	state := map[Code]string{}
	var order []Code
	for _, p := range v.ws.Pods {
		ref := controllerOf(p)
		code, ok := v.codes[p.UID]
		if ref == nil || ref.UID != uid || !ok || code == CodePodHealthy || code == CodePodCompleted {
			continue
		}
		if counts[code] == 0 {
			order = append(order, code)
			state[code] = PodState(p)
		}
		counts[code]++
	}
	var parts []string
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%d %s %s: %s", counts[c], plural(counts[c], "pod", "pods"), state[c], c))
	}
	return strings.Join(parts, "; "), len(parts) > 0
}

// jobRules reports job-backoff-limit for a Job (or a CronJob's newest Job) that failed with
// BackoffLimitExceeded, and job-failed for any other Failed condition.
func jobRules(v *workloadView) []Finding {
	job := v.ws.Job
	if v.ws.CronJob != nil && len(v.ws.Jobs) > 0 {
		job = v.ws.Jobs[0]
	}
	if job == nil {
		return nil
	}
	cond := jobCondition(job, batchv1.JobFailed)
	if cond == nil {
		return nil
	}
	ref := WorkloadRef{Kind: KindJob, Namespace: job.Namespace, Name: job.Name}
	f := Finding{
		Severity: SeverityBlocker,
		Evidence: []Evidence{
			{Object: ref.String(), Field: "status.conditions[Failed]", Reason: cond.Reason, Message: cond.Message, LastSeen: cond.LastTransitionTime.Time},
			{Object: ref.String(), Field: "status", Message: fmt.Sprintf("failed %d, succeeded %d, active %d; spec.backoffLimit %d", job.Status.Failed, job.Status.Succeeded, job.Status.Active, derefInt32(job.Spec.BackoffLimit, 6))},
		},
	}
	pods := ""
	if g, ok := v.groupOf(job.UID); ok {
		pods = " Its pods: " + g + "."
	}
	owner := ""
	if v.ws.CronJob != nil {
		owner = fmt.Sprintf(" (the newest Job of %s)", v.ws.Ref())
	}
	if cond.Reason == batchv1.JobReasonBackoffLimitExceeded {
		f.Code = CodeJobBackoffLimit
		f.Summary = fmt.Sprintf("%s%s failed: its pods failed %d %s, reaching spec.backoffLimit %d, so it creates no more.%s", ref, owner, job.Status.Failed, plural(int(job.Status.Failed), "time", "times"), derefInt32(job.Spec.BackoffLimit, 6), pods)
	} else {
		f.Code = CodeJobFailed
		f.Summary = fmt.Sprintf("%s%s failed (%s): %s.%s", ref, owner, cond.Reason, strings.TrimSuffix(cond.Message, "."), pods)
	}
	ns := shellQuote(job.Namespace)
	f.Fix = []string{
		fmt.Sprintf("kubectl logs -n %s -l batch.kubernetes.io/job-name=%s --tail=20 --prefix", ns, shellQuote(job.Name)),
		"Fix the cause the pods show, then run the work again: a failed Job never retries.",
	}
	if v.ws.CronJob != nil {
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl create job -n %s --from=cronjob/%s %s  # run it once now", ns, shellQuote(v.ws.CronJob.Name), shellQuote(v.ws.CronJob.Name+"-manual")))
	} else {
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl get job -n %s %s -o yaml > job.yaml  # then delete the Job and apply it again (remove status, uid and the controller-uid selector and labels)", ns, shellQuote(job.Name)))
	}
	return []Finding{f}
}
