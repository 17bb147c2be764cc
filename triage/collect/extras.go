package collect

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/triage"
)

// Limits of the extra reads. Together with the two event lists they keep a warm diagnosis
// within four API requests: calico-node pods come from the informer cache (or, uncached, one
// list per namespace only for a pod waiting for its sandbox), at most maxLogFetches previous
// logs, and Calico IPAM only when a sandbox event names Calico.
const (
	// previousLogLines is pods/log tailLines for a previous container's log.
	previousLogLines = 20
	// previousLogBytes is pods/log limitBytes: long lines are cut, not the request.
	previousLogBytes = 16 << 10
	// maxLogFetches caps how many previous logs one diagnosis reads.
	maxLogFetches = 2
	// logTimeout bounds one log read: the API server proxies it to the node's kubelet, which
	// may be unreachable.
	logTimeout = 3 * time.Second
	// ipamTimeout bounds reading Calico IPAM state.
	ipamTimeout = 20 * time.Second
)

// calicoNodeSelector selects calico-node pods in either install style.
var calicoNodeSelector = labels.SelectorFromSet(labels.Set{"k8s-app": "calico-node"})

// calicoNamespaces are where calico-node runs: calico-system for Tigera operator installs (the
// usual way on current clusters), kube-system for manifest installs (older clusters, and the
// Kubernetes 1.28-and-earlier guides).
var calicoNamespaces = []string{"calico-system", "kube-system"}

// collectorExtras holds what the extra reads need beyond the Collector's clientset: where
// Calico IPAM state comes from (WithIPAM), or the REST config to build a Calico client from on
// first use (WithCalico).
type collectorExtras struct {
	source IPAMSource
	cfg    *rest.Config

	once sync.Once
	err  error
}

// WithCalico lets the Collector read Calico IPAM state (through package calico, read only)
// for pods whose sandbox events name Calico. cfg is the same cluster's REST config; the Calico
// client is built on the first diagnosis that needs it (a cluster without Calico then records
// calico.ErrCalicoNotInstalled in triage.Snapshot.IPAMErr), and each such diagnosis reads IPAM
// afresh. Without WithCalico or WithIPAM, triage.Snapshot.IPAM stays nil and the Calico
// findings say IPAM state was not read. It returns c.
func (c *Collector) WithCalico(cfg *rest.Config) *Collector {
	c.extras = &collectorExtras{cfg: cfg}
	return c
}

// ipamSource returns where IPAM state comes from, building the Calico client once.
func (x *collectorExtras) ipamSource(ctx context.Context) (IPAMSource, error) {
	x.once.Do(func() {
		if x.source == nil {
			x.source, x.err = calico.NewClient(ctx, x.cfg)
		}
	})
	return x.source, x.err
}

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
		}()
	}
	s.PreviousLogs = c.previousLogs(ctx, s)
	wg.Wait()
}

