package collect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/whypending/whypending/triage"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"k8s.io/client-go/tools/pager"
)

// Collector reads everything a diagnosis needs into a triage.Snapshot. It has two backends behind one
// type:
//
//   - direct (New): every Collect reads the API, like kubectl describe. The CLI uses it
//     for one-shot answers.
//   - cached (NewCached): shared informers keep pods, nodes, PVCs, PVs and pod events
//     in memory, so a warm Collect sends no request except what the extras need (previous logs
//     of a crashing container; Calico IPAM for a Calico sandbox failure). The bot uses it.
//
// Both backends build the triage.Snapshot with the same code, so cold and warm answers agree. Objects in
// a triage.Snapshot may be shared with the informer cache: rules treat them as read-only.
type Collector struct {
	client kubernetes.Interface
	// cache is nil for the direct backend.
	cache *collectorCache
	// now is the clock (time.Now outside tests).
	now func() time.Time
	// extras is what the non-Pending reads need beyond client (see WithCalico in
	// collect_extra.go); nil reads no Calico IPAM.
	extras *collectorExtras
}

// collectorCache is the informer-backed read path.
type collectorCache struct {
	// pods lists the pod cache, which holds every pod as a leanPod (leanpod.go); podIndex is
	// that cache, indexed by namespace and node.
	pods     corelisters.PodLister
	podIndex cache.Indexer
	// informers are every informer of the cache, by resource, for HasSynced and Objects.
	informers map[string]cache.SharedIndexInformer
	// ipamGen counts changes to what pods and nodes do with Calico addresses (ipam.go).
	ipamGen atomic.Uint64
	nodes   corelisters.NodeLister
	pvcs    corelisters.PersistentVolumeClaimLister
	pvs     corelisters.PersistentVolumeLister
	// storageClasses and csiNodes are small (a few classes, one CSINode per node).
	storageClasses storagelisters.StorageClassLister
	csiNodes       storagelisters.CSINodeLister
	// events holds pod events indexed by involvedObject.uid (startEventCache in
	// collect_extra.go); podEvents reads it instead of listing.
	events         cache.Indexer
	eventsInformer cache.SharedIndexInformer
	// workloads caches what workload questions and namespace sweeps read (workload_cache.go).
	workloads *workloadCache

	// The server version is read once and then again after versionTTL, so a warm Collect
	// does not spend a request on it.
	mu          sync.Mutex
	version     *version.Info
	versionRead time.Time
}

// versionTTL is how long the cached backend reuses /version.
const versionTTL = 10 * time.Minute

// podsByNodeIndex indexes the pod informer by spec.nodeName.
const podsByNodeIndex = "spec.nodeName"

// pageSize is the chunk size for paginated lists (kubectl's default).
const pageSize = 500

// New returns a Collector that reads the API directly on every Collect (the CLI's
// one-shot backend).
func New(client kubernetes.Interface) *Collector {
	return &Collector{client: client, now: time.Now}
}

