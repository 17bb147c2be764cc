package collect

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/triage"
)

// pageSize is the chunk size for paginated lists (kubectl's default).
const pageSize = 500

// apiReader is the reader of New: every read is a request (or one paginated list) to the API
// server, the way kubectl describe reads.
type apiReader struct {
	client kubernetes.Interface
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

func (r apiReader) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return r.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (r apiReader) podExists(ctx context.Context, namespace, name string) bool {
	_, err := r.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	return err == nil
}

func (r apiReader) pods(ctx context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	pods, err := listAll[corev1.Pod](ctx, metav1.ListOptions{LabelSelector: sel.String()}, listFunc(r.client.CoreV1().Pods(namespace).List))
	if err != nil {
		return nil, fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	return pods, nil
}

// podsOnNode sends one list with a label and a field selector, so only that node's pods
// come back.
func (r apiReader) podsOnNode(ctx context.Context, namespace, node string, sel labels.Selector) ([]*corev1.Pod, error) {
	list, err := r.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: sel.String(),
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

// boundPods sends one paginated list across namespaces, the phases and the node selected by
// field selectors on the server.
func (r apiReader) boundPods(ctx context.Context, node string, skip types.UID) ([]*corev1.Pod, error) {
	sel := fields.AndSelectors(
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
	)
	if node != "" {
		sel = fields.AndSelectors(sel, fields.OneTermEqualSelector("spec.nodeName", node))
	} else {
		sel = fields.AndSelectors(sel, fields.OneTermNotEqualSelector("spec.nodeName", ""))
	}
	var out []*corev1.Pod
	err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return r.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{FieldSelector: sel.String(), Limit: pageSize}, func(obj runtime.Object) error {
		if p := obj.(*corev1.Pod); p.UID != skip && holdsResources(p.Spec.NodeName, p.Status.Phase) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list pods bound to nodes: %w", err)
	}
	return out, nil
}

// allBound is boundPods of every node, grouped by node.
func (r apiReader) allBound(ctx context.Context) (triage.NodePods, map[string]corev1.ResourceList, error) {
	pods, err := r.boundPods(ctx, "", "")
	if err != nil {
		return nil, nil, err
	}
	byNode := podsByNode(pods)
	return triage.PodMap(byNode), triage.RequestsByNode(byNode), nil
}

// holdsResources reports whether a pod bound to node with phase still holds resources there.
func holdsResources(node string, phase corev1.PodPhase) bool {
	return node != "" && phase != corev1.PodSucceeded && phase != corev1.PodFailed
}

// podRefs lists all namespaces first; a user who may only list pods in namespace still gets
// those.
func (r apiReader) podRefs(ctx context.Context, namespace string) []triage.PodRef {
	var refs []triage.PodRef
	for _, ns := range []string{metav1.NamespaceAll, namespace} {
		refs = refs[:0]
		err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return r.client.CoreV1().Pods(ns).List(ctx, opts)
		}).EachListItem(ctx, metav1.ListOptions{Limit: pageSize}, func(obj runtime.Object) error {
			p := obj.(*corev1.Pod)
			refs = append(refs, triage.PodRef{Namespace: p.Namespace, Name: p.Name})
			return nil
		})
		if err == nil {
			break
		}
	}
	return refs
}

func (r apiReader) podLog(ctx context.Context, namespace, name string, opts *corev1.PodLogOptions) ([]byte, error) {
	return r.client.CoreV1().Pods(namespace).GetLogs(name, opts).DoRaw(ctx)
}

func (r apiReader) podEvents(ctx context.Context, pod *corev1.Pod) ([]triage.Event, error) {
	events, err := r.objectEvents(ctx, pod.Namespace, string(pod.UID))
	if err != nil {
		return nil, fmt.Errorf("list events for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return events, nil
}

// objectEvents lists the events about the object from core/v1 and events.k8s.io/v1 (the same
// objects seen through two APIs; a cluster may serve either), merges them by event UID and
// sorts them newest first. It fails only when both lists fail. The two lists run at once, so
// an API server that does not answer costs one request timeout, not two.
func (r apiReader) objectEvents(ctx context.Context, namespace, uid string) ([]triage.Event, error) {
	var core, newer []uidEvent
	var coreErr, newErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		coreSel := fields.OneTermEqualSelector("involvedObject.uid", uid).String()
		coreErr = pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return r.client.CoreV1().Events(namespace).List(ctx, opts)
		}).EachListItem(ctx, metav1.ListOptions{FieldSelector: coreSel, Limit: pageSize}, func(obj runtime.Object) error {
			e := obj.(*corev1.Event)
			core = append(core, withUID(e.UID, eventFromCore(e)))
			return nil
		})
	})
	wg.Go(func() {
		newSel := fields.OneTermEqualSelector("regarding.uid", uid).String()
		newErr = pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return r.client.EventsV1().Events(namespace).List(ctx, opts)
		}).EachListItem(ctx, metav1.ListOptions{FieldSelector: newSel, Limit: pageSize}, func(obj runtime.Object) error {
			e := obj.(*eventsv1.Event)
			newer = append(newer, withUID(e.UID, eventFromEventsV1(e)))
			return nil
		})
	})
	wg.Wait()
	if coreErr != nil && newErr != nil {
		return nil, coreErr
	}
	return mergeEvents(core, newer), nil
}

