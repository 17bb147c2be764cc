package calico

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// allocator is a stand-in for the Calico CNI plugin: it claims free ordinals of a node's
// blocks with compare-and-set writes and starts pods on them. Two orders are exercised:
//
//   - podFirst (what the real CNI does): the pod exists (scheduled, no IP), then its handle is
//     created, then the ordinal is claimed, then the pod's status gets the address;
//   - claimFirst (adversarial): handle, claim, and only then the pod is created, Running.
//
// Both write the CNI's secondary attributes, timestamp included.
type allocator struct {
	w        *world
	nodes    []string
	blocks   map[string][]string // node -> block names
	podFirst bool
	seq      atomic.Int64
	claims   atomic.Int64
	name     string
}

var errBlockFull = errors.New("block full")

func (a *allocator) run(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for ctx.Err() == nil {
		node := a.nodes[rng.IntN(len(a.nodes))]
		blocks := a.blocks[node]
		name := fmt.Sprintf("%s-%d", a.name, a.seq.Add(1))
		if a.podFirst {
			a.w.pod("race", name, node, nil, nil)
		}
		handle := "k8s-pod-network.race." + name
		if err := a.w.cl.raw.Post().Resource(resHandles).Body([]byte(fmt.Sprintf(
			`{"apiVersion":%q,"kind":"IPAMHandle","metadata":{"name":%q},"spec":{"handleID":%q,"block":{}}}`,
			a.w.cl.APIGroup(), HandleName(handle), handle))).Do(ctx).Error(); err != nil {
			return ignoreCanceled(err)
		}
		var ip string
		var err error
		for _, bn := range rng.Perm(len(blocks)) {
			ip, err = a.claim(ctx, blocks[bn], handle, "race", name, node)
			if !errors.Is(err, errBlockFull) {
				break
			}
		}
		if errors.Is(err, errBlockFull) {
			continue // the node is full this round
		}
		if err != nil {
			return ignoreCanceled(err)
		}
		a.claims.Add(1)
		if a.podFirst {
			p, err := a.w.kube.CoreV1().Pods("race").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return ignoreCanceled(err)
			}
			p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
			if _, err := a.w.kube.CoreV1().Pods("race").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				return ignoreCanceled(err)
			}
		} else {
			a.w.pod("race", name, node, []string{ip}, nil)
		}
	}
	return nil
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// claim takes the first free ordinal of block name for handle, like Calico's assignFromExistingBlock:
// pop the head of unallocated, add an attribute, record the sequence number, bump
// sequenceNumber, compare-and-set; on conflict re-read and retry. It also records the address in
// the handle.
func (a *allocator) claim(ctx context.Context, name, handle, ns, pod, node string) (string, error) {
	for {
		obj, err := a.w.cl.res(resBlocks).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		spec := obj.Object["spec"].(map[string]any)
		unalloc, _ := spec["unallocated"].([]any)
		if len(unalloc) == 0 {
			return "", errBlockFull
		}
		ord64, _ := toInt64(unalloc[0])
		ord := int(ord64)
		spec["unallocated"] = unalloc[1:]
		attrs, _ := spec["attributes"].([]any)
		attrs = append(attrs, map[string]any{"handle_id": handle, "secondary": map[string]any{
			"namespace": ns, "pod": pod, "node": node, "timestamp": time.Now().UTC().String()}})
		spec["attributes"] = attrs
		spec["allocations"].([]any)[ord] = int64(len(attrs) - 1)
		seq, _ := toInt64(spec["sequenceNumber"])
		sfa, _ := spec["sequenceNumberForAllocation"].(map[string]any)
		if sfa == nil {
			sfa = map[string]any{}
		}
		sfa[strconv.Itoa(ord)] = seq
		spec["sequenceNumberForAllocation"] = sfa
		spec["sequenceNumber"] = seq + 1
		_, err = a.w.cl.res(resBlocks).Update(ctx, obj, metav1.UpdateOptions{})
		if isConflict(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		cidr, _, _ := unstructured.NestedString(obj.Object, "spec", "cidr")
		p := netip.MustParsePrefix(cidr)
		h, err := a.w.cl.res(resHandles).Get(ctx, HandleName(handle), metav1.GetOptions{})
		if err == nil {
			unstructured.SetNestedField(h.Object, int64(1), "spec", "block", cidr)
			_, err = a.w.cl.res(resHandles).Update(ctx, h, metav1.UpdateOptions{})
		}
		return ordinalIP(p, ord).String(), err
	}
}

// checkPodsAllocated fails the test for every live pod whose address is not allocated to its
// own handle: the one thing a release must never cause.
func checkPodsAllocated(t *testing.T, w *world) int {
	t.Helper()
	blocks := blockInvariants(t, w.cl)
	byCIDR := map[netip.Prefix]*block{}
	for _, b := range blocks {
		byCIDR[b.cidr] = b
	}
	pods, err := w.kube.CoreV1().Pods("race").List(w.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		n++
		ip := netip.MustParseAddr(p.Status.PodIP)
		b := byCIDR[netip.PrefixFrom(ip, 26).Masked()]
		if b == nil {
			t.Errorf("pod %s uses %s outside every block", p.Name, ip)
			continue
		}
		ord := ipOrdinal(b.cidr, ip)
		if got, want := b.handleOf(ord), "k8s-pod-network.race."+p.Name; got != want {
			t.Errorf("IN-USE ADDRESS RELEASED: pod %s uses %s, block %s ordinal %d has handle %q", p.Name, ip, b.cidr, ord, got)
		}
	}
	return n
}

// TestReleaseRacesAllocator runs check + release while allocators claim addresses and start
// pods on them, over many iterations; between iterations (and during them) some pods are
// deleted without a CNI DEL, which leaks their addresses. No address a pod uses may ever be
// released. Two variants:
//
//   - cni-order: allocators in the real CNI order (pod first) and no minimum allocation age,
//     so safety rests on the pending-pod cross-check, the re-verification right before each
//     block write and the compare-and-set;
//   - claim-first: adversarial allocators that claim before the pod exists, as well, with a
//     short minimum allocation age.
//
// WHYPENDING_RACE_ITERATIONS overrides the iteration count per variant (default 8).
func TestReleaseRacesAllocator(t *testing.T) {
	iterations := 8
	if n, err := strconv.Atoi(os.Getenv("WHYPENDING_RACE_ITERATIONS")); err == nil {
		iterations = n
	}
	if testing.Short() {
		iterations = 2
	}
	for _, v := range []struct {
		name       string
		claimFirst bool
		minAge     time.Duration
	}{
		{"cni-order", false, -1},
		{"claim-first", true, 3 * time.Second},
	} {
		t.Run(v.name, func(t *testing.T) { raceRelease(t, iterations, v.claimFirst, v.minAge) })
	}
}

func raceRelease(t *testing.T, iterations int, claimFirst bool, minAge time.Duration) {
	w := newWorld(t)
	w.pool("race", "10.40.0.0/22", 26, false)
	w.namespace("race")
	nodes := []string{"r1", "r2", "r3"}
	blocks := map[string][]string{}
	bi := 0
	for _, n := range nodes {
		w.node(n, nil)
		for range 3 {
			cidr := netip.PrefixFrom(ordinalIP(netip.MustParsePrefix("10.40.0.0/22"), bi*64), 26)
			bi++
			allocs := map[int]attr{}
			for ord := range 16 { // 8 in use, 8 leaked; the rest free
				pod := fmt.Sprintf("seed-%s-%d", BlockName(cidr), ord)
				allocs[ord] = podAttr("race", pod, n)
				w.handle("k8s-pod-network.race."+pod, map[string]int{cidr.String(): 1})
				if ord%2 == 0 {
					w.pod("race", pod, n, []string{ordinalIP(cidr, ord).String()}, nil)
				}
			}
			w.block(cidr.String(), "host:"+n, allocs)
			blocks[n] = append(blocks[n], BlockName(cidr))
		}
	}

	var totalReleased, totalSkipped, totalClaims, totalRetries int64
	rng := rand.New(rand.NewPCG(1, 2))
	leak := func(ctx context.Context, fraction int) {
		pods, err := w.kube.CoreV1().Pods("race").List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for i := range pods.Items {
			if pods.Items[i].Status.PodIP != "" && rng.IntN(fraction) == 0 {
				w.kube.CoreV1().Pods("race").Delete(ctx, pods.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
			}
		}
	}
	for it := range iterations {
		ctx, cancel := context.WithCancel(t.Context())
		var allocs []*allocator
		for k := range 4 {
			allocs = append(allocs, &allocator{w: w, nodes: nodes, blocks: blocks, podFirst: !claimFirst || k%2 == 0, name: fmt.Sprintf("i%d-a%d", it, k)})
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(allocs))
		for _, a := range allocs {
			wg.Go(func() { errs <- a.run(ctx) })
		}
		wg.Go(func() { // pods vanish during the round too
			for ctx.Err() == nil {
				time.Sleep(200 * time.Millisecond)
				leak(ctx, 20)
			}
		})
		time.Sleep(100 * time.Millisecond)
		res, err := w.cl.Check(t.Context(), CheckOptions{})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		rel, err := w.cl.ReleaseIPs(t.Context(), res.LeakedIPs, ReleaseOptions{Handles: res.LeakedHandles, MinAllocationAge: minAge, HandleGracePeriod: max(minAge, 0)})
		time.Sleep(100 * time.Millisecond)
		cancel()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("allocator: %v", err)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		live := checkPodsAllocated(t, w)
		var claims int64
		for _, a := range allocs {
			claims += a.claims.Load()
		}
		retries := rel.BlockWrites - int64(rel.BlocksWritten)
		totalReleased += int64(len(rel.Released))
		totalSkipped += int64(len(rel.Skipped))
		totalClaims += claims
		totalRetries += retries
		t.Logf("iteration %d: %d leaked, released %d, skipped %d, %d block writes (%d conflicts retried), %d claims, %d live pods",
			it, len(res.LeakedIPs), len(rel.Released), len(rel.Skipped), rel.BlockWrites, retries, claims, live)
		for _, s := range rel.Skipped {
			t.Logf("  kept %s: %s", s.IP, s.Reason)
		}
		if t.Failed() {
			return
		}
		leak(t.Context(), 3)
		time.Sleep(max(minAge, 0)) // so this round's leaks are old enough for the next
	}
	t.Logf("%d iterations: released %d, kept %d, %d concurrent claims, %d conflicts retried; no in-use address released",
		iterations, totalReleased, totalSkipped, totalClaims, totalRetries)
	if totalReleased == 0 || totalClaims == 0 {
		t.Errorf("the race did not happen: released %d, claims %d", totalReleased, totalClaims)
	}
}
