package collect

import (
	"runtime"
	"testing"
	"time"
)

// TestRecentReadsShared: questions within readsFresh of each other share one clusterReads
// while one of them holds it; later ones, or once nobody holds it, read afresh.
func TestRecentReadsShared(t *testing.T) {
	var r recentReads
	t0 := time.Now()
	a := r.get(t0)
	if b := r.get(t0.Add(500 * time.Millisecond)); b != a {
		t.Error("a question half a second later did not share the reads another holds")
	}
	if c := r.get(t0.Add(1500 * time.Millisecond)); c == a {
		t.Error("a question past readsFresh shared reads that old")
	}
	runtime.KeepAlive(a)

	r.get(t0.Add(10 * time.Second)) // a question that ends at once
	runtime.GC()
	if r.last.Value() != nil {
		t.Error("the reads outlived every question that held them")
	}
}