// uidEvent is an event with the UID of the object it was read from.
type uidEvent struct {
	uid types.UID
	triage.Event
}

func withUID(uid types.UID, e triage.Event) uidEvent { return uidEvent{uid, e} }

// mergeEvents merges the events of both APIs by event UID, sorted newest first:
// events.k8s.io/v1 carries series and reportingController natively, so where both APIs
// return the same event, its view wins.
func mergeEvents(core, newer []uidEvent) []triage.Event {
	byUID := map[types.UID]triage.Event{}
	var order []types.UID
	for _, e := range append(core, newer...) {
		if _, seen := byUID[e.uid]; !seen {
			order = append(order, e.uid)
		}
		byUID[e.uid] = e.Event
	}
	events := make([]triage.Event, 0, len(order))
	for _, id := range order {
		events = append(events, byUID[id])
	}
	triage.SortEvents(events)
	return events
}

// namespaceEvents lists the namespace's core/v1 events once (paginated) and groups them by
// involved object UID, newest first. core/v1 shows the events.k8s.io/v1 events too (one
// storage), with their series.
func (r apiReader) namespaceEvents(ctx context.Context, namespace string) (eventIndex, error) {
	out := eventMap{}
	err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return r.client.CoreV1().Events(namespace).List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{Limit: pageSize}, func(obj runtime.Object) error {
		e := obj.(*corev1.Event)
		out[e.InvolvedObject.UID] = append(out[e.InvolvedObject.UID], eventFromCore(e))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list events in %s: %w", namespace, err)
	}
	for _, evs := range out {
		triage.SortEvents(evs)
	}
	return out, nil
}

func (r apiReader) node(ctx context.Context, name string) (*corev1.Node, error) {
	n, err := r.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return n, nil
}

func (r apiReader) nodes(ctx context.Context) ([]*corev1.Node, error) {
	nodes, err := listAll[corev1.Node](ctx, metav1.ListOptions{}, listFunc(r.client.CoreV1().Nodes().List))
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return nodes, nil
}

func (r apiReader) claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return r.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (r apiReader) claims(ctx context.Context, namespace string) ([]*corev1.PersistentVolumeClaim, error) {
	claims, err := listAll[corev1.PersistentVolumeClaim](ctx, metav1.ListOptions{}, listFunc(r.client.CoreV1().PersistentVolumeClaims(namespace).List))
	if err != nil {
		return nil, fmt.Errorf("list persistent volume claims: %w", err)
	}
	return claims, nil
}

