package collect

import (
	"errors"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/whypending/whypending/triage"
)

// What the watch (bot/watch) reads: the cached backend's pod informer and workload caches,
// never a request of its own. The pods it gets are light views of the lean cache entries
// (watchView): metadata and status only, no spec, the status's slices shared with the cache
// (read-only), so following every pod of a large cluster builds no whole pod.

// ErrNotCached is returned by the watch's reads on a Collector without informer caches.
var ErrNotCached = errors.New("the collector keeps no informer caches")

// PodHandler is told about every pod the cache adds or changes (pod is the new state) and
// every pod it deletes (gone is true, pod the last state known). pod is a view (metadata and
// status, no spec) that is valid only during the call and read-only: one view is reused for
// every call, so a handler keeps copies (strings may be kept), never pod or its slices and
// maps. Following every pod of a large cluster thus allocates no pod per event.
type PodHandler func(pod *corev1.Pod, gone bool)

// WatchPods calls h for every pod in the cache now (as added), before it returns, and for each
// later change, until the returned remove is called or the cache stops. h is called one call
// at a time.
//
// The later changes come through the collector's one pod handler (podFanout), registered
// before the informer started; the pods already cached are read from the cache here. An
// informer handler added to a synced informer is sent every cached pod as an add through its
// listener's buffer, which grows to hold them (the handler is slower than the replay: about
// 4.6 MiB at 120,800 pods) and keeps that size for as long as the handler stays: the watch's
// handler stays a whole leader term.
func (c *Collector) WatchPods(h PodHandler) (remove func(), err error) {
	cc, ok := c.read.(*cacheReader)
	if !ok {
		return nil, ErrNotCached
	}
	sub := &podSub{h: h}
	cc.podFanout.add(sub)
	var scratch corev1.Pod // the fan-out builds its views in its own
	for _, obj := range cc.podIndex.List() {
		if lp := leanPodOf(obj); lp != nil {
			lp.viewInto(&scratch)
			sub.call(&scratch, false)
		}
	}
	return func() { cc.podFanout.remove(sub) }, nil
}

// podFanout hands the pod informer's events to the WatchPods handlers. Its informer handler
// is registered before the informer starts (newCacheReader), so it is never sent the cached
// pods at once; the informer calls it one event at a time, so one view serves every event.
type podFanout struct {
	mu      sync.Mutex
	subs    []*podSub
	scratch corev1.Pod
}

// podSub is one WatchPods handler; mu makes its calls one at a time (the fan-out's and
// WatchPods' first look at the cache).
type podSub struct {
	mu sync.Mutex
	h  PodHandler
}

func (s *podSub) call(p *corev1.Pod, gone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h(p, gone)
}

func (f *podFanout) add(s *podSub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, s)
}

// remove makes a new slice: the fan-out may be reading the old one.
func (f *podFanout) remove(s *podSub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = slices.DeleteFunc(slices.Clone(f.subs), func(x *podSub) bool { return x == s })
}

// register adds the fan-out's handler to the pod informer (before it starts).
func (f *podFanout) register(inf cache.SharedIndexInformer) error {
	send := func(obj any, gone bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		f.mu.Lock()
		subs := f.subs
		f.mu.Unlock()
		if len(subs) == 0 {
			return
		}
		lp := leanPodOf(obj)
		if lp == nil {
			return
		}
		lp.viewInto(&f.scratch)
		for _, s := range subs {
			s.call(&f.scratch, gone)
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { send(obj, false) },
		UpdateFunc: func(_, obj any) { send(obj, false) },
		DeleteFunc: func(obj any) { send(obj, true) },
	})
	return err
}

// CachedPods returns the cached pods of namespace whose metadata match keeps (nil: every
// pod), as light views (no spec). match sees the cache's metadata (read-only, and only
// during the call): a view is built only for the pods it keeps, so asking for one
// workload's pods in a namespace of thousands builds a few.
func (c *Collector) CachedPods(namespace string, match func(*metav1.ObjectMeta) bool) ([]*corev1.Pod, error) {
	cc, ok := c.read.(*cacheReader)
	if !ok {
		return nil, ErrNotCached
	}
	objs, err := cc.podIndex.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, err
	}
	var (
		out []*corev1.Pod
		m   metav1.ObjectMeta // one for the whole scan: match must not keep it
	)
	for _, o := range objs {
		lp := leanPodOf(o)
		if lp == nil {
			continue
		}
		if match != nil {
			if m = lp.objectMeta(); !match(&m) {
				continue
			}
		}
		out = append(out, lp.watchView())
	}
	return out, nil
}

// watchView is the pod's metadata and status without its spec: the status shares the cache's
// slices, but its conditions carry their transition times.
func (lp *leanPod) watchView() *corev1.Pod {
	p := &corev1.Pod{}
	lp.viewInto(p)
	return p
}

// viewInto makes p the pod's watchView, reusing p's conditions slice.
func (lp *leanPod) viewInto(p *corev1.Pod) {
	conditions := p.Status.Conditions[:0]
	*p = corev1.Pod{ObjectMeta: lp.objectMeta()}
	p.Spec.NodeName = lp.node.Value()
	p.Status = *lp.status
	p.Status.Conditions = append(conditions, lp.status.Conditions...)
	for i := range p.Status.Conditions {
		p.Status.Conditions[i].LastTransitionTime = fromUnixNano(lp.times[i])
	}
}

