package calico

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// AddressUsers is a cached view of what uses pod-network addresses, kept by the caller's own
// informers (in the bot, triage/collect's pod and node caches), so that a Cache does not watch
// every pod a second time.
type AddressUsers interface {
	// Generation changes whenever what EachPod or EachNode would report may have changed.
	Generation() uint64
	// EachPod calls fn with the address use of every pod PodUseOf accepts.
	EachPod(fn func(PodUse))
	// EachNode calls fn with every node's name and annotations (read-only).
	EachNode(fn func(name string, annotations map[string]string))
	// HasSynced reports whether the caches behind EachPod and EachNode have synced.
	HasSynced() bool
}

// Cache answers Check, Utilization and Overview from informers instead of lists: IPAMBlocks,
// BlockAffinities, IPAMHandles (metadata, spec.handleID and spec.deleted only), IPPools,
// IPAMConfig, ClusterInformation and LoadBalancer Services, plus the pods and nodes of an
// AddressUsers. A warm answer sends no request. The classification is the live Client's
// (inventory.check, inventory.utilization), so a check from the cache and a fresh one agree
// on a cluster at rest.
//
// A result is computed once per change of the caches and shared (callers treat it as
// read-only): concurrent callers wait for one computation, and a caller is never given a result
// computed from a snapshot taken before it asked while the caches have changed since.
//
// A Cache is for reading only. Repairs (Client.ReleaseIPs, ReleaseEmptyBlocks, the actions
// package) re-read live objects and write with compare-and-set; nothing in a Cache is ever
// used for a write.
type Cache struct {
	c     *Client
	users AddressUsers

	// informers are every informer, named by resource; the stores below are theirs.
	informers []namedInformer

	blocks, handles, pools, affinities, configs, clusterInfos, services cache.Store

	// gen counts changes to the Calico objects and LoadBalancer services.
	gen atomic.Uint64

	mu   sync.Mutex // held while computing
	memo *cacheMemo
}

type namedInformer struct {
	name string
	inf  cache.SharedIndexInformer
}

// cacheMemo is the last computed answer and the state it was computed from.
type cacheMemo struct {
	gen, usersGen uint64
	at            time.Time // when its snapshot of the caches was taken
	overview      *Overview
	err           error
}

// NewCache starts informers over c's Calico objects and LoadBalancer services; pods and nodes
// come from users. They run until ctx is done. NewCache does not wait: see WaitForSync and
// HasSynced.
func NewCache(ctx context.Context, c *Client, users AddressUsers) *Cache {
	k := &Cache{c: c, users: users}
	dyn := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, 0)
	add := func(name, resource string, transform cache.TransformFunc) cache.Store {
		inf := dyn.ForResource(c.gvr(resource)).Informer()
		k.track(name, inf, transform)
		return inf.GetStore()
	}
	k.blocks = add(resBlocks, resBlocks, cachedTransform(func(u *unstructured.Unstructured) (*block, error) {
		var o blockObject
		if err := fromUnstructured(u, &o); err != nil {
			return nil, err
		}
		if o.Spec.Deleted {
			return nil, nil
		}
		return o.parse()
	}))
	k.handles = add(resHandles, resHandles, transformHandle)
	k.pools = add(resPools, resPools, cachedTransform(func(u *unstructured.Unstructured) (*pool, error) {
		var o poolObject
		if err := fromUnstructured(u, &o); err != nil {
			return nil, err
		}
		p, err := poolOf(&o)
		return &p, err
	}))
	k.affinities = add(resAffinities, resAffinities, cachedTransform(func(u *unstructured.Unstructured) (*affinityObject, error) {
		var o affinityObject
		if err := fromUnstructured(u, &o); err != nil {
			return nil, err
		}
		return &o, nil
	}))
	k.configs = add("ipamconfigs", c.resIPAMConfig(), cachedTransform(func(u *unstructured.Unstructured) (*ipamConfigObject, error) {
		var o ipamConfigObject
		return &o, fromUnstructured(u, &o)
	}))
	k.clusterInfos = add(resClusterInfo, resClusterInfo, cachedTransform(func(u *unstructured.Unstructured) (*clusterInfoObject, error) {
		var o clusterInfoObject
		return &o, fromUnstructured(u, &o)
	}))

	core := informers.NewSharedInformerFactory(c.kube, 0)
	svc := core.Core().V1().Services().Informer()
	k.track("services", svc, func(obj any) (any, error) {
		s, ok := obj.(*corev1.Service)
		if !ok {
			return obj, nil // a tombstone, or already transformed
		}
		l, _ := lbUseOf(s)
		return &cached[lbUse]{name: s.Name, namespace: s.Namespace, rv: s.ResourceVersion, val: &l}, nil
	})
	k.services = svc.GetStore()

	dyn.Start(ctx.Done())
	core.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		dyn.Shutdown()
		core.Shutdown()
	}()
	return k
}

