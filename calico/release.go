package calico

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"golang.org/x/sync/errgroup"
)

// ReleaseOptions tune ReleaseIPs.
type ReleaseOptions struct {
	// Handles are leaked IPAMHandles to delete as well (CheckResult.LeakedHandles). Each is
	// deleted only if its resourceVersion still equals Revision, no block references it and it
	// is older than HandleGracePeriod.
	Handles []HandleInfo
	// HandleGracePeriod keeps leaked handles younger than this: the CNI plugin creates a
	// handle before it writes the block, so a very young unreferenced handle may be an
	// allocation in flight. Zero means DefaultHandleGracePeriod; negative means no grace.
	HandleGracePeriod time.Duration
	// MinAllocationAge keeps allocations younger than this, by their secondary.timestamp
	// attribute (written by the CNI plugin and calico-node at allocation): an allocation
	// whose pod is not created yet looks leaked for a moment when the datastore is not
	// locked. Zero means DefaultMinAllocationAge; negative means no minimum. Allocations
	// without a parseable timestamp are not held back.
	MinAllocationAge time.Duration
	// Workers bounds the blocks being verified and written at once, and separately the
	// handle writes at once; zero means DefaultWorkers.
	Workers int
}

// Defaults for ReleaseOptions.
const (
	DefaultHandleGracePeriod = time.Minute
	DefaultMinAllocationAge  = time.Minute
	DefaultWorkers           = 32
	// maxAttempts bounds the compare-and-set retries of one object.
	maxAttempts = 20
)

// SkippedIP is an address ReleaseIPs left allocated, and why.
type SkippedIP struct {
	Allocation
	Reason string
}

// SkippedHandle is a leaked handle ReleaseIPs kept, and why.
type SkippedHandle struct {
	ID, Reason string
}

// ReleaseResult is what ReleaseIPs did.
type ReleaseResult struct {
	// Released are the addresses freed (their block writes succeeded), sorted by IP.
	Released []Allocation
	// Skipped are the requested addresses left allocated, with the reason, sorted by IP.
	Skipped []SkippedIP
	// BlocksWritten is the number of IPAMBlocks changed.
	BlocksWritten int
	// HandlesDeleted and HandlesUpdated count IPAMHandle objects deleted (count reached zero,
	// or leaked) and decremented.
	HandlesDeleted, HandlesUpdated int
	// Unconfirmed are addresses whose block write was sent but whose answer never came back
	// (the connection broke: the API server stopped): they may or may not have been freed,
	// and their handles were not decremented; a check afterwards tells.
	Unconfirmed []Allocation
	// HandleErrors are handles whose decrement failed after the block write (Calico logs
	// these as warnings too: the next check reports them as leaked handles).
	HandleErrors []SkippedHandle
	// SkippedHandles are requested leaked handles that were kept.
	SkippedHandles []SkippedHandle
	// BlockWrites and HandleWrites count every write request sent (updates and deletes,
	// including ones that failed a compare-and-set and were retried); Reads counts reads
	// (gets and list pages).
	BlockWrites, HandleWrites, Reads int64
	// Took is the wall time.
	Took time.Duration
}

// releaseTarget is one requested address, resolved to its block.
type releaseTarget struct {
	Allocation
	ord int
}

// blockPlan is the work for one block.
type blockPlan struct {
	name    string
	cidr    netip.Prefix
	affine  string
	raw     []byte // the block as listed (JSON)
	targets []*releaseTarget
}

