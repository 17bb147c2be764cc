package collect

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/triage"
)

// cacheReader is the reader of NewCached: shared informers keep pods (lean, leanpod.go),
// nodes, PVCs, PVs, StorageClasses, CSINodes, pod events and the workload reads
// (workload_cache.go) in memory, so a warm question sends no request for them. What it does not
// cache it reads through the embedded apiReader: the pod asked about (whole), container logs,
// the events of a claim, names of ConfigMaps, Secrets and ServiceAccounts, a workload or
// namespace the cache has not seen yet, and /version once per versionTTL.
type cacheReader struct {
	apiReader

	// podLister lists the pod cache, which holds every pod as a leanPod; podIndex is that
	// cache, indexed by namespace and node.
	podLister corelisters.PodLister
	podIndex  cache.Indexer
	// informers are every informer of the cache, by resource, for synced and objectCounts.
	informers map[string]cache.SharedIndexInformer
	// podFanout hands pod events to the watch's handlers (WatchPods).
	podFanout podFanout
	// ipamGen counts changes to what pods and nodes do with Calico addresses (watchIPAMUse, calico.go).
	ipamGen    atomic.Uint64
	nodeLister corelisters.NodeLister
	pvcLister  corelisters.PersistentVolumeClaimLister
	pvLister   corelisters.PersistentVolumeLister
	// classLister and csiNodeLister are small (a few classes, one CSINode per node).
	classLister   storagelisters.StorageClassLister
	csiNodeLister storagelisters.CSINodeLister
	// events holds pod events indexed by involvedObject.uid (startEventCache).
	events         cache.Indexer
	eventsInformer cache.SharedIndexInformer
	// workloads caches what workload questions and namespace sweeps read (workload_cache.go).
	workloads *workloadCache

	// The server version is read once and then again after versionTTL, so a warm question
	// does not spend a request on it.
	mu          sync.Mutex
	version     *version.Info
	versionRead time.Time
}

// versionTTL is how long the cached backend reuses /version.
const versionTTL = 10 * time.Minute

// podsByNodeIndex indexes the pod informer by spec.nodeName.
const podsByNodeIndex = "spec.nodeName"

// eventsByUIDIndex indexes the event caches by involvedObject.uid.
const eventsByUIDIndex = "involvedObject.uid"

// newCacheReader starts the informers of a cacheReader, waits until their caches have synced
// and returns it; they run until ctx is done (see NewCached).
func newCacheReader(ctx context.Context, client kubernetes.Interface) (*cacheReader, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(stripForCache))
	podInformer := factory.Core().V1().Pods().Informer()
	if err := podInformer.SetTransform(leanPodTransform); err != nil {
		return nil, fmt.Errorf("set pod transform: %w", err)
	}
	if err := podInformer.AddIndexers(cache.Indexers{podsByNodeIndex: indexPodByNode}); err != nil {
		return nil, fmt.Errorf("add pod index %s: %w", podsByNodeIndex, err)
	}
	r := &cacheReader{
		apiReader:  apiReader{client: client},
		podLister:  leanPodLister{indexer: podInformer.GetIndexer()},
		podIndex:   podInformer.GetIndexer(),
		nodeLister: factory.Core().V1().Nodes().Lister(),
		pvcLister:  factory.Core().V1().PersistentVolumeClaims().Lister(),
		pvLister:   factory.Core().V1().PersistentVolumes().Lister(),

		classLister:   factory.Storage().V1().StorageClasses().Lister(),
		csiNodeLister: factory.Storage().V1().CSINodes().Lister(),
	}
	r.informers = map[string]cache.SharedIndexInformer{
		"pods":                   podInformer,
		"nodes":                  factory.Core().V1().Nodes().Informer(),
		"persistentvolumeclaims": factory.Core().V1().PersistentVolumeClaims().Informer(),
		"persistentvolumes":      factory.Core().V1().PersistentVolumes().Informer(),
		"storageclasses":         factory.Storage().V1().StorageClasses().Informer(),
		"csinodes":               factory.Storage().V1().CSINodes().Informer(),
	}
	if err := r.watchIPAMUse(); err != nil {
		return nil, err
	}
	if err := r.podFanout.register(podInformer); err != nil {
		return nil, fmt.Errorf("add pod handler: %w", err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			factory.Shutdown()
			return nil, fmt.Errorf("sync informer cache for %v: %w", typ, context.Cause(ctx))
		}
	}
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	// Pod events from an informer too, so a warm question lists nothing.
	if err := r.startEventCache(ctx, client); err != nil {
		factory.Shutdown()
		return nil, err
	}
	workloads, err := startWorkloadCache(ctx, client)
	if err != nil {
		factory.Shutdown()
		return nil, err
	}
	r.workloads = workloads
	r.serverVersion()
	return r, nil
}

