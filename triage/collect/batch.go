package collect

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"

	"github.com/whypending/whypending/triage"
)

// podBatch holds the reads that the Snapshots of many pods of one namespace share (a
// workload's pods, a namespace sweep): the nodes, the pods bound to each node, the
// namespace's events by object UID, its claims and their volumes. The direct backend fills it
// with one list per kind (so a workload of 30 Pending pods costs one node list and one list of
// bound pods, not 30 of each); the cached backend reads the informer caches. A batch is
// read-only once built, so snapshots may be taken from it concurrently.
type podBatch struct {
	c     *Collector
	now   time.Time
	names *sharedNames // collectNames' reads, once for all the batch's pods

	nodes      []*corev1.Node // sorted by name
	nodeByName map[string]*corev1.Node
	// bound are the pods bound to each node that still hold resources, sorted by namespace
	// and name (Snapshot.BoundPods before the pod itself is removed), read node by node.
	bound    triage.NodePods
	nodesErr error
	// requested is what bound request on each node (triage.RequestsByNode), computed once for
	// every unscheduled pod.
	requested map[string]corev1.ResourceList
	// tables shares the node tables of the batch's unscheduled pods (triage.NodeTables): the
	// Pending pods of one workload get one. nodes, nodeByName, bound, requested and tables
	// come from Collector.clusterReads.
	tables *triage.NodeTables
	// readable is Snapshot.Readable for bound (readableNamespaces), checked once.
	readable map[string]bool

	// events are the namespace's events by involved object UID (namespaceEvents: one list for
	// the direct backend, the indexes of the cached one); nil when they could not be read.
	events    eventIndex
	eventsErr error

	// pvcs are the namespace's claims by name, nil when they could not be listed (then the
	// pods' claims are left out of their Snapshots rather than reported missing); pvs are the
	// bound claims' volumes by name.
	pvcs map[string]*corev1.PersistentVolumeClaim
	pvs  map[string]*corev1.PersistentVolume

	version *version.Info

	// replicas memoises workloadReplicas by the pod's controller UID: a workload's pods share
	// one or two reads.
	replicasMu sync.Mutex
	replicas   map[types.UID]*int32
}

// newPodBatch reads what the Snapshots of pods (all in namespace) share. events are the
// namespace's events when the caller has read them already (nil: the batch reads them). Every
// read is best effort: a failed one leaves its part empty with the error recorded, as Collect
// does.
func (c *Collector) newPodBatch(ctx context.Context, namespace string, pods []*corev1.Pod, events eventIndex, eventsErr error) *podBatch {
	b := &podBatch{c: c, now: c.now(), events: events, eventsErr: eventsErr, names: newSharedNames(c.nameReads())}
	if len(pods) == 0 {
		return b
	}
	cr := c.clusterReads(ctx)
	b.nodes, b.nodeByName, b.bound, b.requested, b.tables, b.nodesErr = cr.nodes, cr.nodeByName, cr.bound, cr.requested, cr.tables, cr.err()
	names := map[string]bool{}
	for _, n := range b.nodes {
		names[n.Name] = true
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" && !names[p.Spec.NodeName] {
			names[p.Spec.NodeName] = true
		}
	}
	b.readable = readableNamespaces(ctx, namespace, slices.Sorted(maps.Keys(names)), b.bound)
	if b.events == nil {
		b.events, b.eventsErr = c.read.namespaceEvents(ctx, namespace)
	}
	for _, p := range pods {
		if len(claimNames(p)) > 0 {
			b.pvcs, b.pvs = c.namespaceClaims(ctx, namespace)
			break
		}
	}
	b.version = c.read.serverVersion()
	return b
}

// snapshot builds pod's Snapshot from the batch, as Collect would read it. full adds what
// Collect reads beyond the shared parts (previous container logs, calico-node pods, Calico
// IPAM, near names, storage classes and CSI limits); a light snapshot (a namespace sweep) reads
// only whether the objects a kubelet reported missing exist now (collectNames, shared among
// the batch's pods): an answer that says "not found" of an object that exists is wrong.
func (b *podBatch) snapshot(ctx context.Context, pod *corev1.Pod, full bool) *triage.Snapshot {
	s := &triage.Snapshot{Now: b.now, Requested: triage.PodRef{Namespace: pod.Namespace, Name: pod.Name}, Pod: pod}
	s.Events, s.EventsErr = b.podEvents(pod)
	s.NodesErr, s.Readable = b.nodesErr, b.readable
	if pod.Spec.NodeName == "" {
		// The pod is not bound, so it is in no list: every unscheduled pod shares them.
		s.Nodes, s.BoundPods, s.RequestedByNode, s.NodeTables = b.nodes, b.bound, b.requested, b.tables
	} else {
		if n := b.nodeByName[pod.Spec.NodeName]; n != nil {
			s.Nodes = []*corev1.Node{n}
		} else if s.NodesErr == nil {
			s.NodesErr = fmt.Errorf("get node %s: not found", pod.Spec.NodeName)
		}
		var others []*corev1.Pod
		for _, p := range b.bound.On(pod.Spec.NodeName) {
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
		b.collectWorkloadReplicas(ctx, s)
		b.c.collectExtras(ctx, s)
		b.c.collectComponents(ctx, s)
	}
	b.c.collectNamesFrom(ctx, s, b.names)
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

// podEvents returns the pod's events from the batch.
func (b *podBatch) podEvents(pod *corev1.Pod) ([]triage.Event, error) {
	if b.events == nil {
		return nil, b.eventsErr
	}
	return b.events.of(pod.UID), b.eventsErr
}

// allNodes returns every node, sorted by name.
func (c *Collector) allNodes(ctx context.Context) ([]*corev1.Node, error) {
	return c.listNodes(ctx, &corev1.Pod{}) // an unscheduled pod needs them all
}

// namespaceClaims returns the namespace's PersistentVolumeClaims by name and the volumes the
// bound ones use (best effort: pvcs is nil when the claims could not be listed, and a failed
// volume read leaves pvs empty).
func (c *Collector) namespaceClaims(ctx context.Context, namespace string) (map[string]*corev1.PersistentVolumeClaim, map[string]*corev1.PersistentVolume) {
	list, err := c.read.claims(ctx, namespace)
	if err != nil {
		return nil, map[string]*corev1.PersistentVolume{}
	}
	pvcs := map[string]*corev1.PersistentVolumeClaim{}
	bound := map[string]bool{}
	for _, p := range list {
		pvcs[p.Name] = p
		if p.Spec.VolumeName != "" {
			bound[p.Spec.VolumeName] = true
		}
	}
	pvs := map[string]*corev1.PersistentVolume{}
	if len(bound) > 0 {
		if got, err := c.read.volumes(ctx, bound); err == nil {
			pvs = got
		}
	}
	return pvcs, pvs
}