// ReleaseIPs frees the given allocations (normally CheckResult.LeakedIPs, or Report.Leaked) and
// decrements or deletes their handles, then deletes opts.Handles. For every address:
//
//   - the allocation must still carry the same handle and sequence number
//     (spec.sequenceNumberForAllocation) as in the check; a mismatch skips that address only;
//   - all addresses of a handle are released or none: if the handle holds an address that is
//     not requested, or one of its addresses fails verification, all of them are kept;
//   - right before each block write, the pods on the affected nodes (the allocation's node and
//     the block's affine node), those nodes' tunnel addresses and, for load-balancer
//     allocations, LoadBalancer services are read again; an address in use, or whose
//     attributes name an existing pod that has no address yet, is kept.
//
// Each block gets one compare-and-set Update (metadata.resourceVersion) that frees all its
// addresses, bumps spec.sequenceNumber, appends the ordinals to spec.unallocated and prunes
// and renumbers unreferenced attributes; a conflict re-reads the block, re-verifies and
// retries. Blocks are independent: up to opts.Workers are verified and written at once, each
// with its own compare-and-set. A touched handle gets one write as soon as every block
// holding its released addresses is done (never before: a handle is decremented only after
// its block write, as Calico does, so an interruption leaves leaked handles, never an
// address whose handle is gone): Delete with UID and resourceVersion preconditions when its
// count drops to zero, else an Update; conflicts re-read and retry. Requested leaked handles
// (opts.Handles) are deleted after the last block. Unknown fields of every object are
// preserved. Everything stops when ctx is done (a datastore lock's deadline).
//
// When an API call fails part way, ReleaseIPs returns the error together with the result so
// far (what was released stays released; its handles are still decremented).
func (c *Client) ReleaseIPs(ctx context.Context, allocs []Allocation, opts ReleaseOptions) (*ReleaseResult, error) {
	start := time.Now()
	workers := cmp.Or(opts.Workers, DefaultWorkers)
	res := &ReleaseResult{}
	r := &releaser{c: c, res: res, failedHandles: map[string]string{}, decrements: map[string]map[string]int{},
		blocksLeft: map[string]int{}, minAge: cmp.Or(opts.MinAllocationAge, DefaultMinAllocationAge)}

	// Read the handles the release may write in the background, while blocks are read and
	// written: the handle writes come after the block writes, with compare-and-set, so a
	// handle that changes meanwhile is simply read again.
	wanted := map[string]bool{}
	for _, a := range allocs {
		if h := cutHandle(a.Handle); h != "" {
			wanted[HandleName(h)] = true
		}
	}
	for _, h := range opts.Handles {
		wanted[HandleName(h.ID)] = true
	}
	var handlesRead sync.WaitGroup
	handlesDone := make(chan struct{}) // closed once r.handleRaws is set (nil after a failed read)
	defer handlesRead.Wait()
	hctx, cancelHandles := context.WithCancel(ctx)
	defer cancelHandles() // before the Wait above, on early returns
	handlesRead.Go(func() {
		defer close(handlesDone)
		if raws, err := r.readHandles(hctx, wanted); err == nil {
			r.handleRaws = raws // else each handle is read on its own
		}
	})

	// Snapshot every block: to resolve addresses, and to see all addresses of each handle.
	blocks := map[netip.Prefix]*blockPlan{}
	parsed := map[netip.Prefix]*block{}
	prefixLens := map[int]bool{}
	referenced := map[string]bool{}
	_, err := listAll(ctx, c, resBlocks, func(raw *json.RawMessage) error {
		var o blockObject
		if err := json.Unmarshal(*raw, &o); err != nil {
			return fmt.Errorf("decode ipamblock: %w", err)
		}
		if o.Spec.Deleted {
			return nil
		}
		b, err := o.parse()
		if err != nil {
			return err
		}
		blocks[b.cidr] = &blockPlan{name: b.name, cidr: b.cidr, affine: b.affineNode(), raw: *raw}
		parsed[b.cidr] = b
		prefixLens[b.cidr.Bits()] = true
		for ord := range b.spec.Allocations {
			if h := b.handleOf(ord); h != "" {
				referenced[h] = true
			}
		}
		return nil
	})
	res.Reads++
	if err != nil {
		return nil, err
	}

	// Resolve and pre-check every requested address against the snapshot.
	requested := map[string]map[netip.Addr]bool{} // handle -> requested addresses
	seen := map[netip.Addr]bool{}
	for _, a := range allocs {
		ip, ok := parseIP(a.IP)
		if !ok {
			r.skip(&releaseTarget{Allocation: a}, "bad address")
			continue
		}
		if seen[ip] {
			continue
		}
		seen[ip] = true
		t := &releaseTarget{Allocation: a}
		t.IP, t.Handle = ip.String(), cutHandle(a.Handle)
		bp := findBlock(blocks, prefixLens, a.Block, ip)
		if bp == nil {
			r.skip(t, "no block holds this address")
			continue
		}
		b := parsed[bp.cidr]
		t.Block, t.ord = bp.cidr.String(), ipOrdinal(bp.cidr, ip)
		if reason := r.precheck(b, t); reason != "" {
			r.skip(t, reason)
			continue
		}
		bp.targets = append(bp.targets, t)
		if t.Handle != "" {
			if requested[t.Handle] == nil {
				requested[t.Handle] = map[netip.Addr]bool{}
			}
			requested[t.Handle][ip] = true
		}
	}

	// All or none per handle: find every address each requested handle holds.
	holds := map[string][]*Allocation{}
	for _, b := range parsed {
		for ord := range b.spec.Allocations {
			if h := b.handleOf(ord); h != "" && requested[h] != nil {
				a := allocationAt(b, ord)
				holds[h] = append(holds[h], &a)
			}
		}
	}
	for h, addrs := range holds {
		for _, a := range addrs {
			ip, _ := parseIP(a.IP)
			if !requested[h][ip] {
				r.failedHandles[h] = "handle " + h + " also holds " + a.IP + ", which is not being released"
				break
			}
		}
	}
	r.holds = holds

	var plans []*blockPlan
	for _, bp := range blocks {
		if len(bp.targets) > 0 {
			plans = append(plans, bp)
		} else {
			bp.raw = nil // not written: let the GC have it
		}
	}
	slices.SortFunc(plans, func(a, b *blockPlan) int { return a.cidr.Addr().Compare(b.cidr.Addr()) })
	// How many planned blocks hold each handle's targets: its write waits for all of them.
	for _, bp := range plans {
		seen := map[string]bool{}
		for _, t := range bp.targets {
			if t.Handle != "" && !seen[t.Handle] {
				seen[t.Handle] = true
				r.blocksLeft[t.Handle]++
			}
		}
	}

	// Handle writers: each handle as soon as its blocks are done. They use ctx, not the
	// blocks' context, so the handles of written blocks are decremented even when another
	// block failed.
	grace := cmp.Or(opts.HandleGracePeriod, DefaultHandleGracePeriod)
	handleQueue := make(chan *handleWork, len(r.blocksLeft)+len(opts.Handles))
	var writers sync.WaitGroup
	var handleErrMu sync.Mutex
	var handleErr error
	for range workers {
		writers.Go(func() {
			for w := range handleQueue {
				if err := r.writeQueuedHandle(ctx, w, handlesDone, grace); err != nil {
					handleErrMu.Lock()
					handleErr = cmp.Or(handleErr, err)
					handleErrMu.Unlock()
				}
			}
		})
	}
	blockErr := forEach(ctx, workers, plans, func(ctx context.Context, bp *blockPlan) error {
		err := r.releaseBlock(ctx, bp)
		for _, w := range r.blockDone(bp) {
			handleQueue <- w
		}
		return err
	})
	// Leaked handles last, and only when every block went through.
	if blockErr == nil {
		for _, w := range r.leakedHandleWork(opts.Handles, referenced) {
			handleQueue <- w
		}
	}
	close(handleQueue)
	writers.Wait()
	handlesRead.Wait()
	err = errors.Join(blockErr, handleErr)
	slices.SortFunc(res.Released, func(a, b Allocation) int { return compareIPs(a.IP, b.IP) })
	slices.SortFunc(res.Skipped, func(a, b SkippedIP) int { return compareIPs(a.IP, b.IP) })
	res.Took = time.Since(start)
	return res, err
}

