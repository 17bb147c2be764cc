package testenv

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/whypending/whypending/internal/clock"
)

// loadParallelism bounds concurrent requests within one load group.
const loadParallelism = 16

// Load loads s into the cluster as DESIGN.md "Scenarios" describes:
//
//  1. cluster-scoped objects (plus any Namespace a namespaced object needs but the file lacks),
//     then namespaced objects (owners before the objects they own: a Deployment before its
//     ReplicaSets), then ResourceQuotas (so their status.used, as the file gives it, already
//     counts those objects, and quota admission adds only the pods), then pods bound to a node
//     (spec.nodeName set), then unbound pods; an
//     ownerReference to an object of the file (or to a live one) gets that object's uid, so
//     the Deployment → ReplicaSet → Pod chain matches by UID as it does in a real cluster;
//     after each object is created its status is written through the status
//     subresource (unbound pods get none: the real kube-scheduler owns them). A Node's
//     spec.taints is reset to exactly the manifest's after create, undoing the not-ready
//     taint the TaintNodesByCondition admission adds;
//  2. core/v1 and events.k8s.io/v1 Events, with involvedObject.uid (regarding.uid) filled
//     from the live object they name, when it exists;
//  3. pods in Expected.DeleteAfterLoad are deleted without waiting (they stay Terminating
//     because no kubelet confirms the deletion);
//  4. when s.Clock is set, every RFC3339 timestamp under status, in Events and in a Node's
//     spec.taints (timeAdded) is shifted by (now - Clock), rounded to whole seconds.
//
// Objects are sent one by one (in parallel within a group). Kinds the cluster does not serve
// and that are not built in get a permissive CRD so they still load. Load does not modify s.
// Creation and deletion timestamps cannot be back-dated: they are the load time.
func (c *Cluster) Load(ctx context.Context, s *Scenario) error {
	var shift time.Duration
	if !s.Clock.IsZero() {
		shift = time.Since(s.Clock).Truncate(time.Second)
	}
	l := &loader{c: c, shift: shift, uids: map[objKey]string{}}
	if err := l.plan(ctx, s.Objects); err != nil {
		return fmt.Errorf("load scenario %s: %w", s.Name, err)
	}
	groups := [][]*loadItem{l.cluster}
	groups = append(groups, ownerLevels(l.namespaced)...)
	groups = append(groups, l.quotas, l.boundPods, l.unboundPods)
	for _, g := range groups {
		if err := l.createGroup(ctx, g); err != nil {
			return fmt.Errorf("load scenario %s: %w", s.Name, err)
		}
	}
	if err := l.createEvents(ctx); err != nil {
		return fmt.Errorf("load scenario %s: %w", s.Name, err)
	}
	for _, ref := range s.Expected.DeleteAfterLoad {
		ns, name, ok := strings.Cut(ref, "/")
		if !ok {
			return fmt.Errorf("load scenario %s: delete_after_load %q: want namespace/name", s.Name, ref)
		}
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("load scenario %s: delete pod %s: %w", s.Name, ref, err)
		}
	}
	return nil
}

// objKey names a live object for involvedObject lookups.
type objKey struct {
	group, kind, namespace, name string
}

type loadItem struct {
	obj     *unstructured.Unstructured // what to create (a copy, with server fields removed)
	status  any                        // the manifest's status, shifted; nil if none or not to be written
	taints  []any                      // for Nodes: the manifest's spec.taints (nil = none)
	mapping *meta.RESTMapping
}

type loader struct {
	c     *Cluster
	shift time.Duration

	cluster, namespaced, quotas, boundPods, unboundPods, events []*loadItem

	mu   sync.Mutex
	uids map[objKey]string
}

