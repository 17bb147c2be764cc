package collect

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/whypending/whypending/calico"
)

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
	c.extras = &collectorExtras{source: src}
	return c
}

// AddressUsers is the pods and nodes of a cached Collector as a calico.Cache reads them, so
// the IPAM cache shares the pod cache instead of watching every pod again; nil for a direct
// Collector.
func (c *Collector) AddressUsers() calico.AddressUsers {
	if c.cache == nil {
		return nil
	}
	return ipamUsers{c.cache}
}

// ipamUsers implements calico.AddressUsers over the collector's informers.
type ipamUsers struct{ cc *collectorCache }

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
func (cc *collectorCache) watchIPAMUse() error {
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

// HasSynced reports whether every informer of a cached Collector has synced (true for a
// direct one).
func (c *Collector) HasSynced() bool {
	if c.cache == nil {
		return true
	}
	for _, inf := range c.cache.informers {
		if !inf.HasSynced() {
			return false
		}
	}
	return c.cache.eventsInformer == nil || c.cache.eventsInformer.HasSynced()
}

// CacheObjects returns how many objects each informer of a cached Collector holds, by resource
// ("pods", "nodes", "events", …); nil for a direct Collector.
func (c *Collector) CacheObjects() map[string]int {
	if c.cache == nil {
		return nil
	}
	out := map[string]int{}
	for name, inf := range c.cache.informers {
		out[name] = len(inf.GetStore().ListKeys())
	}
	if c.cache.eventsInformer != nil {
		out["events"] = len(c.cache.eventsInformer.GetStore().ListKeys())
	}
	return out
}
