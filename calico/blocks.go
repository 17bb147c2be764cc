package calico

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// BlockReleaseOptions tune ReleaseEmptyBlocks.
type BlockReleaseOptions struct {
	// AllowLastBlock also releases a block that is its node's last affine block (Calico's GC
	// never does; the node claims a new block on its next pod).
	AllowLastBlock bool
}

// SkippedBlock is a block ReleaseEmptyBlocks kept, and why.
type SkippedBlock struct {
	CIDR, Reason string
}

// BlockReleaseResult is what ReleaseEmptyBlocks did.
type BlockReleaseResult struct {
	// Released are the CIDRs of the blocks deleted (with their affinities), sorted.
	Released []string
	// Skipped are the blocks kept, with the reason.
	Skipped []SkippedBlock
	// Writes counts write requests sent (updates and deletes); Reads counts reads.
	Writes, Reads int64
	// Took is the wall time.
	Took time.Duration
}

// ReleaseEmptyBlocks deletes empty affine blocks and their BlockAffinities with Calico's own
// procedure (libcalico-go releaseBlockAffinity): the affinity goes to state pendingDeletion,
// the block is soft-deleted (spec.deleted=true) and deleted with UID and resourceVersion
// preconditions, then the affinity is soft-deleted and deleted the same way. Every update is a
// compare-and-set.
//
// A block is kept when it has any allocation that is not Windows-reserved, has no host
// affinity, is its node's last affine block (unless opts.AllowLastBlock), or when a pod or node
// uses one of its addresses. Pods are read cluster-wide once, and the pods and tunnel
// addresses of the block's node are read again right before the writes (the "verify no new pod
// used the block" step of the manual procedure, which matters when the datastore is not
// locked). If the block gains an allocation after its affinity was marked pendingDeletion, the
// affinity is put back to confirmed and the block kept.
func (c *Client) ReleaseEmptyBlocks(ctx context.Context, cidrs []netip.Prefix, opts BlockReleaseOptions) (*BlockReleaseResult, error) {
	start := time.Now()
	res := &BlockReleaseResult{}
	var mu sync.Mutex
	skip := func(cidr netip.Prefix, reason string) {
		mu.Lock()
		defer mu.Unlock()
		res.Skipped = append(res.Skipped, SkippedBlock{cidr.String(), reason})
	}

	// Affinities: per node confirmed counts, and the affinity object of each block.
	nodeBlocks := map[string]int{}
	affName := map[netip.Prefix]map[string]string{} // cidr -> node -> affinity name
	_, err := listAll(ctx, c, resAffinities, func(a *affinityObject) error {
		if a.deleted() {
			return nil
		}
		p, err := netip.ParsePrefix(a.Spec.CIDR)
		if err != nil {
			return nil
		}
		if a.Spec.State == stateConfirmed && (a.Spec.Type == "" || a.Spec.Type == "host") {
			nodeBlocks[a.Spec.Node]++
		}
		if affName[p.Masked()] == nil {
			affName[p.Masked()] = map[string]string{}
		}
		affName[p.Masked()][a.Spec.Node] = a.Metadata.Name
		return nil
	})
	res.Reads++
	if err != nil {
		return nil, err
	}

	// Addresses in use anywhere (pods, nodes, LoadBalancers), read once.
	used := map[netip.Addr]string{}
	var umu sync.Mutex
	record := func(ip netip.Addr, owner string) {
		for _, p := range cidrs {
			if p.Contains(ip) {
				umu.Lock()
				used[ip] = owner
				umu.Unlock()
			}
		}
	}
	if err := c.scanAllPods(ctx, func(p PodUse) {
		for _, ip := range p.IPs {
			record(ip, p.owner())
		}
	}); err != nil {
		return nil, err
	}
	if err := c.scanNodes(ctx, func(n nodeUse) {
		for _, ip := range n.ips {
			record(ip, n.owner())
		}
	}); err != nil {
		return nil, err
	}
	if err := c.scanLoadBalancers(ctx, func(l lbUse) {
		for _, ip := range l.ips {
			record(ip, l.owner())
		}
	}); err != nil {
		return nil, err
	}
	res.Reads += 3

	seen := map[netip.Prefix]bool{}
	for _, cidr := range cidrs {
		cidr = cidr.Masked()
		if seen[cidr] {
			continue
		}
		seen[cidr] = true
		reason, err := c.releaseEmptyBlock(ctx, cidr, opts, nodeBlocks, affName[cidr], used, res)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			skip(cidr, reason)
			continue
		}
		res.Released = append(res.Released, cidr.String())
	}
	slices.Sort(res.Released)
	res.Took = time.Since(start)
	return res, nil
}

