package triage

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// WorkloadRef identifies a workload.
type WorkloadRef struct {
	Kind      Kind   `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// String is "Kind namespace/name", the form Evidence.Object uses.
func (r WorkloadRef) String() string { return string(r.Kind) + " " + r.Namespace + "/" + r.Name }

// kubectl is "TYPE/NAME -n NAMESPACE" with both shell-quoted, for suggested commands.
func (r WorkloadRef) kubectl() string {
	return r.Kind.Short() + "/" + shellQuote(r.Name) + " -n " + shellQuote(r.Namespace)
}

// WorkloadSnapshot is everything the workload rules read, collected once by package
// triage/collect: the workload, the controllers between it and its pods, its current pods
// (the ones read in full as pod Snapshots), the controllers' events, and the namespace's
// admission settings that decide whether a pod may be created. Rules treat it as read-only.
// Optional parts are nil when they could not be read (best effort, like Snapshot).
type WorkloadSnapshot struct {
	// Now is the collection time; rules compute ages against it.
	Now time.Time
	// Requested is the workload asked about (kind, namespace and name as given).
	Requested WorkloadRef
	// Refused are the reads of this question the API server refused (see Snapshot.Refused).
	Refused []RefusedRead
	// MissingNamespace is set when the workload does not exist because its namespace does not.
	MissingNamespace *MissingNamespace
	// Exactly one of Deployment, ReplicaSet, StatefulSet, DaemonSet, Job and CronJob is set,
	// the one Requested.Kind names; all are nil when the workload does not exist (see
	// SimilarWorkloads).
	Deployment  *appsv1.Deployment
	ReplicaSet  *appsv1.ReplicaSet
	StatefulSet *appsv1.StatefulSet
	DaemonSet   *appsv1.DaemonSet
	Job         *batchv1.Job
	CronJob     *batchv1.CronJob
	// ReplicaSets are, for a Deployment, the ReplicaSets it controls (ownerReferences with
	// controller true), newest revision first (the deployment.kubernetes.io/revision
	// annotation, then creation time): the first is the one the rollout creates pods with.
	ReplicaSets []*appsv1.ReplicaSet
	// Jobs are, for a CronJob, the Jobs it controls, newest first (creation time).
	Jobs []*batchv1.Job
	// Pods are the workload's current pods, the way kubectl finds them: the pods the workload
	// controls, or that one of its ReplicaSets or Jobs controls (controller ownerReference,
	// matched by UID), sorted by creation time then name.
	Pods []*corev1.Pod
	// PodSnapshots maps a pod's UID to the Snapshot read for it: the pods PodsToDiagnose
	// chose. Pods without one were not diagnosed (beyond MaxDiagnosedPods, or a healthy pod
	// other than the one read to show what healthy looks like).
	PodSnapshots map[types.UID]*Snapshot
	// Events maps the UID of the workload and of each of its ReplicaSets and Jobs to that
	// object's events (core/v1 and events.k8s.io/v1, merged), newest first. The controllers
	// write FailedCreate there when the API server refuses a pod.
	Events map[types.UID][]Event
	// EventsErr is set when those events could not be read.
	EventsErr error
	// Nodes are every node, sorted by name, read for a DaemonSet (which nodes it places pods
	// on); NodesErr says why they are missing.
	Nodes    []*corev1.Node
	NodesErr error
	// Namespace is the workload's Namespace (its pod-security.kubernetes.io labels); nil when
	// it could not be read.
	Namespace *corev1.Namespace
	// ResourceQuotas and LimitRanges are the namespace's, read with the workload: they decide
	// whether the API server admits a pod.
	ResourceQuotas []*corev1.ResourceQuota
	LimitRanges    []*corev1.LimitRange
	// ServiceAccountNames are the names of the namespace's ServiceAccounts, sorted, read when
	// a FailedCreate says the pods' ServiceAccount does not exist
	// (NeedsServiceAccountNames), for "did you mean" and to tell whether the ServiceAccount
	// exists now; nil when not read or when the list failed (unknown, never "none").
	ServiceAccountNames []string
	// ServiceAccountCreated maps each of ServiceAccountNames to its metadata.creationTimestamp,
	// from the same metadata-only list.
	ServiceAccountCreated map[string]time.Time
	// ServiceAccountElsewhere are the other namespaces that have a ServiceAccount of the name
	// the pods ask for, sorted, read with ServiceAccountNames; nil otherwise.
	ServiceAccountElsewhere []string
	// WebhookServices maps "namespace/name" of the Service behind a webhook that a current
	// FailedCreate says could not be called to the Service (nil: it does not exist), read when
	// NeedsWebhookServices names it, to tell whether the refused pods are its own backend; a
	// Service that could not be read is absent.
	WebhookServices map[string]*corev1.Service
	// SimilarWorkloads holds "kind/name" of workloads in the namespace whose names are closest
	// to the one asked for; filled only when the workload does not exist.
	SimilarWorkloads []string
}

// Ref returns the workload's reference with its UID, or Requested when it does not exist.
func (ws *WorkloadSnapshot) Ref() WorkloadRef {
	r := ws.Requested
	if m := ws.meta(); m != nil {
		r.Namespace, r.Name, r.UID = m.Namespace, m.Name, string(m.UID)
	}
	return r
}

// Exists reports whether the workload was found.
func (ws *WorkloadSnapshot) Exists() bool { return ws.meta() != nil }

// WorkloadDiagnosis is the answer to "why is this workload not coming up?": the workload-level
// causes (a controller that cannot create pods, a stalled rollout, a failed Job, a DaemonSet
// that misses nodes) and its pods grouped by their primary cause, each group with one pod's
// full Diagnosis.
type WorkloadDiagnosis struct {
	// Workload names the workload (with its UID when it exists).
	Workload WorkloadRef `json:"workload"`
	// Summary is one or two sentences: the primary cause, then the pods by group, e.g. "4 of 5
	// pods Pending: insufficient-cpu; 1 Running and Ready."
	Summary string `json:"summary"`
	// Uncertain is true when the primary cause is not sure (Findings[0].Uncertain).
	Uncertain bool `json:"uncertain,omitempty"`
	// Desired is how many pods the workload wants now (spec.replicas; a DaemonSet's
	// status.desiredNumberScheduled; a Job's spec.parallelism while it runs); nil when the
	// kind has no such number (a CronJob, a finished Job) or the workload does not exist.
	Desired *int32 `json:"desired,omitempty"`
	// Ready is how many of Pods are Running and Ready.
	Ready int `json:"ready"`
	// Pods is how many current pods the workload has (WorkloadSnapshot.Pods).
	Pods int `json:"pods"`
	// Findings holds the primary cause first, then the other workload-level findings. When no
	// controller-level cause blocks, Findings[0] restates the largest stuck group's cause (its
	// code, the group's count, the representative's fix); when nothing is stuck it is
	// workload-healthy. Never empty.
	Findings []Finding `json:"findings"`
	// Partial is true when the API server refused some reads (Refused): the answer rests on
	// what could be read, and the primary finding lists the refused reads.
	Partial bool `json:"partial,omitempty"`
	// Refused are the reads the API server refused (403 Forbidden).
	Refused []RefusedRead `json:"refused,omitempty"`
	// Groups are the pods grouped by their diagnosis's primary code: stuck groups first, most
	// pods first, then the healthy and completed ones. Each holds one pod's full Diagnosis.
	// Always present in JSON: [] when the workload has no pods (or does not exist).
	Groups []PodGroup `json:"groups"`
	// NotDiagnosed are the pods that were not read in full (more than MaxDiagnosedPods pods
	// needed a diagnosis), one line each with the state kubectl shows; [] when none.
	NotDiagnosed []PodLine `json:"notDiagnosed"`
	// CollectedAt is when the snapshot behind this diagnosis was taken.
	CollectedAt time.Time `json:"collectedAt"`
}

// Primary returns the primary finding (Findings[0]).
func (d *WorkloadDiagnosis) Primary() Finding { return primary(d.Findings) }

// PodGroup is the workload's pods that share one primary code.
type PodGroup struct {
	// Code is the primary code every pod of the group got.
	Code Code `json:"code"`
	// Label says how many pods, in which state, for which cause: "4 of 5 pods Pending:
	// insufficient-cpu", "1 Running and Ready".
	Label string `json:"label"`
	// Diagnosis is the full diagnosis of one pod of the group (the representative: the one
	// stuck longest, i.e. created first).
	Diagnosis *Diagnosis `json:"diagnosis"`
	// Pods lists every pod of the group, the representative first, one line each.
	Pods []PodLine `json:"pods"`
}

// Stuck reports whether the group's pods are stuck (not Running and Ready, not Succeeded).
func (g PodGroup) Stuck() bool { return g.Code != CodePodHealthy && g.Code != CodePodCompleted }

// PodLine is one pod in one line: its name, the state kubectl shows, its node and its own
// primary cause.
type PodLine struct {
	Name string `json:"name"`
	// State is what `kubectl get pod` shows in its STATUS column (PodState).
	State string `json:"state"`
	// Node is spec.nodeName ("" when unscheduled).
	Node string `json:"node,omitempty"`
	// Owner is the pod's controller, "ReplicaSet checkout-7d9f8b6c4", when it is not the
	// workload itself.
	Owner string `json:"owner,omitempty"`
	// Summary is the pod's own diagnosis summary; "" for a pod that was not diagnosed in full
	// (a healthy pod other than the group's representative).
	Summary string `json:"summary,omitempty"`
}

// MaxDiagnosedPods caps how many of a workload's pods are read in full: the rest are listed by
// state (WorkloadDiagnosis.NotDiagnosed). Each full read may fetch previous container logs.
const MaxDiagnosedPods = 30

// PodsToDiagnose returns the pods of ws the Collector should read in full, in order: every pod
// that does not look Running and Ready (or Succeeded), oldest first, up to MaxDiagnosedPods;
// then one healthy and one Succeeded pod, whose diagnoses show what the others look like.
// Healthy-looking pods beyond those are counted without a read.
func PodsToDiagnose(ws *WorkloadSnapshot) []*corev1.Pod {
	var out []*corev1.Pod
	var healthy, completed *corev1.Pod
	for _, p := range ws.Pods {
		switch {
		case podLooksHealthy(ws.Now, p):
			if healthy == nil {
				healthy = p
			}
		case podLooksCompleted(p):
			if completed == nil {
				completed = p
			}
		case len(out) < MaxDiagnosedPods:
			out = append(out, p)
		}
	}
	for _, p := range []*corev1.Pod{healthy, completed} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// podLooksHealthy reports, from the pod alone, that a diagnosis would find it Running and
// Ready (pod-healthy): not being deleted, no status.reason, Ready, every container ready and
// none terminated in the last recentRestart. It is conservative: a pod it rejects is diagnosed.
func podLooksHealthy(now time.Time, pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Reason != "" || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	if c := podCondition(pod, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if !cs.Ready || cs.State.Running == nil {
			return false
		}
		if t := cs.LastTerminationState.Terminated; t != nil && now.Sub(t.FinishedAt.Time) < recentRestart {
			return false
		}
	}
	return true
}

// podLooksCompleted reports whether the pod ran to completion (Succeeded, not being deleted).
func podLooksCompleted(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodSucceeded
}

// workloadRule is one family of workload-level checks, pure like rule: it reads the snapshot
// and the pods' diagnoses (v) and returns every finding it is sure of.
type workloadRule struct {
	name  string
	check func(v *workloadView) []Finding
}

// workloadView is a WorkloadSnapshot with each pod's outcome: the diagnosis of the pods read
// in full and the code of every pod.
type workloadView struct {
	ws *WorkloadSnapshot
	// diagnoses maps a pod UID to its Diagnosis (pods read in full).
	diagnoses map[types.UID]*Diagnosis
	// codes maps a pod UID to its primary code; pods not read in full that look healthy get
	// pod-healthy, Succeeded ones pod-completed; pods not diagnosed have none.
	codes map[types.UID]Code
	// groups are the pod groups (see WorkloadDiagnosis.Groups).
	groups []PodGroup
}

// EvaluateWorkload explains a workload: it evaluates each pod read in full (Evaluate), groups
// the pods by primary code, runs the workload rules (workloadRules in rules.go) and ranks the
// result. The primary cause is the first workload-level blocker (a controller that cannot
// create pods outranks a failed Job, which outranks a stalled rollout and a DaemonSet that
// misses nodes); without one it is the largest stuck group's cause; with nothing stuck it is
// workload-healthy, or an uncertain unknown when the workload has no pods and nothing says
// why. EvaluateWorkload is pure: it reads only ws.
func EvaluateWorkload(ws *WorkloadSnapshot) *WorkloadDiagnosis {
	d, _, _ := evaluateWorkload(ws, newEvalMemo())
	d.Refused, d.Partial = ws.Refused, len(ws.Refused) > 0
	d.Findings, d.Summary = withRefused(d.Findings, d.Summary, ws.Refused)
	return d
}

// evaluateWorkload is EvaluateWorkload that also returns the view (each pod's code) and
// whether the primary cause is the workload's own (a workload rule's blocker) rather than a pod
// group's. The view is nil for a workload that does not exist. memo (nil: none) shares one
// evaluation among sibling pods that wait for the scheduler for the same reason.
func evaluateWorkload(ws *WorkloadSnapshot, memo *evalMemo) (d *WorkloadDiagnosis, v *workloadView, own bool) {
	d = &WorkloadDiagnosis{Workload: ws.Ref(), CollectedAt: ws.Now, Pods: len(ws.Pods), Groups: []PodGroup{}, NotDiagnosed: []PodLine{}}
	if !ws.Exists() {
		d.Findings = []Finding{workloadNotFoundFinding(ws)}
		if m := ws.MissingNamespace; m != nil {
			d.Findings = []Finding{namespaceNotFoundFinding(m, string(ws.Requested.Kind)+" "+ws.Requested.Name, ws.Requested.Name)}
		}
		d.Summary = d.Findings[0].Summary
		return d, nil, true
	}
	d.Desired = desiredPods(ws)
	v = newWorkloadView(ws, memo)
	for _, code := range v.codes {
		if code == CodePodHealthy {
			d.Ready++
		}
	}
	for _, p := range ws.Pods {
		if _, ok := v.codes[p.UID]; !ok {
			d.NotDiagnosed = append(d.NotDiagnosed, podLine(ws, p, nil))
		}
	}
	v.countNotDiagnosed(d.NotDiagnosed)
	d.Groups = append(d.Groups, v.groups...)

	var blockers, context []Finding
	for _, r := range workloadRules {
		blockers, context = bySeverity(blockers, context, r.check(v))
	}
	own = len(blockers) > 0
	if own {
		d.Findings = append(blockers, context...)
	} else {
		d.Findings = append([]Finding{v.podsFinding(d)}, context...)
	}
	p := d.Findings[0]
	d.Uncertain = p.Uncertain
	d.Summary = p.Summary
	if labels := v.groupLabels(); labels != "" && own {
		d.Summary += " Pods: " + labels + "."
	}
	if n := len(d.NotDiagnosed); n > 0 {
		d.Summary += fmt.Sprintf(" %d more %s not diagnosed (only %d are read in full).", n, plural(n, "pod was", "pods were"), MaxDiagnosedPods)
	}
	return d, v, own
}

// newWorkloadView evaluates the pods read in full (through memo, when not nil) and groups
// every pod by primary code.
func newWorkloadView(ws *WorkloadSnapshot, memo *evalMemo) *workloadView {
	v := &workloadView{ws: ws, diagnoses: map[types.UID]*Diagnosis{}, codes: map[types.UID]Code{}}
	byCode := map[Code][]*corev1.Pod{}
	var order []Code
	for _, p := range ws.Pods {
		var code Code
		if s := ws.PodSnapshots[p.UID]; s != nil {
			d := memo.evaluate(s)
			v.diagnoses[p.UID] = d
			code = d.Primary().Code
		} else if podLooksHealthy(ws.Now, p) {
			code = CodePodHealthy
		} else if podLooksCompleted(p) {
			code = CodePodCompleted
		} else {
			continue // not diagnosed
		}
		v.codes[p.UID] = code
		if _, seen := byCode[code]; !seen {
			order = append(order, code)
		}
		byCode[code] = append(byCode[code], p)
	}
	for _, code := range order {
		pods := byCode[code]
		// The representative is the first pod read in full (pods are oldest first).
		rep := -1
		for i, p := range pods {
			if v.diagnoses[p.UID] != nil {
				rep = i
				break
			}
		}
		if rep < 0 {
			continue // pods that only look healthy or completed, none read (a sweep): counted, no group
		}
		pods = append([]*corev1.Pod{pods[rep]}, append(pods[:rep:rep], pods[rep+1:]...)...)
		g := PodGroup{Code: code, Diagnosis: v.diagnoses[pods[0].UID]}
		for _, p := range pods {
			g.Pods = append(g.Pods, podLine(ws, p, v.diagnoses[p.UID]))
		}
		g.Label = groupLabel(g, len(ws.Pods))
		v.groups = append(v.groups, g)
	}
	sort.SliceStable(v.groups, func(i, j int) bool {
		a, b := v.groups[i], v.groups[j]
		if a.Stuck() != b.Stuck() {
			return a.Stuck()
		}
		if len(a.Pods) != len(b.Pods) {
			return len(a.Pods) > len(b.Pods)
		}
		return a.Code < b.Code
	})
	return v
}

// podLine is the one-line form of pod p (d is its diagnosis, nil when not read in full).
func podLine(ws *WorkloadSnapshot, p *corev1.Pod, d *Diagnosis) PodLine {
	l := PodLine{Name: p.Name, State: PodState(p), Node: p.Spec.NodeName}
	if ref := controllerOf(p); ref != nil && string(ref.UID) != ws.Ref().UID {
		l.Owner = ref.Kind + " " + ref.Name
	}
	if d != nil {
		l.Summary = d.Summary
	}
	return l
}

// groupLabel says how many pods, in which state, for which cause: "4 of 5 pods Pending:
// insufficient-cpu", "1 Running and Ready", "3 Completed".
func groupLabel(g PodGroup, total int) string {
	n := len(g.Pods)
	switch g.Code {
	case CodePodHealthy:
		return fmt.Sprintf("%d Running and Ready", n)
	case CodePodCompleted:
		return fmt.Sprintf("%d Completed", n)
	}
	states := map[string]bool{}
	var names []string
	for _, p := range g.Pods {
		if !states[p.State] {
			states[p.State] = true
			names = append(names, p.State)
		}
	}
	state := strings.Join(names, " or ")
	if len(names) > 2 {
		state = "stuck"
	}
	return fmt.Sprintf("%d of %d %s %s: %s", n, total, plural(total, "pod", "pods"), state, g.Code)
}

// countNotDiagnosed makes the group labels count the pods that were not read in full, so no
// header understates: when every such pod in state S shares it with exactly one stuck group
// (whose pods are all S), that group's label counts them and says how many were read, "154 of
// 155 pods Pending: insufficient-cpu (30 read in full)". Pods in a state no single group has
// are left to the not-diagnosed list, which the summary counts.
func (v *workloadView) countNotDiagnosed(lines []PodLine) {
	byState := map[string]int{}
	for _, l := range lines {
		byState[l.State]++
	}
	owner := map[string]int{} // state -> index of the one stuck group all in that state, -1 when several
	for i, g := range v.groups {
		state := sharedState(g.Pods)
		if !g.Stuck() || state == "" {
			continue
		}
		if _, seen := owner[state]; seen {
			owner[state] = -1
		} else {
			owner[state] = i
		}
	}
	total := len(v.ws.Pods)
	for state, n := range byState {
		i, ok := owner[state]
		if !ok || i < 0 {
			continue
		}
		g := &v.groups[i]
		g.Label = fmt.Sprintf("%d of %d %s %s: %s (%d read in full)", len(g.Pods)+n, total, plural(total, "pod", "pods"), state, g.Code, len(g.Pods))
	}
}

// groupLabels joins the groups' labels: "4 of 5 pods Pending: insufficient-cpu; 1 Running and
// Ready".
func (v *workloadView) groupLabels() string {
	var parts []string
	for _, g := range v.groups {
		parts = append(parts, g.Label)
	}
	return strings.Join(parts, "; ")
}

// podsFinding is the primary finding when no workload-level cause blocks: the largest stuck
// group's cause for the workload, else workload-healthy, else (no pods, nothing says why) an
// uncertain unknown.
func (v *workloadView) podsFinding(d *WorkloadDiagnosis) Finding {
	ref := v.ws.Ref()
	for _, g := range v.groups {
		if !g.Stuck() {
			continue
		}
		rep := g.Diagnosis.Primary()
		f := Finding{
			Code:      g.Code,
			Severity:  rep.Severity,
			Uncertain: rep.Uncertain,
			Summary:   fmt.Sprintf("%s. %s (pod %s)", v.groupLabels(), rep.Summary, g.Pods[0].Name),
			Fix:       rep.Fix,
			Actions:   rep.Actions,
		}
		for i, p := range g.Pods {
			if i == maxGroupEvidence {
				f.Evidence = append(f.Evidence, Evidence{Object: ref.String(), Message: fmt.Sprintf("and %d more pods with the same cause", len(g.Pods)-i)})
				break
			}
			msg := p.Summary
			if i > 0 && msg == g.Pods[0].Summary {
				msg = "the same cause as " + g.Pods[0].Name
			}
			f.Evidence = append(f.Evidence, Evidence{Object: "Pod " + ref.Namespace + "/" + p.Name, Field: "status", Reason: p.State, Message: msg})
		}
		return f
	}
	finishedJob := v.ws.Job != nil && jobFinished(v.ws.Job)
	if len(v.ws.Pods) == 0 && (d.Desired == nil || *d.Desired > 0) && v.ws.CronJob == nil && !finishedJob {
		return noPodsFinding(v.ws, d.Desired)
	}
	return workloadHealthyFinding(v, d)
}

// maxGroupEvidence caps the per-pod evidence lines of a group finding.
const maxGroupEvidence = 10

// noPodsFinding is the honest answer for a workload that wants pods, has none, and no
// controller event says why: the controller may not run, or its events expired.
func noPodsFinding(ws *WorkloadSnapshot, desired *int32) Finding {
	ref := ws.Ref()
	want := "pods"
	if desired != nil {
		want = fmt.Sprintf("%d %s", *desired, plural(int(*desired), "pod", "pods"))
	}
	f := Finding{
		Code:      CodeUnknown,
		Severity:  SeverityWarning,
		Uncertain: true,
		Summary:   fmt.Sprintf("%s wants %s but has none, and no controller event says why: the controller (kube-controller-manager) may not be running, or its events have expired.", ref, want),
		Evidence:  workloadEventEvidence(ws, 4),
		Fix: []string{
			fmt.Sprintf("kubectl describe %s", ref.kubectl()),
			"kubectl get pods -n kube-system -l component=kube-controller-manager  # is the controller manager running?",
		},
	}
	if u := unread(ws.EventsErr, ws.Refused, "events"); u != "" {
		f.Summary = fmt.Sprintf("%s wants %s but has none, and its events, which would say why, could not be read (%s).", ref, want, u)
		f.Evidence = append(f.Evidence, Evidence{Object: ref.String(), Field: "status", Message: "no pods; events could not be read"})
	}
	if r, ok := podsUnread(ws.Refused); ok {
		// No pod seen because the reads that find them failed: nothing is known of its pods,
		// least of all that it has none.
		f.Summary = fmt.Sprintf("%s wants %s; its pods could not be read (%s %s: %s), so whether it has any, and why they would be stuck, is not known.",
			ref, want, r.Verb, r.Resource, r.Reason())
		f.Evidence = []Evidence{{Object: ref.String(), Field: "status", Message: "pods not read: " + r.String()}}
		f.Fix = []string{fmt.Sprintf("kubectl describe %s  # its status counts the replicas and ready ones", ref.kubectl())}
	}
	if len(f.Evidence) == 0 {
		f.Evidence = []Evidence{{Object: ref.String(), Field: "status", Message: "no pods and no Warning events"}}
	}
	return f
}

// podsUnread is the first failed read among those that find a workload's pods: the pod list
// or a list of the controllers between the workload and its pods (ReplicaSets, Jobs).
func podsUnread(refused []RefusedRead) (RefusedRead, bool) {
	for _, r := range refused {
		if r.Verb == "list" && (r.Resource == "pods" || strings.HasSuffix(r.Resource, ".apps") || strings.HasSuffix(r.Resource, ".batch")) {
			return r, true
		}
	}
	return RefusedRead{}, false
}

// workloadHealthyFinding says the workload is not stuck: every desired pod Running and Ready,
// a completed Job, a suspended CronJob or one between runs, or a workload scaled to zero.
func workloadHealthyFinding(v *workloadView, d *WorkloadDiagnosis) Finding {
	ref := v.ws.Ref()
	f := Finding{Code: CodeWorkloadHealthy, Severity: SeverityInfo}
	switch {
	case v.ws.Job != nil && jobCondition(v.ws.Job, batchv1.JobComplete) != nil:
		f.Summary = fmt.Sprintf("%s is not stuck: it completed (%d %s succeeded).", ref, v.ws.Job.Status.Succeeded, plural(int(v.ws.Job.Status.Succeeded), "pod", "pods"))
	case v.ws.CronJob != nil && v.ws.CronJob.Spec.Suspend != nil && *v.ws.CronJob.Spec.Suspend:
		f.Summary = fmt.Sprintf("%s is suspended (spec.suspend): it starts no Jobs until it is resumed.", ref)
	case v.ws.CronJob != nil:
		if missed, ok := cronJobMissedRun(v.ws); ok {
			return missed // a CronJob that stopped starting Jobs is not "between runs"
		}
		f.Summary = fmt.Sprintf("%s is not stuck: none of its Jobs failed and %d %s running now.", ref, len(v.ws.CronJob.Status.Active), plural(len(v.ws.CronJob.Status.Active), "is", "are"))
	case v.ws.DaemonSet != nil && d.Desired != nil && *d.Desired == 0 && v.ws.NodesErr != nil:
		// A DaemonSet has no replicas: 0 desired means no node passes its rules, and without
		// the nodes nothing says whether that is intended.
		f.Code, f.Severity, f.Uncertain = CodeUnknown, SeverityWarning, true
		f.Summary = fmt.Sprintf("%s places no pods (status.desiredNumberScheduled is 0), and the nodes could not be read to say which of its rules rejects them: %v.", ref, v.ws.NodesErr)
	case v.ws.DaemonSet != nil && d.Desired != nil && *d.Desired == 0:
		f.Summary = fmt.Sprintf("%s wants no pods: the cluster has no nodes.", ref)
	case d.Desired != nil && *d.Desired == 0:
		f.Summary = fmt.Sprintf("%s is scaled to zero (spec.replicas 0): it wants no pods.", ref)
	default:
		f.Summary = fmt.Sprintf("%s is not stuck: %d of %d %s Running and Ready.", ref, d.Ready, d.Pods, ofPods(d.Ready, d.Pods, "pod", "pods"))
	}
	f.Evidence = []Evidence{{Object: ref.String(), Field: "status", Message: workloadStatusLine(v.ws)}}
	f.Fix = []string{fmt.Sprintf("kubectl get %s -o wide", ref.kubectl())}
	return f
}

// workloadNotFoundFinding answers for a workload that does not exist, with the closest names.
func workloadNotFoundFinding(ws *WorkloadSnapshot) Finding {
	r := ws.Requested
	for _, x := range ws.Refused {
		if x.Verb == "get" && x.Namespace == r.Namespace && strings.HasPrefix(x.Resource, strings.ToLower(string(r.Kind))+"s.") {
			// The read of the workload itself was refused: it may well exist.
			return Finding{Code: CodeUnknown, Severity: SeverityBlocker, Uncertain: true,
				Summary: fmt.Sprintf("whypending may not read %s %q in namespace %q (the API server refused the get), so it cannot tell whether it exists or why it is stuck; ask about one of its pods by name, or get the permissions below.", r.Kind, r.Name, r.Namespace)}
		}
	}
	f := Finding{
		Code:     CodeWorkloadNotFound,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("There is no %s %q in namespace %q.", r.Kind, r.Name, r.Namespace),
	}
	if len(ws.SimilarWorkloads) > 0 {
		f.Summary += " Did you mean " + strings.Join(ws.SimilarWorkloads, ", ") + "?"
		for _, w := range ws.SimilarWorkloads {
			f.Evidence = append(f.Evidence, Evidence{Object: w, Message: "similar name"})
		}
	}
	f.Fix = []string{fmt.Sprintf("kubectl get deployments,statefulsets,daemonsets,cronjobs,jobs,replicasets -n %s", shellQuote(r.Namespace))}
	return f
}

// desiredPods is how many pods the workload wants now (see WorkloadDiagnosis.Desired).
func desiredPods(ws *WorkloadSnapshot) *int32 {
	one := int32(1)
	switch {
	case ws.Deployment != nil:
		if r := ws.Deployment.Spec.Replicas; r != nil {
			return r
		}
		return &one
	case ws.ReplicaSet != nil:
		if r := ws.ReplicaSet.Spec.Replicas; r != nil {
			return r
		}
		return &one
	case ws.StatefulSet != nil:
		if r := ws.StatefulSet.Spec.Replicas; r != nil {
			return r
		}
		return &one
	case ws.DaemonSet != nil:
		n := ws.DaemonSet.Status.DesiredNumberScheduled
		return &n
	case ws.Job != nil:
		if jobFinished(ws.Job) {
			return nil // a finished Job wants nothing more, and is no "0 wanted"
		}
		if p := ws.Job.Spec.Parallelism; p != nil {
			return p
		}
		return &one
	}
	return nil
}

// workloadStatusLine renders the workload's status counts the way kubectl get shows them.
func workloadStatusLine(ws *WorkloadSnapshot) string {
	switch {
	case ws.Deployment != nil:
		st := ws.Deployment.Status
		return fmt.Sprintf("ready %d/%d, up-to-date %d, available %d", st.ReadyReplicas, derefInt32(ws.Deployment.Spec.Replicas, 1), st.UpdatedReplicas, st.AvailableReplicas)
	case ws.ReplicaSet != nil:
		st := ws.ReplicaSet.Status
		return fmt.Sprintf("desired %d, current %d, ready %d", derefInt32(ws.ReplicaSet.Spec.Replicas, 1), st.Replicas, st.ReadyReplicas)
	case ws.StatefulSet != nil:
		st := ws.StatefulSet.Status
		return fmt.Sprintf("ready %d/%d, current %d, updated %d", st.ReadyReplicas, derefInt32(ws.StatefulSet.Spec.Replicas, 1), st.CurrentReplicas, st.UpdatedReplicas)
	case ws.DaemonSet != nil:
		st := ws.DaemonSet.Status
		return fmt.Sprintf("desired %d, current %d, ready %d, up-to-date %d, available %d, misscheduled %d", st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberReady, st.UpdatedNumberScheduled, st.NumberAvailable, st.NumberMisscheduled)
	case ws.Job != nil:
		st := ws.Job.Status
		return fmt.Sprintf("active %d, succeeded %d/%d, failed %d", st.Active, st.Succeeded, derefInt32(ws.Job.Spec.Completions, 1), st.Failed)
	case ws.CronJob != nil:
		last := "never"
		if t := ws.CronJob.Status.LastScheduleTime; t != nil {
			last = FormatAge(ws.Now.Sub(t.Time)) + " ago"
		}
		return fmt.Sprintf("schedule %q, suspend %t, active %d, last schedule %s", ws.CronJob.Spec.Schedule, derefBool(ws.CronJob.Spec.Suspend), len(ws.CronJob.Status.Active), last)
	}
	return ""
}

func derefInt32(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func derefBool(p *bool) bool { return p != nil && *p }
