package collect

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/whypending/whypending/triage"
)

// TestNoteFailedReads: which errors make a read failed, and how it is listed: refused, timed
// out (with the wait), failed at once (no wait said), and the API server's answers about the
// object (NotFound, 400) not at all.
func TestNoteFailedReads(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	tests := []struct {
		name   string
		err    error
		waited time.Duration
		want   string // RefusedRead.String, "" when not noted
	}{
		{"forbidden", apierrors.NewForbidden(nodes, "", errors.New("no")), 0, "nodes: forbidden (list cluster-wide)"},
		{"a deadline, waited", fmt.Errorf("list nodes: %w", context.DeadlineExceeded), 3 * time.Second, "nodes: timed out after 3s (list cluster-wide)"},
		{"a 503 at once", apierrors.NewServiceUnavailable("etcd is down"), 0, "nodes: failed: etcd is down (list cluster-wide)"},
		{"not found is an answer", apierrors.NewNotFound(nodes, "n1"), 0, ""},
		{"bad request is an answer", apierrors.NewBadRequest("previous terminated container not found"), 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &refusals{seen: map[triage.RefusedRead]bool{}}
			r.note(tt.err, time.Now().Add(-tt.waited), "list", "nodes", "")
			got := ""
			if l := r.refused(); len(l) == 1 {
				got = l[0].String()
			}
			if got != tt.want {
				t.Errorf("note(%v) listed %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
