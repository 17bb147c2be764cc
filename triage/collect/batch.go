package collect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/pager"

	"github.com/whypending/whypending/triage"
)

// podBatch holds the reads that the Snapshots of many pods of one namespace share (a
// workload's pods, a namespace sweep): the nodes, the pods bound to each node, the
// namespace's events by object UID, its claims and their volumes. The direct backend fills it
// with one list per kind (so a workload of 30 Pending pods costs one node list and one list of
// bound pods, not 30 of each); the cached backend reads the informer caches. A batch is
// read-only once built, so snapshots may be taken from it concurrently.
type podBatch struct {
	c   *Collector
	now time.Time

	nodes      []*corev1.Node // sorted by name
	nodeByName map[string]*corev1.Node
	// bound maps a node name to the pods bound to it that still hold resources, sorted by
	// namespace and name (Snapshot.PodsByNode before the pod itself is removed).
	bound    map[string][]*corev1.Pod
	nodesErr error
	// requested is triage.RequestsByNode(bound), computed once for every unscheduled pod.
	requested map[string]corev1.ResourceList

	// events maps an involved object's UID to its events, newest first (direct backend: the
	// namespace's events, listed once); nil with the cached backend, which reads its indexes.
	events    map[types.UID][]triage.Event
	eventsErr error

	// pvcs are the namespace's claims by name, nil when they could not be listed (then the
	// pods' claims are left out of their Snapshots rather than reported missing); pvs are the
	// bound claims' volumes by name.
	pvcs map[string]*corev1.PersistentVolumeClaim
	pvs  map[string]*corev1.PersistentVolume

	version *version.Info
}

// newPodBatch reads what the Snapshots of pods (all in namespace) share. events says whether to
// read the namespace's events too (the direct backend lists them once; a caller that already
// has them passes them in events of the returned batch). Every read is best effort: a failed
// one leaves its part empty with the error recorded, as Collect does.
func (c *Collector) newPodBatch(ctx context.Context, namespace string, pods []*corev1.Pod, events map[types.UID][]triage.Event, eventsErr error) *podBatch {
	b := &podBatch{c: c, now: c.now(), events: events, eventsErr: eventsErr}
	if len(pods) == 0 {
		return b
	}
	var nodesErr, boundErr error
	b.nodes, nodesErr = c.allNodes(ctx)
	b.bound, boundErr = c.allBoundPods(ctx)
	b.nodesErr = errors.Join(nodesErr, boundErr)
	b.nodeByName = make(map[string]*corev1.Node, len(b.nodes))
	for _, n := range b.nodes {
		b.nodeByName[n.Name] = n
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			b.requested = triage.RequestsByNode(b.bound)
			break
		}
	}
	if c.cache == nil && b.events == nil {
		b.events, b.eventsErr = c.namespaceEvents(ctx, namespace)
	}
	for _, p := range pods {
		if len(claimNames(p)) > 0 {
			b.pvcs, b.pvs = c.namespaceClaims(ctx, namespace)
			break
		}
	}
	b.version = c.serverVersion()
	return b
}

// snapshot builds pod's Snapshot from the batch, as Collect would read it. full adds what
// Collect reads beyond the shared parts (previous container logs, calico-node pods, Calico
// IPAM, near names, storage classes and CSI limits); a light snapshot (a namespace sweep) reads
// nothing more.
func (b *podBatch) snapshot(ctx context.Context, pod *corev1.Pod, full bool) *triage.Snapshot {
	s := &triage.Snapshot{Now: b.now, Requested: triage.PodRef{Namespace: pod.Namespace, Name: pod.Name}, Pod: pod}
	s.Events, s.EventsErr = b.podEvents(pod)
	s.NodesErr = b.nodesErr
	if pod.Spec.NodeName == "" {
		// The pod is not bound, so it is in no list: every unscheduled pod shares them.
		s.Nodes, s.PodsByNode, s.RequestedByNode = b.nodes, b.bound, b.requested
	} else {
		if n := b.nodeByName[pod.Spec.NodeName]; n != nil {
			s.Nodes = []*corev1.Node{n}
		} else if s.NodesErr == nil {
			s.NodesErr = fmt.Errorf("get node %s: not found", pod.Spec.NodeName)
		}
		var others []*corev1.Pod
		for _, p := range b.bound[pod.Spec.NodeName] {
			if p.UID != pod.UID {
				others = append(others, p)
			}
		}
		s.PodsByNode = map[string][]*corev1.Pod{pod.Spec.NodeName: others}
	}
	if names := claimNames(pod); len(names) > 0 && b.pvcs != nil {
		s.PVCs, s.PVs = map[string]*corev1.PersistentVolumeClaim{}, map[string]*corev1.PersistentVolume{}
		for _, name := range names {
			pvc := b.pvcs[name]
			s.PVCs[name] = pvc
			if pvc != nil && pvc.Spec.VolumeName != "" {
				if pv := b.pvs[pvc.Spec.VolumeName]; pv != nil {
					s.PVs[pv.Name] = pv
				}
			}
		}
	}
	s.ServerVersion = b.version
	if full {
		b.c.collectStorage(ctx, s)
		b.c.collectExtras(ctx, s)
		b.c.collectComponents(ctx, s)
		b.c.collectNames(ctx, s)
	}
	return s
}

