package calico

import (
	"errors"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestListPagedReadsWhatTheWholeListReads lists the IPAMHandles and IPAMBlocks of
// seed-ipam-leaked on the real API server both ways listAll can: in one unpaginated request
// and page by page (3 items a page, many continue tokens): the same objects, once each.
func TestListPagedReadsWhatTheWholeListReads(t *testing.T) {
	_, cl := startCluster(t, "seed-ipam-leaked")
	ctx := t.Context()
	for _, resource := range []string{resHandles, resBlocks} {
		var whole, paged []string
		if _, err := listAll(ctx, cl, resource, func(o *struct {
			Metadata struct{ Name string } `json:"metadata"`
		}) error {
			whole = append(whole, o.Metadata.Name)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		rv, err := listPaged(ctx, cl, resource, 3, func(o *struct {
			Metadata struct{ Name string } `json:"metadata"`
		}) error {
			paged = append(paged, o.Metadata.Name)
			return nil
		})
		if err != nil || rv == "" {
			t.Fatalf("listPaged(%s): rv %q, %v", resource, rv, err)
		}
		if len(whole) < 4 || !slices.Equal(whole, paged) {
			t.Errorf("%s: paged list (%d items) differs from the whole list (%d items)", resource, len(paged), len(whole))
		}
	}

	// The metadata-only IPAMHandle list of a check, whole and page by page (its fallback).
	var whole, paged []string
	if _, err := cl.handleMetaPage(ctx, 0, "", func(o *objectMetaFields) { whole = append(whole, o.name+" "+o.uid) }); err != nil {
		t.Fatal(err)
	}
	pages := 0
	for cont := ""; ; pages++ {
		page, err := cl.handleMetaPage(ctx, 3, cont, func(o *objectMetaFields) { paged = append(paged, o.name+" "+o.uid) })
		if err != nil {
			t.Fatal(err)
		}
		if page.ResourceVersion == "" {
			t.Error("a page has no resourceVersion")
		}
		if cont = page.Continue; cont == "" {
			break
		}
	}
	if len(whole) < 4 || pages < 1 || !slices.Equal(whole, paged) {
		t.Errorf("ipamhandles metadata: %d pages, paged list (%d items) differs from the whole list (%d items)", pages+1, len(paged), len(whole))
	}
}

func TestRetryPageByPageOnlyOnTimeoutsBeforeAnyItem(t *testing.T) {
	gr := schema.GroupResource{Group: "crd.projectcalico.org", Resource: resHandles}
	tests := []struct {
		err    error
		passed int
		want   bool
	}{
		{apierrors.NewTimeoutError("the server was unable to return a response in the time allotted", 0), 0, true},
		{apierrors.NewServerTimeout(gr, "list", 1), 0, true},
		{apierrors.NewTimeoutError("timed out", 0), 10, false},
		{apierrors.NewForbidden(gr, "", errors.New("no")), 0, false},
		{errors.New("stream error: INTERNAL_ERROR"), 0, false},
	}
	for _, tt := range tests {
		if got := retryPageByPage(tt.err, tt.passed); got != tt.want {
			t.Errorf("retryPageByPage(%v, %d) = %t, want %t", tt.err, tt.passed, got, tt.want)
		}
	}
}