// findBlock returns the plan of the block holding ip: the named block CIDR if given, else the
// block whose prefix (of any block size in use) contains ip.
func findBlock(blocks map[netip.Prefix]*blockPlan, lens map[int]bool, named string, ip netip.Addr) *blockPlan {
	if named != "" {
		p, err := netip.ParsePrefix(named)
		if err != nil {
			return nil
		}
		if bp := blocks[p.Masked()]; bp != nil && bp.cidr.Contains(ip) {
			return bp
		}
		return nil
	}
	for bits := range lens {
		if p, err := ip.Prefix(bits); err == nil {
			if bp := blocks[p]; bp != nil {
				return bp
			}
		}
	}
	return nil
}

// precheck compares a requested address with the block; "" means it may be released.
func precheck(b *block, t *releaseTarget) string {
	if t.ord < 0 || t.ord >= len(b.spec.Allocations) {
		return "address outside block " + b.cidr.String()
	}
	if b.spec.Allocations[t.ord] == nil {
		return "not allocated (already free)"
	}
	h := b.handleOf(t.ord)
	if strings.EqualFold(h, windowsReservedHandle) {
		return "reserved for Windows"
	}
	if t.Handle != "" && h != t.Handle {
		return fmt.Sprintf("handle changed: block has %q, check saw %q", h, t.Handle)
	}
	if t.SequenceNumber != nil && b.seqOf(t.ord) != *t.SequenceNumber {
		return fmt.Sprintf("sequence number changed: block has %d, check saw %d (address was reallocated)", b.seqOf(t.ord), *t.SequenceNumber)
	}
	if a := b.attrs(t.ord); a != nil && a.ReleasedAt != nil {
		return "cooling down"
	}
	return ""
}