// snapshots builds the Snapshots of pods concurrently (a few at a time: full ones may read
// container logs), by pod UID.
func (b *podBatch) snapshots(ctx context.Context, pods []*corev1.Pod, full bool) map[types.UID]*triage.Snapshot {
	out := make(map[types.UID]*triage.Snapshot, len(pods))
	if !full {
		for _, p := range pods {
			out[p.UID] = b.snapshot(ctx, p, false)
		}
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, batchConcurrency)
	for _, p := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s := b.snapshot(ctx, p, true)
			mu.Lock()
			out[p.UID] = s
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// batchConcurrency is how many full pod snapshots a batch reads at once.
const batchConcurrency = 4

// podEvents returns the pod's events from the batch (direct) or the event cache (cached).
func (b *podBatch) podEvents(pod *corev1.Pod) ([]triage.Event, error) {
	if events, ok := b.c.cachedEvents(pod); ok {
		return events, nil
	}
	return b.events[pod.UID], b.eventsErr
}

// allNodes returns every node, sorted by name.
func (c *Collector) allNodes(ctx context.Context) ([]*corev1.Node, error) {
	return c.listNodes(ctx, &corev1.Pod{}) // an unscheduled pod needs them all
}

// allBoundPods returns the pods bound to nodes that still hold resources, by node name.
func (c *Collector) allBoundPods(ctx context.Context) (map[string][]*corev1.Pod, error) {
	return c.boundPods(ctx, &corev1.Pod{}) // an unscheduled pod needs them all
}

// namespaceEvents lists the namespace's core/v1 events once (paginated) and groups them by
// involved object UID, newest first. core/v1 shows the events.k8s.io/v1 events too (one
// storage), with their series.
func (c *Collector) namespaceEvents(ctx context.Context, namespace string) (map[types.UID][]triage.Event, error) {
	out := map[types.UID][]triage.Event{}
	err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.client.CoreV1().Events(namespace).List(ctx, opts)
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

// namespaceClaims returns the namespace's PersistentVolumeClaims by name and the volumes the
// bound ones use, from the cache or with one list each (best effort: pvcs is nil when the
// claims could not be listed, and a failed volume list leaves pvs empty).
func (c *Collector) namespaceClaims(ctx context.Context, namespace string) (map[string]*corev1.PersistentVolumeClaim, map[string]*corev1.PersistentVolume) {
	pvcs := map[string]*corev1.PersistentVolumeClaim{}
	pvs := map[string]*corev1.PersistentVolume{}
	if c.cache != nil {
		list, err := c.cache.pvcs.PersistentVolumeClaims(namespace).List(labels.Everything())
		if err != nil {
			return nil, pvs
		}
		for _, p := range list {
			pvcs[p.Name] = p
		}
		for _, p := range pvcs {
			if p.Spec.VolumeName != "" {
				if pv, err := c.cache.pvs.Get(p.Spec.VolumeName); err == nil {
					pvs[pv.Name] = pv
				}
			}
		}
		return pvcs, pvs
	}
	list, err := c.client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, pvs
	}
	for i := range list.Items {
		pvcs[list.Items[i].Name] = &list.Items[i]
	}
	bound := false
	for _, p := range pvcs {
		bound = bound || p.Spec.VolumeName != ""
	}
	if bound {
		if list, err := c.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); err == nil {
			for i := range list.Items {
				pvs[list.Items[i].Name] = &list.Items[i]
			}
		}
	}
	return pvcs, pvs
}