// track registers inf with transform and an event handler that counts changes.
func (k *Cache) track(name string, inf cache.SharedIndexInformer, transform cache.TransformFunc) {
	_ = inf.SetTransform(transform) // only fails once the informer has started
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.gen.Add(1) },
		UpdateFunc: func(any, any) { k.gen.Add(1) },
		DeleteFunc: func(any) { k.gen.Add(1) },
	})
	k.informers = append(k.informers, namedInformer{name, inf})
}

// HasSynced reports whether every informer, and users, has synced.
func (k *Cache) HasSynced() bool {
	for _, ni := range k.informers {
		if !ni.inf.HasSynced() {
			return false
		}
	}
	return k.users.HasSynced()
}

// WaitForSync waits until HasSynced or ctx is done (then it returns an error naming the
// caches that have not synced).
func (k *Cache) WaitForSync(ctx context.Context) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !k.HasSynced() {
		select {
		case <-ctx.Done():
			var pending []string
			for _, ni := range k.informers {
				if !ni.inf.HasSynced() {
					pending = append(pending, ni.name)
				}
			}
			if !k.users.HasSynced() {
				pending = append(pending, "pods and nodes")
			}
			return fmt.Errorf("calico caches not synced (%v): %w", pending, context.Cause(ctx))
		case <-t.C:
		}
	}
	return nil
}

// Objects returns the number of objects in each of the Cache's own informers, by resource
// ("ipamblocks", "ipamhandles", …, "services"), and whether each has synced.
func (k *Cache) Objects() (objects map[string]int, synced map[string]bool) {
	objects, synced = map[string]int{}, map[string]bool{}
	for _, ni := range k.informers {
		objects[ni.name] = len(ni.inf.GetStore().ListKeys())
		synced[ni.name] = ni.inf.HasSynced()
	}
	return objects, synced
}

// Check is Client.Check answered from the caches: CheckResult.Cached is true, and Took is how
// long computing it from the caches took.
func (k *Cache) Check(ctx context.Context, opts CheckOptions) (*CheckResult, error) {
	o, err := k.Overview(ctx)
	if err != nil {
		return nil, err
	}
	if o.CheckErr != nil {
		return nil, o.CheckErr
	}
	if opts.ReportVersion == "" || opts.ReportVersion == o.Check.Report.Version {
		return o.Check, nil
	}
	res := *o.Check // shallow: only the report's version differs
	res.Report.Version = opts.ReportVersion
	return &res, nil
}

// Utilization is Client.Utilization answered from the caches.
func (k *Cache) Utilization(ctx context.Context) (*Utilization, error) {
	o, err := k.Overview(ctx)
	if err != nil {
		return nil, err
	}
	return o.Utilization, nil
}

// errNotSynced is returned while the caches are still filling.
var errNotSynced = errors.New("the calico ipam caches have not synced yet")

