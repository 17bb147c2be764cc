package chat

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCutsAtWords is issue 22 item 10's first point: a cell cut for a narrow table ends and
// resumes at whole words ("Insufficient cpu: allocatable…pods"), never mid-word as it did
// ("allocata…e").
func TestCutsAtWords(t *testing.T) {
	const s = "Insufficient cpu: allocatable 2000m, requested 1900m by 7 pods, the pod asks 500m more than is free"
	words := map[string]bool{}
	for _, w := range strings.Fields(s) {
		words[w] = true
	}
	for _, limit := range []int{20, 27, 33, 48, 61} {
		for name, got := range map[string]string{"Cut": Cut(s, limit), "CutMiddle": CutMiddle(s, limit)} {
			if n := utf8.RuneCountInString(got); n > limit {
				t.Errorf("%s(%d) = %q: %d characters", name, limit, got, n)
			}
			for _, part := range strings.Split(got, "…") {
				for _, w := range strings.Fields(part) {
					if !words[w] {
						t.Errorf("%s(%d) = %q: %q is not a whole word", name, limit, got, w)
					}
				}
			}
		}
	}
	if got := Cut("abcdefghijklmnopqrstuvwxyz", 10); got != "abcdefghi…" {
		t.Errorf("one long word is cut where it must be: %q", got)
	}
}