// plan copies and classifies the objects, and creates missing CRDs.
func (l *loader) plan(ctx context.Context, objs []*unstructured.Unstructured) error {
	declaredNS := map[string]bool{}
	neededNS := map[string]bool{}
	var flat []*unstructured.Unstructured
	for _, o := range objs {
		if strings.HasSuffix(o.GetKind(), "List") && o.Object["items"] != nil {
			list, err := o.ToList()
			if err != nil {
				return fmt.Errorf("expand %s: %w", o.GetKind(), err)
			}
			for i := range list.Items {
				flat = append(flat, &list.Items[i])
			}
			continue
		}
		flat = append(flat, o)
	}
	for _, o := range flat {
		obj := o.DeepCopy()
		gvk := obj.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return fmt.Errorf("object %q has no apiVersion or kind", obj.GetName())
		}
		mapping, err := l.c.mapping(ctx, obj)
		if err != nil {
			return err
		}
		for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "selfLink", "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"} {
			unstructured.RemoveNestedField(obj.Object, "metadata", f)
		}
		namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
		if namespaced && obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
		if !namespaced {
			obj.SetNamespace("")
		}
		it := &loadItem{obj: obj, mapping: mapping}
		gk := gvk.GroupKind()
		switch {
		case gk == eventGK || gk == eventsV1GK:
			l.shiftTree(obj.Object, "metadata", "involvedObject", "regarding", "related")
			l.events = append(l.events, it)
			neededNS[obj.GetNamespace()] = true
			continue
		case gk == (schema.GroupKind{Kind: "Namespace"}):
			declaredNS[obj.GetName()] = true
		case gk == (schema.GroupKind{Kind: "Node"}):
			// The taints' timeAdded (when a NoExecute taint appeared) is shifted like status,
			// so "unreachable for 40m" in the file stays 40m at load time.
			taints, _, _ := unstructured.NestedSlice(obj.Object, "spec", "taints")
			it.taints = []any{}
			if taints != nil {
				it.taints = l.shiftValue(taints).([]any)
			}
		}
		if st, ok := obj.Object["status"]; ok && st != nil {
			it.status = l.shiftValue(st)
		}
		switch {
		case gk == (schema.GroupKind{Kind: "Pod"}):
			neededNS[obj.GetNamespace()] = true
			if node, _, _ := unstructured.NestedString(obj.Object, "spec", "nodeName"); node != "" {
				l.boundPods = append(l.boundPods, it)
			} else {
				it.status = nil
				delete(obj.Object, "status")
				l.unboundPods = append(l.unboundPods, it)
			}
		case gk == (schema.GroupKind{Kind: "ResourceQuota"}):
			// After the other namespaced objects, before the pods: a quota's status.used in
			// the file counts the namespace's objects (a CronJob's Jobs under count/jobs.batch),
			// and quota admission adds only the pods created after it.
			neededNS[obj.GetNamespace()] = true
			l.quotas = append(l.quotas, it)
		case namespaced:
			neededNS[obj.GetNamespace()] = true
			l.namespaced = append(l.namespaced, it)
		default:
			l.cluster = append(l.cluster, it)
		}
	}
	for ns := range neededNS {
		if declaredNS[ns] {
			continue
		}
		nsObj := &unstructured.Unstructured{}
		nsObj.SetAPIVersion("v1")
		nsObj.SetKind("Namespace")
		nsObj.SetName(ns)
		mapping, err := l.c.mapping(ctx, nsObj)
		if err != nil {
			return err
		}
		l.cluster = append(l.cluster, &loadItem{obj: nsObj, mapping: mapping})
	}
	return nil
}

var (
	eventGK    = schema.GroupKind{Kind: "Event"}
	eventsV1GK = schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}
)

// mapping returns obj's REST mapping, refreshing discovery once on a miss, and installing a
// permissive CRD for kinds of non-Kubernetes groups the cluster does not serve.
func (c *Cluster) mapping(ctx context.Context, obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return m, nil
	}
	if !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("map %s: %w", gvk, err)
	}
	c.Mapper.Reset()
	if m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m, nil
	}
	if gvk.Group == "" || !strings.Contains(gvk.Group, ".") || strings.HasSuffix(gvk.Group, ".k8s.io") {
		return nil, fmt.Errorf("map %s: %w", gvk, err)
	}
	if err := c.createCRDs(ctx, []*unstructured.Unstructured{permissiveCRD(gvk, obj.GetNamespace() != "")}); err != nil {
		return nil, fmt.Errorf("map %s: %w", gvk, err)
	}
	m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", gvk, err)
	}
	return m, nil
}

