package collect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/pager"

	"github.com/whypending/whypending/triage"
)

// This file holds the reads of workload questions and namespace sweeps, each from the informer
// cache when the Collector has one (NewCached) and else with one paginated list (or one get)
// of that kind: the workload kinds, the namespace's pods, its admission settings (Namespace,
// ResourceQuotas, LimitRanges) and the controllers' events.

// workloadCache returns the informer caches of workload reads, nil for the direct backend.
func (c *Collector) workloadCache() *workloadCache {
	if c.cache == nil {
		return nil
	}
	return c.cache.workloads
}

// listAll lists every object of a kind through list (a typed client's List), page by page, as
// pointers.
func listAll[T any](ctx context.Context, opts metav1.ListOptions, list func(context.Context, metav1.ListOptions) (runtime.Object, error)) ([]*T, error) {
	var out []*T
	opts.Limit = pageSize
	err := pager.New(list).EachListItem(ctx, opts, func(obj runtime.Object) error {
		if t, ok := any(obj).(*T); ok {
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// listFunc adapts a typed client's List to pager's list function.
func listFunc[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error)) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { return list(ctx, opts) }
}

// getVia reads one object: from the cache (get; nil for the direct backend), falling back to a
// live get for one the cache has not seen yet.
func getVia[T any](ctx context.Context, name string, get func(string) (*T, error), live func(context.Context, string, metav1.GetOptions) (*T, error)) (*T, error) {
	if get != nil {
		if o, err := get(name); err == nil {
			return o, nil
		}
	}
	o, err := live(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// listVia lists a namespace's objects of one kind: from the cache (list; nil for the direct
// backend), else with one paginated list.
func listVia[T any, L runtime.Object](ctx context.Context, list func(labels.Selector) ([]*T, error), live func(context.Context, metav1.ListOptions) (L, error)) ([]*T, error) {
	if list != nil {
		return list(labels.Everything())
	}
	return listAll[T](ctx, metav1.ListOptions{}, listFunc(live))
}

// getWorkload reads the workload ws.Requested names into ws. found is false when it does not
// exist; err is set only for another failure (the API server unreachable, RBAC).
func (c *Collector) getWorkload(ctx context.Context, ws *triage.WorkloadSnapshot) (found bool, err error) {
	ns, name := ws.Requested.Namespace, ws.Requested.Name
	wc := c.workloadCache()
	apps, batch := c.client.AppsV1(), c.client.BatchV1()
	switch ws.Requested.Kind {
	case triage.KindDeployment:
		var get func(string) (*appsv1.Deployment, error)
		if wc != nil {
			get = wc.deployments.Deployments(ns).Get
		}
		ws.Deployment, err = getVia(ctx, name, get, apps.Deployments(ns).Get)
	case triage.KindReplicaSet:
		// Read whole: the cache drops ReplicaSets' and Jobs' pod templates
		// (stripWorkloadForCache), and the rules read the template of the workload asked about.
		ws.ReplicaSet, err = getVia(ctx, name, nil, apps.ReplicaSets(ns).Get)
	case triage.KindStatefulSet:
		var get func(string) (*appsv1.StatefulSet, error)
		if wc != nil {
			get = wc.statefulSets.StatefulSets(ns).Get
		}
		ws.StatefulSet, err = getVia(ctx, name, get, apps.StatefulSets(ns).Get)
	case triage.KindDaemonSet:
		var get func(string) (*appsv1.DaemonSet, error)
		if wc != nil {
			get = wc.daemonSets.DaemonSets(ns).Get
		}
		ws.DaemonSet, err = getVia(ctx, name, get, apps.DaemonSets(ns).Get)
	case triage.KindJob:
		ws.Job, err = getVia(ctx, name, nil, batch.Jobs(ns).Get) // read whole, as a ReplicaSet
	case triage.KindCronJob:
		var get func(string) (*batchv1.CronJob, error)
		if wc != nil {
			get = wc.cronJobs.CronJobs(ns).Get
		}
		ws.CronJob, err = getVia(ctx, name, get, batch.CronJobs(ns).Get)
	default:
		return false, fmt.Errorf("%s is not a workload kind", ws.Requested.Kind)
	}
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
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

// workloadsIn reads the namespace's workloads of the kinds listed (all six when kinds is
// empty), one list per kind.
func (c *Collector) workloadsIn(ctx context.Context, ns string, kinds ...triage.Kind) (*namespaceWorkloads, error) {
	want := func(k triage.Kind) bool { return len(kinds) == 0 || slices.Contains(kinds, k) }
	out := &namespaceWorkloads{}
	wc := c.workloadCache()
	apps, batch := c.client.AppsV1(), c.client.BatchV1()
	var errs []error
	note := func(k triage.Kind, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("list %ss in %s: %w", k, ns, err))
		}
	}
	if want(triage.KindDeployment) {
		var list func(labels.Selector) ([]*appsv1.Deployment, error)
		if wc != nil {
			list = wc.deployments.Deployments(ns).List
		}
		var err error
		out.deployments, err = listVia(ctx, list, apps.Deployments(ns).List)
		note(triage.KindDeployment, err)
	}
	if want(triage.KindReplicaSet) {
		var list func(labels.Selector) ([]*appsv1.ReplicaSet, error)
		if wc != nil {
			list = wc.replicaSets.ReplicaSets(ns).List
		}
		var err error
		out.replicaSets, err = listVia(ctx, list, apps.ReplicaSets(ns).List)
		note(triage.KindReplicaSet, err)
	}
	if want(triage.KindStatefulSet) {
		var list func(labels.Selector) ([]*appsv1.StatefulSet, error)
		if wc != nil {
			list = wc.statefulSets.StatefulSets(ns).List
		}
		var err error
		out.statefulSets, err = listVia(ctx, list, apps.StatefulSets(ns).List)
		note(triage.KindStatefulSet, err)
	}
	if want(triage.KindDaemonSet) {
		var list func(labels.Selector) ([]*appsv1.DaemonSet, error)
		if wc != nil {
			list = wc.daemonSets.DaemonSets(ns).List
		}
		var err error
		out.daemonSets, err = listVia(ctx, list, apps.DaemonSets(ns).List)
		note(triage.KindDaemonSet, err)
	}
	if want(triage.KindJob) {
		var list func(labels.Selector) ([]*batchv1.Job, error)
		if wc != nil {
			list = wc.jobs.Jobs(ns).List
		}
		var err error
		out.jobs, err = listVia(ctx, list, batch.Jobs(ns).List)
		note(triage.KindJob, err)
	}
	if want(triage.KindCronJob) {
		var list func(labels.Selector) ([]*batchv1.CronJob, error)
		if wc != nil {
			list = wc.cronJobs.CronJobs(ns).List
		}
		var err error
		out.cronJobs, err = listVia(ctx, list, batch.CronJobs(ns).List)
		note(triage.KindCronJob, err)
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

// namespacePods returns the namespace's pods matching sel (labels.Everything() for all).
func (c *Collector) namespacePods(ctx context.Context, ns string, sel labels.Selector) ([]*corev1.Pod, error) {
	if c.cache != nil {
		return c.cache.pods.Pods(ns).List(sel)
	}
	pods, err := listAll[corev1.Pod](ctx, metav1.ListOptions{LabelSelector: sel.String()}, listFunc(c.client.CoreV1().Pods(ns).List))
	if err != nil {
		return nil, fmt.Errorf("list pods in %s: %w", ns, err)
	}
	return pods, nil
}

// admission reads what decides whether the API server admits a pod in ns: the Namespace (its
// pod-security labels), its ResourceQuotas and its LimitRanges. Best effort: a failed read
// leaves its part empty.
func (c *Collector) admission(ctx context.Context, ws *triage.WorkloadSnapshot, ns string) {
	if wc := c.workloadCache(); wc != nil {
		ws.Namespace, _ = wc.namespaces.Get(ns)
		ws.ResourceQuotas, _ = wc.quotas.ResourceQuotas(ns).List(labels.Everything())
		ws.LimitRanges, _ = wc.limitRanges.LimitRanges(ns).List(labels.Everything())
	} else {
		if n, err := c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			ws.Namespace = n
		}
		ws.ResourceQuotas, _ = listAll[corev1.ResourceQuota](ctx, metav1.ListOptions{}, listFunc(c.client.CoreV1().ResourceQuotas(ns).List))
		ws.LimitRanges, _ = listAll[corev1.LimitRange](ctx, metav1.ListOptions{}, listFunc(c.client.CoreV1().LimitRanges(ns).List))
	}
	sort.Slice(ws.ResourceQuotas, func(i, j int) bool { return ws.ResourceQuotas[i].Name < ws.ResourceQuotas[j].Name })
	sort.Slice(ws.LimitRanges, func(i, j int) bool { return ws.LimitRanges[i].Name < ws.LimitRanges[j].Name })
}

// controllerEvents returns the events of the objects with uids: from the controller event
// cache, or from nsEvents (the namespace's events, listed once by the direct backend).
func (c *Collector) controllerEvents(uids []types.UID, nsEvents map[types.UID][]triage.Event) map[types.UID][]triage.Event {
	out := map[types.UID][]triage.Event{}
	wc := c.workloadCache()
	for _, uid := range uids {
		if wc == nil {
			if evs := nsEvents[uid]; len(evs) > 0 {
				out[uid] = evs
			}
			continue
		}
		objs, err := wc.events.ByIndex(eventsByUIDIndex, string(uid))
		if err != nil || len(objs) == 0 {
			continue
		}
		evs := make([]triage.Event, 0, len(objs))
		for _, o := range objs {
			if e, ok := o.(*corev1.Event); ok {
				evs = append(evs, eventFromCore(e))
			}
		}
		triage.SortEvents(evs)
		out[uid] = evs
	}
	return out
}
