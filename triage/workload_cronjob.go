package triage

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
)

// This file explains a CronJob that stopped running on schedule. With concurrencyPolicy
// Forbid the CronJob controller skips every schedule while a Job it started is still active
// (it records JobAlreadyActive and keeps lastScheduleTime), so one Job that never finishes
// stops the CronJob for good: that is cronjob-blocked-by-active-job, and the Job, its pod's
// blocker and the missing activeDeadlineSeconds/backoffLimit are the answer. A CronJob whose
// last schedule is older than its schedule says, with nothing else to explain it, is not
// "between runs" either. A refused Job create is failedCreateRules' (workload_create.go).

// cronJobRules reports cronjob-blocked-by-active-job, and an uncertain unknown for a CronJob
// that missed a schedule for a reason the snapshot does not show.
func cronJobRules(v *workloadView) []Finding {
	cj := v.ws.CronJob
	if cj == nil || derefBool(cj.Spec.Suspend) {
		return nil
	}
	if f, ok := blockedByActiveJob(v); ok {
		return []Finding{f}
	}
	return nil
}

// jobAlreadyActive is the CronJob controller's event for a schedule skipped under Forbid.
const jobAlreadyActive = "JobAlreadyActive"

// activeJobs returns the CronJob's Jobs that status.active lists and that have not finished.
func activeJobs(ws *WorkloadSnapshot) []*batchv1.Job {
	var out []*batchv1.Job
	for _, ref := range ws.CronJob.Status.Active {
		for _, j := range ws.Jobs {
			if (ref.UID != "" && j.UID == ref.UID) || (ref.UID == "" && j.Name == ref.Name) {
				if !jobFinished(j) {
					out = append(out, j)
				}
			}
		}
	}
	return out
}

// blockedByActiveJob reports cronjob-blocked-by-active-job: concurrencyPolicy Forbid, an active
// Job, and a schedule skipped since it started (a JobAlreadyActive event, or a scheduled time
// that passed while it ran).
func blockedByActiveJob(v *workloadView) (Finding, bool) {
	ws := v.ws
	cj := ws.CronJob
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		return Finding{}, false
	}
	active := activeJobs(ws)
	if len(active) == 0 {
		return Finding{}, false
	}
	job := active[0]
	started := job.CreationTimestamp.Time
	if st := job.Status.StartTime; st != nil {
		started = st.Time
	}
	var skipped *Event
	for _, e := range ws.eventsOf(cj.UID) {
		if e.Reason == jobAlreadyActive && e.LastSeen.After(started) {
			skipped = &e
			break
		}
	}
	missed, next := missedSchedules(cj, started, ws.Now)
	if skipped == nil && missed == 0 {
		return Finding{}, false
	}
	ref := ws.Ref()
	jobRef := WorkloadRef{Kind: KindJob, Namespace: job.Namespace, Name: job.Name}
	running := FormatAge(ws.Now.Sub(started))
	f := Finding{Code: CodeCronJobBlockedByActiveJob, Severity: SeverityBlocker}
	f.Summary = fmt.Sprintf("%s starts no new Jobs: its concurrencyPolicy is Forbid and its Job %s has been active for %s without finishing, so the controller skips every schedule", ref, job.Name, running)
	switch {
	case missed > 0:
		f.Summary += fmt.Sprintf(" (%d %s of %q missed since it started, the first at %s)", missed, plural(missed, "run", "runs"), cj.Spec.Schedule, next.UTC().Format(time.RFC3339))
	case skipped != nil:
		f.Summary += fmt.Sprintf(" (%s %s)", jobAlreadyActive, eventSeen(&Snapshot{Now: ws.Now}, *skipped))
	}
	f.Summary += "."
	if g, ok := v.groupOf(job.UID); ok {
		f.Summary += " Its pods: " + g + "."
	}
	if rep := v.jobPodCause(job); rep != "" {
		f.Summary += " " + rep
	}
	spec := cj.Spec.JobTemplate.Spec
	deadline := "3600"
	if p := schedulePeriod(cj, ws.Now); p > 0 {
		deadline = fmt.Sprint(int64(p.Seconds()))
	}
	if spec.ActiveDeadlineSeconds == nil {
		f.Summary += " The job template sets no activeDeadlineSeconds, so nothing ends a Job that hangs"
		if spec.BackoffLimit == nil {
			f.Summary += " (its backoffLimit, default 6, never counts a pod that does not fail, such as one stuck in ContainerCreating or pulling)"
		}
		f.Summary += "."
	} else if job.Spec.ActiveDeadlineSeconds == nil {
		// A Job keeps the template it was created from: a deadline added since is not its.
		f.Summary += fmt.Sprintf(" The job template sets activeDeadlineSeconds (%ds), but Job %s was created from it before that, without one, so nothing ends it; Jobs created from now on get it.", *spec.ActiveDeadlineSeconds, job.Name)
	} else {
		f.Summary += fmt.Sprintf(" The job template's activeDeadlineSeconds (%ds) ends a Job that hangs, once that long has passed since it started.", *spec.ActiveDeadlineSeconds)
	}
	f.Evidence = []Evidence{
		{Object: ref.String(), Field: "spec.concurrencyPolicy", Message: string(cj.Spec.ConcurrencyPolicy)},
		{Object: ref.String(), Field: "status", Message: workloadStatusLine(ws)},
		{Object: jobRef.String(), Field: "status", Message: fmt.Sprintf("active %d, succeeded %d, failed %d; started %s ago", job.Status.Active, job.Status.Succeeded, job.Status.Failed, running)},
	}
	if skipped != nil {
		f.Evidence = append(f.Evidence, objectEventEvidence(ref, *skipped))
	}
	ns, name := shellQuote(cj.Namespace), shellQuote(cj.Name)
	f.Fix = []string{
		fmt.Sprintf("kubectl describe job -n %s %s   # why it does not finish: its pods' state above", ns, shellQuote(job.Name)),
	}
	if spec.ActiveDeadlineSeconds == nil {
		// A deadline someone set is theirs: never replaced by one a normal run may outlast.
		f.Fix = append(f.Fix, fmt.Sprintf(`kubectl patch cronjob/%s -n %s -p '{"spec":{"jobTemplate":{"spec":{"activeDeadlineSeconds":%s}}}}'   # a Job that hangs is ended after one schedule period (%ss; set it above the longest normal run) and does not block the next run; fix the cause in the CronJob's template, not the Job's (immutable)`, name, ns, deadline, deadline))
	}
	f.Fix = append(f.Fix,
		fmt.Sprintf("kubectl delete job -n %s %s   # then the next schedule starts a fresh Job from the fixed template; this stops the Job's running pods, and what they did so far is lost", ns, shellQuote(job.Name)))
	return f, true
}