// permissiveCRD returns a CRD for gvk that accepts any content (no schema checks), so a
// scenario can carry custom resources whose real CRD the repository does not have.
func permissiveCRD(gvk schema.GroupVersionKind, namespaced bool) *unstructured.Unstructured {
	plural := strings.ToLower(gvk.Kind)
	switch {
	case strings.HasSuffix(plural, "s"), strings.HasSuffix(plural, "x"), strings.HasSuffix(plural, "ch"), strings.HasSuffix(plural, "sh"):
		plural += "es"
	case strings.HasSuffix(plural, "y") && !strings.ContainsAny(plural[len(plural)-2:len(plural)-1], "aeiou"):
		plural = plural[:len(plural)-1] + "ies"
	default:
		plural += "s"
	}
	scope := "Cluster"
	if namespaced {
		scope = "Namespaced"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + gvk.Group},
		"spec": map[string]any{
			"group": gvk.Group,
			"scope": scope,
			"names": map[string]any{"kind": gvk.Kind, "listKind": gvk.Kind + "List", "plural": plural, "singular": strings.ToLower(gvk.Kind)},
			"versions": []any{map[string]any{
				"name": gvk.Version, "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

func (l *loader) resource(it *loadItem) dynamic.ResourceInterface {
	r := l.c.Dynamic.Resource(it.mapping.Resource)
	if it.mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.Namespace(it.obj.GetNamespace())
	}
	return r
}

// createGroup creates the items concurrently and writes their statuses.
func (l *loader) createGroup(ctx context.Context, items []*loadItem) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(loadParallelism)
	for _, it := range items {
		g.Go(func() error { return l.create(ctx, it) })
	}
	return g.Wait()
}

func (l *loader) create(ctx context.Context, it *loadItem) error {
	gvk := it.obj.GroupVersionKind()
	desc := fmt.Sprintf("%s %s", gvk.Kind, it.obj.GetName())
	if ns := it.obj.GetNamespace(); ns != "" {
		desc = fmt.Sprintf("%s %s/%s", gvk.Kind, ns, it.obj.GetName())
	}
	r := l.resource(it)
	l.fillOwnerUIDs(ctx, it.obj)
	live, err := r.Create(ctx, it.obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) && gvk.GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
		// kube-system, default and friends exist already: adopt them.
		live, err = r.Get(ctx, it.obj.GetName(), metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", desc, err)
	}
	if it.taints != nil {
		cur, _, _ := unstructured.NestedSlice(live.Object, "spec", "taints")
		if !reflect.DeepEqual(cur, it.taints) && !(len(cur) == 0 && len(it.taints) == 0) {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if len(it.taints) == 0 {
					unstructured.RemoveNestedField(live.Object, "spec", "taints")
				} else if err := unstructured.SetNestedSlice(live.Object, it.taints, "spec", "taints"); err != nil {
					return err
				}
				updated, err := r.Update(ctx, live, metav1.UpdateOptions{})
				if apierrors.IsConflict(err) {
					if fresh, getErr := r.Get(ctx, live.GetName(), metav1.GetOptions{}); getErr == nil {
						live = fresh
					}
					return err
				}
				if err == nil {
					live = updated
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("set taints of %s: %w", desc, err)
			}
		}
	}
	l.mu.Lock()
	l.uids[objKey{gvk.Group, gvk.Kind, live.GetNamespace(), live.GetName()}] = string(live.GetUID())
	l.mu.Unlock()
	if it.status == nil {
		return nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		status := deepCopyValue(it.status)
		if gvk.GroupKind() == (schema.GroupKind{Kind: "Pod"}) {
			// The API server sets qosClass on create and refuses to change it later.
			if m, ok := status.(map[string]any); ok {
				if q, ok := live.Object["status"].(map[string]any)["qosClass"]; ok {
					m["qosClass"] = q
				}
			}
		}
		live.Object["status"] = status
		_, err := r.UpdateStatus(ctx, live, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, getErr := r.Get(ctx, live.GetName(), metav1.GetOptions{}); getErr == nil {
				live = fresh
			}
		}
		return err
	})
	if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
		// No status subresource: the status went in with the create.
		return nil
	}
	if err != nil {
		return fmt.Errorf("write status of %s: %w", desc, err)
	}
	return nil
}

// ownerLevels splits namespaced items into groups to create in order: items whose owner is not
// in items first, then the items those own, and so on (a Deployment, its ReplicaSets).
func ownerLevels(items []*loadItem) [][]*loadItem {
	byKey := map[objKey]*loadItem{}
	for _, it := range items {
		gvk := it.obj.GroupVersionKind()
		byKey[objKey{gvk.Group, gvk.Kind, it.obj.GetNamespace(), it.obj.GetName()}] = it
	}
	depth := map[*loadItem]int{}
	var depthOf func(it *loadItem, seen int) int
	depthOf = func(it *loadItem, seen int) int {
		if d, ok := depth[it]; ok {
			return d
		}
		d := 0
		if seen < len(items) { // an ownership cycle in a file cannot recurse forever
			for _, o := range it.obj.GetOwnerReferences() {
				gv, _ := schema.ParseGroupVersion(o.APIVersion)
				if owner := byKey[objKey{gv.Group, o.Kind, it.obj.GetNamespace(), o.Name}]; owner != nil && owner != it {
					d = max(d, depthOf(owner, seen+1)+1)
				}
			}
		}
		depth[it] = d
		return d
	}
	var levels [][]*loadItem
	for _, it := range items {
		d := depthOf(it, 0)
		for len(levels) <= d {
			levels = append(levels, nil)
		}
		levels[d] = append(levels[d], it)
	}
	return levels
}

// fillOwnerUIDs sets the uid of each of obj's ownerReferences that names an object loaded
// before it (or living in the cluster); others keep the file's uid.
func (l *loader) fillOwnerUIDs(ctx context.Context, obj *unstructured.Unstructured) {
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return
	}
	for i, o := range refs {
		ref := map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind, "namespace": obj.GetNamespace(), "name": o.Name}
		if uid := l.uidOf(ctx, ref); uid != "" {
			refs[i].UID = types.UID(uid)
		}
	}
	obj.SetOwnerReferences(refs)
}

