package collect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/whypending/whypending/triage"
)

// DiagnoseWorkload collects a triage.WorkloadSnapshot of ref with c and evaluates it. It
// returns an error only when the workload itself could not be read for a reason other than
// NotFound; a missing workload is a triage.WorkloadDiagnosis with triage.CodeWorkloadNotFound.
func DiagnoseWorkload(ctx context.Context, c *Collector, ref triage.WorkloadRef) (*triage.WorkloadDiagnosis, error) {
	ws, err := c.CollectWorkload(ctx, ref)
	if err != nil {
		return nil, err
	}
	return triage.EvaluateWorkload(ws), nil
}

// CollectWorkload reads everything the workload rules need about ref into a
// triage.WorkloadSnapshot, the way kubectl finds a workload's pods: the workload; for a
// Deployment its ReplicaSets, for a CronJob its Jobs (ownerReferences); the namespace's pods
// that those control; the events of the workload and of those ReplicaSets and Jobs (where the
// controllers write FailedCreate); the namespace's pod-security labels, ResourceQuotas and
// LimitRanges; every node for a DaemonSet; and a full pod Snapshot of each pod
// triage.PodsToDiagnose picks, the shared parts read once for all of them (podBatch). The direct
// backend sends one request (or one paginated list) per kind; the cached one reads its
// informers. Only a failed read of the workload itself fails it.
func (c *Collector) CollectWorkload(ctx context.Context, ref triage.WorkloadRef) (*triage.WorkloadSnapshot, error) {
	quiet := c
	c, refused := c.recording()
	ws := &triage.WorkloadSnapshot{Now: c.now(), Requested: ref}
	defer func() { ws.Refused = refused.refused() }()
	found, err := c.getWorkload(ctx, ws)
	if err != nil && onlyForbidden(err) {
		// RBAC refused the workload itself: the answer says so (ws.Refused) instead of
		// failing, and claims neither that it exists nor that it does not.
		return ws, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	if !found {
		if ws.MissingNamespace = quiet.missingNamespace(ctx, ref.Namespace); ws.MissingNamespace != nil {
			return ws, nil
		}
		if w, err := c.workloadsIn(ctx, ref.Namespace); err == nil {
			ws.SimilarWorkloads = triage.ClosestWorkloadNames(w.refs(), ref, maxSimilarPods)
		}
		return ws, nil
	}
	ns := ref.Namespace
	sel := labels.Everything()
	switch {
	case ws.Deployment != nil:
		if w, err := c.workloadsIn(ctx, ns, triage.KindReplicaSet); err == nil {
			ws.ReplicaSets = triage.OwnedReplicaSets(ws.Deployment, w.replicaSets)
		}
		sel = selectorOf(ws.Deployment.Spec.Selector)
	case ws.CronJob != nil:
		if w, err := c.workloadsIn(ctx, ns, triage.KindJob); err == nil {
			ws.Jobs = triage.OwnedJobs(ws.CronJob, w.jobs)
		}
	case ws.ReplicaSet != nil:
		sel = selectorOf(ws.ReplicaSet.Spec.Selector)
	case ws.StatefulSet != nil:
		sel = selectorOf(ws.StatefulSet.Spec.Selector)
	case ws.DaemonSet != nil:
		sel = selectorOf(ws.DaemonSet.Spec.Selector)
	case ws.Job != nil:
		sel = selectorOf(ws.Job.Spec.Selector)
	}
	if pods, err := c.read.pods(ctx, ns, sel); err == nil {
		ws.Pods = triage.PodsOf(ws, pods)
	}
	nsEvents, eventsErr := c.read.namespaceEvents(ctx, ns)
	ws.EventsErr = eventsErr
	ws.Events = controllerEvents(creatorUIDs(ws), nsEvents)
	c.admission(ctx, ws, ns)
	if ws.DaemonSet != nil {
		ws.Nodes, ws.NodesErr = c.allNodes(ctx)
	}
	if triage.NeedsServiceAccountNames(ws) {
		if names, created, err := c.read.names(ctx, ns, "serviceaccounts"); err == nil {
			ws.ServiceAccountNames, ws.ServiceAccountCreated = names, created
		}
	}
	c.collectWorkloadComponents(ctx, ws)
	diagnose := triage.PodsToDiagnose(ws)
	b := c.newPodBatch(ctx, ns, diagnose, nsEvents, ws.EventsErr)
	ws.PodSnapshots = b.snapshots(ctx, diagnose, true)
	return ws, nil
}

// creatorUIDs are the UIDs of the workload and of its ReplicaSets and Jobs, whose events the
// workload rules read.
func creatorUIDs(ws *triage.WorkloadSnapshot) []types.UID {
	uids := []types.UID{types.UID(ws.Ref().UID)}
	for _, rs := range ws.ReplicaSets {
		uids = append(uids, rs.UID)
	}
	for _, j := range ws.Jobs {
		uids = append(uids, j.UID)
	}
	return uids
}

// selectorOf converts a workload's label selector; a missing or invalid one selects every pod
// (ownerReferences then decide).
func selectorOf(ls *metav1.LabelSelector) labels.Selector {
	if ls == nil {
		return labels.Everything()
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Everything()
	}
	return sel
}

// podsNeedingDiagnosis returns the pods a sweep reads (triage.PodNeedsDiagnosis).
func podsNeedingDiagnosis(now time.Time, pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if triage.PodNeedsDiagnosis(now, p) {
			out = append(out, p)
		}
	}
	return out
}

