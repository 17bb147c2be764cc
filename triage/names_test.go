package triage

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClosestNames(t *testing.T) {
	refs := []PodRef{
		{Namespace: "shop", Name: "web-7f9c5d-abcde"}, {Namespace: "shop", Name: "web-7f9c5d-xyz12"}, {Namespace: "shop", Name: "worker-55d8-k2k2k"},
		{Namespace: "staging", Name: "web-7f9c5d-abcdf"}, {Namespace: "kube-system", Name: "coredns-5644d7b6d9-bsmn7"}, {Namespace: "shop", Name: "db-0"},
	}
	got := ClosestPodNames(refs, "shop", "web-7f9c5d-abcdd", 3)
	want := []string{"shop/web-7f9c5d-abcde", "staging/web-7f9c5d-abcdf", "shop/web-7f9c5d-xyz12"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClosestPodNames() mismatch (-want +got):\n%s", diff)
	}
	if got := ClosestPodNames(refs, "shop", "zzzzzzzz", 5); len(got) != 0 {
		t.Errorf("ClosestPodNames(unrelated) = %v, want none", got)
	}
}