// createEvents fills the involved object's uid and creates the events concurrently.
func (l *loader) createEvents(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(loadParallelism)
	for _, it := range l.events {
		g.Go(func() error {
			field := "involvedObject"
			if it.obj.GroupVersionKind().Group == eventsV1GK.Group {
				field = "regarding"
			}
			if ref, ok := it.obj.Object[field].(map[string]any); ok {
				if uid := l.uidOf(ctx, ref); uid != "" {
					ref["uid"] = uid
				}
			}
			if _, err := l.resource(it).Create(ctx, it.obj, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create Event %s/%s: %w", it.obj.GetNamespace(), it.obj.GetName(), err)
			}
			return nil
		})
	}
	return g.Wait()
}

// uidOf returns the uid of the live object ref names (an ObjectReference as a map), or "" if
// it does not exist.
func (l *loader) uidOf(ctx context.Context, ref map[string]any) string {
	apiVersion, _ := ref["apiVersion"].(string)
	kind, _ := ref["kind"].(string)
	ns, _ := ref["namespace"].(string)
	name, _ := ref["name"].(string)
	if kind == "" || name == "" {
		return ""
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	l.mu.Lock()
	uid, ok := l.uids[objKey{gv.Group, kind, ns, name}]
	l.mu.Unlock()
	if ok {
		return uid
	}
	// Not loaded from the file (e.g. the default Namespace): ask the cluster.
	m, err := l.c.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind})
	if err != nil {
		return ""
	}
	r := l.c.Dynamic.Resource(m.Resource)
	var live *unstructured.Unstructured
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		live, err = r.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	} else {
		live, err = r.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return ""
	}
	return string(live.GetUID())
}

// timestampRE matches the RFC3339 forms Kubernetes writes: metav1.Time (seconds) and
// metav1.MicroTime (fractional seconds).
var timestampRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`)

// shiftValue returns a deep copy of v with every RFC3339 timestamp string moved by l.shift.
func (l *loader) shiftValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = l.shiftValue(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = l.shiftValue(e)
		}
		return out
	case string:
		return l.shiftString(v)
	default:
		return v
	}
}

// shiftTree shifts timestamps in place in every top-level field of obj except skip.
func (l *loader) shiftTree(obj map[string]any, skip ...string) {
	for k, v := range obj {
		skipped := false
		for _, s := range skip {
			skipped = skipped || k == s
		}
		if !skipped {
			obj[k] = l.shiftValue(v)
		}
	}
}

func (l *loader) shiftString(s string) string {
	if l.shift == 0 || !timestampRE.MatchString(s) {
		return s
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	t = t.Add(l.shift).UTC()
	if strings.Contains(s, ".") {
		return t.Format(metav1.RFC3339Micro)
	}
	return t.Format(time.RFC3339)
}

// deepCopyValue deep-copies a JSON-like value (nulls in lists included).
func deepCopyValue(v any) any {
	return runtime.DeepCopyJSONValue(v)
}

// WaitForScheduler waits until the real kube-scheduler has judged pod namespace/name: it
// either bound the pod (spec.nodeName set) or wrote a FailedScheduling event for it. It polls
// every 100ms until ctx ends, and fails at once if the cluster's scheduler is not running
// (see StartScheduler).
func (c *Cluster) WaitForScheduler(ctx context.Context, namespace, name string) error {
	for {
		if !c.SchedulerRunning() {
			return fmt.Errorf("wait for scheduler on pod %s/%s: kube-scheduler is not running", namespace, name)
		}
		pod, err := c.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("wait for scheduler on pod %s/%s: %w", namespace, name, err)
		}
		if pod.Spec.NodeName != "" {
			return nil
		}
		evs, err := c.FailedScheduling(ctx, pod)
		if err != nil {
			return fmt.Errorf("wait for scheduler on pod %s/%s: %w", namespace, name, err)
		}
		if len(evs) > 0 {
			return nil
		}
		if err := clock.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("wait for scheduler on pod %s/%s: %w", namespace, name, err)
		}
	}
}

// FailedScheduling returns the FailedScheduling events for pod (matched by uid), as the core
// v1 API shows them (the scheduler writes them through events.k8s.io/v1).
func (c *Cluster) FailedScheduling(ctx context.Context, pod *corev1.Pod) ([]corev1.Event, error) {
	list, err := c.Client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.uid=" + string(pod.UID) + ",reason=FailedScheduling",
	})
	if err != nil {
		return nil, fmt.Errorf("list FailedScheduling events: %w", err)
	}
	return list.Items, nil
}