// precheck is the package precheck plus the minimum allocation age.
func (r *releaser) precheck(b *block, t *releaseTarget) string {
	if reason := precheck(b, t); reason != "" {
		return reason
	}
	if a := b.attrs(t.ord); a != nil && r.minAge > 0 {
		if at, ok := parseAllocationTime(a.Secondary.Timestamp); ok {
			if age := time.Since(at); age < r.minAge {
				return fmt.Sprintf("allocated %s ago, less than the minimum age %s (may be in flight)", age.Round(time.Second), r.minAge)
			}
		}
	}
	return ""
}

// parseAllocationTime parses the timestamp attribute, Go's time.Time.String() of a UTC time
// ("2026-01-02 03:04:05.123456789 +0000 UTC").
func parseAllocationTime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	s, _, _ = strings.Cut(s, " m=") // a monotonic clock reading, if any
	t, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", s)
	return t, err == nil
}

// releaser carries the shared state of one ReleaseIPs call.
type releaser struct {
	c   *Client
	res *ReleaseResult

	minAge time.Duration

	mu            sync.Mutex
	failedHandles map[string]string         // handle -> why none of its addresses is released
	holds         map[string][]*Allocation  // handle -> every address it holds (snapshot)
	decrements    map[string]map[string]int // handle -> block CIDR -> addresses released
	blocksLeft    map[string]int            // handle -> planned blocks holding its targets not done yet
	handleRaws    map[string][]byte         // handle name -> JSON, from readHandles (nil: read each)
}

func (r *releaser) skip(t *releaseTarget, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Skipped = append(r.res.Skipped, SkippedIP{Allocation: t.Allocation, Reason: reason})
}

func (r *releaser) count(p *int64) { atomic.AddInt64(p, 1) }

