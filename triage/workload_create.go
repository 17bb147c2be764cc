package triage

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// This file explains a controller that cannot create pods. The API server refuses the pod at
// admission (a ResourceQuota, Pod Security, a webhook, a missing ServiceAccount, a LimitRange),
// so no pod exists to ask about: the only trace is the FailedCreate event the ReplicaSet,
// StatefulSet, DaemonSet, Job or CronJob controller writes on itself ("Error creating: pods
// "checkout-7d9f8b6c4-" is forbidden: exceeded quota: …"), and a ReplicaSet's ReplicaFailure
// condition, which keeps the last error after the event expires.

// failedCreateRules reports, once per cause, why the workload's controllers cannot create
// pods: each creator that lacks pods and whose newest FailedCreate is newer than its newest
// SuccessfulCreate (or whose ReplicaFailure condition is True) is refused now. An older
// FailedCreate that a later SuccessfulCreate followed is history and reported as context.
func failedCreateRules(v *workloadView) []Finding {
	var out []Finding
	byCode := map[Code]int{}
	for _, c := range v.ws.creators() {
		failed, ev, current := creationFailure(v.ws, c)
		if failed == "" {
			continue
		}
		if !current {
			if ev != nil {
				out = append(out, Finding{
					Code:     CodeUnknown,
					Severity: SeverityInfo,
					Summary:  fmt.Sprintf("%s could not create a pod %s ago, but created one since: that refusal is history.", c.ref, FormatAge(v.ws.Now.Sub(ev.LastSeen))),
					Evidence: []Evidence{objectEventEvidence(c.ref, *ev)},
				})
			}
			continue
		}
		f := admissionFinding(v.ws, c, failed)
		if ev != nil {
			f.Evidence = append([]Evidence{objectEventEvidence(c.ref, *ev)}, f.Evidence...)
		}
		if c.failure != nil {
			f.Evidence = appendNewError(f.Evidence, Evidence{Object: c.ref.String(), Field: "status.conditions[" + c.failure.Type + "]", Reason: c.failure.Reason, Message: c.failure.Message})
		}
		if i, ok := byCode[f.Code]; ok {
			// A Deployment repeats its ReplicaSet's error in its own condition: one finding per
			// cause, with each error message once.
			for _, e := range f.Evidence {
				out[i].Evidence = appendNewError(out[i].Evidence, e)
			}
			continue
		}
		byCode[f.Code] = len(out)
		out = append(out, f)
	}
	return out
}

// CreateRefused reports whether the controller of a Deployment, ReplicaSet, StatefulSet,
// DaemonSet or Job (obj, with events its own events, newest first) cannot create its pods now,
// read as failedCreateRules reads it: its ReplicaFailure condition is True, or it lacks pods and
// its newest FailedCreate is not older than its newest SuccessfulCreate. since is when that
// began, as far as the object tells (the condition's transition, else the first FailedCreate
// of the event). For a Deployment only its own condition counts (the Deployment controller
// copies its ReplicaSets' there). It reads nothing else, for the watch (bot/watch), which
// follows every workload of the informer caches.
func CreateRefused(obj runtime.Object, events []Event) (since time.Time, refused bool) {
	ws := &WorkloadSnapshot{}
	if _, cron := obj.(*batchv1.CronJob); cron || !ws.SetWorkload(obj) {
		return time.Time{}, false
	}
	cs := ws.creators()
	if len(cs) != 1 {
		return time.Time{}, false
	}
	c := cs[0]
	ws.Events = map[types.UID][]Event{c.uid: events}
	msg, ev, current := creationFailure(ws, c)
	if msg == "" || !current {
		return time.Time{}, false
	}
	switch {
	case c.failure != nil:
		since = c.failure.LastTransition.Time
	case ev != nil && !ev.FirstSeen.IsZero():
		since = ev.FirstSeen
	case ev != nil:
		since = ev.LastSeen
	}
	return since, true
}

// appendNewError appends e to evidence unless an earlier line already quotes the same error
// (the FailedCreate event, the ReplicaSet's ReplicaFailure condition and the Deployment's repeat
// one message, the event's with an "Error creating: " prefix): each error is shown once, by the
// first object that carries it.
func appendNewError(evidence []Evidence, e Evidence) []Evidence {
	msg := strings.TrimPrefix(e.Message, "Error creating: ")
	if slices.ContainsFunc(evidence, func(x Evidence) bool {
		return (x.Object == e.Object && x.Field == e.Field && x.Message == e.Message) || (msg != "" && strings.TrimPrefix(x.Message, "Error creating: ") == msg)
	}) {
		return evidence
	}
	return append(evidence, e)
}

// creationFailure returns the newest pod (or Job) creation error of creator c, the event it
// came from (nil when only the ReplicaFailure condition has it), and whether it is current: c
// lacks pods (or its ReplicaFailure condition is True) and no SuccessfulCreate came after it.
func creationFailure(ws *WorkloadSnapshot, c creator) (msg string, ev *Event, current bool) {
	var failed, created *Event
	for _, e := range ws.eventsOf(c.uid) {
		switch {
		case e.Reason == "FailedCreate" && failed == nil:
			failed = &e
		case e.Reason == "SuccessfulCreate" && created == nil:
			created = &e
		}
	}
	switch {
	case failed != nil:
		msg = failed.Message
	case c.failure != nil:
		msg = c.failure.Message
	default:
		return "", nil, false
	}
	after := failed == nil || created == nil || failed.LastSeen.After(created.LastSeen) || failed.LastSeen.Equal(created.LastSeen)
	current = c.failure != nil || (c.missing > 0 && after)
	if c.ref.Kind == KindCronJob && ws.CronJob != nil && failed != nil {
		// A CronJob wants no Job between runs, so "missing" says nothing: its refusal is current
		// when it is newer than the last Job it did create.
		current = failed.LastSeen.After(lastJobCreated(ws, created))
	}
	return msg, failed, current
}

// lastJobCreated is when the CronJob last created a Job, as far as the snapshot tells: its
// status.lastScheduleTime (set when the controller creates the Job of a schedule), its newest
// SuccessfulCreate event, and its Jobs' status.startTime (set when the job controller first
// syncs a new Job).
func lastJobCreated(ws *WorkloadSnapshot, created *Event) time.Time {
	var t time.Time
	if ls := ws.CronJob.Status.LastScheduleTime; ls != nil {
		t = ls.Time
	}
	if created != nil && created.LastSeen.After(t) {
		t = created.LastSeen
	}
	for _, j := range ws.Jobs {
		if st := j.Status.StartTime; st != nil && st.After(t) {
			t = st.Time
		}
	}
	return t
}