// stripForCache is the informers' cache.TransformFunc: it drops what triage never reads and
// what costs the most memory: managedFields and kubectl's last-applied-configuration annotation
// of every object, and a node's status.images (the image list a kubelet reports, often tens of
// kilobytes per node). It edits the freshly decoded object in place, before the cache stores
// it; rules that need a dropped field must not rely on the cached backend.
func stripForCache(obj any) (any, error) {
	if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return obj, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
			delete(a, corev1.LastAppliedConfigAnnotation)
			m.SetAnnotations(a)
		}
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return obj, nil
}

// indexPodByNode is the podsByNodeIndex function: a bound pod's spec.nodeName.
func indexPodByNode(obj any) ([]string, error) {
	lp := leanPodOf(obj)
	if lp == nil || lp.node.Value() == "" {
		return nil, nil
	}
	return []string{lp.node.Value()}, nil
}

// startEventCache starts an informer over core/v1 Events about Pods (field selector
// involvedObject.kind=Pod; events.k8s.io/v1 serves the same objects, so one API is enough),
// indexed by involvedObject.uid and stripped like the other caches, and waits for it to sync.
// Listing a pod's events live costs the API server a scan of every event in the namespace per
// request (field selectors are not indexed); from the cache a warm diagnosis reads them with
// no request. It runs until ctx is done.
func (r *cacheReader) startEventCache(ctx context.Context, client kubernetes.Interface) error {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(stripForCache),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("involvedObject.kind", "Pod").String()
		}))
	inf := factory.Core().V1().Events().Informer()
	if err := inf.AddIndexers(cache.Indexers{eventsByUIDIndex: indexEventByUID}); err != nil {
		return fmt.Errorf("add event index %s: %w", eventsByUIDIndex, err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			factory.Shutdown()
			return fmt.Errorf("sync informer cache for %v: %w", typ, context.Cause(ctx))
		}
	}
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	r.events, r.eventsInformer = inf.GetIndexer(), inf
	return nil
}

// indexEventByUID is the eventsByUIDIndex function.
func indexEventByUID(obj any) ([]string, error) {
	e, ok := obj.(*corev1.Event)
	if !ok || e.InvolvedObject.UID == "" {
		return nil, nil
	}
	return []string{string(e.InvolvedObject.UID)}, nil
}

// indexedEvents returns the events about uid in an event cache, newest first (empty, not
// nil, when there are none).
func indexedEvents(events cache.Indexer, uid types.UID) []triage.Event {
	objs, _ := events.ByIndex(eventsByUIDIndex, string(uid))
	out := make([]triage.Event, 0, len(objs))
	for _, o := range objs {
		if e, ok := o.(*corev1.Event); ok {
			out = append(out, eventFromCore(e))
		}
	}
	triage.SortEvents(out)
	return out
}

// cachedEvents is the eventIndex of a cacheReader: the pod event cache, then the controller
// event cache (which holds every event but those about Pods and Nodes).
type cachedEvents struct{ pods, others cache.Indexer }

func (e cachedEvents) of(uid types.UID) []triage.Event {
	if evs := indexedEvents(e.pods, uid); len(evs) > 0 || e.others == nil {
		return evs
	}
	return indexedEvents(e.others, uid)
}

func (r *cacheReader) podExists(_ context.Context, namespace, name string) bool {
	_, err := r.podLister.Pods(namespace).Get(name)
	return err == nil
}

func (r *cacheReader) pods(_ context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	return r.podLister.Pods(namespace).List(sel)
}

func (r *cacheReader) podsOnNode(_ context.Context, namespace, node string, sel labels.Selector) ([]*corev1.Pod, error) {
	pods, err := r.podLister.Pods(namespace).List(sel)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}

// boundPods filters on the cache entries, so only the pods kept are built.
func (r *cacheReader) boundPods(_ context.Context, node string, skip types.UID) ([]*corev1.Pod, error) {
	var objs []any
	if node != "" {
		var err error
		if objs, err = r.podIndex.ByIndex(podsByNodeIndex, node); err != nil {
			return nil, err
		}
	} else {
		objs = r.podIndex.List()
	}
	var out []*corev1.Pod
	for _, o := range objs {
		lp := leanPodOf(o)
		if lp == nil || lp.uid == string(skip) || !holdsResources(lp.node.Value(), corev1.PodPhase(lp.phase.Value())) {
			continue
		}
		out = append(out, lp.pod())
	}
	return out, nil
}

// allBound reads the cache entries only: no pod is built until a rule reads its node.
func (r *cacheReader) allBound(context.Context) (triage.NodePods, map[string]corev1.ResourceList, error) {
	pods, used := newLeanNodePods(r.podIndex.List())
	return pods, used, nil
}

func (r *cacheReader) podRefs(context.Context, string) []triage.PodRef {
	var refs []triage.PodRef
	for _, o := range r.podIndex.List() {
		if lp := leanPodOf(o); lp != nil {
			refs = append(refs, triage.PodRef{Namespace: lp.namespace.Value(), Name: lp.name})
		}
	}
	return refs
}