// releaseBlock verifies and frees the targets of one block with one compare-and-set write,
// retrying on conflict.
func (r *releaser) releaseBlock(ctx context.Context, bp *blockPlan) error {
	raw := bp.raw
	pending := bp.targets
	for attempt := 1; ; attempt++ {
		if raw == nil {
			body, err := r.c.raw.Get().Resource(resBlocks).Name(bp.name).DoRaw(ctx)
			r.count(&r.res.Reads)
			if isNotFound(err) {
				for _, t := range pending {
					r.skip(t, "block deleted")
				}
				return nil
			}
			if err != nil {
				return fmt.Errorf("get ipamblock %s: %w", bp.name, err)
			}
			raw = body
		}
		var o blockObject
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("decode ipamblock %s: %w", bp.name, err)
		}
		b, err := o.parse()
		if err != nil {
			return err
		}
		if o.Spec.Deleted {
			for _, t := range pending {
				r.skip(t, "block deleted")
			}
			return nil
		}

		// Re-check each target against the block as it is now.
		var ok []*releaseTarget
		for _, t := range pending {
			if reason := r.precheck(b, t); reason != "" {
				r.skip(t, reason)
				continue
			}
			ok = append(ok, t)
		}
		// Fresh read of what uses these addresses (and the other addresses of their handles).
		q := &useQuery{}
		r.mu.Lock()
		for _, t := range ok {
			q.addAllocation(&t.Allocation, b.affineNode())
			for _, a := range r.holds[t.Handle] {
				q.addAllocation(a, "")
			}
		}
		r.mu.Unlock()
		use, err := r.c.readUse(ctx, q)
		atomic.AddInt64(&r.res.Reads, int64(len(q.podNodes)+len(q.tunnels)+len(q.byAddress)))
		if err != nil {
			return err
		}
		r.mu.Lock()
		inUse := map[*releaseTarget]bool{}
		for _, t := range ok {
			if reason := use.blocks(&t.Allocation); reason != "" {
				r.failHandle(t.Handle, t.IP+" "+reason)
				r.res.Skipped = append(r.res.Skipped, SkippedIP{Allocation: t.Allocation, Reason: reason})
				inUse[t] = true
				continue
			}
			for _, a := range r.holds[t.Handle] {
				if a.IP == t.IP {
					continue
				}
				if reason := use.blocks(a); reason != "" {
					r.failHandle(t.Handle, a.IP+" "+reason)
				}
			}
		}
		var write []*releaseTarget
		for _, t := range ok {
			if inUse[t] {
				continue
			}
			if why, failed := r.failedHandles[t.Handle]; failed && t.Handle != "" {
				r.res.Skipped = append(r.res.Skipped, SkippedIP{Allocation: t.Allocation, Reason: why})
				continue
			}
			write = append(write, t)
		}
		r.mu.Unlock()
		if len(write) == 0 {
			return nil
		}

		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("decode ipamblock %s: %w", bp.name, err)
		}
		ords := make([]int, len(write))
		for i, t := range write {
			ords[i] = t.ord
		}
		if err := releaseOrdinals(obj.Object, ords); err != nil {
			return fmt.Errorf("ipamblock %s: %w", bp.name, err)
		}
		_, err = r.c.res(resBlocks).Update(ctx, obj, metav1.UpdateOptions{})
		r.count(&r.res.BlockWrites)
		switch {
		case err == nil:
			r.mu.Lock()
			r.res.BlocksWritten++
			for _, t := range write {
				r.res.Released = append(r.res.Released, t.Allocation)
				if t.Handle != "" {
					if r.decrements[t.Handle] == nil {
						r.decrements[t.Handle] = map[string]int{}
					}
					r.decrements[t.Handle][bp.cidr.String()]++
				}
			}
			r.mu.Unlock()
			return nil
		case isConflict(err) && attempt < maxAttempts:
			// Someone else wrote the block: re-read, re-verify and retry the still-pending targets.
			raw, pending = nil, write
			continue
		case isNotFound(err):
			for _, t := range write {
				r.skip(t, "block deleted")
			}
			return nil
		default:
			if mayHaveArrived(err) {
				r.mu.Lock()
				for _, t := range write {
					r.res.Unconfirmed = append(r.res.Unconfirmed, t.Allocation)
				}
				r.mu.Unlock()
			}
			return fmt.Errorf("update ipamblock %s: %w", bp.name, err)
		}
	}
}

// failHandle marks a handle whose addresses must all stay; callers hold r.mu.
func (r *releaser) failHandle(h, why string) {
	if h == "" {
		return
	}
	if _, ok := r.failedHandles[h]; !ok {
		r.failedHandles[h] = "handle " + h + ": " + why
	}
}