// admissionFinding classifies one creation error: which admission step refused the pod, with
// the objects that explain it.
func admissionFinding(ws *WorkloadSnapshot, c creator, msg string) Finding {
	var f Finding
	switch {
	case strings.Contains(msg, "exceeded quota: ") || strings.Contains(msg, "failed quota: "):
		f = quotaFinding(ws, c, msg)
	case strings.Contains(msg, "violates PodSecurity "):
		f = podSecurityFinding(ws, c, msg)
	case strings.Contains(msg, sccMarker):
		f = sccFinding(ws, c, msg)
	case webhookRE.MatchString(msg) || webhookCallRE.MatchString(msg):
		f = webhookFinding(ws, c, msg)
	case strings.Contains(msg, "error looking up service account "):
		f = serviceAccountFinding(ws, c, msg)
	case limitRangeRE.MatchString(msg) || strings.Contains(msg, "error enforcing limit ranges"):
		f = limitRangeFinding(ws, c, msg)
	default:
		f = Finding{
			Code:      CodeUnknown,
			Uncertain: true,
			Summary:   fmt.Sprintf("%s cannot create %s: the API server refuses them for a reason the rules do not model; it says: %q.", c.ref, c.what(), truncateStart(strings.TrimPrefix(msg, "Error creating: "), 300)),
			Fix:       []string{fmt.Sprintf("kubectl describe %s", c.ref.kubectl())},
		}
	}
	f.Severity = SeverityBlocker
	if c.missing > 0 {
		if !strings.HasSuffix(f.Summary, ".") && !strings.HasSuffix(f.Summary, "?") && !strings.HasSuffix(f.Summary, "!") {
			f.Summary += "."
		}
		f.Summary += fmt.Sprintf(" It lacks %d %s.", c.missing, plural(int(c.missing), strings.TrimSuffix(c.what(), "s"), c.what()))
	}
	return f
}

// what is what c creates: "pods", or "Jobs" for a CronJob.
func (c creator) what() string {
	if c.ref.Kind == KindCronJob {
		return "Jobs"
	}
	return "pods"
}

// quotaRE matches the ResourceQuota admission error: "exceeded quota: NAME, requested: R,
// used: U, limited: L" (R, U and L are "resource=quantity" lists joined by commas).
var quotaRE = regexp.MustCompile(`exceeded quota: ([^,]+), requested: (\S+), used: (\S+), limited: (\S+)`)

// quotaMustSpecifyRE matches "failed quota: NAME: must specify limits.cpu for: app; …".
var quotaMustSpecifyRE = regexp.MustCompile(`failed quota: ([^:]+): (.*)$`)

// quotaFinding explains resource-quota-exceeded: which quota, what each new pod (or Job) asks,
// what is used of what is allowed, and how much is left; and fixes it with the figures the
// answer knows: requests that fit the room left, the hard limit that would admit the missing
// pods, or, for an object count such as count/jobs.batch that a CronJob's kept Jobs fill, the
// history limits that free it.
func quotaFinding(ws *WorkloadSnapshot, c creator, msg string) Finding {
	f := Finding{Code: CodeResourceQuotaExceeded}
	ns := c.ref.Namespace
	one := strings.TrimSuffix(c.what(), "s")
	var name string
	var resources []string
	var missing map[string][]string // "limits.memory" -> the containers that lack it
	var exceeded []quotaShortfall
	mustSpecify := false
	if m := quotaRE.FindStringSubmatch(msg); m != nil {
		name = m[1]
		req, used, limited := quantityList(m[2]), quantityList(m[3]), quantityList(m[4])
		var parts []string
		for _, r := range sortedKeys(req) {
			resources = append(resources, r)
			sf := quotaShortfall{resource: r, requested: req[r], used: used[r], hard: limited[r]}
			exceeded = append(exceeded, sf)
			left, ok := quantityLeft(limited[r], used[r])
			switch {
			case objectCount(r):
				parts = append(parts, fmt.Sprintf("%s counts objects, and %s of the %s allowed exist (finished ones count too)", r, used[r], limited[r]))
			case ok:
				parts = append(parts, fmt.Sprintf("each %s asks %s=%s but only %s of the %s allowed is left (%s used)", one, r, quotaAmount(r, req[r]), quotaAmount(r, left), quotaAmount(r, limited[r]), quotaAmount(r, used[r])))
			default:
				parts = append(parts, fmt.Sprintf("each %s asks %s=%s and %s of the %s allowed is used", one, r, quotaAmount(r, req[r]), quotaAmount(r, used[r]), quotaAmount(r, limited[r])))
			}
		}
		f.Summary = fmt.Sprintf("ResourceQuota %s in %s refuses new %s: %s.", name, ns, c.what(), strings.Join(parts, "; "))
	} else if m := quotaMustSpecifyRE.FindStringSubmatch(msg); m != nil {
		name, mustSpecify = m[1], true
		missing = quotaMissingFields(m[2])
		resources = sortedKeys(missing)
		if len(missing) == 0 {
			f.Summary = fmt.Sprintf("ResourceQuota %s in %s refuses new %s: %s.", name, ns, c.what(), strings.TrimSuffix(strings.TrimSpace(m[2]), "."))
		} else {
			f.Summary = fmt.Sprintf("ResourceQuota %s in %s tracks %s, so the API server admits only pods whose every container sets them, and the pod template does not: %s.", name, ns, strings.Join(resources, " and "), strings.TrimSpace(m[2]))
		}
	} else {
		f.Summary = fmt.Sprintf("A ResourceQuota in %s refuses new %s.", ns, c.what())
	}
	f.Summary = c.ref.String() + " cannot create " + c.what() + ": " + f.Summary
	if cj := ws.CronJob; cj != nil && slices.ContainsFunc(exceeded, func(sf quotaShortfall) bool { return sf.resource == "count/jobs.batch" }) {
		kept := 0
		for _, j := range ws.Jobs {
			if jobFinished(j) {
				kept++
			}
		}
		last := "never"
		if t := lastJobCreated(ws, nil); !t.IsZero() {
			last = FormatAge(ws.Now.Sub(t)) + " ago"
		}
		f.Summary += fmt.Sprintf(" The finished Jobs that CronJobs keep as history fill it: %s keeps %d (successfulJobsHistoryLimit %d, failedJobsHistoryLimit %d), so none of its runs starts any more (the last Job was created %s).",
			ws.Ref(), kept, derefInt32(cj.Spec.SuccessfulJobsHistoryLimit, 3), derefInt32(cj.Spec.FailedJobsHistoryLimit, 1), last)
	}
	for _, q := range ws.ResourceQuotas {
		if name != "" && q.Name != name {
			continue
		}
		f.Evidence = append(f.Evidence, quotaEvidence(q, resources))
	}
	fix := []string{fmt.Sprintf("kubectl describe resourcequota -n %s %s", shellQuote(ns), shellQuote(name))}
	if name == "" {
		fix[0] = fmt.Sprintf("kubectl describe resourcequota -n %s", shellQuote(ns))
	}
	if mustSpecify {
		// Nothing is used up: more room, fewer pods or smaller requests change nothing. The
		// containers must set the fields, by hand or from a LimitRange default.
		if len(missing) > 0 {
			if injected := quotaInjected(ws, missing); len(injected) > 0 {
				// The quota names containers the template lacks: a mutating webhook added them,
				// so their fields are set where the injector takes them from, not in the template.
				note, injFix := injectedNote(ws, fmt.Sprintf("containers %s", strings.Join(quoteAll(injected), ", ")))
				f.Summary += note
				fix = append(fix, injFix...)
			}
			if len(missing) > 0 {
				fix = append(fix, quotaMissingFixes(ws, missing)...)
			}
			f.Fix = fix
		} else {
			f.Fix = append(fix, "Set the requests and limits the quota names on every container of the template (or give the namespace a LimitRange whose defaults fill them in): freeing or raising the quota changes nothing.")
		}
		return f
	}
	f.Fix = append(fix, quotaRoomFixes(ws, c, name, exceeded)...)
	return f
}

