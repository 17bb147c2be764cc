package collect

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/whypending/whypending/triage"
)

// What the watch (bot/watch) reads: the cached backend's pod informer and workload caches,
// never a request of its own. Pods handed out are built from the lean cache (leanPod.pod) and
// shared: treat them as read-only.

// ErrNotCached is returned by the watch's reads on a Collector without informer caches.
var ErrNotCached = errors.New("the collector keeps no informer caches")

// PodHandler is told about every pod the cache adds or changes (pod is the new state) and
// every pod it deletes (gone is true, pod the last state known).
type PodHandler func(pod *corev1.Pod, gone bool)

// WatchPods calls h for every pod in the cache now (as added) and for each later change, until
// the returned remove is called or the cache stops.
func (c *Collector) WatchPods(h PodHandler) (remove func(), err error) {
	cc, ok := c.read.(*cacheReader)
	if !ok {
		return nil, ErrNotCached
	}
	inf := cc.informers["pods"]
	view := func(obj any) *corev1.Pod {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if lp := leanPodOf(obj); lp != nil {
			return lp.pod()
		}
		return nil
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p := view(obj); p != nil {
				h(p, false)
			}
		},
		UpdateFunc: func(_, obj any) {
			if p := view(obj); p != nil {
				h(p, false)
			}
		},
		DeleteFunc: func(obj any) {
			if p := view(obj); p != nil {
				h(p, true)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = inf.RemoveEventHandler(reg) }, nil
}

// CachedPods returns the cached pods of namespace.
func (c *Collector) CachedPods(namespace string) ([]*corev1.Pod, error) {
	cc, ok := c.read.(*cacheReader)
	if !ok {
		return nil, ErrNotCached
	}
	return cc.podLister.Pods(namespace).List(labels.Everything())
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
	obj, err := cc.workloads.get(kind, namespace, name)
	if err != nil || obj == nil {
		return nil, false
	}
	m, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, false
	}
	return m.GetObjectMeta(), true
}
