package collect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/triage"
)

// Collector reads everything a diagnosis needs into a triage.Snapshot. It decides what to
// read for a question and builds the Snapshot; its reader (reader.go) does the reads, from
// one of two backends:
//
//   - direct (New, apiReader): every question reads the API, like kubectl describe. The CLI
//     uses it for one-shot answers.
//   - cached (NewCached, cacheReader): shared informers keep pods, nodes, PVCs, PVs, pod
//     events and the workload kinds in memory, so a warm Collect sends no request except
//     the pod itself and what the extras need (previous logs of a crashing container;
//     Calico IPAM for a Calico sandbox failure). The bot uses it.
//
// Both backends build the triage.Snapshot with the same code, so cold and warm answers agree. Objects in
// a triage.Snapshot may be shared with the informer cache: rules treat them as read-only.
type Collector struct {
	read reader
	// now is the clock (time.Now outside tests).
	now func() time.Time
	// ipam is where Calico IPAM state comes from (WithCalico, WithIPAM in calico.go); nil
	// reads no Calico IPAM.
	ipam *ipamAccess
	// refused notes the reads the API server refuses during one question (read is then
	// refused too; see recording); nil outside a question.
	refused *refusals
	// recent shares the cluster-wide reads of concurrent questions (the cached Collector
	// only; nil: each question reads its own).
	recent *recentReads
}

// New returns a Collector that reads the API directly on every Collect (the CLI's
// one-shot backend).
func New(client kubernetes.Interface) *Collector {
	return &Collector{read: apiReader{client: client}, now: time.Now}
}

// NewCached starts shared informers for pods, nodes, PVCs, PVs, StorageClasses, CSINodes, pod
// events and what workload questions read (workload_cache.go), waits until their caches have
// synced and returns a Collector that reads those objects from the caches (the bot's
// backend). The informers run until ctx is done. Cached objects carry no managedFields and no
// last-applied-configuration annotation (see stripForCache); pods are kept lean (leanpod.go),
// and the pod asked about is read whole from the API server.
//
// client should ask for protobuf (rest.Config.ContentType "application/vnd.kubernetes.protobuf"):
// the initial sync decodes every pod of the cluster.
func NewCached(ctx context.Context, client kubernetes.Interface) (*Collector, error) {
	r, err := newCacheReader(ctx, client)
	if err != nil {
		return nil, err
	}
	return &Collector{read: r, now: time.Now, recent: &recentReads{}}, nil
}

// HasSynced reports whether every informer of a cached Collector has synced (true for a
// direct one).
func (c *Collector) HasSynced() bool { return c.read.synced() }

