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

// TestDefuseFences: no run of backticks, however long, keeps three in a row, so a log line or
// a table cell cannot close the code block it is shown in; shorter runs and other text stay.
func TestDefuseFences(t *testing.T) {
	tests := []struct{ in, want string }{
		{"no fences here", "no fences here"},
		{"`code` and ``two``", "`code` and ``two``"},
		{"```closed```", "`\u200b`\u200b`closed`\u200b`\u200b`"},
		{"a````b", "a`\u200b`\u200b`\u200b`b"},
		{"`````", "`\u200b`\u200b`\u200b`\u200b`"},
		{"x ```````` y", "x " + strings.Repeat("`\u200b", 7) + "` y"},
	}
	for _, tt := range tests {
		got := DefuseFences(tt.in)
		if got != tt.want {
			t.Errorf("DefuseFences(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "```") {
			t.Errorf("DefuseFences(%q) = %q keeps a fence", tt.in, got)
		}
	}
}