// quotaShortfall is one resource of an "exceeded quota" error: what one new object asks, what
// is used and the hard limit, as the API server wrote them.
type quotaShortfall struct {
	resource, requested, used, hard string
}

// objectCount reports whether a quota resource counts objects ("count/jobs.batch", "pods",
// "services", "configmaps", …) rather than compute or storage.
func objectCount(r string) bool {
	if strings.HasPrefix(r, "count/") {
		return true
	}
	switch r {
	case "pods", "services", "services.loadbalancers", "services.nodeports", "configmaps", "secrets", "persistentvolumeclaims", "replicationcontrollers", "resourcequotas":
		return true
	}
	return false
}

// quotaRoomFixes fixes an exceeded quota with the figures the answer knows: for the kept Jobs
// of a CronJob, history limits that free count/jobs.batch; for compute, requests that fit the
// room left and the hard limit that would admit every missing pod.
func quotaRoomFixes(ws *WorkloadSnapshot, c creator, quota string, exceeded []quotaShortfall) []string {
	ns := shellQuote(c.ref.Namespace)
	var out []string
	wanted := max(int64(c.missing), 1)
	var raise []string
	for _, sf := range exceeded {
		if sf.resource == "count/jobs.batch" && ws.CronJob != nil {
			out = append(out, cronJobHistoryFixes(ws)...)
			continue
		}
		if objectCount(sf.resource) {
			out = append(out, fmt.Sprintf("Remove %s objects of namespace %s that are no longer needed (finished ones count too):", sf.resource, c.ref.Namespace),
				fmt.Sprintf("kubectl get %s -n %s", strings.TrimPrefix(sf.resource, "count/"), ns))
		} else if fit := quotaFitFix(ws, sf, wanted); fit != "" {
			out = append(out, fit)
		}
		if q := quotaRaised(sf, wanted); q != "" {
			raise = append(raise, fmt.Sprintf("%q:%q", sf.resource, q))
		}
	}
	if len(exceeded) == 0 || !slices.ContainsFunc(exceeded, func(sf quotaShortfall) bool { return objectCount(sf.resource) }) {
		free := fmt.Sprintf("Free room: scale down or delete workloads in %s you no longer need; their pods hold the quota:", c.ref.Namespace)
		if len(out) > 0 || (len(raise) > 0 && quota != "") {
			// The lower request and the raised quota after it are the other ways out.
			free = fmt.Sprintf("Either free room (scale down or delete workloads in %s you no longer need; their pods hold the quota), or take one of the changes after it:", c.ref.Namespace)
		}
		out = append([]string{free, fmt.Sprintf("kubectl get pods -n %s", ns)}, out...)
	}
	if len(raise) > 0 && quota != "" {
		out = append(out, fmt.Sprintf("kubectl patch resourcequota %s -n %s --type=merge -p %s   # only if the namespace may use more: room for %d more %s", shellQuote(quota), ns, shellQuote(`{"spec":{"hard":{`+strings.Join(raise, ",")+`}}}`), wanted, plural(int(wanted), strings.TrimSuffix(c.what(), "s"), c.what())))
	}
	return out
}

// quotaFitFix is the command that lowers the template's request of sf's resource so that the
// wanted pods fit in the room left (requests.cpu 400m left for 2 pods: 200m each); "" when
// nothing is left, the resource is not one kubectl set resources sets, or the template has more
// than one container (the split between them is the operator's call).
func quotaFitFix(ws *WorkloadSnapshot, sf quotaShortfall, wanted int64) string {
	kind, res, ok := strings.Cut(sf.resource, ".")
	if !ok {
		kind, res = "requests", sf.resource
	}
	if (kind != "requests" && kind != "limits") || (res != "cpu" && res != "memory") {
		return ""
	}
	left, ok := quantityLeft(sf.hard, sf.used)
	if !ok {
		return ""
	}
	room := resource.MustParse(left)
	if room.Sign() <= 0 {
		return ""
	}
	per := room.MilliValue() / wanted
	spec := ws.podTemplate()
	if spec == nil || len(spec.Containers) != 1 || per <= 0 {
		return ""
	}
	amount := resource.NewMilliQuantity(per, resource.DecimalSI)
	if res == "memory" {
		amount = resource.NewQuantity(per/1000/(1<<20)*(1<<20), resource.BinarySI)
		if amount.IsZero() {
			return ""
		}
	}
	target, mutable := workloadTemplateTarget(ws)
	flag := "--" + kind + "=" + res + "=" + amount.String()
	if !mutable {
		return fmt.Sprintf("Or lower %s of container %s to %s so the pod fits the %s left: %s.", sf.resource, spec.Containers[0].Name, amount.String(), quotaAmount(sf.resource, left), immutableNote(target))
	}
	return fmt.Sprintf("kubectl set resources %s -n %s -c %s %s   # or lower the request so %d %s the %s left, if the app can live with it", target, shellQuote(ws.Ref().Namespace), shellQuote(spec.Containers[0].Name), flag, wanted, plural(int(wanted), "pod fits", "pods fit"), quotaAmount(sf.resource, left))
}

// quotaRaised is the hard limit that would admit wanted more objects asking sf.requested each:
// used + wanted × requested.
func quotaRaised(sf quotaShortfall, wanted int64) string {
	used, err1 := resource.ParseQuantity(sf.used)
	req, err2 := resource.ParseQuantity(sf.requested)
	if err1 != nil || err2 != nil {
		return ""
	}
	for range wanted {
		used.Add(req)
	}
	return used.String()
}

// workloadTemplateTarget is "kind/name" of the workload for kubectl set, and whether its pod
// template may be changed (a Job's may not; a CronJob's jobTemplate may).
func workloadTemplateTarget(ws *WorkloadSnapshot) (string, bool) {
	r := ws.Ref()
	return r.Kind.Short() + "/" + shellQuote(r.Name), r.Kind != KindJob
}

// cronJobHistoryFixes frees count/jobs.batch that a CronJob's kept Jobs fill: lower its
// history limits (the controller deletes the extra finished Jobs), or let each Job delete
// itself after it finishes, and delete the finished Jobs now.
func cronJobHistoryFixes(ws *WorkloadSnapshot) []string {
	cj := ws.CronJob
	ns, name := shellQuote(cj.Namespace), shellQuote(cj.Name)
	succ, fail := derefInt32(cj.Spec.SuccessfulJobsHistoryLimit, 3), derefInt32(cj.Spec.FailedJobsHistoryLimit, 1)
	finished := 0
	for _, j := range ws.Jobs {
		if jobFinished(j) {
			finished++
		}
	}
	var out []string
	out = append(out, fmt.Sprintf("kubectl get jobs -n %s   # count/jobs.batch counts every Job in the namespace, finished ones too; %s keeps %d of its own (successfulJobsHistoryLimit %d, failedJobsHistoryLimit %d)", ns, ws.Ref(), finished, succ, fail))
	if succ > 1 || fail > 1 {
		out = append(out, fmt.Sprintf(`kubectl patch cronjob/%s -n %s -p '{"spec":{"successfulJobsHistoryLimit":1,"failedJobsHistoryLimit":1}}'   # the controller deletes the finished Jobs beyond that (do the same for the namespace's other CronJobs)`, name, ns))
	}
	if cj.Spec.JobTemplate.Spec.TTLSecondsAfterFinished == nil {
		out = append(out, fmt.Sprintf(`kubectl patch cronjob/%s -n %s -p '{"spec":{"jobTemplate":{"spec":{"ttlSecondsAfterFinished":3600}}}}'   # or let each Job delete itself an hour after it finishes`, name, ns))
	}
	out = append(out,
		fmt.Sprintf("kubectl delete jobs -n %s --field-selector status.successful=1   # frees room at once: deletes the namespace's succeeded Jobs (their history only)", ns),
		"Or ask for a larger count/jobs.batch in the quota, or run fewer CronJobs.",
	)
	return out
}

