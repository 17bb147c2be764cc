package collect

import (
	"strings"
	"testing"
)

func TestSplitLogLines(t *testing.T) {
	raw := []byte(strings.Repeat("line\n", 30) + "last\n")
	got := splitLogLines(raw, 20)
	if len(got) != 20 || got[19] != "last" {
		t.Errorf("splitLogLines() = %d lines ending %q, want 20 ending \"last\"", len(got), got[len(got)-1])
	}
}
