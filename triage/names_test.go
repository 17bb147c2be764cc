package triage

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
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

// TestOnlyCloseNamesAreSuggested is issue 12's kind 11 for suggestions: a name gets the names
// that really are close (a typo, the same ReplicaSet, the workload of a pod), never a list of
// unrelated names that happen to share a letter.
func TestOnlyCloseNamesAreSuggested(t *testing.T) {
	have := []string{"checkout-7d9f8b6c4-x2k9q", "checkout-7d9f8b6c4-p8r2m", "cart-5f6d7c8b9-abcde", "db-0", "redis-master-0", "x-ray-agent-77c9d-qqq"}
	tests := []struct {
		want string
		got  []string
	}{
		{"checkout", []string{"checkout-7d9f8b6c4-p8r2m", "checkout-7d9f8b6c4-x2k9q"}},
		{"checkout-7d9f8b6c4-x2k9z", []string{"checkout-7d9f8b6c4-x2k9q", "checkout-7d9f8b6c4-p8r2m"}},
		{"db-1", []string{"db-0"}},
		{"redis-mastr-0", []string{"redis-master-0"}},
		{"x", nil},
		{"<!channel>", nil},
		{"web", nil},
		{"zzzzzzzz", nil},
	}
	for _, tt := range tests {
		if got := closestNames(tt.want, have, 3); !cmp.Equal(got, tt.got, cmpopts.EquateEmpty()) {
			t.Errorf("closestNames(%q) = %v, want %v", tt.want, got, tt.got)
		}
	}
}

func TestCheckPodRef(t *testing.T) {
	for _, tt := range []struct {
		ns, name string
		ok       bool
	}{
		{"shop", "web-7f9c5d-abcde", true},
		{"kube-system", "coredns-5644d7b6d9-bsmn7", true},
		{"BAD NS", "x", false},
		{"shop", "<!channel>", false},
		{"shop", "Web", false},
		{"shop", "", false},
		{"a.b", "web", false},
	} {
		if err := CheckPodRef(tt.ns, tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckPodRef(%q, %q) = %v, want ok %t", tt.ns, tt.name, err, tt.ok)
		}
	}
}

func TestNotFoundFixQuotesWhatWasAsked(t *testing.T) {
	s := &Snapshot{Requested: PodRef{Namespace: "shop", Name: "a;b"}}
	f := notFoundFinding(s)
	if len(f.Fix) == 0 || !strings.Contains(f.Fix[0], "'a;b'") {
		t.Errorf("fix = %q, want the name shell-quoted", f.Fix)
	}
}