// releaseOrdinals frees ords in the unstructured IPAMBlock obj the way Calico v3.32 does:
// allocations[ord] = null, ord appended to unallocated (FIFO), its sequenceNumberForAllocation
// entry removed, unreferenced attributes deleted and the remaining indexes renumbered, and
// spec.sequenceNumber incremented.
func releaseOrdinals(obj map[string]any, ords []int) error {
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return fmt.Errorf("no spec")
	}
	allocs, _ := spec["allocations"].([]any)
	unalloc, _ := spec["unallocated"].([]any)
	attrs, _ := spec["attributes"].([]any)
	seqFor, _ := spec["sequenceNumberForAllocation"].(map[string]any)
	for _, ord := range ords {
		if ord < 0 || ord >= len(allocs) || allocs[ord] == nil {
			return fmt.Errorf("ordinal %d is not allocated", ord)
		}
		allocs[ord] = nil
		unalloc = append(unalloc, int64(ord))
		delete(seqFor, strconv.Itoa(ord))
	}
	// Prune attributes no allocation references and renumber the rest, keeping their order.
	refs := make([]bool, len(attrs))
	for _, a := range allocs {
		if a == nil {
			continue
		}
		i, ok := toInt64(a)
		if !ok || i < 0 || int(i) >= len(attrs) {
			return fmt.Errorf("bad attribute index %v", a)
		}
		refs[i] = true
	}
	newIndex := make([]int64, len(attrs))
	kept := attrs[:0:0]
	for i, a := range attrs {
		if refs[i] {
			newIndex[i] = int64(len(kept))
			kept = append(kept, a)
		}
	}
	for ord, a := range allocs {
		if a != nil {
			i, _ := toInt64(a)
			allocs[ord] = newIndex[i]
		}
	}
	spec["allocations"] = allocs
	spec["unallocated"] = unalloc
	spec["attributes"] = kept
	if seqFor != nil {
		spec["sequenceNumberForAllocation"] = seqFor
	}
	seq, _ := toInt64(spec["sequenceNumber"])
	spec["sequenceNumber"] = seq + 1
	return nil
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// handleWork is one handle to write: a decrement of released addresses, or a leaked handle.
type handleWork struct {
	id     string
	dec    map[string]int // block CIDR -> addresses released (nil for a leaked handle)
	leaked *HandleInfo
}