// quotaMissingFields parses the quota's "must specify" list, "must specify limits.memory for:
// app,sidecar; requests.cpu for: app" (the quota evaluator's Constraints error), into the
// containers that lack each field.
func quotaMissingFields(s string) map[string][]string {
	out := map[string][]string{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimPrefix(strings.TrimSpace(part), "must specify ")
		r, containers, ok := strings.Cut(part, " for:")
		if !ok {
			continue
		}
		for _, c := range strings.Split(containers, ",") {
			if c = strings.TrimSpace(c); c != "" {
				out[r] = append(out[r], c)
			}
		}
	}
	return out
}

// quotaInjected removes from missing the containers that the workload's pod template does not
// have (a mutating webhook injected them) and returns them, sorted; nil when the template was
// not read.
func quotaInjected(ws *WorkloadSnapshot, missing map[string][]string) []string {
	spec := ws.podTemplate()
	if !ws.Exists() || spec == nil || len(spec.Containers) == 0 {
		return nil
	}
	have := map[string]bool{}
	for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		have[c.Name] = true
	}
	var out []string
	for r, cs := range missing {
		kept := cs[:0]
		for _, c := range cs {
			if have[c] {
				kept = append(kept, c)
			} else if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
		if len(kept) == 0 {
			delete(missing, r)
		} else {
			missing[r] = kept
		}
	}
	sort.Strings(out)
	return out
}

// quotaMissingFixes returns the fix for a quota that requires fields the containers do not
// set: per container, the kubectl set resources command that sets them, with amounts the answer
// knows (the container's other bound of the same resource, else the namespace LimitRange's
// default or max; a container with no known amount gets a line saying what to set instead of a
// placeholder), then the namespace-wide alternative, a LimitRange whose defaults fill them in.
func quotaMissingFixes(ws *WorkloadSnapshot, missing map[string][]string) []string {
	byContainer := map[string][]string{} // container -> "limits.memory", …
	for r, cs := range missing {
		for _, c := range cs {
			byContainer[c] = append(byContainer[c], r)
		}
	}
	var spec *corev1.PodSpec
	if ws.Exists() {
		spec = ws.podTemplate()
	}
	target, mutable := workloadTemplateTarget(ws)
	var out []string
	for _, c := range sortedKeys(byContainer) {
		var limits, requests, unknown []string
		fields := byContainer[c]
		sort.Strings(fields)
		for _, r := range fields {
			kind, res, ok := strings.Cut(r, ".")
			if !ok { // "cpu" and "memory" in a quota mean requests
				kind, res = "requests", r
			}
			amount, known := templateAmount(ws, spec, c, kind, res)
			switch {
			case !known:
				unknown = append(unknown, kind+"."+res)
			case kind == "limits":
				limits = append(limits, res+"="+amount)
			default:
				requests = append(requests, res+"="+amount)
			}
		}
		if len(limits)+len(requests) > 0 {
			flags := ""
			if len(limits) > 0 {
				flags += " --limits=" + strings.Join(limits, ",")
			}
			if len(requests) > 0 {
				flags += " --requests=" + strings.Join(requests, ",")
			}
			if mutable {
				out = append(out, fmt.Sprintf("kubectl set resources %s -n %s -c %s%s  # set what the quota requires on container %s", target, shellQuote(ws.Ref().Namespace), shellQuote(c), flags, c))
			} else {
				out = append(out, fmt.Sprintf("Set%s on container %s: %s.", flags, c, immutableNote(target)))
			}
		}
		if len(unknown) > 0 {
			out = append(out, fmt.Sprintf("Set %s on container %s to what it needs: it sets no other bound of that resource and no LimitRange gives a value to copy.", strings.Join(unknown, " and "), c))
		}
	}
	var defaults []string
	for _, r := range sortedKeys(missing) {
		kind, res, ok := strings.Cut(r, ".")
		if !ok {
			kind, res = "requests", r
		}
		field := "default"
		if kind == "requests" {
			field = "defaultRequest"
		}
		defaults = append(defaults, field+"."+res)
	}
	out = append(out, fmt.Sprintf("Or give every container in %s that sets none a default: a LimitRange of type Container with %s, applied to namespace %s.", ws.Ref().Namespace, strings.Join(defaults, " and "), ws.Ref().Namespace))
	return out
}

// templateAmount suggests the amount for container c's missing kind ("limits" or "requests")
// of res: its other bound of the same resource when the template sets one, else the
// namespace's LimitRange (a Container default for limits, defaultRequest for requests, else
// the other of the two, else its max); known is false when none says.
func templateAmount(ws *WorkloadSnapshot, spec *corev1.PodSpec, c, kind, res string) (amount string, known bool) {
	if spec != nil {
		for _, ctr := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			if ctr.Name != c {
				continue
			}
			other := ctr.Resources.Requests
			if kind == "requests" {
				other = ctr.Resources.Limits
			}
			if q, ok := other[corev1.ResourceName(res)]; ok {
				return q.String(), true
			}
		}
	}
	for _, lr := range ws.LimitRanges {
		for _, l := range lr.Spec.Limits {
			if l.Type != corev1.LimitTypeContainer {
				continue
			}
			lists := []corev1.ResourceList{l.Default, l.DefaultRequest, l.Max}
			if kind == "requests" {
				lists = []corev1.ResourceList{l.DefaultRequest, l.Default, l.Max}
			}
			for _, list := range lists {
				if q, ok := list[corev1.ResourceName(res)]; ok {
					return q.String(), true
				}
			}
		}
	}
	return "", false
}

// quotaAmount renders quantity q of quota resource r in one unit per kind, so that figures
// compare at a glance: cpu in millicores with whole cores spelled out ("1 CPU (1000m)", "200m"),
// memory and storage in Mi with whole Gi spelled out ("1Gi (1024Mi)"); anything else, or what
// does not parse, as given.
func quotaAmount(r, q string) string {
	v, err := resource.ParseQuantity(q)
	if err != nil {
		return q
	}
	switch base := r[strings.LastIndex(r, ".")+1:]; {
	case base == "cpu":
		m := v.MilliValue()
		if m != 0 && m%1000 == 0 {
			return fmt.Sprintf("%d CPU (%dm)", m/1000, m)
		}
		return fmt.Sprintf("%dm", m)
	case base == "memory" || base == "storage" || base == "ephemeral-storage":
		const mi, gi = 1 << 20, 1 << 30
		b := v.Value()
		switch {
		case b != 0 && b%gi == 0:
			return fmt.Sprintf("%dGi (%dMi)", b/gi, b/mi)
		case b%mi == 0:
			return fmt.Sprintf("%dMi", b/mi)
		}
	}
	return v.String()
}

