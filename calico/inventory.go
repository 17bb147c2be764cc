package calico

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// inventory is one read of Calico IPAM state and of what uses its addresses: everything Check
// and Utilization derive from. The Client fills it with fresh lists (readInventory), the Cache
// from its informers (Cache.inventory); inventory.check and inventory.utilization are the only
// code that classifies, so a check answered from the cache and a fresh one agree.
type inventory struct {
	// clusterInfo is ClusterInformation default; nil when it was not read.
	clusterInfo *clusterInfoObject
	// blocks are the IPAMBlocks that are not soft-deleted.
	blocks []*block
	// pools are the IPPools.
	pools []pool
	// handles are the IPAMHandles by object name (the handle ID in lower case); nil when not
	// read.
	handles map[string]handleEntry
	// affinities are the BlockAffinities that are not soft-deleted; config is IPAMConfig
	// default (nil when it does not exist).
	affinities []affinityObject
	config     *ipamConfigObject
	// users is what uses addresses; nil when not read.
	users *addressUse
	// v3 is true for projectcalico.org/v3 objects, whose UIDs Calico clients see unconverted.
	v3 bool
}

// pool is an IPPool as the check and the utilization read it.
type pool struct {
	name      string
	cidr      netip.Prefix // masked
	blockSize int          // spec.blockSize, or Calico's default (26 for IPv4, 122 for IPv6)
	disabled  bool
}

func poolOf(p *poolObject) (pool, error) {
	cidr, err := netip.ParsePrefix(p.Spec.CIDR)
	if err != nil {
		return pool{}, fmt.Errorf("ippool %s: bad cidr %q: %w", p.Metadata.Name, p.Spec.CIDR, err)
	}
	bs := p.Spec.BlockSize
	if bs == 0 {
		bs = 26
		if cidr.Addr().Is6() {
			bs = 122
		}
	}
	return pool{name: p.Metadata.Name, cidr: cidr.Masked(), blockSize: bs, disabled: p.Spec.Disabled}, nil
}

// handleEntry is what a check keeps of one IPAMHandle.
type handleEntry struct {
	// id is spec.handleID, or the object name until spec is read; uid is metadata.uid as
	// stored; rv is metadata.resourceVersion.
	id, uid, rv string
	created     time.Time
	// known is true when spec was read (id is spec.handleID and deleted is spec.deleted); a
	// metadata-only list leaves it false until Client.resolveHandles reads the handles no
	// block references.
	known, deleted bool
}

// handleInfo is h as a report names it: its UID as Calico clients see it (ConvertUID of
// metadata.uid in crd.projectcalico.org/v1).
func (inv *inventory) handleInfo(h handleEntry) HandleInfo {
	uid := h.uid
	if !inv.v3 {
		if u, err := ConvertUID(uid); err == nil {
			uid = u
		}
	}
	return HandleInfo{ID: h.id, UID: &uid, Revision: h.rv, created: h.created}
}

// addressUse is what uses addresses: pods, node tunnels, Windows reservations aside (those
// are in the blocks) and LoadBalancer services.
type addressUse struct {
	// inUse maps an address to its owners ("Workload(ns/pod)", "Node(name)").
	inUse map[netip.Addr][]string
	// pendingPods holds "ns/name" of scheduled pods with no address yet.
	pendingPods            map[string]bool
	tunnelIPs, workloadIPs int
	lbs                    []lbUse
}

// newAddressUse makes an empty addressUse; sizeHint is about how many addresses will be added
// (0 when unknown).
func newAddressUse(sizeHint int) *addressUse {
	return &addressUse{inUse: make(map[netip.Addr][]string, sizeHint), pendingPods: map[string]bool{}}
}

func (u *addressUse) addPod(p PodUse) {
	if p.Pending {
		u.pendingPods[p.Namespace+"/"+p.Name] = true
		return
	}
	o := p.owner()
	for _, ip := range p.IPs {
		u.inUse[ip] = append(u.inUse[ip], o)
		u.workloadIPs++
	}
}

func (u *addressUse) addNode(n nodeUse) {
	o := n.owner()
	for _, ip := range n.ips {
		u.inUse[ip] = append(u.inUse[ip], o)
		u.tunnelIPs++
	}
}

