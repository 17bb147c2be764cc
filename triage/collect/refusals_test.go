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

// slowEvents is a reader whose event lists wait until their context ends, counting calls.
type slowEvents struct {
	reader
	calls int
}

func (s *slowEvents) objectEvents(ctx context.Context, namespace, uid string) ([]triage.Event, error) {
	s.calls++
	<-ctx.Done()
	return nil, fmt.Errorf("list events: %w", ctx.Err())
}

// TestStalledReadIsNotWaitedAgain: once an events read timed out in a question, the next
// events read of that namespace (the next pod's, the workload's) fails at once with the same
// error instead of waiting out another timeout; other namespaces are still asked.
func TestStalledReadIsNotWaitedAgain(t *testing.T) {
	slow := &slowEvents{}
	r := &refusals{reader: slow, seen: map[triage.RefusedRead]bool{}}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.objectEvents(ctx, "shop", "uid-1"); err == nil {
		t.Fatal("the hung read succeeded")
	}
	t0 := time.Now()
	if _, err := r.objectEvents(t.Context(), "shop", "uid-2"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second read: %v, want the first read's timeout", err)
	}
	if waited := time.Since(t0); waited > 20*time.Millisecond || slow.calls != 1 {
		t.Errorf("second read waited %s and made %d calls, want none", waited, slow.calls)
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel2()
	r.objectEvents(ctx2, "batch", "uid-3")
	if slow.calls != 2 {
		t.Errorf("another namespace's read was not asked (%d calls)", slow.calls)
	}
	if l := r.refused(); len(l) != 2 || l[0].Failure != triage.ReadTimedOut {
		t.Errorf("refused = %v, want shop's and batch's events, timed out", l)
	}
}