// quotaEvidence renders a quota's status for resources (all of its hard limits when empty).
func quotaEvidence(q *corev1.ResourceQuota, resources []string) Evidence {
	names := resources
	if len(names) == 0 {
		for r := range q.Status.Hard {
			names = append(names, string(r))
		}
		sort.Strings(names)
	}
	var parts []string
	for _, r := range names {
		hard, ok := q.Status.Hard[corev1.ResourceName(r)]
		if !ok {
			continue
		}
		used := q.Status.Used[corev1.ResourceName(r)]
		parts = append(parts, fmt.Sprintf("%s: used %s of %s", r, quotaAmount(r, used.String()), quotaAmount(r, hard.String())))
	}
	msg := strings.Join(parts, "; ")
	if msg == "" {
		msg = "status not filled in yet (the resource quota controller computes it)"
	}
	return Evidence{Object: "ResourceQuota " + q.Namespace + "/" + q.Name, Field: "status.used/status.hard", Message: msg}
}

// quantityList parses "a=1,b=2" into a map.
func quantityList(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// quantityLeft is limited minus used, when both parse and the result is not negative.
func quantityLeft(limited, used string) (string, bool) {
	l, err1 := resource.ParseQuantity(limited)
	u, err2 := resource.ParseQuantity(used)
	if err1 != nil || err2 != nil || l.Cmp(u) < 0 {
		return "", false
	}
	l.Sub(u)
	return l.String(), true
}

// podSecurityRE matches the Pod Security admission error: `violates PodSecurity
// "LEVEL:VERSION": violation (detail), violation (detail), …`.
var podSecurityRE = regexp.MustCompile(`violates PodSecurity "([^"]+)": (.*)$`)

// podSecurityFinding explains pod-security-violation: the level the namespace enforces, each
// violated control and the field that fixes it.
func podSecurityFinding(ws *WorkloadSnapshot, c creator, msg string) Finding {
	f := Finding{Code: CodePodSecurityViolation}
	ns := c.ref.Namespace
	level, violations := "", []string(nil)
	if m := podSecurityRE.FindStringSubmatch(msg); m != nil {
		level, violations = m[1], splitTopLevel(m[2])
	}
	var controls []string
	for _, v := range violations {
		control, _, _ := strings.Cut(v, " (")
		controls = append(controls, control)
	}
	f.Summary = fmt.Sprintf("%s cannot create %s: namespace %s enforces Pod Security %q and the pod template violates it: %s.", c.ref, c.what(), ns, level, strings.Join(controls, "; "))
	if n := ws.Namespace; n != nil {
		var labels []string
		for _, k := range sortedKeys(n.Labels) {
			if strings.HasPrefix(k, "pod-security.kubernetes.io/") {
				labels = append(labels, k+"="+n.Labels[k])
			}
		}
		if len(labels) > 0 {
			f.Evidence = append(f.Evidence, Evidence{Object: "Namespace " + ns, Field: "metadata.labels", Message: strings.Join(labels, ", ")})
		}
	}
	enforced, _, _ := strings.Cut(level, ":")
	if l := ws.Namespace; l != nil && l.Labels["pod-security.kubernetes.io/enforce"] != "" {
		enforced = l.Labels["pod-security.kubernetes.io/enforce"]
	}
	if systemDaemon(ws) && enforced != "privileged" && enforced != "" {
		// A CSI or CNI node plugin needs host access: taking it away breaks the daemon. The
		// namespace's level is the fix.
		f.Summary += fmt.Sprintf(" %s is a node-level system daemon (host paths of the kubelet, the CNI or devices, or a privileged host-network pod): it needs what %s forbids.", ws.Ref(), enforced)
		// The namespace's labels first: the level the change raises, and what else runs there.
		f.Fix = append(f.Fix,
			fmt.Sprintf("kubectl get namespace %s --show-labels", shellQuote(ns)),
			fmt.Sprintf("Do not remove privileged, hostPath or hostNetwork from %s: a storage or network node plugin does not work without them.", ws.Ref()),
			fmt.Sprintf("kubectl label namespace %s pod-security.kubernetes.io/enforce=privileged --overwrite   # the level a node plugin's namespace needs; keep only such daemons in it", shellQuote(ns)),
		)
		return f
	}
	f.Fix = append(f.Fix, fmt.Sprintf("kubectl get namespace %s --show-labels", shellQuote(ns)))
	if note, fix := injectedNote(ws, msg); note != "" {
		f.Summary += note
		f.Fix = append(f.Fix, fix...)
	} else {
		for _, v := range violations {
			control, detail, _ := strings.Cut(v, " (")
			f.Fix = append(f.Fix, podSecurityFix(control, strings.TrimSuffix(detail, ")")))
		}
	}
	if looser := looserPodSecurityLevel(enforced); looser != "" {
		f.Fix = append(f.Fix, fmt.Sprintf("Policy change, for the owner of namespace %s to decide (it lets every pod in %s do what %s forbids), only if the workload really needs it:", ns, ns, enforced),
			fmt.Sprintf("kubectl label namespace %s pod-security.kubernetes.io/enforce=%s --overwrite", shellQuote(ns), looser))
	}
	return f
}

// looserPodSecurityLevel is the Pod Security level next looser than level ("restricted" →
// "baseline" → "privileged"); "" for privileged or a level it does not know.
func looserPodSecurityLevel(level string) string {
	switch level {
	case "restricted":
		return "baseline"
	case "baseline":
		return "privileged"
	}
	return ""
}

// Pod Security details the fix rewrites (the forbiddenDetail formats of
// k8s.io/pod-security-admission/policy): what to set, what to remove.
var (
	psaMustSetRE     = regexp.MustCompile(`^(.+?) must set (.+)$`)
	psaMustNotSetRE  = regexp.MustCompile(`^(.+?) must not set (\S+?)(?:=| to )(.+)$`)
	psaMustNotIncRE  = regexp.MustCompile(`^(.+?) must not include (.+) in (\S+)$`)
	psaHostPortRE    = regexp.MustCompile(`^(containers? .+?) uses? hostPorts? (.+)$`)
	psaProbeHostRE   = regexp.MustCompile(`^(containers? .+?) uses? probe or lifecycle hosts? (.+)$`)
	psaVolumeTypeRE  = regexp.MustCompile(`^(volumes? .+?) uses? restricted volume types? (.+)$`)
	psaSELinuxRE     = regexp.MustCompile(`^(.+?) set forbidden (securityContext\.seLinuxOptions): (.+)$`)
	psaAnnotationsRE = regexp.MustCompile(`^forbidden annotations? (.+)$`)
)

// podSecurityFix turns one violated Pod Security control and its detail ("privileged",
// `container "app" must not set securityContext.privileged=true`) into what to change in the
// pod template: the field to remove or the value to set, never the violation restated.
func podSecurityFix(control, detail string) string {
	const allowedVolumes = "configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected or secret"
	var fixes []string
	for _, d := range strings.Split(detail, "; ") {
		d = strings.TrimSpace(d)
		var fix string
		if m := psaMustSetRE.FindStringSubmatch(d); m != nil {
			who := m[1]
			if rest, ok := strings.CutPrefix(who, "pod or "); ok {
				who = "the pod (spec.securityContext) or on " + rest
			}
			fix = fmt.Sprintf("set %s on %s", m[2], who)
		} else if m := psaMustNotSetRE.FindStringSubmatch(d); m != nil && m[3] == "true" {
			fix = fmt.Sprintf("remove %s from %s (or set it to false)", m[2], m[1])
		} else if m != nil {
			fix = fmt.Sprintf("remove %s from %s, or change it from %s to a value the level allows", m[2], m[1], m[3])
		} else if m := psaMustNotIncRE.FindStringSubmatch(d); m != nil {
			fix = fmt.Sprintf("remove %s from %s of %s", m[2], m[3], m[1])
		} else if m := psaHostPortRE.FindStringSubmatch(d); m != nil {
			fix = fmt.Sprintf("remove hostPort %s from the ports of %s (reach the pods through a Service instead)", m[2], m[1])
		} else if m := psaProbeHostRE.FindStringSubmatch(d); m != nil {
			fix = fmt.Sprintf("remove the host field (%s) from the probes and lifecycle handlers of %s", m[2], m[1])
		} else if m := psaVolumeTypeRE.FindStringSubmatch(d); m != nil {
			fix = fmt.Sprintf("replace %s (type %s) with an allowed volume type: %s", m[1], m[2], allowedVolumes)
		} else if m := psaSELinuxRE.FindStringSubmatch(d); m != nil {
			fix = fmt.Sprintf("remove the forbidden %s of %s (%s)", m[2], m[1], m[3])
		} else if m := psaAnnotationsRE.FindStringSubmatch(d); m != nil {
			fix = fmt.Sprintf("remove the annotations %s from the pod template's metadata", m[1])
		}
		if fix != "" {
			fixes = append(fixes, fix)
		}
	}
	if len(fixes) == 0 {
		switch control {
		case "host namespaces":
			for _, field := range strings.Split(detail, ", ") {
				if k, _, ok := strings.Cut(strings.TrimSpace(field), "="); ok {
					fixes = append(fixes, fmt.Sprintf("remove spec.%s (or set it to false)", k))
				}
			}
		case "hostPath volumes":
			fixes = append(fixes, fmt.Sprintf("replace the hostPath %s with an allowed volume type (%s), and drop their volumeMounts if the containers do not need them", detail, allowedVolumes))
		case "forbidden sysctls":
			fixes = append(fixes, fmt.Sprintf("remove the sysctls %s from spec.securityContext.sysctls", detail))
		}
	}
	if len(fixes) == 0 {
		return fmt.Sprintf("In the pod template, change what the %q control of the Pod Security Standards forbids (%s): https://kubernetes.io/docs/concepts/security/pod-security-standards/ lists the allowed values.", control, detail)
	}
	return "In the pod template, " + strings.Join(fixes, "; ") + "."
}

// splitTopLevel splits "a (x, y), b [z, w]" at the commas outside parentheses, brackets and
// quotes.
func splitTopLevel(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '(' || r == '[':
			depth++
		case r == ')' || r == ']':
			depth--
		case r == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

// webhookRE matches a webhook's denial: `admission webhook "NAME" denied the request: MSG`;
// webhookCallRE a webhook the API server could not call (failurePolicy Fail):
// `failed calling webhook "NAME": MSG`.
var (
	webhookRE     = regexp.MustCompile(`(?s)admission webhook "([^"]+)" denied the request:?\s*(.*)$`)
	webhookCallRE = regexp.MustCompile(`(?s)failed calling webhook "([^"]+)": (.*)$`)
)

// webhookFinding explains admission-webhook-denied: the webhook's name and its message, or
// why the API server could not call it; a fail-closed webhook whose own backend's pods it
// refuses is a deadlock, and its fix is to let the backend start first.
func webhookFinding(ws *WorkloadSnapshot, c creator, msg string) Finding {
	f := Finding{Code: CodeAdmissionWebhookDenied}
	var name string
	if m := webhookRE.FindStringSubmatch(msg); m != nil {
		name = m[1]
		f.Summary = fmt.Sprintf("%s cannot create %s: admission webhook %q denies them: %s", c.ref, c.what(), name, truncate(strings.Join(strings.Fields(m[2]), " "), 500))
	} else if m := webhookCallRE.FindStringSubmatch(msg); m != nil {
		name = m[1]
		f.Summary = fmt.Sprintf("%s cannot create %s: the API server cannot call admission webhook %q (%s), and the webhook's failurePolicy is Fail, so every pod is refused.", c.ref, c.what(), name, truncateStart(strings.Join(strings.Fields(m[2]), " "), 300))
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations -o custom-columns=CONFIG:.metadata.name,WEBHOOKS:.webhooks[*].name | grep -F %s", shellQuote(name)),
	}
	if !webhookCallRE.MatchString(msg) {
		f.Fix = append(f.Fix, fmt.Sprintf("Change the pod template to satisfy the webhook's policy (its message says what it wants), or ask the owner of %s for an exception.", name))
		return f
	}
	svc, deadlock, known := webhookDeadlock(ws, msg)
	switch {
	case deadlock:
		f.Summary = fmt.Sprintf("Deadlock: %s is the backend of admission webhook %q (Service %s selects its pods), and that webhook, with failurePolicy Fail and no backend running, refuses every pod, its own backend's included. Nothing recovers by itself.", ws.Ref(), name, svc)
		f.Evidence = append(f.Evidence, Evidence{Object: "Service " + svc, Field: "spec.selector", Message: fmt.Sprintf("%v selects the pods of %s", ws.WebhookServices[svc].Spec.Selector, ws.Ref())})
		f.Fix = append(f.Fix,
			fmt.Sprintf("Break it: in the webhook configuration that holds %q, set that webhook's failurePolicy to Ignore (or give it a namespaceSelector that leaves out namespace %s), let %s start, then restore it.", name, ws.Ref().Namespace, ws.Ref()),
			"Or delete the webhook configuration, if its operator or chart recreates it once the backend runs.",
			fmt.Sprintf("Then keep it from recurring: exclude the webhook's own namespace (%s) in its namespaceSelector.", ws.Ref().Namespace),
		)
	case svc != "" && known && ws.WebhookServices[svc] == nil:
		f.Summary += fmt.Sprintf(" Its Service %s does not exist.", svc)
		f.Fix = append(f.Fix, fmt.Sprintf("Reinstall the webhook's backend (Service %s and its pods), or delete the webhook configuration it left behind.", svc))
	default:
		f.Fix = append(f.Fix, "Check the webhook's Service and pods (clientConfig.service in that configuration): they must run and answer before the API server admits pods it intercepts.")
	}
	return f
}

// serviceAccountRE matches the ServiceAccount admission error: `error looking up service
// account NS/NAME: serviceaccount "NAME" not found`.
var serviceAccountRE = regexp.MustCompile(`error looking up service account ([^/\s]+)/([^:\s]+): (.*)$`)

// serviceAccountFinding explains service-account-not-found, with the namespace's closest
// ServiceAccount names and the namespaces that have one of that name (a pod can use only one
// of its own namespace).
//
// The controller's report is as old as its last try: when ServiceAccountNames (a live list)
// has the name, the ServiceAccount was created since (referenced-object-now-exists,
// serviceAccountExistsFinding); when the list could not be read, the answer says what the API
// server reported and when, no more.
func serviceAccountFinding(ws *WorkloadSnapshot, c creator, msg string) Finding {
	f := Finding{Code: CodeServiceAccountNotFound}
	ns, name, cause := c.ref.Namespace, "", ""
	if m := serviceAccountRE.FindStringSubmatch(msg); m != nil {
		ns, name, cause = m[1], m[2], m[3]
	}
	_, ev, _ := creationFailure(ws, c)
	when := " (its ReplicaFailure condition)"
	if ev != nil {
		when = fmt.Sprintf(" (%s, %s)", ev.Reason, eventSeenAt(ws.Now, *ev))
	}
	if cause != "" && !strings.Contains(cause, "not found") {
		// The lookup failed (a timeout, the API server's own error): that says nothing about
		// whether the ServiceAccount exists.
		f.Code, f.Uncertain = CodeUnknown, true
		f.Summary = fmt.Sprintf("%s cannot create %s: the API server could not look up their ServiceAccount %s in namespace %s%s: %s.", c.ref, c.what(), name, ns, when, truncateStart(cause, 240))
		f.Fix = []string{fmt.Sprintf("kubectl get serviceaccount %s -n %s", shellQuote(name), shellQuote(ns)), fmt.Sprintf("kubectl describe %s", c.ref.kubectl())}
		return f
	}
	switch {
	case ws.ServiceAccountNames == nil:
		f.Summary = fmt.Sprintf("%s cannot create %s: the API server reported their ServiceAccount %s not found in namespace %s%s, and it admits no pod without its ServiceAccount. Whether it exists now was not checked: whypending could not list the namespace's ServiceAccounts.", c.ref, c.what(), name, ns, when)
	case slices.Contains(ws.ServiceAccountNames, name):
		return serviceAccountExistsFinding(ws, c, ns, name, when, ev)
	default:
		f.Summary = fmt.Sprintf("%s cannot create %s: their ServiceAccount %s does not exist in namespace %s, and the API server admits no pod without its ServiceAccount.", c.ref, c.what(), name, ns)
	}
	near := closestNames(name, ws.ServiceAccountNames, 3)
	if len(near) > 0 {
		f.Summary += fmt.Sprintf(" Did you mean %s?", strings.Join(near, " or "))
	}
	if ws.ServiceAccountNames != nil {
		f.Evidence = append(f.Evidence, Evidence{Object: "Namespace " + ns, Field: "serviceaccounts", Message: "existing: " + orNone(joinLimited(ws.ServiceAccountNames, 8))})
	}
	if len(ws.ServiceAccountElsewhere) > 0 {
		f.Summary += fmt.Sprintf(" A ServiceAccount %s exists in %s %s, but a pod can only use one of its own namespace.", name, plural(len(ws.ServiceAccountElsewhere), "namespace", "namespaces"), joinLimited(ws.ServiceAccountElsewhere, 3))
		f.Evidence = append(f.Evidence, Evidence{Object: "ServiceAccount " + name, Field: "metadata.namespace", Message: "exists in " + joinLimited(ws.ServiceAccountElsewhere, 8)})
	}
	create := fmt.Sprintf("kubectl create serviceaccount -n %s %s   # the controller's next retry creates the %s", shellQuote(ns), shellQuote(name), c.what())
	if len(ws.ServiceAccountElsewhere) > 0 {
		create += fmt.Sprintf("; give it the RoleBindings the one in %s has, if the app needs them", ws.ServiceAccountElsewhere[0])
	}
	f.Fix = []string{fmt.Sprintf("kubectl get serviceaccounts -n %s", shellQuote(ns)), create}
	if ws.ServiceAccountNames == nil {
		f.Fix[0] = fmt.Sprintf("kubectl get serviceaccount %s -n %s   # if it is there now, do not create it: the controller retries on its own", shellQuote(name), shellQuote(ns))
	}
	if len(near) > 0 {
		target, mutable := workloadTemplateTarget(ws)
		if mutable {
			// Two pasted changes that are alternatives: say so before the first.
			f.Fix = []string{f.Fix[0],
				fmt.Sprintf("Either create ServiceAccount %s (the first command), or, if %s is the one meant, point the template at it (the second): one of the two.", name, near[0]),
				create,
				fmt.Sprintf("kubectl set serviceaccount %s -n %s %s   # or, if %s is the one meant, point the template at it", target, shellQuote(ws.Ref().Namespace), shellQuote(near[0]), near[0])}
		} else {
			f.Fix = append(f.Fix, fmt.Sprintf("Or, if %s is the one meant, set serviceAccountName: %s in the template: %s.", near[0], near[0], immutableNote(target)))
		}
	}
	return f
}

// serviceAccountExistsFinding is referenced-object-now-exists for a creator whose pods the API
// server refused because ServiceAccount ns/name was not found (when: the report's event or
// condition, ev its event) while the namespace's ServiceAccounts have it now: the controller's
// next try should create them.
func serviceAccountExistsFinding(ws *WorkloadSnapshot, c creator, ns, name, when string, ev *Event) Finding {
	f := Finding{Code: CodeReferencedObjectNowExists}
	created := ws.ServiceAccountCreated[name]
	var last time.Time
	if ev != nil {
		last = ev.LastSeen
	}
	exists := fmt.Sprintf("ServiceAccount %s exists in namespace %s now", name, ns)
	text, late := createdVersusReport(ws.Now, created, last)
	if text != "" {
		exists += " (" + text + ")"
	}
	f.Summary = fmt.Sprintf("%s could not create %s because the API server reported their ServiceAccount %s not found%s, but %s.", c.ref, c.what(), name, when, exists)
	objEv := Evidence{Object: "ServiceAccount " + ns + "/" + name, Field: "metadata.creationTimestamp", Message: "exists now"}
	if !created.IsZero() {
		objEv.Message = fmt.Sprintf("exists now, created %s (%s ago)", created.UTC().Format(time.RFC3339), FormatAge(ageAt(ws.Now, created)))
	}
	f.Evidence = append(f.Evidence, objEv)
	f.Fix = []string{fmt.Sprintf("kubectl get %s -w   # its controller retries on its own", c.ref.kubectl())}
	if late {
		f.Uncertain = true
		f.Summary += " The API server still reported it not found after it was created, so something else is wrong: read the controller's newest events."
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl describe %s", c.ref.kubectl()))
		return f
	}
	switch c.ref.Kind {
	case KindJob:
		f.Summary += " The Job controller retries on its own with exponential back-off of at most 1 minute between tries, so its next try should create them."
	case KindReplicaSet, KindStatefulSet, KindDaemonSet:
		f.Summary += fmt.Sprintf(" Its controller retries on its own with exponential back-off that grows with each failure, to about 16 minutes between tries after a long run of failures, so its next try should create them; any change to %s makes it try at once.", c.ref)
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl annotate %s whypending.io/retry=\"$(date +%%s)\" --overwrite   # any change makes the controller try again at once; the annotation does nothing else", c.ref.kubectl()))
	default:
		f.Summary += " Its controller retries on its own with exponential back-off, so its next try should create them."
	}
	return f
}