// check classifies every allocation against the address users, like `calicoctl ipam check`
// (see Client.Check for the differences). inv.handles and inv.users must be set.
//
// With every set the result holds every Allocation (CheckResult.Allocations) and the report's
// map by IP, which the release plan and `ipam check --report` read. Without it (an Overview:
// the answers and the bot's cache, which read counts and the lists of problems) those two stay
// nil, and the allocations are built a block at a time and dropped, so that a check at L does
// not hold 152,000 of them at once and the cache's memo keeps only what answers read.
func (inv *inventory) check(opts CheckOptions, every bool) *CheckResult {
	blocks := slices.Clone(inv.blocks)
	slices.SortFunc(blocks, func(a, b *block) int { return a.cidr.Addr().Compare(b.cidr.Addr()) })
	res := &CheckResult{Blocks: len(blocks), AllocationsByNode: map[string]int{}}
	// Sized up front: at L (152,000 allocations) growing these by appending allocated several
	// times their final size per check (calico/BENCHMARKS.md, issue 20).
	n := 0
	for _, b := range blocks {
		for _, idx := range b.spec.Allocations {
			if idx != nil {
				n++
			}
		}
	}
	allocated := make(map[netip.Addr]bool, n)
	for _, b := range blocks {
		if p := b.validate(); len(p) > 0 {
			res.InvalidBlocks = append(res.InvalidBlocks, InvalidBlock{Name: b.name, CIDR: b.cidr.String(), Problems: p})
		}
		for ord, idx := range b.spec.Allocations {
			if idx != nil {
				allocated[ordinalIP(b.cidr, ord)] = true
			}
		}
	}
	var active, all []netip.Prefix
	for _, p := range inv.pools {
		all = append(all, p.cidr)
		if !p.disabled {
			active = append(active, p.cidr)
			res.ActivePools = append(res.ActivePools, p.cidr.String())
		}
	}
	u := inv.users
	res.NodeTunnelIPs, res.WorkloadIPs = u.tunnelIPs, u.workloadIPs

	// LoadBalancer addresses count when Calico could have given them out (see scanLoadBalancers);
	// they are kept apart from u.inUse, which the Cache shares between checks.
	lbOwners := map[netip.Addr][]string{}
	for _, l := range u.lbs {
		counted := false
		for _, ip := range l.ips {
			if allocated[ip] || inAny(all, ip) {
				lbOwners[ip] = append(lbOwners[ip], l.owner())
				counted = true
			}
		}
		if counted {
			res.LoadBalancers++
		}
	}
	ownersOf := func(ip netip.Addr) []string {
		owners := u.inUse[ip]
		if extra := lbOwners[ip]; len(extra) > 0 {
			owners = append(slices.Clip(owners), extra...)
		}
		return owners
	}
	res.InUseIPs = len(u.inUse)
	for ip := range lbOwners {
		if _, ok := u.inUse[ip]; !ok {
			res.InUseIPs++
		}
	}

	handlesInUse := make(map[string]bool, n)
	var batch []Allocation // one block's allocations when not every one is kept
	if every {
		// Exactly n: Report.Allocations points into it, so it must never grow.
		res.Allocations = make([]Allocation, 0, n)
		res.Report.Allocations = make(map[string][]*Allocation, n)
	}
	for _, b := range blocks {
		var allocs []Allocation
		if every {
			start := len(res.Allocations)
			res.Allocations = appendAllocations(res.Allocations, b, handlesInUse)
			allocs = res.Allocations[start:]
		} else {
			batch = appendAllocations(batch[:0], b, handlesInUse)
			allocs = batch
		}
		for i := range allocs {
			a := &allocs[i]
			res.AllocationsByNode[a.Node]++
			if every {
				res.Report.Allocations[a.IP] = append(res.Report.Allocations[a.IP], a)
			}
			ip, _ := parseIP(a.IP)
			if owners := ownersOf(ip); len(owners) > 0 {
				a.InUse = true
				a.Owners = append(a.Owners, owners...)
			}
			switch {
			case a.InUse, a.CoolingDown:
			case a.Pod != "" && u.pendingPods[a.Namespace+"/"+a.Pod]:
				a.InUse = true
				a.Owners = []string{"Workload(" + a.Namespace + "/" + a.Pod + ") without IP yet"}
				res.Pending = append(res.Pending, *a)
			default:
				res.LeakedIPs = append(res.LeakedIPs, *a)
			}
		}
	}
	notAllocated := func(ip netip.Addr) {
		if allocated[ip] {
			return
		}
		use := InUseIP{IP: ip.String(), Owners: ownersOf(ip)}
		if inAny(active, ip) {
			res.InUseNotAllocated = append(res.InUseNotAllocated, use)
		} else {
			res.NotInPool = append(res.NotInPool, use)
		}
	}
	for ip := range u.inUse {
		notAllocated(ip)
	}
	for ip := range lbOwners {
		if _, ok := u.inUse[ip]; !ok {
			notAllocated(ip)
		}
	}

	referenced := make(map[string]bool, len(handlesInUse))
	for id := range handlesInUse {
		referenced[HandleName(id)] = true
		if _, ok := inv.handles[HandleName(id)]; !ok {
			res.MissingHandles = append(res.MissingHandles, id)
		}
	}
	for name, h := range inv.handles {
		switch {
		case referenced[name]:
			res.Handles++
		case !h.deleted: // a soft-deleted handle no block references is on its way out
			res.Handles++
			res.LeakedHandles = append(res.LeakedHandles, inv.handleInfo(h))
		}
	}

	byIP := func(a, b Allocation) int { return compareIPs(a.IP, b.IP) }
	slices.SortFunc(res.LeakedIPs, byIP)
	slices.SortFunc(res.Pending, byIP)
	byUse := func(a, b InUseIP) int { return compareIPs(a.IP, b.IP) }
	slices.SortFunc(res.InUseNotAllocated, byUse)
	slices.SortFunc(res.NotInPool, byUse)
	slices.SortFunc(res.LeakedHandles, func(a, b HandleInfo) int { return strings.Compare(a.ID, b.ID) })
	slices.Sort(res.MissingHandles)
	slices.SortFunc(res.InvalidBlocks, func(a, b InvalidBlock) int { return strings.Compare(a.Name, b.Name) })
	res.Report.LeakedHandles = res.LeakedHandles
	res.Problems = len(res.LeakedIPs) + len(res.InUseNotAllocated) + len(res.NotInPool) +
		len(res.LeakedHandles) + len(res.InvalidBlocks)

	if ci := inv.clusterInfo; ci != nil {
		res.Report.Version = cmp.Or(opts.ReportVersion, ci.Spec.CalicoVersion)
		res.Report.ClusterGUID = ci.Spec.ClusterGUID
		res.Report.ClusterType = ci.Spec.ClusterType
		res.Report.ClusterInfoRevision = ci.Metadata.ResourceVersion
		res.Report.DatastoreLocked = ci.Spec.DatastoreReady != nil && !*ci.Spec.DatastoreReady
	}
	return res
}

