package calico

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
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
	// Report is the calicoctl-schema report: every allocation, in use or not, keyed by IP
	// (nil in an Overview's check, see Overview.Check).
	Report Report
	// Allocations is every allocation, sorted by block then ordinal; Report points into it.
	// Nil in an Overview's check.
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
	// Cached is true for a check answered from a Cache (the bot's watch caches) rather than a
	// fresh read.
	Cached bool
}

// ownerReservedWindows is calicoctl's owner name for Windows-reserved ordinals.
const ownerReservedWindows = "Reserved for Windows"

// Check compares IPAM allocations with what uses addresses, like `calicoctl ipam check`, with
// these differences: IPv6 tunnel annotations count as in use; Windows-reserved ordinals are in
// use; an allocation whose attributes name an existing pod that has no address yet is pending,
// not leaked; LoadBalancer ingress addresses count when they are inside a pool or allocated
// (KubeControllersConfiguration is not needed); broken block invariants are problems.
//
// It reads ClusterInformation default, then IPAMBlocks, IPAMHandle metadata and IPPools
// concurrently and, once the blocks are read, pods, node metadata and services: pods come
// after blocks, so a pod whose CNI ADD wrote an allocation the check saw is also seen. Every
// list is one unpaginated request that the API server answers from its watch cache (see
// listAll); pods are listed per namespace, a few at a time.
func (c *Client) Check(ctx context.Context, opts CheckOptions) (*CheckResult, error) {
	start := time.Now()
	inv, checkErr, err := c.readInventory(ctx, readParts{check: true})
	if err == nil {
		err = checkErr
	}
	if err != nil {
		return nil, err
	}
	res := inv.check(opts, true)
	res.Took = time.Since(start)
	return res, nil
}

// Overview reads Calico IPAM once and derives both a check and the utilization from it (what
// Check and Utilization would return, for the price of one read). The check part is missing,
// with Overview.CheckErr set, when only its reads failed.
func (c *Client) Overview(ctx context.Context) (*Overview, error) {
	start := time.Now()
	inv, checkErr, err := c.readInventory(ctx, readParts{check: true, utilization: true})
	if err != nil {
		return nil, err
	}
	return overviewOf(inv, checkErr, time.Since(start)), nil
}

// readParts says what readInventory reads besides IPAMBlocks and IPPools.
type readParts struct {
	// check: ClusterInformation, IPAMHandle metadata and what uses addresses.
	check bool
	// utilization: BlockAffinities and IPAMConfig.
	utilization bool
}

// readInventory reads what parts asks for. err is a failed read of the blocks, pools or (with
// parts.utilization) affinities and IPAMConfig; checkErr a failed read of what only the check
// needs, which leaves the rest of the inventory usable.
func (c *Client) readInventory(ctx context.Context, parts readParts) (inv *inventory, checkErr, err error) {
	inv = &inventory{v3: c.v3}
	if parts.check && !parts.utilization {
		// A check without ClusterInformation cannot be written as a report: fail before listing.
		if inv.clusterInfo, err = c.clusterInfo(ctx); err != nil {
			return nil, nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	blocksRead := make(chan struct{})
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		blocks, err := c.listBlocks(gctx)
		if err != nil {
			return err
		}
		inv.blocks = blocks
		close(blocksRead)
		return nil
	})
	g.Go(func() error {
		var err error
		inv.pools, err = c.listPools(gctx)
		return err
	})
	if parts.utilization {
		g.Go(func() error {
			var err error
			inv.affinities, err = c.listAffinities(gctx)
			return err
		})
		g.Go(func() error {
			var err error
			inv.config, err = c.ipamConfig(gctx)
			return err
		})
	}

	// The check's own reads fail on their own: the inventory stays usable for the utilization.
	var checkWait func() error
	if parts.check {
		cg, cctx := errgroup.WithContext(ctx) // not gctx: g.Wait cancels that
		if inv.clusterInfo == nil {
			cg.Go(func() error {
				var err error
				inv.clusterInfo, err = c.clusterInfo(cctx)
				return err
			})
		}
		cg.Go(func() error {
			var err error
			inv.handles, err = c.listHandleMeta(cctx)
			return err
		})
		// Pods, nodes and services only once the blocks are read: the pod of any CNI ADD
		// whose allocation the block list shows exists by then, so an allocation in flight is
		// seen as pending, not leaked.
		cg.Go(func() error {
			select {
			case <-blocksRead:
			case <-cctx.Done():
				return context.Cause(cctx)
			}
			var err error
			inv.users, err = c.readUsers(cctx)
			return err
		})
		checkWait = cg.Wait
	}
	if err := g.Wait(); err != nil {
		cancel()
		if checkWait != nil {
			_ = checkWait() // let the check's reads stop before inv is dropped
		}
		return nil, nil, err
	}
	if checkWait != nil {
		if checkErr = checkWait(); checkErr == nil {
			checkErr = c.resolveHandles(ctx, inv)
		}
	}
	return inv, checkErr, nil
}

// listBlocks reads every IPAMBlock that is not soft-deleted.
func (c *Client) listBlocks(ctx context.Context) ([]*block, error) {
	var out []*block
	_, err := listAll(ctx, c, resBlocks, func(o *blockObject) error {
		if o.Spec.Deleted {
			return nil
		}
		b, err := o.parse()
		if err != nil {
			return err
		}
		out = append(out, b)
		return nil
	})
	return out, err
}