// WorkloadHandler is told about every Deployment, ReplicaSet, StatefulSet, DaemonSet and Job
// the cache adds or changes (obj is the cached state: read-only), every one it deletes (gone
// is true, obj the last state known), and again about a cached one whenever a FailedCreate
// event about it arrives (a controller refused its pods: no pod tells of it).
type WorkloadHandler func(kind triage.Kind, obj runtime.Object, gone bool)

// WatchWorkloads calls h for every such workload in the cache now (as added) and for each
// later change, until the returned remove is called or the cache stops.
func (c *Collector) WatchWorkloads(h WorkloadHandler) (remove func(), err error) {
	cc, ok := c.read.(*cacheReader)
	if !ok || cc.workloads == nil {
		return nil, ErrNotCached
	}
	wc := cc.workloads
	var removes []func()
	remove = func() {
		for _, r := range removes {
			r()
		}
	}
	follow := func(inf cache.SharedIndexInformer, on func(obj any, gone bool)) error {
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { on(obj, false) },
			UpdateFunc: func(_, obj any) { on(obj, false) },
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = t.Obj
				}
				on(obj, true)
			},
		})
		if err != nil {
			return err
		}
		removes = append(removes, func() { _ = inf.RemoveEventHandler(reg) })
		return nil
	}
	for kind, inf := range wc.informers {
		if err := follow(inf, func(obj any, gone bool) {
			if o, ok := obj.(runtime.Object); ok {
				h(kind, o, gone)
			}
		}); err != nil {
			remove()
			return nil, err
		}
	}
	err = follow(wc.eventsInformer, func(obj any, gone bool) {
		e, ok := obj.(*corev1.Event)
		if !ok || gone || e.Reason != "FailedCreate" {
			return
		}
		kind := triage.Kind(e.InvolvedObject.Kind)
		if _, watched := wc.informers[kind]; !watched {
			return
		}
		if o, err := wc.get(kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name); err == nil && o != nil {
			h(kind, o, false)
		}
	})
	if err != nil {
		remove()
		return nil, err
	}
	return remove, nil
}

// WatchNamespaces calls h for every namespace the cache adds (old is nil) or changes (old is
// the state before), with ns the cached state (both read-only), until the returned remove is
// called or the cache stops. Deletions are not passed on: a namespace's workloads tell of
// their own.
func (c *Collector) WatchNamespaces(h func(old, ns metav1.Object)) (remove func(), err error) {
	cc, ok := c.read.(*cacheReader)
	if !ok || cc.workloads == nil || cc.workloads.namespacesInformer == nil {
		return nil, ErrNotCached
	}
	inf := cc.workloads.namespacesInformer
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m, ok := obj.(metav1.Object); ok {
				h(nil, m)
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			old, _ := oldObj.(metav1.Object)
			if m, ok := obj.(metav1.Object); ok {
				h(old, m)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = inf.RemoveEventHandler(reg) }, nil
}

// CachedWorkload returns the cached workload of kind namespace/name (read-only); found is false
// when the cache has none.
func (c *Collector) CachedWorkload(kind triage.Kind, namespace, name string) (obj runtime.Object, found bool) {
	cc, ok := c.read.(*cacheReader)
	if !ok || cc.workloads == nil {
		return nil, false
	}
	obj, err := cc.workloads.get(kind, namespace, name)
	if err != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

// CachedWorkloadGone reports whether the workload cache holds no workload of kind named
// name in namespace (it was deleted). It is false when there is no workload cache to tell.
func (c *Collector) CachedWorkloadGone(kind triage.Kind, namespace, name string) bool {
	cc, ok := c.read.(*cacheReader)
	if !ok || cc.workloads == nil {
		return false
	}
	_, err := cc.workloads.get(kind, namespace, name)
	return apierrors.IsNotFound(err)
}

// CachedWorkloadEvents returns the cached events about the object with uid (a workload or any
// object but a pod or a node), newest first.
func (c *Collector) CachedWorkloadEvents(uid types.UID) []triage.Event {
	cc, ok := c.read.(*cacheReader)
	if !ok || cc.workloads == nil {
		return nil
	}
	return indexedEvents(cc.workloads.events, uid)
}

// CachedObjectMeta returns the cached metadata of a namespace (kind "" and name the
// namespace) or a workload of kind in namespace; found is false when the cache has none.
func (c *Collector) CachedObjectMeta(kind triage.Kind, namespace, name string) (meta metav1.Object, found bool) {
	cc, ok := c.read.(*cacheReader)
	if !ok || cc.workloads == nil {
		return nil, false
	}
	if kind == "" {
		ns, err := cc.workloads.namespaces.Get(namespace)
		if err != nil {
			return nil, false
		}
		return ns, true
	}
	obj, found := c.CachedWorkload(kind, namespace, name)
	if !found {
		return nil, false
	}
	m, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, false
	}
	return m.GetObjectMeta(), true
}