// jobPodCause is the primary cause of the Job's first stuck pod, "Pod x: summary", or "".
func (v *workloadView) jobPodCause(job *batchv1.Job) string {
	for _, p := range v.ws.Pods {
		if !ownedBy(p, job.UID) {
			continue
		}
		if d := v.diagnoses[p.UID]; d != nil && d.Primary().Code != CodePodHealthy && d.Primary().Code != CodePodCompleted {
			return fmt.Sprintf("Pod %s: %s", p.Name, d.Primary().Summary)
		}
	}
	return ""
}

// cronSchedule parses the CronJob's schedule in its time zone (spec.timeZone, else UTC, which
// is what the controller uses when the zone cannot be loaded too); nil when it does not parse.
func cronSchedule(cj *batchv1.CronJob) (cron.Schedule, *time.Location) {
	loc := time.UTC
	if tz := cj.Spec.TimeZone; tz != nil && *tz != "" {
		if l, err := time.LoadLocation(*tz); err == nil {
			loc = l
		}
	}
	sched, err := cron.ParseStandard(cj.Spec.Schedule)
	if err != nil {
		return nil, loc
	}
	return sched, loc
}

// missedSchedules counts the scheduled times in (since, now] (at most 100, as the controller
// counts them) and returns the first; 0 when the schedule does not parse.
func missedSchedules(cj *batchv1.CronJob, since, now time.Time) (int, time.Time) {
	sched, loc := cronSchedule(cj)
	if sched == nil || since.IsZero() {
		return 0, time.Time{}
	}
	var first time.Time
	n := 0
	for t := sched.Next(since.In(loc)); !t.After(now) && n < 100; t = sched.Next(t) {
		if n == 0 {
			first = t
		}
		n++
	}
	return n, first
}

// schedulePeriod is the time between the CronJob's next two scheduled times after now; 0 when
// the schedule does not parse.
func schedulePeriod(cj *batchv1.CronJob, now time.Time) time.Duration {
	sched, loc := cronSchedule(cj)
	if sched == nil {
		return 0
	}
	a := sched.Next(now.In(loc))
	return sched.Next(a).Sub(a)
}

// cronJobMissedRun says, for a CronJob that is not suspended and has no active Job, that a run
// is overdue: a scheduled time passed more than a grace period after status.lastScheduleTime.
// ok is false when it is on schedule (or its schedule does not parse).
func cronJobMissedRun(ws *WorkloadSnapshot) (Finding, bool) {
	cj := ws.CronJob
	if cj == nil || derefBool(cj.Spec.Suspend) || len(cj.Status.Active) > 0 || cj.Status.LastScheduleTime == nil {
		return Finding{}, false
	}
	missed, first := missedSchedules(cj, cj.Status.LastScheduleTime.Time, ws.Now.Add(-cronGrace))
	if missed == 0 {
		return Finding{}, false
	}
	ref := ws.Ref()
	f := Finding{
		Code:      CodeUnknown,
		Severity:  SeverityWarning,
		Uncertain: true,
		Summary: fmt.Sprintf("%s missed %d %s: schedule %q was due at %s, but its last Job was scheduled %s ago and nothing in its events says why (the cronjob controller may not run, or startingDeadlineSeconds passed).",
			ref, missed, plural(missed, "run", "runs"), cj.Spec.Schedule, first.UTC().Format(time.RFC3339), FormatAge(ws.Now.Sub(cj.Status.LastScheduleTime.Time))),
		Evidence: append([]Evidence{{Object: ref.String(), Field: "status", Message: workloadStatusLine(ws)}}, workloadEventEvidence(ws, 3)...),
		Fix: []string{
			fmt.Sprintf("kubectl describe %s", ref.kubectl()),
			"kubectl get pods -n kube-system -l component=kube-controller-manager   # the cronjob controller runs in kube-controller-manager",
		},
	}
	return f, true
}

// cronGrace is how late a scheduled run may start before the answer calls it missed: the
// controller requeues each CronJob for its next time and syncs every few seconds.
const cronGrace = 2 * time.Minute