// listPools reads every IPPool.
func (c *Client) listPools(ctx context.Context) ([]pool, error) {
	var out []pool
	_, err := listAll(ctx, c, resPools, func(o *poolObject) error {
		p, err := poolOf(o)
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// listAffinities reads every BlockAffinity that is not soft-deleted.
func (c *Client) listAffinities(ctx context.Context) ([]affinityObject, error) {
	var out []affinityObject
	_, err := listAll(ctx, c, resAffinities, func(a *affinityObject) error {
		if !a.deleted() {
			out = append(out, *a)
		}
		return nil
	})
	return out, err
}

// ipamConfig reads IPAMConfig default; nil when it does not exist.
func (c *Client) ipamConfig(ctx context.Context) (*ipamConfigObject, error) {
	o, err := getRaw[ipamConfigObject](ctx, c, c.resIPAMConfig(), "default")
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ipam config: %w", err)
	}
	return o, nil
}

// readUsers reads what uses addresses: pods, node tunnel annotations and LoadBalancer
// services, concurrently.
func (c *Client) readUsers(ctx context.Context) (*addressUse, error) {
	u := newAddressUse(0)
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return c.scanAllPods(gctx, func(p PodUse) {
			mu.Lock()
			defer mu.Unlock()
			u.addPod(p)
		})
	})
	g.Go(func() error {
		return c.scanNodes(gctx, func(n nodeUse) {
			mu.Lock()
			defer mu.Unlock()
			u.addNode(n)
		})
	})
	g.Go(func() error {
		return c.scanLoadBalancers(gctx, func(l lbUse) {
			mu.Lock()
			defer mu.Unlock()
			u.lbs = append(u.lbs, l)
		})
	})
	return u, g.Wait()
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

// listHandleMeta lists IPAMHandle metadata only (names, UIDs, resourceVersions, creation
// times; PartialObjectMetadataList as protobuf, decoded field by field as it streams in): a
// handle's name is its ID in lower case, which is all the check needs except for handles no
// block references, whose exact IDs (and soft-deleted state) resolveHandles reads afterwards.
// Like listAll, it reads the whole list in one request and, when the API server times out
// before any item arrived, again page by page.
func (c *Client) listHandleMeta(ctx context.Context) (map[string]handleEntry, error) {
	m := map[string]handleEntry{}
	add := func(o *objectMetaFields) {
		m[o.name] = handleEntry{id: o.name, uid: o.uid, rv: o.resourceVersion, created: o.created}
	}
	_, err := c.handleMetaPage(ctx, 0, "", add)
	if err == nil {
		return m, nil
	}
	if !retryPageByPage(err, len(m)) {
		return nil, fmt.Errorf("list ipamhandles: %w", err)
	}
	if _, perr := readPages(func(cont string) (listMeta, error) { return c.handleMetaPage(ctx, listPageSize, cont, add) }); perr != nil {
		return nil, fmt.Errorf("list ipamhandles page by page (the whole list timed out: %v): %w", err, perr)
	}
	return m, nil
}

// handleMetaPage reads one metadata-only IPAMHandle list: the whole list when limit is 0,
// else a page of limit items from continue token cont. It passes each item to fn and returns
// the list's metadata.
func (c *Client) handleMetaPage(ctx context.Context, limit int, cont string, fn func(*objectMetaFields)) (listMeta, error) {
	req := c.raw.Get().Resource(resHandles).SetHeader("Accept", protobufMetadataList)
	if limit > 0 {
		req = req.Param("limit", strconv.Itoa(limit))
	}
	if cont != "" {
		req = req.Param("continue", cont)
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return listMeta{}, err
	}
	defer body.Close()
	return decodeMetadataList(body, fn)
}

// protobufMetadataList asks for a PartialObjectMetadataList as protobuf.
const protobufMetadataList = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

// resolveHandles reads the exact spec.handleID and the soft-deleted state of the handles no
// block references (only their metadata was listed): one get each, or one list when there
// are many.
func (c *Client) resolveHandles(ctx context.Context, inv *inventory) error {
	referenced := map[string]bool{}
	for _, b := range inv.blocks {
		for ord := range b.spec.Allocations {
			if h := b.handleOf(ord); h != "" {
				referenced[HandleName(h)] = true
			}
		}
	}
	var unknown []string
	for name, h := range inv.handles {
		if !referenced[name] && !h.known {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	var mu sync.Mutex
	update := func(name string, h *handleMeta) {
		mu.Lock()
		defer mu.Unlock()
		if h == nil {
			delete(inv.handles, name)
			return
		}
		inv.handles[name] = handleEntryOf(h)
	}
	if len(unknown) > 200 {
		wanted := map[string]bool{}
		for _, name := range unknown {
			wanted[name] = true
			delete(inv.handles, name) // re-added below if it still exists
		}
		_, err := listAll(ctx, c, resHandles, func(h *handleMeta) error {
			if wanted[h.Metadata.Name] {
				update(h.Metadata.Name, h)
			}
			return nil
		})
		return err
	}
	return forEach(ctx, 16, unknown, func(ctx context.Context, name string) error {
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

// handleEntryOf is what a check keeps of a handle read in full.
func handleEntryOf(h *handleMeta) handleEntry {
	return handleEntry{id: h.Spec.HandleID, uid: h.Metadata.UID, rv: h.Metadata.ResourceVersion,
		created: parseTime(h.Metadata.CreationTimestamp), known: true, deleted: h.Spec.Deleted}
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
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