func (r apiReader) volume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return r.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// volumes sends one paginated list of every PV (not a request per name: a cluster may hold
// thousands of claims).
func (r apiReader) volumes(ctx context.Context, names map[string]bool) (map[string]*corev1.PersistentVolume, error) {
	pvs := map[string]*corev1.PersistentVolume{}
	err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return r.client.CoreV1().PersistentVolumes().List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{Limit: pageSize}, func(obj runtime.Object) error {
		if pv := obj.(*corev1.PersistentVolume); names[pv.Name] {
			pvs[pv.Name] = pv
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list persistent volumes: %w", err)
	}
	return pvs, nil
}

func (r apiReader) storageClasses(ctx context.Context) ([]*storagev1.StorageClass, error) {
	list, err := r.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list storage classes: %w", err)
	}
	out := make([]*storagev1.StorageClass, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

func (r apiReader) csiNodes(ctx context.Context) ([]*storagev1.CSINode, error) {
	return listAll[storagev1.CSINode](ctx, metav1.ListOptions{}, listFunc(r.client.StorageV1().CSINodes().List))
}

func (r apiReader) workload(ctx context.Context, kind triage.Kind, namespace, name string) (runtime.Object, error) {
	apps, batch, get := r.client.AppsV1(), r.client.BatchV1(), metav1.GetOptions{}
	switch kind {
	case triage.KindDeployment:
		return nonNil(apps.Deployments(namespace).Get(ctx, name, get))
	case triage.KindReplicaSet:
		return nonNil(apps.ReplicaSets(namespace).Get(ctx, name, get))
	case triage.KindStatefulSet:
		return nonNil(apps.StatefulSets(namespace).Get(ctx, name, get))
	case triage.KindDaemonSet:
		return nonNil(apps.DaemonSets(namespace).Get(ctx, name, get))
	case triage.KindJob:
		return nonNil(batch.Jobs(namespace).Get(ctx, name, get))
	case triage.KindCronJob:
		return nonNil(batch.CronJobs(namespace).Get(ctx, name, get))
	}
	return nil, fmt.Errorf("%s is not a workload kind", kind)
}

// nonNil returns o as a runtime.Object, or a nil interface (not a typed nil pointer) with err.
func nonNil[T runtime.Object](o T, err error) (runtime.Object, error) {
	if err != nil {
		return nil, err
	}
	return o, nil
}

func (r apiReader) listWorkloads(ctx context.Context, namespace string, kind triage.Kind, into *namespaceWorkloads) error {
	apps, batch, opts := r.client.AppsV1(), r.client.BatchV1(), metav1.ListOptions{}
	var err error
	switch kind {
	case triage.KindDeployment:
		into.deployments, err = listAll[appsv1.Deployment](ctx, opts, listFunc(apps.Deployments(namespace).List))
	case triage.KindReplicaSet:
		into.replicaSets, err = listAll[appsv1.ReplicaSet](ctx, opts, listFunc(apps.ReplicaSets(namespace).List))
	case triage.KindStatefulSet:
		into.statefulSets, err = listAll[appsv1.StatefulSet](ctx, opts, listFunc(apps.StatefulSets(namespace).List))
	case triage.KindDaemonSet:
		into.daemonSets, err = listAll[appsv1.DaemonSet](ctx, opts, listFunc(apps.DaemonSets(namespace).List))
	case triage.KindJob:
		into.jobs, err = listAll[batchv1.Job](ctx, opts, listFunc(batch.Jobs(namespace).List))
	case triage.KindCronJob:
		into.cronJobs, err = listAll[batchv1.CronJob](ctx, opts, listFunc(batch.CronJobs(namespace).List))
	default:
		err = fmt.Errorf("%s is not a workload kind", kind)
	}
	return err
}

// workloadsNamed sends one metadata-only list per kind with a metadata.name field selector,
// so the API server returns only the matches.
func (r apiReader) workloadsNamed(ctx context.Context, name string) []triage.WorkloadRef {
	var out []triage.WorkloadRef
	for _, k := range triage.WorkloadKinds {
		rc := r.client.AppsV1().RESTClient()
		if k == triage.KindJob || k == triage.KindCronJob {
			rc = r.client.BatchV1().RESTClient()
		}
		var list metav1.PartialObjectMetadataList
		err := rc.Get().Resource(strings.ToLower(string(k))+"s").
			Param("fieldSelector", fields.OneTermEqualSelector("metadata.name", name).String()).
			SetHeader("Accept", partialMetadataList).
			Do(ctx).Into(&list)
		if err != nil {
			continue
		}
		for _, it := range list.Items {
			out = append(out, triage.WorkloadRef{Kind: k, Namespace: it.Namespace, Name: it.Name, UID: string(it.UID)})
		}
	}
	return out
}

func (r apiReader) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return r.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
}

// namespaceNames lists the namespaces as metadata only.
func (r apiReader) namespaceNames(ctx context.Context) ([]string, error) {
	names, _, err := r.names(ctx, metav1.NamespaceNone, "namespaces")
	return names, err
}

func (r apiReader) quotas(ctx context.Context, namespace string) ([]*corev1.ResourceQuota, error) {
	return listAll[corev1.ResourceQuota](ctx, metav1.ListOptions{}, listFunc(r.client.CoreV1().ResourceQuotas(namespace).List))
}

func (r apiReader) limitRanges(ctx context.Context, namespace string) ([]*corev1.LimitRange, error) {
	return listAll[corev1.LimitRange](ctx, metav1.ListOptions{}, listFunc(r.client.CoreV1().LimitRanges(namespace).List))
}

// partialMetadataList asks the API server for a PartialObjectMetadataList: names and metadata
// only, so listing Secrets transfers no secret data.
const partialMetadataList = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

func (r apiReader) names(ctx context.Context, namespace, resource string) ([]string, map[string]time.Time, error) {
	var list metav1.PartialObjectMetadataList
	err := r.client.CoreV1().RESTClient().Get().
		Namespace(namespace).Resource(resource).
		SetHeader("Accept", partialMetadataList).
		Do(ctx).Into(&list)
	if err != nil {
		return nil, nil, fmt.Errorf("list %s names in %s: %w", resource, namespace, err)
	}
	names := make([]string, 0, len(list.Items))
	created := make(map[string]time.Time, len(list.Items))
	for _, it := range list.Items {
		names = append(names, it.Name)
		created[it.Name] = it.CreationTimestamp.Time
	}
	sort.Strings(names)
	return names, created, nil
}

func (r apiReader) mayList(ctx context.Context, namespace, resource string) (allowed, known bool) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "list", Resource: resource},
	}}
	got, err := r.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, false
	}
	return got.Status.Allowed, true
}