// CacheObjects returns how many objects each informer of a cached Collector holds, by resource
// ("pods", "nodes", "events", …); nil for a direct Collector.
func (c *Collector) CacheObjects() map[string]int { return c.read.objectCounts() }

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
	quiet := c
	c, refused := c.recording()
	s := &triage.Snapshot{Now: c.now(), Requested: triage.PodRef{Namespace: namespace, Name: name}}
	pod, err := c.read.pod(ctx, namespace, name)
	switch {
	case podNotFound(err):
		if s.MissingNamespace = quiet.missingNamespace(ctx, namespace); s.MissingNamespace == nil {
			s.SimilarPods = quiet.similarPods(ctx, namespace, name)
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	s.Pod = pod
	s.Events, s.EventsErr = c.read.podEvents(ctx, pod)
	// Nodes, bound pods, volumes and the server version are best effort: a rule that needs a
	// missing part stays silent rather than guess.
	if pod.Spec.NodeName == "" {
		cr := c.clusterReads(ctx)
		s.Nodes, s.BoundPods, s.RequestedByNode, s.NodesErr = cr.nodes, cr.bound, cr.requested, cr.err()
		if _, shared := ctx.Value(sharedKey{}).(*clusterReads); shared {
			s.NodeTables = cr.tables
		}
	} else {
		var nodesErr, podsErr error
		s.Nodes, nodesErr = c.listNodes(ctx, pod)
		s.PodsByNode, podsErr = c.boundPods(ctx, pod)
		s.NodesErr = errors.Join(nodesErr, podsErr)
	}
	s.Readable = readableNamespaces(ctx, namespace, boundNodes(pod, s.Nodes), s.Bound())
	s.PVCs, s.PVs = c.volumes(ctx, pod)
	c.collectStorage(ctx, s)
	c.collectWorkloadReplicas(ctx, s)
	s.ServerVersion = c.read.serverVersion()
	c.collectExtras(ctx, s)
	c.collectComponents(ctx, s)
	c.collectNames(ctx, s)
	s.Refused = refused.refused()
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

// listNodes returns the nodes the rules need, sorted by name: every node for an unscheduled
// pod, only its own node for a bound one.
func (c *Collector) listNodes(ctx context.Context, pod *corev1.Pod) ([]*corev1.Node, error) {
	if pod.Spec.NodeName != "" {
		n, err := c.read.node(ctx, pod.Spec.NodeName)
		if err != nil {
			return nil, err
		}
		return []*corev1.Node{n}, nil
	}
	nodes, err := c.read.nodes(ctx)
	if err != nil {
		return nil, err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// boundPods returns the pods bound to nodes that still hold resources (phase neither Succeeded
// nor Failed), by node name, without the pod under diagnosis: all of them for an unscheduled
// pod, those on its node for a bound one.
func (c *Collector) boundPods(ctx context.Context, pod *corev1.Pod) (map[string][]*corev1.Pod, error) {
	pods, err := c.read.boundPods(ctx, pod.Spec.NodeName, pod.UID)
	if err != nil {
		return nil, err
	}
	return podsByNode(pods), nil
}

// boundNodes names the nodes whose pods a question about pod reads: pod's node when it is
// bound (whether or not the node could be read), else every node of nodes.
func boundNodes(pod *corev1.Pod, nodes []*corev1.Node) []string {
	if pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return names
}

// podsByNode groups pods by spec.nodeName, each node's sorted by namespace and name.
func podsByNode(pods []*corev1.Pod) map[string][]*corev1.Pod {
	byNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	for _, pods := range byNode {
		sort.Slice(pods, func(i, j int) bool {
			if pods[i].Namespace != pods[j].Namespace {
				return pods[i].Namespace < pods[j].Namespace
			}
			return pods[i].Name < pods[j].Name
		})
	}
	return byNode
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
		if pv, err := c.read.volume(ctx, pvc.Spec.VolumeName); err == nil {
			pvs[pvc.Spec.VolumeName] = pv
		}
	}
	return pvcs, pvs
}

// The extra reads keep a warm diagnosis within four API requests besides the pod itself:
// calico-node pods come from the informer cache (or, uncached, one list per namespace only for
// a pod waiting for its sandbox), at most maxLogFetches previous logs (logs.go), and Calico
// IPAM only when a sandbox event names Calico (calico.go).

// collectExtras fills the parts of s that the non-Pending rule families read: calico-node pods,
// Calico IPAM state (through package calico) and previous container logs. Collect calls it
// last, after the pod, events, nodes, bound pods and volumes are in s; it is best effort and
// records failures in s's *Err fields (triage.LogTail.Err for logs) rather than returning them.
func (c *Collector) collectExtras(ctx context.Context, s *triage.Snapshot) {
	pod := s.Pod
	if pod == nil {
		return
	}
	if triage.NeedsCalicoNodePods(pod) {
		s.CalicoNodePods = c.calicoNodePods(ctx, pod.Spec.NodeName)
	}
	var wg sync.WaitGroup
	if triage.NeedsIPAM(s) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.IPAM, s.IPAMErr = c.readIPAM(ctx)
			if c.refused != nil {
				c.refused.noteIPAM(s.IPAMErr)
			}
		}()
	}
	s.PreviousLogs = c.previousLogs(ctx, s)
	wg.Wait()
}
