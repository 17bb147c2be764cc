package calico

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"testing"
	"time"
)

// BenchmarkCacheOverview computes Cache.Overview afresh (the memo dropped) on an attached
// fixture (WHYPENDING_BENCH_KUBECONFIG; it skips otherwise) and reports what one computation
// costs in memory: live-MiB, the heap after a GC with the caches synced and no memo;
// peak-heap-MiB, the largest heap of live and dead objects sampled every millisecond while
// computing (what the process's RSS must hold before a GC); held-MiB, what the memo keeps
// after a GC; and B/op. WHYPENDING_BENCH_HEAPPROFILE names a file for the heap profile
// written after the last computation (alloc_space is the computation's allocations).
func BenchmarkCacheOverview(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			if os.Getenv(benchKubeconfigEnv) == "" {
				b.Skipf("%s is not set", benchKubeconfigEnv)
			}
			e := benchSetup(b, size.name, size.spec)
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			k := syncedBenchCache(b, ctx, e)
			heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			read := func() float64 {
				metrics.Read(heap)
				return float64(heap[0].Value.Uint64()) / (1 << 20)
			}
			live := func() float64 {
				runtime.GC()
				return read()
			}
			var liveMiB, peakMiB, heldMiB float64
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				k.mu.Lock()
				k.memo = nil
				k.mu.Unlock()
				before := live()
				done, peak := make(chan struct{}), make(chan float64)
				go func() {
					var p float64
					t := time.NewTicker(time.Millisecond)
					defer t.Stop()
					for {
						p = max(p, read())
						select {
						case <-done:
							peak <- p
							return
						case <-t.C:
						}
					}
				}()
				b.StartTimer()
				o, err := k.Overview(ctx)
				b.StopTimer()
				close(done)
				if err != nil {
					b.Fatal(err)
				}
				liveMiB, peakMiB, heldMiB = before, <-peak, live()-before
				if o.Check == nil {
					b.Fatal("no check")
				}
				b.StartTimer()
			}
			b.ReportMetric(liveMiB, "live-MiB")
			b.ReportMetric(peakMiB, "peak-heap-MiB")
			b.ReportMetric(heldMiB, "held-MiB")
			if f := os.Getenv("WHYPENDING_BENCH_HEAPPROFILE"); f != "" {
				w, err := os.Create(f)
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				if err := pprof.Lookup("heap").WriteTo(w, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// syncedBenchCache is a Cache over e's cluster, synced; it runs until ctx is done.
func syncedBenchCache(b *testing.B, ctx context.Context, e *benchEnv) *Cache {
	b.Helper()
	k := NewCache(ctx, e.cl, startInformerUsers(ctx, e.c.Client))
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := k.WaitForSync(sctx); err != nil {
		b.Fatal(err)
	}
	return k
}
