package calico

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckOptions tune Check.
type CheckOptions struct {
	// ReportVersion is written as the report's "version". calicoctl ipam release
	// --from-report refuses a report whose version differs from its own unless --force, so the
	// default (empty) is ClusterInformation spec.calicoVersion, which matches the cluster's
	// calicoctl.
	ReportVersion string
}

// Allocation is one allocated address of an IPAMBlock, cross-referenced with what uses it. Its
// JSON form is calicoctl's report schema (ipam check -o), so `calicoctl ipam release
// --from-report` accepts reports written by CheckResult.WriteReport.
type Allocation struct {
	// IP is the address: block base address plus ordinal, in canonical form.
	IP string `json:"ip"`
	// Handle is the attribute's handle_id (empty for Windows-reserved ordinals).
	Handle string `json:"handle,omitempty"`
	// SequenceNumber is spec.sequenceNumberForAllocation[ordinal] (0 when missing).
	SequenceNumber *uint64 `json:"sequenceNumber,omitempty"`
	// Pod, Namespace, Type and CreationTimestamp are the attribute's secondary pod,
	// namespace, type and timestamp ("2006-01-02 15:04:05.999 +0000 UTC" as the CNI writes it).
	Pod       string `json:"pod,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Node is secondary.node, else the block's affine node.
	Node              string `json:"node,omitempty"`
	Type              string `json:"type,omitempty"`
	CreationTimestamp string `json:"creationTimestamp,omitempty"`
	// InUse is true when a pod, node, LoadBalancer service or Windows reservation uses the
	// address, or when the pod the attributes name exists but has no address yet (CNI ADD in
	// flight).
	InUse bool `json:"inUse"`
	// Borrowed is true when Node differs from the block's affine node.
	Borrowed bool `json:"borrowed,omitempty"`
	// CoolingDown is true for an ordinal released but still in Calico's IP cooldown.
	CoolingDown bool `json:"coolingDown,omitempty"`
	// Owners name what uses the address: "Workload(ns/pod)", "Node(name)",
	// "Service(ns/name)", "Reserved for Windows"; null when not in use.
	Owners []string `json:"owners"`

	// Block is the CIDR of the IPAMBlock that holds the allocation.
	Block string `json:"-"`
	// Ordinal is the address's index in the block.
	Ordinal int `json:"-"`
}

// HandleInfo identifies an IPAMHandle object. The field names (no JSON tags) are calicoctl's.
type HandleInfo struct {
	// ID is spec.handleID.
	ID string
	// UID is the UID as Calico clients see it: ConvertUID(metadata.uid) for
	// crd.projectcalico.org/v1, metadata.uid for projectcalico.org/v3.
	UID *string
	// Revision is metadata.resourceVersion.
	Revision string

	created time.Time // metadata.creationTimestamp
}

// Created is the handle's metadata.creationTimestamp as the check read it; zero for a handle
// read from a report file (calicoctl's schema does not carry it).
func (h HandleInfo) Created() time.Time { return h.created }

// Report is calicoctl's `ipam check -o` JSON schema (stable from v3.26 to v3.32).
type Report struct {
	Version             string                   `json:"version"`
	ClusterGUID         string                   `json:"clusterGUID"`
	DatastoreLocked     bool                     `json:"datastoreLocked"`
	ClusterInfoRevision string                   `json:"clusterInformationRevision"`
	ClusterType         string                   `json:"clusterType"`
	Allocations         map[string][]*Allocation `json:"allocations"`
	LeakedHandles       []HandleInfo             `json:"leakedHandles,omitempty"`
}

// InUseIP is an address something uses but no block allocates.
type InUseIP struct {
	IP     string
	Owners []string
}

// InvalidBlock is a block that breaks an IPAMBlock invariant.
type InvalidBlock struct {
	// Name and CIDR identify the IPAMBlock.
	Name, CIDR string
	Problems   []string
}

// CheckResult is the outcome of Check.
type CheckResult struct {
	// Report is the calicoctl-schema report: every allocation, in use or not, keyed by IP.
	Report Report
	// Allocations is every allocation, sorted by block then ordinal; Report points into it.
	Allocations []Allocation

	// LeakedIPs are allocations nothing uses (not in use, not cooling down, no pending pod),
	// sorted by IP. ReleaseIPs takes them.
	LeakedIPs []Allocation
	// Pending are allocations no address user matches but whose attributes name a pod that
	// exists, is scheduled, not finished and has no address yet: the CNI ADD is in flight.
	// They are in use, not leaked.
	Pending []Allocation
	// InUseNotAllocated are addresses used by a pod, node or service, inside an active pool,
	// that no block allocates. Never released automatically.
	InUseNotAllocated []InUseIP
	// NotInPool are used addresses outside every active pool and not allocated (calicoctl's
	// "not in active IP pools").
	NotInPool []InUseIP
	// LeakedHandles are IPAMHandles no block attribute references.
	LeakedHandles []HandleInfo
	// MissingHandles are handle IDs block attributes reference with no IPAMHandle object
	// (reported, not counted as problems, like calicoctl).
	MissingHandles []string
	// InvalidBlocks are blocks that break the allocations/unallocated/attributes invariants.
	InvalidBlocks []InvalidBlock
	// Problems is the calicoctl problem count: leaked IPs + in-use-not-allocated + not in
	// pool + leaked handles, plus invalid blocks.
	Problems int

	// Counts for the text output.
	Blocks, Handles, NodeTunnelIPs, WorkloadIPs, LoadBalancers, InUseIPs int
	ActivePools                                                          []string
	// AllocationsByNode counts allocations by Allocation.Node.
	AllocationsByNode map[string]int
	// Took is the wall time of the check.
	Took time.Duration
}

// ownerReservedWindows is calicoctl's owner name for Windows-reserved ordinals.
const ownerReservedWindows = "Reserved for Windows"

// checkState collects the inputs of a check.
type checkState struct {
	mu           sync.Mutex
	allocs       []Allocation
	handlesInUse map[string]bool       // handle IDs referenced by block attributes
	handles      map[string]HandleInfo // by object name (the ID in lower case)
	activePools  []netip.Prefix
	allPools     []netip.Prefix
	invalid      []InvalidBlock
	blocks       int

	inUse         map[netip.Addr][]string // address -> owners
	pendingPods   map[string]bool         // "ns/name" of scheduled pods with no address yet
	tunnelIPs     int
	workloadIPs   int
	loadBalancers int
	lbIPs         []lbUse
}

// Check compares IPAM allocations with what uses addresses, like `calicoctl ipam check`, with
// these differences: IPv6 tunnel annotations count as in use; Windows-reserved ordinals are in
// use; an allocation whose attributes name an existing pod that has no address yet is pending,
// not leaked; LoadBalancer ingress addresses count when they are inside a pool or allocated
// (KubeControllersConfiguration is not needed); broken block invariants are problems.
//
// It reads ClusterInformation default, then IPAMBlocks, IPAMHandle metadata and IPPools
// concurrently and, once the blocks are read, pods, node metadata and services: pods come
// after blocks, so a pod whose CNI ADD wrote an allocation the check saw is also seen. Every
// list is paginated; pods are listed per namespace, a few at a time.
func (c *Client) Check(ctx context.Context, opts CheckOptions) (*CheckResult, error) {
	start := time.Now()
	ci, err := c.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	st := &checkState{
		handlesInUse: map[string]bool{},
		handles:      map[string]HandleInfo{},
		inUse:        map[netip.Addr][]string{},
		pendingPods:  map[string]bool{},
	}

	// Handles and pools are read alongside the blocks. Pods, nodes and services are read
	// only once the blocks are: the pod of any CNI ADD whose allocation the block list shows
	// exists by then, so an allocation in flight is seen as pending, not leaked.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.loadHandles(gctx, st) })
	g.Go(func() error { return c.loadPools(gctx, st) })
	g.Go(func() error {
		if err := c.loadBlocks(gctx, st); err != nil {
			return err
		}
		users, uctx := errgroup.WithContext(gctx)
		users.Go(func() error {
			return c.scanAllPods(uctx, func(p podUse) {
				st.mu.Lock()
				defer st.mu.Unlock()
				if p.pending {
					st.pendingPods[p.namespace+"/"+p.name] = true
					return
				}
				o := p.owner()
				for _, ip := range p.ips {
					st.inUse[ip] = append(st.inUse[ip], o)
					st.workloadIPs++
				}
			})
		})
		users.Go(func() error {
			return c.scanNodes(uctx, func(n nodeUse) {
				st.mu.Lock()
				defer st.mu.Unlock()
				o := n.owner()
				for _, ip := range n.ips {
					st.inUse[ip] = append(st.inUse[ip], o)
					st.tunnelIPs++
				}
			})
		})
		users.Go(func() error {
			return c.scanLoadBalancers(uctx, func(l lbUse) {
				st.mu.Lock()
				defer st.mu.Unlock()
				st.lbIPs = append(st.lbIPs, l)
			})
		})
		return users.Wait()
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := c.resolveHandles(ctx, st); err != nil {
		return nil, err
	}

	res := st.classify()
	res.Report.Version = cmp.Or(opts.ReportVersion, ci.Spec.CalicoVersion)
	res.Report.ClusterGUID = ci.Spec.ClusterGUID
	res.Report.ClusterType = ci.Spec.ClusterType
	res.Report.ClusterInfoRevision = ci.Metadata.ResourceVersion
	res.Report.DatastoreLocked = ci.Spec.DatastoreReady != nil && !*ci.Spec.DatastoreReady
	res.Took = time.Since(start)
	return res, nil
}

// ClusterInfo is Calico's ClusterInformation "default".
type ClusterInfo struct {
	// ClusterGUID, ClusterType and CalicoVersion are the spec fields of the same names.
	ClusterGUID, ClusterType, CalicoVersion string
	// DatastoreReady is spec.datastoreReady (nil when unset, which Calico treats as ready).
	DatastoreReady *bool
	// Revision is metadata.resourceVersion (a calicoctl report's clusterInformationRevision).
	Revision string
}

// ClusterInfo reads ClusterInformation default; ErrNotInitialized when it does not exist.
func (c *Client) ClusterInfo(ctx context.Context) (*ClusterInfo, error) {
	o, err := c.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	return &ClusterInfo{ClusterGUID: o.Spec.ClusterGUID, ClusterType: o.Spec.ClusterType, CalicoVersion: o.Spec.CalicoVersion,
		DatastoreReady: o.Spec.DatastoreReady, Revision: o.Metadata.ResourceVersion}, nil
}

func (c *Client) clusterInfo(ctx context.Context) (*clusterInfoObject, error) {
	ci, err := getRaw[clusterInfoObject](ctx, c, resClusterInfo, "default")
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("read clusterinformation: %w", ErrNotInitialized)
		}
		return nil, fmt.Errorf("read clusterinformation default: %w", err)
	}
	return ci, nil
}

// loadHandles lists IPAMHandle metadata only (names, UIDs, resourceVersions, as protobuf): a
// handle's name is its ID in lower case, which is all the check needs except for handles no
// block references, whose exact IDs (and soft-deleted state) resolveHandles reads afterwards.
// With a warm watch cache this costs the API server and the client about half of a full list.
func (c *Client) loadHandles(ctx context.Context, st *checkState) error {
	m := map[string]HandleInfo{}
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		list, err := c.meta.Resource(c.gvr(resHandles)).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list ipamhandles: %w", err)
		}
		for i := range list.Items {
			o := &list.Items[i].ObjectMeta
			m[o.Name] = c.handleInfo(o.Name, string(o.UID), o.ResourceVersion, o.CreationTimestamp.Time)
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	st.mu.Lock()
	st.handles = m
	st.mu.Unlock()
	return nil
}

// resolveHandles reads the exact spec.handleID of the handles no block references, and drops
// soft-deleted ones: one get each, or one full list when there are many.
func (c *Client) resolveHandles(ctx context.Context, st *checkState) error {
	referenced := make(map[string]bool, len(st.handlesInUse))
	for id := range st.handlesInUse {
		referenced[HandleName(id)] = true
	}
	leaked := map[string]bool{}
	for name := range st.handles {
		if !referenced[name] {
			leaked[name] = true
		}
	}
	if len(leaked) == 0 {
		return nil
	}
	var mu sync.Mutex
	update := func(name string, h *handleMeta) {
		mu.Lock()
		defer mu.Unlock()
		if h == nil || h.Spec.Deleted {
			delete(st.handles, name)
			return
		}
		st.handles[name] = c.handleInfo(h.Spec.HandleID, h.Metadata.UID, h.Metadata.ResourceVersion, parseTime(h.Metadata.CreationTimestamp))
	}
	if len(leaked) > 200 {
		for name := range leaked {
			delete(st.handles, name) // re-added below if it still exists
		}
		_, err := listAll(ctx, c, resHandles, func(h *handleMeta) error {
			if leaked[h.Metadata.Name] {
				update(h.Metadata.Name, h)
			}
			return nil
		})
		return err
	}
	names := make([]string, 0, len(leaked))
	for name := range leaked {
		names = append(names, name)
	}
	return forEach(ctx, 16, names, func(ctx context.Context, name string) error {
		h, err := getRaw[handleMeta](ctx, c, resHandles, name)
		if isNotFound(err) {
			update(name, nil)
			return nil
		}
		if err != nil {
			return fmt.Errorf("get ipamhandle %s: %w", name, err)
		}
		update(name, h)
		return nil
	})
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
}

func (c *Client) handleInfo(id, uid, rv string, created time.Time) HandleInfo {
	if !c.v3 {
		if u, err := ConvertUID(uid); err == nil {
			uid = u
		}
	}
	return HandleInfo{ID: id, UID: &uid, Revision: rv, created: created}
}

func (c *Client) loadPools(ctx context.Context, st *checkState) error {
	var active, all []netip.Prefix
	_, err := listAll(ctx, c, resPools, func(p *poolObject) error {
		cidr, err := netip.ParsePrefix(p.Spec.CIDR)
		if err != nil {
			return fmt.Errorf("ippool %s: bad cidr %q: %w", p.Metadata.Name, p.Spec.CIDR, err)
		}
		all = append(all, cidr.Masked())
		if !p.Spec.Disabled {
			active = append(active, cidr.Masked())
		}
		return nil
	})
	st.mu.Lock()
	st.activePools, st.allPools = active, all
	st.mu.Unlock()
	return err
}

func (c *Client) loadBlocks(ctx context.Context, st *checkState) error {
	var allocs []Allocation
	handles := map[string]bool{}
	var invalid []InvalidBlock
	n := 0
	_, err := listAll(ctx, c, resBlocks, func(o *blockObject) error {
		if o.Spec.Deleted {
			return nil
		}
		b, err := o.parse()
		if err != nil {
			return err
		}
		n++
		if p := b.validate(); len(p) > 0 {
			invalid = append(invalid, InvalidBlock{Name: b.name, CIDR: b.cidr.String(), Problems: p})
		}
		allocs = appendAllocations(allocs, b, handles)
		return nil
	})
	st.mu.Lock()
	st.allocs, st.handlesInUse, st.invalid, st.blocks = allocs, handles, invalid, n
	st.mu.Unlock()
	return err
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

// classify turns the collected state into a CheckResult.
func (st *checkState) classify() *CheckResult {
	res := &CheckResult{
		Allocations:       st.allocs,
		Blocks:            st.blocks,
		Handles:           len(st.handles),
		NodeTunnelIPs:     st.tunnelIPs,
		WorkloadIPs:       st.workloadIPs,
		InvalidBlocks:     st.invalid,
		AllocationsByNode: map[string]int{},
	}
	for _, p := range st.activePools {
		res.ActivePools = append(res.ActivePools, p.String())
	}
	allocated := make(map[netip.Addr]bool, len(st.allocs))
	for i := range st.allocs {
		if ip, ok := parseIP(st.allocs[i].IP); ok {
			allocated[ip] = true
		}
	}
	for _, l := range st.lbIPs {
		counted := false
		for _, ip := range l.ips {
			if allocated[ip] || inAny(st.allPools, ip) {
				st.inUse[ip] = append(st.inUse[ip], l.owner())
				counted = true
			}
		}
		if counted {
			st.loadBalancers++
		}
	}
	res.LoadBalancers = st.loadBalancers
	res.InUseIPs = len(st.inUse)

	res.Report.Allocations = make(map[string][]*Allocation, len(st.allocs))
	for i := range st.allocs {
		a := &st.allocs[i]
		res.AllocationsByNode[a.Node]++
		res.Report.Allocations[a.IP] = append(res.Report.Allocations[a.IP], a)
		ip, _ := parseIP(a.IP)
		if owners := st.inUse[ip]; len(owners) > 0 {
			a.InUse = true
			a.Owners = append(a.Owners, owners...)
		}
		switch {
		case a.InUse, a.CoolingDown:
		case a.Pod != "" && st.pendingPods[a.Namespace+"/"+a.Pod]:
			a.InUse = true
			a.Owners = []string{"Workload(" + a.Namespace + "/" + a.Pod + ") without IP yet"}
			res.Pending = append(res.Pending, *a)
		default:
			res.LeakedIPs = append(res.LeakedIPs, *a)
		}
	}
	for ip, owners := range st.inUse {
		if allocated[ip] {
			continue
		}
		u := InUseIP{IP: ip.String(), Owners: owners}
		if inAny(st.activePools, ip) {
			res.InUseNotAllocated = append(res.InUseNotAllocated, u)
		} else {
			res.NotInPool = append(res.NotInPool, u)
		}
	}
	referenced := make(map[string]bool, len(st.handlesInUse))
	for id := range st.handlesInUse {
		referenced[HandleName(id)] = true
		if _, ok := st.handles[HandleName(id)]; !ok {
			res.MissingHandles = append(res.MissingHandles, id)
		}
	}
	for name, h := range st.handles {
		if !referenced[name] {
			res.LeakedHandles = append(res.LeakedHandles, h)
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
	return res
}

func compareIPs(a, b string) int {
	x, _ := parseIP(a)
	y, _ := parseIP(b)
	return x.Compare(y)
}

// WriteReport writes the calicoctl-schema JSON report (`calicoctl ipam check -o`), indented
// like calicoctl's.
func (r *CheckResult) WriteReport(w io.Writer) error {
	b, err := json.MarshalIndent(r.Report, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// ReadReport decodes a calicoctl-schema report, from WriteReport or `calicoctl ipam check -o`.
func ReadReport(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("decode report: %w", err)
	}
	return &rep, nil
}

// Leaked returns the report's allocations that are neither in use nor cooling down, sorted by
// IP. Their Block is empty (the schema does not carry it); ReleaseIPs finds the block by address.
func (r *Report) Leaked() []Allocation {
	var out []Allocation
	for _, allocs := range r.Allocations {
		for _, a := range allocs {
			if a != nil && !a.InUse && !a.CoolingDown {
				out = append(out, *a)
			}
		}
	}
	slices.SortFunc(out, func(a, b Allocation) int { return compareIPs(a.IP, b.IP) })
	return out
}

// Detail selects how much CheckResult.WriteText prints.
type Detail int

// Detail levels, like calicoctl's flags.
const (
	// Summary prints counts only.
	Summary Detail = iota
	// ProblemIPs also prints every problem address (--show-problem-ips).
	ProblemIPs
	// AllIPs also prints every allocation and owner (--show-all-ips).
	AllIPs
)

// WriteText prints the result the way `calicoctl ipam check` does, plus the lines for what
// calicoctl lacks (pending allocations, invalid blocks). The last line is "Check complete;
// found N problems.".
func (r *CheckResult) WriteText(w io.Writer, d Detail) error {
	ew := &errWriter{w: w}
	p := ew.printf
	p("Checking IPAM for inconsistencies...\n\n")
	p("Loading all IPAM blocks...\n")
	p("Found %d IPAM blocks.\n", r.Blocks)
	if d >= AllIPs {
		for i := range r.Allocations {
			a := &r.Allocations[i]
			p("  %s allocated; attrs %s\n", a.IP, a.attrString())
		}
	}
	p("IPAM blocks record %d allocations.\n\n", len(r.Allocations))
	p("Loading all IPAM pools...\n")
	for _, c := range r.ActivePools {
		p("  %s\n", c)
	}
	p("Found %d active IP pools.\n\n", len(r.ActivePools))
	p("Loading all nodes.\nFound %d node tunnel IPs.\n\n", r.NodeTunnelIPs)
	p("Loading all service load balancer IPs.\nFound %d service load balancer.\n\n", r.LoadBalancers)
	p("Loading all workload endpoints.\nFound %d workload IPs.\n", r.WorkloadIPs)
	p("Workloads and nodes are using %d IPs.\n\n", r.InUseIPs)
	p("Loading all handles\n")
	const top = 20
	p("Looking for top (up to %d) nodes by allocations...\n", top)
	nodes := make([]string, 0, len(r.AllocationsByNode))
	for n := range r.AllocationsByNode {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b string) int {
		return cmp.Or(cmp.Compare(r.AllocationsByNode[b], r.AllocationsByNode[a]), strings.Compare(a, b))
	})
	for i, n := range nodes {
		if i >= top {
			break
		}
		p("  %s has %d allocations\n", n, r.AllocationsByNode[n])
	}
	if len(nodes) > 0 {
		p("Node with most allocations has %d; median is %d\n", r.AllocationsByNode[nodes[0]], r.AllocationsByNode[nodes[len(nodes)/2]])
	}
	p("\nScanning for IPs that are allocated but not actually in use...\n")
	if d >= ProblemIPs {
		for i := range r.LeakedIPs {
			p("  %s leaked; attrs %s\n", r.LeakedIPs[i].IP, r.LeakedIPs[i].attrString())
		}
	}
	p("Found %d IPs that are allocated in IPAM but not actually in use.\n", len(r.LeakedIPs))
	if d >= ProblemIPs {
		for i := range r.Pending {
			p("  %s allocated to pod %s/%s, which has no IP yet\n", r.Pending[i].IP, r.Pending[i].Namespace, r.Pending[i].Pod)
		}
	}
	p("Found %d allocations whose pod exists but has no IP yet (CNI ADD in flight; not leaked).\n", len(r.Pending))
	p("Scanning for IPs that are in use by a workload or node but not allocated in IPAM...\n")
	if d >= ProblemIPs {
		for _, u := range r.NotInPool {
			for _, o := range u.Owners {
				p("  %s in use by %s is not in any active IP pool.\n", u.IP, o)
			}
		}
		for _, u := range r.InUseNotAllocated {
			for _, o := range u.Owners {
				p("  %s in use by %s and in active IPAM pool but has no IPAM allocation.\n", u.IP, o)
			}
		}
	}
	p("Found %d in-use IPs that are not in active IP pools.\n", len(r.NotInPool))
	p("Found %d in-use IPs that are in active IP pools but have no corresponding IPAM allocation.\n\n", len(r.InUseNotAllocated))
	p("Scanning for IPAM handles with no matching IPs...\n")
	if d >= AllIPs {
		for _, h := range r.LeakedHandles {
			p("  %s doesn't have any active IPs.\n", h.ID)
		}
	}
	p("Found %d handles with no matching IPs (and %d handles with matches).\n", len(r.LeakedHandles), r.Handles-len(r.LeakedHandles))
	p("Scanning for IPs with missing handle...\n")
	if d >= ProblemIPs {
		for _, h := range r.MissingHandles {
			p("  %s is in use in a block but doesn't exist.\n", h)
		}
	}
	p("Found %d handles mentioned in blocks with no matching handle resource.\n", len(r.MissingHandles))
	p("Scanning for blocks that break IPAM invariants...\n")
	if d >= ProblemIPs {
		for _, b := range r.InvalidBlocks {
			p("  block %s (%s): %s\n", b.CIDR, b.Name, strings.Join(b.Problems, "; "))
		}
	}
	p("Found %d invalid blocks.\n", len(r.InvalidBlocks))
	p("Check complete; found %d problems.\n", r.Problems)
	return ew.err
}

func (a *Allocation) attrString() string {
	var kv []string
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, k+"="+v)
		}
	}
	add(attrNamespace, a.Namespace)
	add(attrNode, a.Node)
	add(attrPod, a.Pod)
	add(attrTimestamp, a.CreationTimestamp)
	add(attrType, a.Type)
	return "Main:" + cmp.Or(a.Handle, "<none>") + " Extra:" + strings.Join(kv, ",")
}

// errWriter keeps the first write error so text writers can print unconditionally.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
