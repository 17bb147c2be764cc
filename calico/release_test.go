package calico

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// blockInvariants fails the test for any block that breaks an IPAMBlock invariant.
func blockInvariants(t *testing.T, cl *Client) map[string]*block {
	t.Helper()
	out := map[string]*block{}
	_, err := listAll(t.Context(), cl, resBlocks, func(o *blockObject) error {
		b, err := o.parse()
		if err != nil {
			return err
		}
		if p := b.validate(); len(p) > 0 {
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
	blocks := blockInvariants(t, cl)
	for _, b := range blocks {
		alloc, _ := b.counts()
		for ord := range b.spec.Allocations {
			if b.spec.Allocations[ord] != nil {
				if _, ok := b.spec.SequenceNumberForAllocation[fmt.Sprint(ord)]; !ok {
					t.Errorf("block %s ordinal %d lost its sequence number", b.name, ord)
				}
			}
		}
		_ = alloc
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
	_ = context.Background
}