// appendAllocations appends one Allocation per allocated ordinal of b (like calicoctl's
// recordAllocation) and records the referenced handle IDs.
func appendAllocations(dst []Allocation, b *block, handles map[string]bool) []Allocation {
	for ord, idx := range b.spec.Allocations {
		if idx == nil {
			continue
		}
		a := allocationAt(b, ord)
		if a.Handle != "" {
			handles[a.Handle] = true
		}
		dst = append(dst, a)
	}
	return dst
}

// allocationAt describes allocated ordinal ord of b. Windows-reserved ordinals are in use,
// with no handle.
func allocationAt(b *block, ord int) Allocation {
	affine := b.affineNode()
	a := Allocation{IP: ordinalIP(b.cidr, ord).String(), Block: b.cidr.String(), Ordinal: ord, Node: affine}
	seq := b.seqOf(ord)
	a.SequenceNumber = &seq
	if at := b.attrs(ord); at != nil {
		if at.HandleID != nil {
			if strings.EqualFold(*at.HandleID, windowsReservedHandle) {
				a.InUse = true
				a.Owners = []string{ownerReservedWindows}
			} else {
				a.Handle = *at.HandleID
			}
		}
		if v := at.Secondary.Node; v != "" {
			a.Node = v
		}
		a.Pod = at.Secondary.Pod
		a.Namespace = at.Secondary.Namespace
		a.Type = at.Secondary.Type
		a.CreationTimestamp = at.Secondary.Timestamp
		a.CoolingDown = at.ReleasedAt != nil
	}
	a.Borrowed = a.Node != affine
	return a
}

func inAny(pools []netip.Prefix, ip netip.Addr) bool {
	for _, p := range pools {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// utilization computes address usage per pool and block and block ownership (see
// Utilization). inv.affinities and inv.config must have been read.
func (inv *inventory) utilization() *Utilization {
	pools := make([]PoolUsage, 0, len(inv.pools))
	for _, p := range inv.pools {
		pools = append(pools, PoolUsage{Name: p.name, CIDR: p.cidr, Disabled: p.disabled, BlockSize: p.blockSize, Total: prefixSize(p.cidr)})
	}
	blocks := make([]BlockUsage, 0, len(inv.blocks))
	for _, b := range inv.blocks {
		alloc, reserved := b.counts()
		u := BlockUsage{Name: b.name, CIDR: b.cidr, Affinity: b.affinity, Node: b.affineNode(),
			Total: blockSize(b.cidr), InUse: alloc, Reserved: reserved}
		u.Free = u.Total - u.InUse
		u.Empty = u.Node != "" && b.reservedOnly()
		blocks = append(blocks, u)
	}
	return utilizationOf(pools, blocks, inv.affinities, inv.config)
}

// Overview is a check and the utilization computed from one read of Calico IPAM state: what a
// diagnosis of a pod with a Calico sandbox failure reads (triage/collect).
type Overview struct {
	// Utilization is always set.
	Utilization *Utilization
	// Check is nil when CheckErr is set (for example pods could not be listed, or
	// ClusterInformation default does not exist). Its Allocations and Report.Allocations are
	// nil: only Client.Check lists every allocation.
	Check    *CheckResult
	CheckErr error
	// DatastoreReady is ClusterInformation default spec.datastoreReady, true when unset (as
	// Calico treats it); nil when ClusterInformation could not be read.
	DatastoreReady *bool
}

// overviewOf derives an Overview from inv; checkErr says why the check part is missing.
func overviewOf(inv *inventory, checkErr error, took time.Duration) *Overview {
	o := &Overview{Utilization: inv.utilization(), CheckErr: checkErr}
	if checkErr == nil {
		o.Check = inv.check(CheckOptions{}, false)
		o.Check.Took = took
	}
	if ci := inv.clusterInfo; ci != nil {
		ready := ci.Spec.DatastoreReady == nil || *ci.Spec.DatastoreReady
		o.DatastoreReady = &ready
	}
	return o
}