// NewCached starts shared informers for pods, nodes, PVCs, PVs, StorageClasses, CSINodes and pod events, waits until their
// caches have synced and returns a Collector that reads those objects from the caches (the bot's
// backend). The informers run until ctx is done. Cached objects carry no managedFields and no
// last-applied-configuration annotation (see stripForCache); pods are kept lean (leanpod.go),
// and the pod asked about is read whole from the API server.
//
// client should ask for protobuf (rest.Config.ContentType "application/vnd.kubernetes.protobuf"):
// the initial sync decodes every pod of the cluster.
func NewCached(ctx context.Context, client kubernetes.Interface) (*Collector, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(stripForCache))
	podInformer := factory.Core().V1().Pods().Informer()
	if err := podInformer.SetTransform(leanPodTransform); err != nil {
		return nil, fmt.Errorf("set pod transform: %w", err)
	}
	if err := podInformer.AddIndexers(cache.Indexers{podsByNodeIndex: indexPodByNode}); err != nil {
		return nil, fmt.Errorf("add pod index %s: %w", podsByNodeIndex, err)
	}
	cc := &collectorCache{
		pods:     leanPodLister{indexer: podInformer.GetIndexer()},
		podIndex: podInformer.GetIndexer(),
		nodes:    factory.Core().V1().Nodes().Lister(),
		pvcs:     factory.Core().V1().PersistentVolumeClaims().Lister(),
		pvs:      factory.Core().V1().PersistentVolumes().Lister(),

		storageClasses: factory.Storage().V1().StorageClasses().Lister(),
		csiNodes:       factory.Storage().V1().CSINodes().Lister(),
	}
	cc.informers = map[string]cache.SharedIndexInformer{
		"pods":                   podInformer,
		"nodes":                  factory.Core().V1().Nodes().Informer(),
		"persistentvolumeclaims": factory.Core().V1().PersistentVolumeClaims().Informer(),
		"persistentvolumes":      factory.Core().V1().PersistentVolumes().Informer(),
		"storageclasses":         factory.Storage().V1().StorageClasses().Informer(),
		"csinodes":               factory.Storage().V1().CSINodes().Informer(),
	}
	if err := cc.watchIPAMUse(); err != nil {
		return nil, err
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
	// Pod events from an informer too (collect_extra.go), so a warm Collect lists nothing.
	if err := cc.startEventCache(ctx, client); err != nil {
		factory.Shutdown()
		return nil, err
	}
	workloads, err := startWorkloadCache(ctx, client)
	if err != nil {
		factory.Shutdown()
		return nil, err
	}
	cc.workloads = workloads
	c := &Collector{client: client, cache: cc, now: time.Now}
	c.serverVersion()
	return c, nil
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

// Diagnose collects a triage.Snapshot of namespace/name with c and evaluates it. It returns an error
// only when the pod itself could not be read for a reason other than NotFound (for example the
// API server is unreachable); the error wraps the client's error (errors.As finds *url.Error,
// apierrors.APIStatus, …). A missing pod is a triage.Diagnosis with triage.CodePodNotFound.
func Diagnose(ctx context.Context, c *Collector, namespace, name string) (*triage.Diagnosis, error) {
	s, err := c.Collect(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return triage.Evaluate(s), nil
}

// Collect reads everything the rules need about namespace/name into a triage.Snapshot. Only a failed
// pod read fails Collect; every other read is best effort (an empty part, with the matching
// *Err field set where the triage.Snapshot has one).
//
// For an unscheduled pod it reads the nodes and every bound pod that still holds resources
// (the verdict table needs them all: resources, host ports and inter-pod affinity are per
// node and per topology domain); for a bound pod only its node and the pods on it.
func (c *Collector) Collect(ctx context.Context, namespace, name string) (*triage.Snapshot, error) {
	s := &triage.Snapshot{Now: c.now(), Requested: triage.PodRef{Namespace: namespace, Name: name}}
	pod, err := c.getPod(ctx, namespace, name)
	switch {
	case podNotFound(err):
		s.SimilarPods = c.similarPods(ctx, namespace, name)
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	s.Pod = pod
	s.Events, s.EventsErr = c.podEvents(ctx, pod)
	// Nodes, bound pods, volumes and the server version are best effort: a rule that needs a
	// missing part stays silent rather than guess.
	var nodesErr, podsErr error
	s.Nodes, nodesErr = c.listNodes(ctx, pod)
	s.PodsByNode, podsErr = c.boundPods(ctx, pod)
	s.NodesErr = errors.Join(nodesErr, podsErr)
	s.PVCs, s.PVs = c.volumes(ctx, pod)
	c.collectStorage(ctx, s)
	s.ServerVersion = c.serverVersion()
	c.collectExtras(ctx, s)
	c.collectComponents(ctx, s)
	c.collectNames(ctx, s)
	return s, nil
}

// podNotFound reports whether err is the API server's answer that the pod does not exist: a
// NotFound Status about pods. A bare 404 from something that is not a Kubernetes API (a
// mistyped proxy or Rancher URL) is an error, not a missing pod.
func podNotFound(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	if d == nil || (d.Kind != "pods" && d.Kind != "pod") {
		return false
	}
	// client-go makes a NotFound of any 404 whose body is not a Status, and keeps that body as
	// an UnexpectedServerResponse cause: the API server itself always answers with a Status.
	for _, c := range d.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return false
		}
	}
	return true
}

// serverVersion returns the API server's /version, nil if it cannot be read. The cached
// backend reuses the last answer for versionTTL.
func (c *Collector) serverVersion() *version.Info {
	if c.cache == nil {
		v, err := c.client.Discovery().ServerVersion()
		if err != nil {
			return nil
		}
		return v
	}
	cc := c.cache
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.version == nil || c.now().Sub(cc.versionRead) > versionTTL {
		if v, err := c.client.Discovery().ServerVersion(); err == nil {
			cc.version, cc.versionRead = v, c.now()
		}
	}
	return cc.version
}

// getPod reads the pod from the API, whole: the cached backend keeps pods lean (leanpod.go),
// and the pod asked about is read in full on demand (one GET, never a list).
func (c *Collector) getPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

// podEvents returns the pod's events: from the event cache when there is one, else listed by
// objectEvents.
func (c *Collector) podEvents(ctx context.Context, pod *corev1.Pod) ([]triage.Event, error) {
	if events, ok := c.cachedEvents(pod); ok {
		return events, nil
	}
	events, err := c.objectEvents(ctx, pod.Namespace, string(pod.UID))
	if err != nil {
		return nil, fmt.Errorf("list events for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return events, nil
}

// objectEvents lists the events about the object with uid in namespace from core/v1 and
// events.k8s.io/v1 (the same objects seen through two APIs; a cluster may serve either),
// merges them by event UID and sorts them newest first. It fails only when both lists fail.
func (c *Collector) objectEvents(ctx context.Context, namespace, uid string) ([]triage.Event, error) {
	byUID := map[types.UID]triage.Event{}
	var order []types.UID
	add := func(id types.UID, e triage.Event) {
		if _, seen := byUID[id]; !seen {
			order = append(order, id)
		}
		byUID[id] = e
	}

	var coreErr, newErr error
	coreSel := fields.OneTermEqualSelector("involvedObject.uid", uid).String()
	coreErr = pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.client.CoreV1().Events(namespace).List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{FieldSelector: coreSel, Limit: pageSize}, func(obj runtime.Object) error {
		e := obj.(*corev1.Event)
		add(e.UID, eventFromCore(e))
		return nil
	})

	// events.k8s.io/v1 carries series and reportingController natively; where both APIs
	// return the same event, its view wins.
	newSel := fields.OneTermEqualSelector("regarding.uid", uid).String()
	newErr = pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.client.EventsV1().Events(namespace).List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{FieldSelector: newSel, Limit: pageSize}, func(obj runtime.Object) error {
		e := obj.(*eventsv1.Event)
		add(e.UID, eventFromEventsV1(e))
		return nil
	})

	if coreErr != nil && newErr != nil {
		return nil, coreErr
	}
	events := make([]triage.Event, 0, len(order))
	for _, id := range order {
		events = append(events, byUID[id])
	}
	triage.SortEvents(events)
	return events, nil
}

// eventFromCore normalises a core/v1 triage.Event.
func eventFromCore(e *corev1.Event) triage.Event {
	out := triage.Event{
		Type:      e.Type,
		Reason:    e.Reason,
		Message:   e.Message,
		FieldPath: e.InvolvedObject.FieldPath,
		Source:    e.Source.Component,
	}
	if out.Source == "" {
		out.Source = e.ReportingController
	}
	var seriesLast time.Time
	var seriesCount int32
	if e.Series != nil {
		seriesLast, seriesCount = e.Series.LastObservedTime.Time, e.Series.Count
	}
	setSeen(&out, e.Count, e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time, seriesLast, seriesCount)
	return out
}

// eventFromEventsV1 normalises an events.k8s.io/v1 triage.Event (note is the message; the deprecated*
// fields hold what a core/v1 writer set).
func eventFromEventsV1(e *eventsv1.Event) triage.Event {
	out := triage.Event{
		Type:      e.Type,
		Reason:    e.Reason,
		Message:   e.Note,
		FieldPath: e.Regarding.FieldPath,
		Source:    e.ReportingController,
	}
	if e.DeprecatedSource.Component != "" {
		out.Source = e.DeprecatedSource.Component
	}
	var seriesLast time.Time
	var seriesCount int32
	if e.Series != nil {
		seriesLast, seriesCount = e.Series.LastObservedTime.Time, e.Series.Count
	}
	setSeen(&out, e.DeprecatedCount, e.DeprecatedFirstTimestamp.Time, e.DeprecatedLastTimestamp.Time, e.EventTime.Time, seriesLast, seriesCount)
	return out
}

// setSeen fills out's Count, FirstSeen and LastSeen from the time fields both event APIs share:
// LastSeen is the series' last observation, else lastTimestamp, else eventTime, else
// firstTimestamp; Count is the larger of count and series.count, at least 1.
func setSeen(out *triage.Event, count int32, first, last, eventTime, seriesLast time.Time, seriesCount int32) {
	out.FirstSeen = first
	if out.FirstSeen.IsZero() {
		out.FirstSeen = eventTime
	}
	switch {
	case !seriesLast.IsZero():
		out.LastSeen = seriesLast
	case !last.IsZero():
		out.LastSeen = last
	case !eventTime.IsZero():
		out.LastSeen = eventTime
	default:
		out.LastSeen = first
	}
	out.Count = max(count, seriesCount, 1)
}

// listNodes returns the nodes the rules need, sorted by name: every node for an unscheduled
// pod, only its own node for a bound one.
func (c *Collector) listNodes(ctx context.Context, pod *corev1.Pod) ([]*corev1.Node, error) {
	var nodes []*corev1.Node
	switch {
	case c.cache != nil && pod.Spec.NodeName != "":
		n, err := c.cache.nodes.Get(pod.Spec.NodeName)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	case c.cache != nil:
		all, err := c.cache.nodes.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		nodes = all
	case pod.Spec.NodeName != "":
		n, err := c.client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
		}
		nodes = append(nodes, n)
	default:
		err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.client.CoreV1().Nodes().List(ctx, opts)
		}).EachListItem(ctx, metav1.ListOptions{Limit: pageSize}, func(obj runtime.Object) error {
			nodes = append(nodes, obj.(*corev1.Node))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// boundPods returns the pods bound to nodes that still hold resources (phase neither Succeeded
// nor Failed), by node name, without the pod under diagnosis: all of them for an unscheduled
// pod, those on its node for a bound one.
func (c *Collector) boundPods(ctx context.Context, pod *corev1.Pod) (map[string][]*corev1.Pod, error) {
	byNode := map[string][]*corev1.Pod{}
	keep := func(p *corev1.Pod) {
		if p.Spec.NodeName == "" || p.UID == pod.UID ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return
		}
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	if c.cache != nil {
		// Filter on the cache entries, so only the pods kept are built.
		objs := c.cache.podIndex.List()
		if pod.Spec.NodeName != "" {
			var err error
			if objs, err = c.cache.podIndex.ByIndex(podsByNodeIndex, pod.Spec.NodeName); err != nil {
				return nil, err
			}
		}
		for _, o := range objs {
			lp := leanPodOf(o)
			if lp == nil || lp.node.Value() == "" || lp.uid == string(pod.UID) {
				continue
			}
			if ph := corev1.PodPhase(lp.phase.Value()); ph == corev1.PodSucceeded || ph == corev1.PodFailed {
				continue
			}
			keep(lp.pod())
		}
	} else {
		sel := fields.AndSelectors(
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
		)
		if pod.Spec.NodeName != "" {
			sel = fields.AndSelectors(sel, fields.OneTermEqualSelector("spec.nodeName", pod.Spec.NodeName))
		} else {
			sel = fields.AndSelectors(sel, fields.OneTermNotEqualSelector("spec.nodeName", ""))
		}
		err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		}).EachListItem(ctx, metav1.ListOptions{FieldSelector: sel.String(), Limit: pageSize}, func(obj runtime.Object) error {
			keep(obj.(*corev1.Pod))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list pods bound to nodes: %w", err)
		}
	}
	for _, pods := range byNode {
		sort.Slice(pods, func(i, j int) bool {
			if pods[i].Namespace != pods[j].Namespace {
				return pods[i].Namespace < pods[j].Namespace
			}
			return pods[i].Name < pods[j].Name
		})
	}
	return byNode, nil
}

// volumes reads the PVCs the pod's volumes name (a name that maps to nil does not exist) and
// the PVs those claims are bound to. Reads that fail for another reason than NotFound leave
// the claim out.
func (c *Collector) volumes(ctx context.Context, pod *corev1.Pod) (map[string]*corev1.PersistentVolumeClaim, map[string]*corev1.PersistentVolume) {
	claims := claimNames(pod)
	if len(claims) == 0 {
		return nil, nil
	}
	pvcs := map[string]*corev1.PersistentVolumeClaim{}
	pvs := map[string]*corev1.PersistentVolume{}
	for _, name := range claims {
		pvc, err := c.claim(ctx, pod.Namespace, name)
		if err != nil {
			continue
		}
		pvcs[name] = pvc
		if pvc == nil || pvc.Spec.VolumeName == "" {
			continue
		}
		if pv, err := c.persistentVolume(ctx, pvc.Spec.VolumeName); err == nil {
			pvs[pvc.Spec.VolumeName] = pv
		}
	}
	return pvcs, pvs
}