// byName lists the objects of namespace named name through list (a typed client's List) with
// a metadata.name field selector; nil without error when there is none.
func byName[T any](ctx context.Context, name string, list func(context.Context, metav1.ListOptions) (runtime.Object, error)) (*T, error) {
	items, err := listAll[T](ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}, list)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return items[0], nil
}

func (r apiReader) configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return byName[corev1.ConfigMap](ctx, name, listFunc(r.client.CoreV1().ConfigMaps(namespace).List))
}

func (r apiReader) service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	return byName[corev1.Service](ctx, name, listFunc(r.client.CoreV1().Services(namespace).List))
}

func (r apiReader) serviceAccountNamespaces(ctx context.Context, name string) ([]string, error) {
	var list metav1.PartialObjectMetadataList
	err := r.client.CoreV1().RESTClient().Get().Resource("serviceaccounts").
		Param("fieldSelector", fields.OneTermEqualSelector("metadata.name", name).String()).
		SetHeader("Accept", partialMetadataList).
		Do(ctx).Into(&list)
	if err != nil {
		return nil, fmt.Errorf("list serviceaccounts named %s: %w", name, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, it.Namespace)
	}
	sort.Strings(out)
	return out, nil
}

func (r apiReader) serverVersion() *version.Info {
	v, err := r.client.Discovery().ServerVersion()
	if err != nil {
		return nil
	}
	return v
}

func (apiReader) synced() bool                      { return true }
func (apiReader) objectCounts() map[string]int      { return nil }
func (apiReader) addressUsers() calico.AddressUsers { return nil }
