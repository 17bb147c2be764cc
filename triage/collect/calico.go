package collect

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/triage"
)

// This file holds the Collector's Calico reads: the calico-node pod on a pod's node, and Calico
// IPAM state through package calico (a fresh read or the bot's watch caches), read only for a
// pod whose sandbox events name Calico (triage.NeedsIPAM). It also lends a cached Collector's
// pods and nodes to the calico.Cache (AddressUsers), so the IPAM cache does not watch every
// pod again.

// ipamTimeout bounds reading Calico IPAM state.
const ipamTimeout = 20 * time.Second

// calicoNodeSelector selects calico-node pods in either install style.
var calicoNodeSelector = labels.SelectorFromSet(labels.Set{"k8s-app": "calico-node"})

// calicoNamespaces are where calico-node runs: calico-system for Tigera operator installs (the
// usual way on current clusters), kube-system for manifest installs (older clusters, and the
// Kubernetes 1.28-and-earlier guides).
var calicoNamespaces = []string{"calico-system", "kube-system"}

// ipamAccess is where a Collector reads Calico IPAM state: a source (WithIPAM), or the REST
// config to build a Calico client from on first use (WithCalico).
type ipamAccess struct {
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
	c.ipam = &ipamAccess{cfg: cfg}
	return c
}

// ipamSource returns where IPAM state comes from, building the Calico client once.
func (x *ipamAccess) ipamSource(ctx context.Context) (IPAMSource, error) {
	x.once.Do(func() {
		if x.source == nil {
			x.source, x.err = calico.NewClient(ctx, x.cfg)
		}
	})
	return x.source, x.err
}

// IPAMSource is where a Collector reads Calico IPAM state for a pod whose sandbox events name
// Calico: a calico.Client (a fresh read, the CLI) or a calico.Cache (the bot's watch caches).
type IPAMSource interface {
	Overview(ctx context.Context) (*calico.Overview, error)
}

var (
	_ IPAMSource = (*calico.Client)(nil)
	_ IPAMSource = (*calico.Cache)(nil)
)

// WithIPAM makes the Collector read Calico IPAM state from src (see WithCalico for a Collector
// that connects on first use). It returns c.
func (c *Collector) WithIPAM(src IPAMSource) *Collector {
	c.ipam = &ipamAccess{source: src}
	return c
}

// AddressUsers is the pods and nodes of a cached Collector as a calico.Cache reads them, so
// the IPAM cache shares the pod cache instead of watching every pod again; nil for a direct
// Collector.
func (c *Collector) AddressUsers() calico.AddressUsers { return c.read.addressUsers() }

// ipamUsers implements calico.AddressUsers over a cacheReader's informers.
type ipamUsers struct{ cc *cacheReader }

func (u ipamUsers) Generation() uint64 { return u.cc.ipamGen.Load() }

func (u ipamUsers) HasSynced() bool {
	return u.cc.informers["pods"].HasSynced() && u.cc.informers["nodes"].HasSynced()
}

func (u ipamUsers) EachPod(fn func(calico.PodUse)) {
	for _, o := range u.cc.podIndex.List() {
		if lp := leanPodOf(o); lp != nil && lp.ipam.ok {
			fn(calico.PodUse{Namespace: lp.namespace.Value(), Name: lp.name, Node: lp.node.Value(), IPs: lp.ipam.ips, Pending: lp.ipam.pending})
		}
	}
}

func (u ipamUsers) EachNode(fn func(name string, annotations map[string]string)) {
	for _, o := range u.cc.informers["nodes"].GetStore().List() {
		if n, ok := o.(*corev1.Node); ok {
			fn(n.Name, n.Annotations)
		}
	}
}

// watchIPAMUse counts changes to what pods and nodes do with Calico addresses in ipamGen: a
// pod added or deleted that can hold an address, a pod whose addresses (or pending state)
// changed, a node added, deleted or re-annotated. Other pod and node updates (status
// heartbeats, readiness) leave the IPAM cache's result valid.
func (cc *cacheReader) watchIPAMUse() error {
	bump := func() { cc.ipamGen.Add(1) }
	podUse := func(obj any) (leanIPAM, bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		lp := leanPodOf(obj)
		if lp == nil {
			return leanIPAM{}, false
		}
		return lp.ipam, true
	}
	_, err := cc.informers["pods"].AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := podUse(obj); ok && u.ok {
				bump()
			}
		},
		UpdateFunc: func(old, obj any) {
			a, _ := podUse(old)
			b, _ := podUse(obj)
			if !a.equal(b) {
				bump()
			}
		},
		DeleteFunc: func(obj any) {
			if u, ok := podUse(obj); !ok || u.ok {
				bump()
			}
		},
	})
	if err != nil {
		return err
	}
	_, err = cc.informers["nodes"].AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { bump() },
		UpdateFunc: func(old, obj any) {
			a, _ := old.(*corev1.Node)
			b, _ := obj.(*corev1.Node)
			if a == nil || b == nil || !maps.Equal(a.Annotations, b.Annotations) {
				bump()
			}
		},
		DeleteFunc: func(any) { bump() },
	})
	return err
}

// calicoNodePods returns the calico-node pods on node, looked for in each of calicoNamespaces.
func (c *Collector) calicoNodePods(ctx context.Context, node string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, ns := range calicoNamespaces {
		pods, err := c.read.podsOnNode(ctx, ns, node, calicoNodeSelector)
		if err != nil {
			continue
		}
		out = append(out, pods...)
	}
	return out
}

// errIPAMNotConfigured is recorded when the Collector was built without WithCalico.
var errIPAMNotConfigured = errors.New("the collector has no Calico access (built without WithCalico)")

// readIPAM reads Calico IPAM state through package calico: one Overview (the utilization
// and a check, from one read, or from the bot's caches). A failed check still returns the
// utilization part, with the error.
func (c *Collector) readIPAM(ctx context.Context) (*triage.IPAMState, error) {
	if c.ipam == nil {
		return nil, errIPAMNotConfigured
	}
	ctx, cancel := context.WithTimeout(ctx, ipamTimeout)
	defer cancel()
	src, err := c.ipam.ipamSource(ctx)
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