// limitRangeRE matches the LimitRanger admission errors: "maximum cpu usage per Container is
// 1, but limit is 2", "minimum memory usage per Pod is 64Mi, but request is 32Mi", "… No limit
// is specified", "cpu max limit to request ratio per Container is 2, but provided ratio is
// 4.000000".
var limitRangeRE = regexp.MustCompile(`(?:(?:minimum|maximum) \S+ usage per (?:Container|Pod|PersistentVolumeClaim) is \S+?(?:,|\.)[^,\]]*|\S+ max limit to request ratio per (?:Container|Pod) is \S+, but [^,\]]*)`)

// limitRangeFinding explains limit-range-violation: each bound the pod breaks and the
// namespace's LimitRanges, and the kubectl set resources that brings each container within a
// per-Container bound (the bound itself, a value the answer knows).
func limitRangeFinding(ws *WorkloadSnapshot, c creator, msg string) Finding {
	f := Finding{Code: CodeLimitRangeViolation}
	violations := limitRangeRE.FindAllString(msg, -1)
	for i := range violations {
		violations[i] = strings.TrimSpace(strings.ReplaceAll(violations[i], ".  ", ". "))
	}
	ns := c.ref.Namespace
	if len(violations) == 0 {
		f.Summary = fmt.Sprintf("%s cannot create %s: a LimitRange in %s could not be enforced.", c.ref, c.what(), ns)
	} else {
		f.Summary = fmt.Sprintf("%s cannot create %s: a LimitRange in %s rejects them: %s.", c.ref, c.what(), ns, strings.Join(violations, "; "))
	}
	for _, lr := range ws.LimitRanges {
		var parts []string
		for _, l := range lr.Spec.Limits {
			for _, b := range []struct {
				name string
				list corev1.ResourceList
			}{{"min", l.Min}, {"max", l.Max}, {"maxLimitRequestRatio", l.MaxLimitRequestRatio}, {"defaultRequest", l.DefaultRequest}, {"default", l.Default}} {
				for _, r := range sortedResourceNames(b.list) {
					q := b.list[corev1.ResourceName(r)]
					parts = append(parts, fmt.Sprintf("%s %s %s=%s", l.Type, b.name, r, q.String()))
				}
			}
		}
		f.Evidence = append(f.Evidence, Evidence{Object: "LimitRange " + lr.Namespace + "/" + lr.Name, Field: "spec.limits", Message: strings.Join(parts, ", ")})
	}
	f.Fix = append([]string{fmt.Sprintf("kubectl describe limitrange -n %s", shellQuote(ns))}, limitRangeFixes(ws, violations)...)
	if note, fix := injectedNote(ws, msg); note != "" {
		f.Summary += note
		f.Fix = append(f.Fix[:1], fix...)
	} else if injectedLimitBreaker(ws, violations) {
		f.Summary += " No container of the pod template breaks that per-Container bound, so a container added at admission (a sidecar a mutating webhook injects) does: change it where the injector takes its resources from, not in the template."
		f.Fix = append(f.Fix[:1], "kubectl get mutatingwebhookconfigurations   # the injectors that add containers at admission; set the sidecar's resources in the injector's annotations or configuration")
	}
	return f
}