// releaseEmptyBlock releases one block; it returns a reason when it kept the block.
func (c *Client) releaseEmptyBlock(ctx context.Context, cidr netip.Prefix, opts BlockReleaseOptions,
	nodeBlocks map[string]int, affs map[string]string, used map[netip.Addr]string, res *BlockReleaseResult) (string, error) {
	name := BlockName(cidr)
	b, obj, err := c.getBlock(ctx, name)
	atomic.AddInt64(&res.Reads, 1)
	if isNotFound(err) {
		return "no such block", nil
	}
	if err != nil {
		return "", err
	}
	node := b.affineNode()
	switch {
	case node == "":
		return "block has no host affinity (" + b.affinity + ")", nil
	case !b.reservedOnly():
		alloc, reserved := b.counts()
		return fmt.Sprintf("block has %d allocations in use", alloc-reserved), nil
	case nodeBlocks[node] <= 1 && !opts.AllowLastBlock:
		return "it is the last affine block of node " + node + " (use AllowLastBlock)", nil
	}
	for ip, owner := range used {
		if cidr.Contains(ip) {
			return ip.String() + " is in use by " + owner, nil
		}
	}
	// Fresh check of the node right before the writes.
	q := &useQuery{}
	q.addNode(node, true)
	use, err := c.readUse(ctx, q)
	atomic.AddInt64(&res.Reads, 2)
	if err != nil {
		return "", err
	}
	for ip, owner := range use.owners {
		if cidr.Contains(ip) {
			return ip.String() + " is in use by " + owner, nil
		}
	}

	// 1. Affinity -> pendingDeletion.
	affName := affs[node]
	var aff *unstructured.Unstructured
	if affName != "" {
		aff, err = c.updateAffinity(ctx, affName, func(o *unstructured.Unstructured) error {
			return unstructured.SetNestedField(o.Object, statePendingDeletion, "spec", "state")
		}, res)
		if isNotFound(err) {
			aff = nil
		} else if err != nil {
			return "", err
		}
	}

	// 2. Soft-delete the block (compare-and-set), re-checking it is still empty.
	for attempt := 1; ; attempt++ {
		if !b.reservedOnly() || b.affineNode() != node {
			if aff != nil {
				if _, err := c.updateAffinity(ctx, affName, func(o *unstructured.Unstructured) error {
					return unstructured.SetNestedField(o.Object, stateConfirmed, "spec", "state")
				}, res); err != nil && !isNotFound(err) {
					return "", err
				}
			}
			return "block changed while releasing (gained an allocation or lost its affinity)", nil
		}
		if err := unstructured.SetNestedField(obj.Object, true, "spec", "deleted"); err != nil {
			return "", err
		}
		out, err := c.res(resBlocks).Update(ctx, obj, metav1.UpdateOptions{})
		atomic.AddInt64(&res.Writes, 1)
		if isConflict(err) && attempt < maxAttempts {
			b, obj, err = c.getBlock(ctx, name)
			atomic.AddInt64(&res.Reads, 1)
			if isNotFound(err) {
				break
			}
			if err != nil {
				return "", err
			}
			continue
		}
		if isNotFound(err) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("soft-delete ipamblock %s: %w", name, err)
		}
		// 3. Delete it, preconditioned on the object we soft-deleted.
		if err := c.deletePrecond(ctx, resBlocks, name, out.GetUID(), out.GetResourceVersion(), res); err != nil {
			return "", fmt.Errorf("delete ipamblock %s: %w", name, err)
		}
		break
	}

	// 4. Soft-delete and delete the affinity.
	if aff != nil {
		var deleted any = true
		if !c.v3 {
			deleted = "true"
		}
		out, err := c.updateAffinity(ctx, affName, func(o *unstructured.Unstructured) error {
			return unstructured.SetNestedField(o.Object, deleted, "spec", "deleted")
		}, res)
		if err != nil && !isNotFound(err) {
			return "", err
		}
		if err == nil {
			if err := c.deletePrecond(ctx, resAffinities, affName, out.GetUID(), out.GetResourceVersion(), res); err != nil {
				return "", fmt.Errorf("delete blockaffinity %s: %w", affName, err)
			}
		}
	}
	nodeBlocks[node]--
	return "", nil
}

func (c *Client) getBlock(ctx context.Context, name string) (*block, *unstructured.Unstructured, error) {
	body, err := c.raw.Get().Resource(resBlocks).Name(name).DoRaw(ctx)
	if err != nil {
		return nil, nil, err
	}
	var o blockObject
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, nil, fmt.Errorf("decode ipamblock %s: %w", name, err)
	}
	if o.Spec.Deleted {
		return nil, nil, notFoundError(resBlocks, name)
	}
	b, err := o.parse()
	if err != nil {
		return nil, nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(body); err != nil {
		return nil, nil, fmt.Errorf("decode ipamblock %s: %w", name, err)
	}
	return b, obj, nil
}

// updateAffinity applies change to BlockAffinity name with compare-and-set, re-reading on
// conflict, and returns the updated object.
func (c *Client) updateAffinity(ctx context.Context, name string, change func(*unstructured.Unstructured) error, res *BlockReleaseResult) (*unstructured.Unstructured, error) {
	for attempt := 1; ; attempt++ {
		o, err := c.res(resAffinities).Get(ctx, name, metav1.GetOptions{})
		atomic.AddInt64(&res.Reads, 1)
		if err != nil {
			return nil, err
		}
		if err := change(o); err != nil {
			return nil, err
		}
		out, err := c.res(resAffinities).Update(ctx, o, metav1.UpdateOptions{})
		atomic.AddInt64(&res.Writes, 1)
		if isConflict(err) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("update blockaffinity %s: %w", name, err)
		}
		return out, nil
	}
}

// deletePrecond deletes a Calico object only if its UID and resourceVersion still match.
func (c *Client) deletePrecond(ctx context.Context, resource, name string, uid types.UID, rv string, res *BlockReleaseResult) error {
	err := c.res(resource).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	atomic.AddInt64(&res.Writes, 1)
	if isNotFound(err) {
		return nil
	}
	return err
}