func (r *cacheReader) podEvents(_ context.Context, pod *corev1.Pod) ([]triage.Event, error) {
	return indexedEvents(r.events, pod.UID), nil
}

// namespaceEvents reads nothing: the caches are indexed by object UID already.
func (r *cacheReader) namespaceEvents(context.Context, string) (eventIndex, error) {
	return cachedEvents{pods: r.events, others: r.workloads.events}, nil
}

func (r *cacheReader) node(_ context.Context, name string) (*corev1.Node, error) {
	return r.nodeLister.Get(name)
}

func (r *cacheReader) nodes(context.Context) ([]*corev1.Node, error) {
	return r.nodeLister.List(labels.Everything())
}

func (r *cacheReader) claim(_ context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return r.pvcLister.PersistentVolumeClaims(namespace).Get(name)
}

func (r *cacheReader) claims(_ context.Context, namespace string) ([]*corev1.PersistentVolumeClaim, error) {
	return r.pvcLister.PersistentVolumeClaims(namespace).List(labels.Everything())
}

func (r *cacheReader) volume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	return r.pvLister.Get(name)
}

func (r *cacheReader) volumes(_ context.Context, names map[string]bool) (map[string]*corev1.PersistentVolume, error) {
	pvs := map[string]*corev1.PersistentVolume{}
	for name := range names {
		if pv, err := r.pvLister.Get(name); err == nil {
			pvs[pv.Name] = pv
		}
	}
	return pvs, nil
}

func (r *cacheReader) storageClasses(context.Context) ([]*storagev1.StorageClass, error) {
	return r.classLister.List(labels.Everything())
}

func (r *cacheReader) csiNodes(context.Context) ([]*storagev1.CSINode, error) {
	return r.csiNodeLister.List(labels.Everything())
}

// workload falls back to the API server for a workload the cache has not seen yet (one
// created a moment ago).
// workload reads a ReplicaSet or a Job whole from the API server: the cache drops their pod
// templates (stripWorkloadForCache), and the rules read the template of the workload asked about.
func (r *cacheReader) workload(ctx context.Context, kind triage.Kind, namespace, name string) (runtime.Object, error) {
	if kind == triage.KindReplicaSet || kind == triage.KindJob {
		return r.apiReader.workload(ctx, kind, namespace, name)
	}
	if o, err := r.workloads.get(kind, namespace, name); err == nil {
		return o, nil
	}
	return r.apiReader.workload(ctx, kind, namespace, name)
}

func (r *cacheReader) listWorkloads(_ context.Context, namespace string, kind triage.Kind, into *namespaceWorkloads) error {
	return r.workloads.list(namespace, kind, into)
}

func (r *cacheReader) workloadsNamed(_ context.Context, name string) []triage.WorkloadRef {
	w := &namespaceWorkloads{}
	for _, k := range namespaceWorkloadKinds {
		if err := r.workloads.list(metav1.NamespaceAll, k, w); err != nil {
			return nil
		}
	}
	var out []triage.WorkloadRef
	for _, ref := range w.refs() {
		if ref.Name == name {
			out = append(out, ref)
		}
	}
	return out
}

// namespace falls back to the API server for a namespace the cache has not seen yet.
func (r *cacheReader) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	if ns, err := r.workloads.namespaces.Get(name); err == nil {
		return ns, nil
	}
	return r.apiReader.namespace(ctx, name)
}

func (r *cacheReader) namespaceNames(context.Context) ([]string, error) {
	all, err := r.workloads.namespaces.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(all))
	for _, ns := range all {
		names = append(names, ns.Name)
	}
	sort.Strings(names)
	return names, nil
}

func (r *cacheReader) quotas(_ context.Context, namespace string) ([]*corev1.ResourceQuota, error) {
	return r.workloads.quotas.ResourceQuotas(namespace).List(labels.Everything())
}

func (r *cacheReader) limitRanges(_ context.Context, namespace string) ([]*corev1.LimitRange, error) {
	return r.workloads.limitRanges.LimitRanges(namespace).List(labels.Everything())
}

// serverVersion reuses the last answer for versionTTL.
func (r *cacheReader) serverVersion() *version.Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); r.version == nil || now.Sub(r.versionRead) > versionTTL {
		if v := r.apiReader.serverVersion(); v != nil {
			r.version, r.versionRead = v, now
		}
	}
	return r.version
}

func (r *cacheReader) synced() bool {
	for _, inf := range r.informers {
		if !inf.HasSynced() {
			return false
		}
	}
	return r.eventsInformer == nil || r.eventsInformer.HasSynced()
}

func (r *cacheReader) objectCounts() map[string]int {
	out := map[string]int{}
	for name, inf := range r.informers {
		out[name] = len(inf.GetStore().ListKeys())
	}
	if r.eventsInformer != nil {
		out["events"] = len(r.eventsInformer.GetStore().ListKeys())
	}
	return out
}

func (r *cacheReader) addressUsers() calico.AddressUsers { return ipamUsers{r} }
