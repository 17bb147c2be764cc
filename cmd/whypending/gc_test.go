package main

import (
	"bytes"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestSetGCPercent: serve's collector target starts at gcPercentBusy and is tuned unless GOGC
// is set, and the log says which is in force and where it came from.
func TestSetGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	var out bytes.Buffer
	if tune := setGCPercent(slog.New(slog.NewJSONHandler(&out, nil))); !tune {
		t.Errorf("GOGC unset: not tuned")
	}
	if got := debug.SetGCPercent(100); got != gcPercentBusy {
		t.Errorf("GOGC unset: target = %d, want %d", got, gcPercentBusy)
	}
	if !strings.Contains(out.String(), `"GOGC":"30 while allocating 32 MiB/s or more, else 15","from":"serve's default"`) {
		t.Errorf("log lacks the default:\n%s", out.String())
	}

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150) // what the runtime does with GOGC at start
	out.Reset()
	if tune := setGCPercent(slog.New(slog.NewJSONHandler(&out, nil))); tune {
		t.Errorf("GOGC=150: tuned, want GOGC kept")
	}
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GOGC=150: target = %d, want it kept", got)
	}
	if !strings.Contains(out.String(), `"GOGC":"150","from":"GOGC"`) {
		t.Errorf("log lacks GOGC's target:\n%s", out.String())
	}

	t.Setenv("GOGC", "banana") // the runtime ignores it (100)
	debug.SetGCPercent(100)
	out.Reset()
	if tune := setGCPercent(slog.New(slog.NewJSONHandler(&out, nil))); !tune {
		t.Errorf("GOGC=banana: not tuned")
	}
	if got := debug.SetGCPercent(100); got != gcPercentBusy {
		t.Errorf("GOGC=banana: target = %d, want the default %d", got, gcPercentBusy)
	}
	if !strings.Contains(out.String(), `"level":"WARN","msg":"GOGC is neither a number nor off`) || !strings.Contains(out.String(), `"from":"serve's default"`) {
		t.Errorf("GOGC=banana: log lacks the warning and the default:\n%s", out.String())
	}
}

// TestGCTuner: the target is busy at start and as soon as one sample allocates at gcBusyRate,
// and quiet only after the rate stayed under it for gcQuietFor; a pause within a burst does
// not make it quiet.
func TestGCTuner(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	const mib = 1 << 20
	var g gcTuner
	at, allocated := t0, uint64(0)
	// step advances by d at rate bytes per second and returns the target.
	step := func(d time.Duration, rate float64) int {
		at, allocated = at.Add(d), allocated+uint64(rate*d.Seconds())
		return g.step(at, allocated)
	}
	if got := g.step(at, allocated); got != gcPercentBusy {
		t.Fatalf("at start: %d, want %d (the sync follows)", got, gcPercentBusy)
	}
	for _, tt := range []struct {
		what string
		d    time.Duration
		rate float64
		want int
	}{
		{"the sync, 130 MiB/s", 40 * time.Second, 130 * mib, gcPercentBusy},
		{"the watch posting, 19 MiB/s, for less than gcQuietFor", gcQuietFor - time.Second, 19 * mib, gcPercentBusy},
		{"still 19 MiB/s, gcQuietFor in all", 2 * time.Second, 19 * mib, gcPercentQuiet},
		{"a mass event, 100 MiB/s", 2 * time.Second, 100 * mib, gcPercentBusy},
		{"a pause within it", 10 * time.Second, 1 * mib, gcPercentBusy},
		{"the burst again", 2 * time.Second, 60 * mib, gcPercentBusy},
		{"idle, not yet gcQuietFor", 20 * time.Second, 0, gcPercentBusy},
		{"idle, gcQuietFor in all", 20 * time.Second, 0, gcPercentQuiet},
		{"just under the rate", time.Minute, gcBusyRate - 1, gcPercentQuiet},
		{"at the rate", 2 * time.Second, gcBusyRate, gcPercentBusy},
	} {
		if got := step(tt.d, tt.rate); got != tt.want {
			t.Errorf("%s: target %d, want %d", tt.what, got, tt.want)
		}
	}
}

// TestGCTunerRelease: free heap memory is returned only while quiet, once it reaches
// gcReleaseAt, and at most once per gcReleaseEvery.
func TestGCTunerRelease(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	g := gcTuner{percent: gcPercentBusy}
	if g.release(t0, 64<<20) {
		t.Errorf("released while busy")
	}
	g.percent = gcPercentQuiet
	if g.release(t0, gcReleaseAt-1) {
		t.Errorf("released %d bytes, under gcReleaseAt", gcReleaseAt-1)
	}
	if !g.release(t0, gcReleaseAt) {
		t.Errorf("quiet with gcReleaseAt free: not released")
	}
	if g.release(t0.Add(gcReleaseEvery-time.Second), 64<<20) {
		t.Errorf("released again within gcReleaseEvery")
	}
	if !g.release(t0.Add(gcReleaseEvery), 64<<20) {
		t.Errorf("gcReleaseEvery later: not released")
	}
}