// calicoNodePods returns the calico-node pods on node, from the informer cache when there is
// one, else with one list per namespace (label and field selector, so only that node's pod).
func (c *Collector) calicoNodePods(ctx context.Context, node string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, ns := range calicoNamespaces {
		if c.cache != nil {
			pods, err := c.cache.pods.Pods(ns).List(calicoNodeSelector)
			if err != nil {
				continue
			}
			for _, p := range pods {
				if p.Spec.NodeName == node {
					out = append(out, p)
				}
			}
			continue
		}
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			LabelSelector: calicoNodeSelector.String(),
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
		})
		if err != nil {
			continue
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

// errIPAMNotConfigured is recorded when the Collector was built without WithCalico.
var errIPAMNotConfigured = errors.New("the collector has no Calico access (built without WithCalico)")

// readIPAM reads Calico IPAM state through package calico: one Overview (the utilization
// and a check, from one read, or from the bot's caches). A failed check still returns the
// utilization part, with the error.
func (c *Collector) readIPAM(ctx context.Context) (*triage.IPAMState, error) {
	if c.extras == nil {
		return nil, errIPAMNotConfigured
	}
	ctx, cancel := context.WithTimeout(ctx, ipamTimeout)
	defer cancel()
	src, err := c.extras.ipamSource(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to calico: %w", err)
	}
	o, err := src.Overview(ctx)
	if err != nil {
		return nil, fmt.Errorf("read calico ipam: %w", err)
	}
	st := ipamStateFrom(o.Utilization, o.Check, o.DatastoreReady)
	if o.CheckErr != nil {
		return st, fmt.Errorf("check calico ipam: %w", o.CheckErr)
	}
	return st, nil
}

// ipamStateFrom converts package calico's results into the triage.IPAMState the rules read. check
// may be nil (then no leak counts); leaked allocations are counted by their block's affine
// node.
func ipamStateFrom(u *calico.Utilization, check *calico.CheckResult, datastoreReady *bool) *triage.IPAMState {
	st := &triage.IPAMState{
		DatastoreReady:    datastoreReady,
		StrictAffinity:    u.StrictAffinity,
		MaxBlocksPerHost:  u.MaxBlocksPerHost,
		NodeBlocks:        map[string]int{},
		LeakedIPsByNode:   map[string]int{},
		EmptyBlocksByNode: map[string]int{},
	}
	for n, k := range u.NodeBlocks {
		st.NodeBlocks[n] = k
	}
	blockNode := map[string]string{}
	for _, p := range u.Pools {
		for _, b := range p.Blocks {
			blockNode[b.CIDR.String()] = b.Node
		}
		if p.CIDR.Bits() == 0 {
			continue // calico's "orphaned" pseudo-pool
		}
		st.Pools = append(st.Pools, triage.PoolUsage{
			Name: p.Name, CIDR: p.CIDR.String(), Disabled: p.Disabled, BlockSize: p.BlockSize,
			Total: clampInt(p.Total), InUse: clampInt(p.InUse),
		})
	}
	for _, b := range u.EmptyBlocks {
		st.EmptyBlocks++
		st.EmptyBlocksByNode[b.Node]++
		if st.EmptyBlockCIDRs == nil {
			st.EmptyBlockCIDRs = map[string][]string{}
		}
		st.EmptyBlockCIDRs[b.Node] = append(st.EmptyBlockCIDRs[b.Node], b.CIDR.String())
	}
	if check != nil {
		st.LeaksChecked = true
		st.LeakedIPs = len(check.LeakedIPs)
		for _, a := range check.LeakedIPs {
			node := blockNode[a.Block]
			if node == "" {
				node = a.Node
			}
			st.LeakedIPsByNode[node]++
		}
	}
	return st
}

// clampInt converts an address count to int, saturating (IPv6 pools exceed int64).
func clampInt(f float64) int {
	const maxInt = int(^uint(0) >> 1)
	if f >= float64(maxInt) {
		return maxInt
	}
	return int(f)
}

// previousLogs reads pods/log?previous=true (tail-limited) for up to maxLogFetches containers,
// concurrently. A failed read is kept as triage.LogTail.Err so the finding can say why.
func (c *Collector) previousLogs(ctx context.Context, s *triage.Snapshot) map[string]triage.LogTail {
	cands := triage.LogCandidates(s)
	if len(cands) == 0 {
		return nil
	}
	pod := s.Pod
	out := map[string]triage.LogTail{}
	if n := s.Node(pod.Spec.NodeName); n != nil && !triage.NodeReady(n) {
		for _, cs := range cands {
			out[cs] = triage.LogTail{Err: fmt.Errorf("node %s is not Ready, so its kubelet cannot serve logs", n.Name)}
		}
		return out
	}
	if len(cands) > maxLogFetches {
		cands = cands[:maxLogFetches]
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, cs := range cands {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			lt := c.previousLog(ctx, pod, name)
			mu.Lock()
			out[name] = lt
			mu.Unlock()
		}(cs)
	}
	wg.Wait()
	return out
}

// previousLog reads one container's previous log.
func (c *Collector) previousLog(ctx context.Context, pod *corev1.Pod, container string) triage.LogTail {
	ctx, cancel := context.WithTimeout(ctx, logTimeout)
	defer cancel()
	tail, limit := int64(previousLogLines), int64(previousLogBytes)
	raw, err := c.client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: container, Previous: true, TailLines: &tail, LimitBytes: &limit,
	}).DoRaw(ctx)
	if err != nil {
		return triage.LogTail{Err: fmt.Errorf("read previous log of container %s: %w", container, err)}
	}
	return triage.LogTail{Lines: splitLogLines(raw, previousLogLines)}
}

// splitLogLines splits a log into at most n last lines, dropping a trailing empty line.
func splitLogLines(raw []byte, n int) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 4096), previousLogBytes+1)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// eventsByUIDIndex indexes the event cache by involvedObject.uid.
const eventsByUIDIndex = "involvedObject.uid"

// startEventCache starts an informer over core/v1 Events about Pods (field selector
// involvedObject.kind=Pod; events.k8s.io/v1 serves the same objects, so one API is enough),
// indexed by involvedObject.uid and stripped like the other caches, and waits for it to sync.
// Listing a pod's events live costs the API server a scan of every event in the namespace per
// request (field selectors are not indexed); from the cache a warm diagnosis reads them with
// no request. It runs until ctx is done.
func (cc *collectorCache) startEventCache(ctx context.Context, client kubernetes.Interface) error {
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
	cc.events, cc.eventsInformer = inf.GetIndexer(), inf
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

// cachedEvents returns the pod's events from the event cache, newest first; ok is false
// without a cache (the direct backend lists them).
func (c *Collector) cachedEvents(pod *corev1.Pod) ([]triage.Event, bool) {
	if c.cache == nil || c.cache.events == nil {
		return nil, false
	}
	objs, err := c.cache.events.ByIndex(eventsByUIDIndex, string(pod.UID))
	if err != nil {
		return nil, false
	}
	events := make([]triage.Event, 0, len(objs))
	for _, o := range objs {
		if e, ok := o.(*corev1.Event); ok {
			events = append(events, eventFromCore(e))
		}
	}
	triage.SortEvents(events)
	return events, true
}
