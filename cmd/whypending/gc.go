package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// serve's garbage collector target (GOGC) follows how fast it allocates, unless GOGC is set.
// Its heap is nearly all caches that live as long as it does, and GOGC is how much garbage may
// pile up over them before a collection, as a share of them: at the runtime's 100 a serve that
// does anything sits at about twice its caches. A lower target costs collections: each marks
// the whole cache, so the collector's CPU per byte allocated goes as 1/GOGC whatever the
// cache's size (the informer sync at 120,800 pods: about 0.5 CPU-seconds per GB at 100, 1.8
// at 30, 3.5 at 15). While serve allocates fast (the sync, a mass event's answers) that is
// real CPU and slower answers; while it allocates slowly (the watch posting, answers now and
// then, idle) it is next to nothing, and the headroom is only memory.
// At 120,800 pods (calico/BENCHMARKS.md, "GOGC that follows the allocation rate"):
//   - GOGC=15 throughout took 30-45% more CPU and made the mass event 25-30% slower than 30;
//   - GOGC=30 throughout left the watch's average RSS 20% over an idle serve, 15 left it 8.5%
//     for the same CPU: the watch under churn allocates 6-19 MiB/s (p10-max over 1 s);
//   - this tuner left it 10% over, and 5.6% once free heap is returned while quiet.
const (
	// gcPercentBusy is the target while serve allocates at least gcBusyRate, and at start
	// (the informer sync follows). VictoriaMetrics ships 30 as its default for the same reason.
	gcPercentBusy = 30
	// gcPercentQuiet is the target once serve has allocated less than gcBusyRate for gcQuietFor.
	gcPercentQuiet = 15
	// gcBusyRate is the allocation rate, in bytes per second over one gcSample, from which
	// serve is busy. Under it the quiet target costs at most about 0.06 cores more than the
	// busy one ((3.5-1.8) CPU-seconds per GB); the sync allocates 130 MB/s.
	gcBusyRate = 32 << 20
	// gcQuietFor is how long the rate stays under gcBusyRate before the quiet target applies:
	// the pauses within a burst do not flip it back and forth.
	gcQuietFor = 30 * time.Second
	// gcSample is how often the allocation rate is read: a burst gets the busy target within it.
	gcSample = time.Second
	// While quiet, heap memory that is free but still held from the OS (the collector's
	// overshoot past its goal, and the runtime's scavenger keeps up to 10% over the goal) is
	// returned once it reaches gcReleaseAt, at most once per gcReleaseEvery: a forced
	// collection, 0.1-0.2 CPU-seconds at 120,800 pods.
	gcReleaseAt    = 16 << 20
	gcReleaseEvery = time.Minute
)

// setGCPercent sets the collector's target to gcPercentBusy and returns true (serve then runs
// runGCTuner), unless GOGC is set to a number or "off" (the runtime has applied it; it is
// kept). It logs the target in force. A GOGC the runtime ignores (neither) is warned about and
// serve's tuning applies.
func setGCPercent(log *slog.Logger) (tune bool) {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		if _, err := strconv.Atoi(v); err == nil || v == "off" {
			log.Info("garbage collector target", slog.String("GOGC", v), slog.String("from", "GOGC"))
			return false
		}
		log.Warn("GOGC is neither a number nor off: the Go runtime ignores it, serve's default applies", slog.String("GOGC", v))
	}
	debug.SetGCPercent(gcPercentBusy)
	log.Info("garbage collector target", slog.String("GOGC", fmt.Sprintf("%d while allocating %d MiB/s or more, else %d", gcPercentBusy, gcBusyRate>>20, gcPercentQuiet)),
		slog.String("from", "serve's default"))
	return true
}

// gcTuner decides the collector's target from the allocation rate: busy (gcPercentBusy) as
// soon as one sample reaches gcBusyRate, quiet (gcPercentQuiet) once the rate has stayed
// under it for gcQuietFor. It starts busy.
type gcTuner struct {
	started    bool
	lastAt     time.Time
	last       uint64    // bytes allocated so far, at lastAt
	quietSince time.Time // zero while busy
	percent    int
	releasedAt time.Time // the last release (FreeOSMemory)
}

// step takes the bytes allocated since start, read at now, and returns the target.
func (g *gcTuner) step(now time.Time, allocated uint64) int {
	if !g.started {
		g.started, g.lastAt, g.last, g.percent = true, now, allocated, gcPercentBusy
		return g.percent
	}
	rate, from := 0.0, g.lastAt
	if dt := now.Sub(from).Seconds(); dt > 0 {
		rate = float64(allocated-g.last) / dt
	}
	g.lastAt, g.last = now, allocated
	if rate >= gcBusyRate {
		g.quietSince, g.percent = time.Time{}, gcPercentBusy
		return g.percent
	}
	if g.quietSince.IsZero() {
		g.quietSince = from // quiet since this sample began
	}
	if now.Sub(g.quietSince) >= gcQuietFor {
		g.percent = gcPercentQuiet
	}
	return g.percent
}

// release says whether to return free heap memory to the OS now, free being what the heap holds
// free and not yet returned: while quiet, once it reaches gcReleaseAt, at most once per
// gcReleaseEvery. A return to the quiet target counts as one (runGCTuner releases then).
func (g *gcTuner) release(now time.Time, free uint64) bool {
	if g.percent != gcPercentQuiet || free < gcReleaseAt || now.Sub(g.releasedAt) < gcReleaseEvery {
		return false
	}
	g.releasedAt = now
	return true
}

// runGCTuner sets the collector's target from the allocation rate (gcTuner) every gcSample
// until ctx ends, and shows it in gauge.
func runGCTuner(ctx context.Context, gauge prometheus.Gauge, log *slog.Logger) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	var g gcTuner
	cur := gcPercentBusy
	gauge.Set(float64(cur))
	for {
		metrics.Read(sample)
		now := time.Now()
		if p := g.step(now, sample[0].Value.Uint64()); p != cur {
			debug.SetGCPercent(p)
			if p < cur {
				// The heap the busy target let grow is returned at once (one collection),
				// not over the next minutes: the runtime's scavenger keeps up to 10% over
				// the new goal, about what the busy target had let the heap reach.
				debug.FreeOSMemory()
				g.releasedAt = now
			}
			log.Debug("garbage collector target", slog.Int("GOGC", p))
			cur = p
			gauge.Set(float64(p))
		} else if g.release(now, sample[1].Value.Uint64()) {
			debug.FreeOSMemory()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(gcSample):
		}
	}
}

// gcTargetGauge registers whypending_gc_target_percent on reg.
func gcTargetGauge(reg prometheus.Registerer) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "whypending_gc_target_percent",
		Help: "The Go garbage collector's target (GOGC) serve has set: 30 while it allocates fast, 15 otherwise (unset when GOGC is set)."})
	reg.MustRegister(g)
	return g
}