// reLimitBound reads one LimitRanger violation: "maximum cpu usage per Container is 1, but
// limit is 2", "minimum memory usage per Container is 64Mi, but request is 32Mi".
var reLimitBound = regexp.MustCompile(`^(minimum|maximum) (\S+) usage per Container is (\S+?),? but (limit|request) is`)

// injectedLimitBreaker reports whether a per-Container min/max is violated although no
// container of the template breaks it (then a container added at admission does).
func injectedLimitBreaker(ws *WorkloadSnapshot, violations []string) bool {
	spec := ws.podTemplate()
	if spec == nil || len(spec.Containers) == 0 {
		return false
	}
	flags, _ := limitBreakers(ws, violations)
	perContainer := slices.ContainsFunc(violations, reLimitBound.MatchString)
	return perContainer && len(flags) == 0
}

// limitBreakers returns, per container of the template, the kubectl set resources flags that
// bring it within each per-Container min/max it breaks (the bound itself), and the violations
// that are not such a bound (per Pod, a ratio).
func limitBreakers(ws *WorkloadSnapshot, violations []string) (map[string][]string, []string) {
	spec := ws.podTemplate()
	flags := map[string][]string{}
	var other []string
	for _, v := range violations {
		m := reLimitBound.FindStringSubmatch(v)
		if m == nil || spec == nil {
			other = append(other, v)
			continue
		}
		which, res, bound, kind := m[1], m[2], m[3], m[4]
		b, err := resource.ParseQuantity(bound)
		if err != nil {
			other = append(other, v)
			continue
		}
		for _, ctr := range spec.Containers {
			list := ctr.Resources.Requests
			flag := "--requests="
			if kind == "limit" {
				list, flag = ctr.Resources.Limits, "--limits="
			}
			q, set := list[corev1.ResourceName(res)]
			if (which == "maximum" && set && q.Cmp(b) > 0) || (which == "minimum" && (!set || q.Cmp(b) < 0)) {
				flags[ctr.Name] = append(flags[ctr.Name], flag+res+"="+b.String())
			}
		}
	}
	return flags, other
}

