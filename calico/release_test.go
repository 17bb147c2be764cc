package calico

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// blockInvariants fails the test for any block that breaks an IPAMBlock invariant, except the
// named ones (broken on purpose).
func blockInvariants(t *testing.T, cl *Client, except ...string) map[string]*block {
	t.Helper()
	out := map[string]*block{}
	_, err := listAll(t.Context(), cl, resBlocks, func(o *blockObject) error {
		b, err := o.parse()
		if err != nil {
			return err
		}
		if p := b.validate(); len(p) > 0 && !slices.Contains(except, b.name) {
			t.Errorf("block %s invalid: %v", b.name, p)
		}
		out[b.name] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func countHandles(t *testing.T, cl *Client) int {
	t.Helper()
	n := 0
	if _, err := listAll(t.Context(), cl, resHandles, func(*handleObject) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReleaseSeedIPAMLeaked(t *testing.T) {
	ctx := t.Context()
	_, cl := startCluster(t, "seed-ipam-leaked")

	// Fields whypending does not model must survive its writes.
	const blockName = "172-16-0-0-26"
	o, err := cl.res(resBlocks).Get(ctx, blockName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o.SetAnnotations(map[string]string{"example.com/keep": "yes"})
	unstructured.SetNestedField(o.Object, "2025-06-01T12:00:00Z", "spec", "affinityClaimTime")
	attrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "attributes")
	attrs[0].(map[string]any)["alternateOwnerAttrs"] = map[string]any{"vmi-name": "keep"}
	unstructured.SetNestedSlice(o.Object, attrs, "spec", "attributes")
	if _, err := cl.res(resBlocks).Update(ctx, o, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	res, err := cl.Check(ctx, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.LeakedIPs) != 181 {
		t.Fatalf("leaked = %d, want 181", len(res.LeakedIPs))
	}
	handlesBefore := countHandles(t, cl)

	rel, err := cl.ReleaseIPs(ctx, res.LeakedIPs, ReleaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Released) != 181 || len(rel.Skipped) != 0 {
		t.Errorf("released %d, skipped %v; want 181 and none", len(rel.Released), rel.Skipped)
	}
	blocksTouched := map[string]bool{}
	for _, a := range res.LeakedIPs {
		blocksTouched[a.Block] = true
	}
	if rel.BlockWrites != int64(len(blocksTouched)) || rel.HandleWrites != 181 {
		t.Errorf("writes: %d block, %d handle; want %d and 181", rel.BlockWrites, rel.HandleWrites, len(blocksTouched))
	}
	if got := countHandles(t, cl); got != handlesBefore-181 {
		t.Errorf("handles after = %d, want %d", got, handlesBefore-181)
	}
	blockInvariants(t, cl)
	// The stored blocks (not parsed: parse moves the map into block.seqs) keep the sequence
	// number of every ordinal still allocated.
	_, err = listAll(t.Context(), cl, resBlocks, func(o *blockObject) error {
		for ord, a := range o.Spec.Allocations {
			if _, ok := o.Spec.SequenceNumberForAllocation[fmt.Sprint(ord)]; a != nil && !ok {
				t.Errorf("block %s ordinal %d lost its sequence number", o.Metadata.Name, ord)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	o, err = cl.res(resBlocks).Get(ctx, blockName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.GetAnnotations()["example.com/keep"] != "yes" {
		t.Errorf("annotation lost: %v", o.GetAnnotations())
	}
	if v, _, _ := unstructured.NestedString(o.Object, "spec", "affinityClaimTime"); v != "2025-06-01T12:00:00Z" {
		t.Errorf("affinityClaimTime = %q", v)
	}
	attrs, _, _ = unstructured.NestedSlice(o.Object, "spec", "attributes")
	if got := fmt.Sprint(attrs[0].(map[string]any)["alternateOwnerAttrs"]); got != "map[vmi-name:keep]" {
		t.Errorf("alternateOwnerAttrs = %s", got)
	}

	again, err := cl.Check(ctx, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Problems != 0 || len(again.Allocations) != 75 {
		t.Errorf("after release: %d problems, %d allocations; want 0 and 75", again.Problems, len(again.Allocations))
	}
}

// TestReleaseHandlesAllOrNone covers handles that hold several addresses.
func TestReleaseHandlesAllOrNone(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	w.pool("v4", "10.50.0.0/24", 26, false)
	w.pool("v6", "fd00:50::/120", 122, false)
	w.namespace("app")
	w.node("n1", nil)
	dual := podAttr("app", "dual", "n1")       // live pod; Kubernetes reports only its IPv4 (#5044)
	gone2 := podAttr("app", "gone-dual", "n1") // gone: v4 + v6
	twice := podAttr("app", "twice", "n1")     // gone: two addresses in one block
	partial := podAttr("app", "partial", "n1") // gone, but only one of its two addresses is asked for
	skew := podAttr("app", "skew", "n1")       // gone; its handle counts 2 addresses, the block has 1
	w.block("10.50.0.0/26", "host:n1", map[int]attr{1: dual, 2: gone2, 3: twice, 4: twice, 5: partial, 6: skew})
	w.block("fd00:50::/122", "host:n1", map[int]attr{1: dual, 2: gone2, 5: partial})
	w.handle(dual.handle, map[string]int{"10.50.0.0/26": 1, "fd00:50::/122": 1})
	w.handle(gone2.handle, map[string]int{"10.50.0.0/26": 1, "fd00:50::/122": 1})
	w.handle(twice.handle, map[string]int{"10.50.0.0/26": 2})
	w.handle(partial.handle, map[string]int{"10.50.0.0/26": 1, "fd00:50::/122": 1})
	w.handle(skew.handle, map[string]int{"10.50.0.0/26": 2})
	w.pod("app", "dual", "n1", []string{"10.50.0.1"}, nil)

	res, err := w.cl.Check(ctx, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"10.50.0.2", "10.50.0.3", "10.50.0.4", "10.50.0.5", "10.50.0.6", "fd00:50::1", "fd00:50::2", "fd00:50::5"}, ips(res.LeakedIPs)); d != "" {
		t.Fatalf("leaked (-want +got):\n%s", d)
	}
	// Go through the calicoctl report, as `release --from-report` would (no block CIDRs).
	var buf bytes.Buffer
	if err := res.WriteReport(&buf); err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var ask []Allocation
	for _, a := range rep.Leaked() {
		if a.IP != "fd00:50::5" { // ask for only one of partial's addresses
			ask = append(ask, a)
		}
	}
	rel, err := w.cl.ReleaseIPs(ctx, ask, ReleaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"10.50.0.2", "10.50.0.3", "10.50.0.4", "10.50.0.6", "fd00:50::2"}, ips(rel.Released)); d != "" {
		t.Errorf("released (-want +got):\n%s", d)
	}
	kept := map[string]string{}
	for _, s := range rel.Skipped {
		kept[s.IP] = s.Reason
	}
	for ip, want := range map[string]string{
		"fd00:50::1": "also holds 10.50.0.1, which is not being released",
		"10.50.0.5":  "also holds fd00:50::5, which is not being released",
	} {
		if !strings.Contains(kept[ip], want) {
			t.Errorf("reason for %s = %q, want %q", ip, kept[ip], want)
		}
	}
	// One write per block, one per handle: gone-dual and twice deleted, skew decremented.
	if rel.BlockWrites != 2 || rel.HandleWrites != 3 || rel.HandlesDeleted != 2 || rel.HandlesUpdated != 1 {
		t.Errorf("writes: %d block, %d handle (%d deleted, %d updated); want 2, 3 (2, 1)", rel.BlockWrites, rel.HandleWrites, rel.HandlesDeleted, rel.HandlesUpdated)
	}
	h, err := w.cl.res(resHandles).Get(ctx, HandleName(skew.handle), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedInt64(h.Object, "spec", "block", "10.50.0.0/26"); got != 1 {
		t.Errorf("skew handle count = %d, want 1", got)
	}
	for _, id := range []string{gone2.handle, twice.handle} {
		if _, err := w.cl.res(resHandles).Get(ctx, HandleName(id), metav1.GetOptions{}); !isNotFound(err) {
			t.Errorf("handle %s not deleted: %v", id, err)
		}
	}
	blockInvariants(t, w.cl)
}