// Overview is Client.Overview answered from the caches: the shared result computed for the
// current state of the caches, or for a state seen after the call began.
func (k *Cache) Overview(ctx context.Context) (*Overview, error) {
	asked := time.Now()
	if !k.HasSynced() {
		return nil, errNotSynced
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	gen, usersGen := k.gen.Load(), k.users.Generation()
	if m := k.memo; m != nil && (m.gen == gen && m.usersGen == usersGen || !m.at.Before(asked)) {
		return m.overview, m.err
	}
	start := time.Now()
	inv, checkErr, err := k.inventory()
	m := &cacheMemo{gen: gen, usersGen: usersGen, at: start, err: err}
	if err == nil {
		m.overview = overviewOf(inv, checkErr, time.Since(start))
		if m.overview.Check != nil {
			m.overview.Check.Cached = true
		}
	}
	k.memo = m
	return m.overview, m.err
}

// inventory snapshots the caches. Like Client.readInventory, checkErr is what only the check
// lacks (ClusterInformation default does not exist).
func (k *Cache) inventory() (inv *inventory, checkErr, err error) {
	// The maps are sized up front: growing them allocated about three times their final size
	// per computation at L (calico/BENCHMARKS.md, issue 20). Each allocation has a handle and
	// most have an address user, so the handle count sizes both.
	handles := k.handles.List()
	inv = &inventory{handles: make(map[string]handleEntry, len(handles)), users: newAddressUse(len(handles)), v3: k.c.v3}
	var errs []error
	for _, o := range k.blocks.List() {
		if b, err := cachedValue[block](o); err != nil {
			errs = append(errs, err)
		} else if b != nil {
			inv.blocks = append(inv.blocks, b)
		}
	}
	for _, o := range k.pools.List() {
		if p, err := cachedValue[pool](o); err != nil {
			errs = append(errs, err)
		} else if p != nil {
			inv.pools = append(inv.pools, *p)
		}
	}
	// In the API server's order, by name, like a list.
	slices.SortFunc(inv.pools, func(a, b pool) int { return strings.Compare(a.name, b.name) })
	for _, o := range handles {
		if h, ok := o.(*cachedHandle); ok {
			inv.handles[h.name] = handleEntry{id: h.id, uid: h.uid, rv: h.rv, created: time.Unix(h.created, 0), known: true, deleted: h.deleted}
		}
	}
	for _, o := range k.affinities.List() {
		if a, _ := cachedValue[affinityObject](o); a != nil && !a.deleted() {
			inv.affinities = append(inv.affinities, *a)
		}
	}
	if o, ok, _ := k.configs.GetByKey("default"); ok {
		inv.config, _ = cachedValue[ipamConfigObject](o)
	}
	o, ok, _ := k.clusterInfos.GetByKey("default")
	if ok {
		inv.clusterInfo, _ = cachedValue[clusterInfoObject](o)
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	if inv.clusterInfo == nil {
		checkErr = fmt.Errorf("read clusterinformation: %w", ErrNotInitialized)
	}
	k.users.EachPod(inv.users.addPod)
	k.users.EachNode(func(name string, annotations map[string]string) {
		inv.users.addNode(nodeUseOf(name, annotations))
	})
	for _, o := range k.services.List() {
		if l, _ := cachedValue[lbUse](o); l != nil && len(l.ips) > 0 {
			inv.users.lbs = append(inv.users.lbs, *l)
		}
	}
	return inv, checkErr, nil
}

// cached is what the Cache's informers store: the object's name, namespace and
// resourceVersion (for the informer's keys) and the part the check reads (val, nil for an
// object the check skips, such as a soft-deleted block), or why it could not be read.
type cached[T any] struct {
	name, namespace, rv string
	val                 *T
	err                 error
}

// GetObjectMeta makes cached a metav1.ObjectMetaAccessor, which is what the informer's store
// needs to key it.
func (o *cached[T]) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: o.name, Namespace: o.namespace, ResourceVersion: o.rv}
}

// cachedTransform turns fn into an informer transform: each object the watch delivers is
// replaced by a *cached[T]. Tombstones and objects already transformed pass through (a
// transform must be idempotent).
func cachedTransform[T any](fn func(*unstructured.Unstructured) (*T, error)) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		v, err := fn(u)
		if err != nil {
			err = fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		return &cached[T]{name: u.GetName(), namespace: u.GetNamespace(), rv: u.GetResourceVersion(), val: v, err: err}, nil
	}
}

// cachedHandle is what the Cache keeps of an IPAMHandle: there are as many as allocations, so
// it is a flat struct (no spec.block) whose ID shares the name's memory when they are equal.
type cachedHandle struct {
	name, id, uid, rv string
	created           int64 // metadata.creationTimestamp, Unix seconds (its precision)
	deleted           bool
}

// GetObjectMeta: see cached.GetObjectMeta.
func (h *cachedHandle) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: h.name, ResourceVersion: h.rv}
}

// transformHandle is the IPAMHandle informer's transform.
func transformHandle(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	h := &cachedHandle{name: u.GetName(), uid: string(u.GetUID()), rv: u.GetResourceVersion(), created: u.GetCreationTimestamp().Unix()}
	h.id, _, _ = unstructured.NestedString(u.Object, "spec", "handleID")
	if h.id == h.name {
		h.id = h.name
	}
	h.deleted, _, _ = unstructured.NestedBool(u.Object, "spec", "deleted")
	return h, nil
}

// cachedValue returns the value of a store item.
func cachedValue[T any](obj any) (*T, error) {
	o, ok := obj.(*cached[T])
	if !ok {
		return nil, nil
	}
	return o.val, o.err
}

// fromUnstructured decodes u into the struct v the way a list response is decoded (JSON), so
// the cache reads exactly what the live client reads.
func fromUnstructured(u *unstructured.Unstructured, v any) error {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