// limitRangeFixes sets, for each per-Container min/max the template breaks, the bound itself on
// each container that breaks it; a per-Pod bound or a ratio gets a line naming the bound.
func limitRangeFixes(ws *WorkloadSnapshot, violations []string) []string {
	target, mutable := workloadTemplateTarget(ws)
	flags, other := limitBreakers(ws, violations)
	var out []string
	for _, name := range sortedKeys(flags) {
		set := strings.Join(flags[name], " ")
		if mutable {
			out = append(out, fmt.Sprintf("kubectl set resources %s -n %s -c %s %s   # the LimitRange's bound", target, shellQuote(ws.Ref().Namespace), shellQuote(name), set))
		} else {
			out = append(out, fmt.Sprintf("Set %s on container %s: %s.", set, name, immutableNote(target)))
		}
	}
	for _, v := range other {
		out = append(out, fmt.Sprintf("Bring the containers within this bound: %s.", v))
	}
	if len(out) == 0 {
		out = append(out, "Set the containers' requests and limits within the LimitRange's bounds above.")
	}
	return out
}

// sortedResourceNames returns the resource names of l, sorted.
func sortedResourceNames(l corev1.ResourceList) []string {
	var out []string
	for r := range l {
		out = append(out, string(r))
	}
	sort.Strings(out)
	return out
}

// nonEmptyName is name, or a placeholder for a name the message did not carry.
func nonEmptyName(name string) string {
	if name == "" {
		return "<quota>"
	}
	return name
}

// MissingServiceAccount returns the name of the ServiceAccount a current FailedCreate says does
// not exist, for the Collector to look up in other namespaces
// (WorkloadSnapshot.ServiceAccountElsewhere); "" when none does.
func MissingServiceAccount(ws *WorkloadSnapshot) string {
	for _, c := range ws.creators() {
		if msg, _, current := creationFailure(ws, c); current {
			if m := serviceAccountRE.FindStringSubmatch(msg); m != nil {
				return m[2]
			}
		}
	}
	return ""
}

// NeedsServiceAccountNames reports whether the Collector should read the namespace's
// ServiceAccount names (WorkloadSnapshot.ServiceAccountNames): a controller's creation error
// says the pods' ServiceAccount does not exist.
func NeedsServiceAccountNames(ws *WorkloadSnapshot) bool {
	for _, c := range ws.creators() {
		if msg, _, current := creationFailure(ws, c); current && strings.Contains(msg, "error looking up service account ") {
			return true
		}
	}
	return false
}