// readHandles lists the handles once and keeps the JSON of the wanted ones (by name).
func (r *releaser) readHandles(ctx context.Context, wanted map[string]bool) (map[string][]byte, error) {
	raws := map[string][]byte{}
	_, err := listAll(ctx, r.c, resHandles, func(raw *json.RawMessage) error {
		var m struct {
			Metadata objectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(*raw, &m); err != nil {
			return fmt.Errorf("decode ipamhandle: %w", err)
		}
		if wanted[m.Metadata.Name] {
			raws[m.Metadata.Name] = slices.Clone(*raw)
		}
		return nil
	})
	r.count(&r.res.Reads)
	return raws, err
}

// blockDone records that bp is finished (written, skipped or failed) and returns the handle
// writes that became due: handles with released addresses whose every planned block is done.
func (r *releaser) blockDone(bp *blockPlan) []*handleWork {
	r.mu.Lock()
	defer r.mu.Unlock()
	var due []*handleWork
	seen := map[string]bool{}
	for _, t := range bp.targets {
		h := t.Handle
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if r.blocksLeft[h]--; r.blocksLeft[h] == 0 && r.decrements[h] != nil {
			due = append(due, &handleWork{id: h, dec: r.decrements[h]})
		}
	}
	return due
}

// leakedHandleWork is the requested leaked handles that no block references and no decrement
// already covers, in ID order.
func (r *releaser) leakedHandleWork(handles []HandleInfo, referenced map[string]bool) []*handleWork {
	r.mu.Lock()
	defer r.mu.Unlock()
	decremented := map[string]bool{}
	for id := range r.decrements {
		decremented[HandleName(id)] = true
	}
	var out []*handleWork
	for i := range handles {
		h := &handles[i]
		switch {
		case referenced[h.ID]:
			r.res.SkippedHandles = append(r.res.SkippedHandles, SkippedHandle{h.ID, "a block references it"})
		case decremented[HandleName(h.ID)]:
			// Its decrement write handles it.
		default:
			out = append(out, &handleWork{id: h.ID, leaked: h})
		}
	}
	slices.SortFunc(out, func(a, b *handleWork) int { return strings.Compare(a.id, b.id) })
	return out
}

// writeQueuedHandle writes w once the background handle list is in (its JSON saves a read;
// without it, or for a handle the list did not have, writeHandle reads the handle itself).
func (r *releaser) writeQueuedHandle(ctx context.Context, w *handleWork, listed <-chan struct{}, grace time.Duration) error {
	select {
	case <-listed:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	var raw []byte
	if r.handleRaws != nil {
		if raw = r.handleRaws[HandleName(w.id)]; raw == nil {
			if w.leaked != nil {
				r.skipHandle(w.id, "already gone")
			}
			return nil
		}
	}
	return r.writeHandle(ctx, w, raw, grace)
}

// writeHandle applies one handle's decrement (or deletes a leaked handle) with
// compare-and-set, re-reading on conflict.
func (r *releaser) writeHandle(ctx context.Context, w *handleWork, raw []byte, grace time.Duration) error {
	name := HandleName(w.id)
	for attempt := 1; ; attempt++ {
		if raw == nil {
			body, err := r.c.raw.Get().Resource(resHandles).Name(name).DoRaw(ctx)
			r.count(&r.res.Reads)
			if isNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("get ipamhandle %s: %w", name, err)
			}
			raw = body
		}
		var h handleObject
		if err := json.Unmarshal(raw, &h); err != nil {
			return fmt.Errorf("decode ipamhandle %s: %w", name, err)
		}
		if h.Spec.Deleted {
			return nil
		}
		var del bool
		var obj *unstructured.Unstructured
		if w.leaked != nil {
			created, _ := time.Parse(time.RFC3339, h.Metadata.CreationTimestamp)
			switch {
			case h.Metadata.ResourceVersion != w.leaked.Revision:
				r.skipHandle(w.id, "changed since the check (resourceVersion "+h.Metadata.ResourceVersion+", check saw "+w.leaked.Revision+")")
				return nil
			case grace > 0 && time.Since(created) < grace:
				r.skipHandle(w.id, "younger than the grace period (may be an allocation in flight)")
				return nil
			}
			del = true
		} else {
			obj = &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(raw); err != nil {
				return fmt.Errorf("decode ipamhandle %s: %w", name, err)
			}
			blocks, _, _ := unstructured.NestedMap(obj.Object, "spec", "block")
			for cidr, n := range w.dec {
				v, _ := toInt64(blocks[cidr])
				if v -= int64(n); v > 0 {
					blocks[cidr] = v
				} else {
					delete(blocks, cidr)
				}
			}
			if len(blocks) == 0 {
				del = true
			} else if err := unstructured.SetNestedMap(obj.Object, blocks, "spec", "block"); err != nil {
				return fmt.Errorf("ipamhandle %s: %w", name, err)
			}
		}
		var err error
		if del {
			uid, rv := h.Metadata.UID, h.Metadata.ResourceVersion
			err = r.c.res(resHandles).Delete(ctx, name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: (*types.UID)(&uid), ResourceVersion: &rv},
			})
		} else {
			_, err = r.c.res(resHandles).Update(ctx, obj, metav1.UpdateOptions{})
		}
		r.count(&r.res.HandleWrites)
		switch {
		case err == nil:
			r.mu.Lock()
			if del {
				r.res.HandlesDeleted++
			} else {
				r.res.HandlesUpdated++
			}
			r.mu.Unlock()
			return nil
		case isNotFound(err):
			return nil
		case isConflict(err) && attempt < maxAttempts:
			raw = nil
		default:
			r.mu.Lock()
			r.res.HandleErrors = append(r.res.HandleErrors, SkippedHandle{w.id, err.Error()})
			r.mu.Unlock()
			return nil
		}
	}
}

func (r *releaser) skipHandle(id, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.SkippedHandles = append(r.res.SkippedHandles, SkippedHandle{id, reason})
}

// forEach runs fn over items with at most n running at once and returns the first error;
// after an error the remaining items see a cancelled context.
func forEach[T any](ctx context.Context, n int, items []T, fn func(context.Context, T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(n, 1))
	for _, it := range items {
		g.Go(func() error { return fn(gctx, it) })
	}
	return g.Wait()
}