// getWorkload reads the workload ws.Requested names into ws. found is false when it does not
// exist; err is set only for another failure (the API server unreachable, RBAC).
func (c *Collector) getWorkload(ctx context.Context, ws *triage.WorkloadSnapshot) (found bool, err error) {
	r := ws.Requested
	o, err := c.read.workload(ctx, r.Kind, r.Namespace, r.Name)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	if !ws.SetWorkload(o) {
		return false, fmt.Errorf("read %s %s/%s: unexpected %T", r.Kind, r.Namespace, r.Name, o)
	}
	return true, nil
}

// namespaceWorkloads are the workload objects of one namespace.
type namespaceWorkloads struct {
	deployments  []*appsv1.Deployment
	replicaSets  []*appsv1.ReplicaSet
	statefulSets []*appsv1.StatefulSet
	daemonSets   []*appsv1.DaemonSet
	jobs         []*batchv1.Job
	cronJobs     []*batchv1.CronJob
}

// namespaceWorkloadKinds is the order in which a namespace's workloads are read and listed
// (namespaceWorkloads, refs).
var namespaceWorkloadKinds = []triage.Kind{triage.KindDeployment, triage.KindReplicaSet, triage.KindStatefulSet,
	triage.KindDaemonSet, triage.KindJob, triage.KindCronJob}

// workloadsIn reads the namespace's workloads of the kinds listed (all six when kinds is
// empty), one list per kind. After a list that timed out it makes no more (the error is that
// list's), so an API server that does not answer costs one request timeout, not six.
func (c *Collector) workloadsIn(ctx context.Context, ns string, kinds ...triage.Kind) (*namespaceWorkloads, error) {
	out := &namespaceWorkloads{}
	var errs []error
	for _, k := range namespaceWorkloadKinds {
		if len(kinds) > 0 && !slices.Contains(kinds, k) {
			continue
		}
		if err := c.read.listWorkloads(ctx, ns, k, out); err != nil {
			errs = append(errs, fmt.Errorf("list %ss in %s: %w", k, ns, err))
			if why, _ := failure(err); why == triage.ReadTimedOut {
				break // the API server does not answer: each other list would wait as long
			}
		}
	}
	return out, errors.Join(errs...)
}

// refs lists every workload as a WorkloadRef.
func (w *namespaceWorkloads) refs() []triage.WorkloadRef {
	var out []triage.WorkloadRef
	add := func(k triage.Kind, m metav1.Object) {
		out = append(out, triage.WorkloadRef{Kind: k, Namespace: m.GetNamespace(), Name: m.GetName(), UID: string(m.GetUID())})
	}
	for _, o := range w.deployments {
		add(triage.KindDeployment, o)
	}
	for _, o := range w.replicaSets {
		add(triage.KindReplicaSet, o)
	}
	for _, o := range w.statefulSets {
		add(triage.KindStatefulSet, o)
	}
	for _, o := range w.daemonSets {
		add(triage.KindDaemonSet, o)
	}
	for _, o := range w.jobs {
		add(triage.KindJob, o)
	}
	for _, o := range w.cronJobs {
		add(triage.KindCronJob, o)
	}
	return out
}

// admission reads what decides whether the API server admits a pod in ns: the Namespace (its
// pod-security labels), its ResourceQuotas and its LimitRanges. Best effort: a failed read
// leaves its part empty; the error of the Namespace read is returned (a sweep names a
// namespace that does not exist).
func (c *Collector) admission(ctx context.Context, ws *triage.WorkloadSnapshot, ns string) error {
	n, nsErr := c.read.namespace(ctx, ns)
	if nsErr == nil {
		ws.Namespace = n
	}
	ws.ResourceQuotas, _ = c.read.quotas(ctx, ns)
	ws.LimitRanges, _ = c.read.limitRanges(ctx, ns)
	sort.Slice(ws.ResourceQuotas, func(i, j int) bool { return ws.ResourceQuotas[i].Name < ws.ResourceQuotas[j].Name })
	sort.Slice(ws.LimitRanges, func(i, j int) bool { return ws.LimitRanges[i].Name < ws.LimitRanges[j].Name })
	return nsErr
}

// controllerEvents returns the events of the objects with uids, from the namespace's events.
func controllerEvents(uids []types.UID, nsEvents eventIndex) map[types.UID][]triage.Event {
	out := map[types.UID][]triage.Event{}
	if nsEvents == nil {
		return out
	}
	for _, uid := range uids {
		if evs := nsEvents.of(uid); len(evs) > 0 {
			out[uid] = evs
		}
	}
	return out
}
