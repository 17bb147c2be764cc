package slack_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/internal/chattest"
)

// concurrentCommands is how many signed slash commands are sent at once.
const concurrentCommands = 200

// burst sends n signed /why-pending commands at once to the serve listener of e, asking
// about targets round-robin, and waits for every follow-up. It returns each command's ack
// latency (request sent to 200 read) and follow-up latency (request sent to answer received
// on its response_url), sorted.
func burst(t testing.TB, e *e2eEnv, client *http.Client, targets []string, round, n int) (acks, followUps []time.Duration) {
	t.Helper()
	paths := make([]string, n)
	reqs := make([]*http.Request, n)
	for i := range n {
		paths[i] = fmt.Sprintf("/bench/%d/%d", round, i)
		body := commandBody("/why-pending", targets[i%len(targets)], alice, "alice", channel, e.hooks.url(paths[i]))
		reqs[i] = signedRequest(t, e.replicas[0].URL+"/slack/commands", testSecret, time.Now(), body)
	}
	starts, acks := chattest.Burst(t, client, reqs)
	chattest.WaitFor(t, 120*time.Second, fmt.Sprintf("%d follow-ups", n), func() bool {
		for _, p := range paths {
			if len(e.hooks.get(p)) == 0 {
				return false
			}
		}
		return true
	})
	for i, p := range paths {
		got := e.hooks.get(p)
		if len(got) != 1 || got[0].ResponseType != "in_channel" {
			t.Fatalf("%s: %d follow-ups, want exactly one in-channel answer", p, len(got))
		}
		followUps = append(followUps, got[0].At.Sub(starts[i]))
	}
	slices.Sort(acks)
	slices.Sort(followUps)
	return acks, followUps
}

// TestServe200ConcurrentCommands sends 200 signed /why-pending commands at once to the
// serve listener (real bot, cached triage collector, real control plane): every one is
// acknowledged well within Slack's 3 s and gets exactly one answer on its response_url.
func TestServe200ConcurrentCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a control plane")
	}
	e := newE2E(t, e2eOptions{scenario: "seed-ipam-leaked", cached: true})
	targets := e.Pods(t, "seed-ipam-leaked")
	acks, followUps := burst(t, e, chattest.BenchClient(concurrentCommands), targets, 0, concurrentCommands)
	t.Logf("%d concurrent commands about %d pods: ack p50 %s p99 %s max %s; follow-up p50 %s p99 %s max %s",
		concurrentCommands, len(targets), chattest.Percentile(acks, 0.50), chattest.Percentile(acks, 0.99), acks[len(acks)-1],
		chattest.Percentile(followUps, 0.50), chattest.Percentile(followUps, 0.99), followUps[len(followUps)-1])
	// The 100 ms target is the benchmark's; the test guards Slack's hard 3 s limit with a
	// margin for a loaded CI machine.
	if p99 := chattest.Percentile(acks, 0.99); p99 > 2*time.Second {
		t.Errorf("ack p99 = %s, want well under Slack's 3 s (target 100 ms)", p99)
	}
}

// BenchmarkServe200ConcurrentCommands measures ack latency (p50/p99, target p99 <= 100 ms)
// and follow-up latency for bursts of 200 concurrent signed slash commands.
func BenchmarkServe200ConcurrentCommands(b *testing.B) {
	e := newE2E(b, e2eOptions{scenario: "seed-ipam-leaked", cached: true})
	client := chattest.BenchClient(concurrentCommands)
	targets := e.Pods(b, "seed-ipam-leaked")
	burst(b, e, client, targets, -1, 20) // warm the caches and connections
	var acks, followUps []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		a, f := burst(b, e, client, targets, i, concurrentCommands)
		acks, followUps = append(acks, a...), append(followUps, f...)
	}
	slices.Sort(acks)
	slices.Sort(followUps)
	chattest.BurstMetrics(b, acks, followUps)
}

// BenchmarkAckHandler measures the CPU cost of acknowledging one signed slash command
// (read body, verify the signature, parse, reserve a queue place, write the ack), without
// the network: a load-independent figure for the ack path.
func BenchmarkAckHandler(b *testing.B) {
	hooks := newHookRecorder(b)
	a := slack.New(slack.Options{Core: &chattest.RecordingCore{}, SigningSecret: testSecret, Log: chattest.QuietLog, QueueSize: 1 << 20})
	body := commandBody("/why-pending", "shop/web-7f9c", alice, "alice", channel, hooks.url("/ack"))
	ts := time.Now()
	sig := sign(testSecret, ts, body)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/slack/commands", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("X-Slack-Signature", sig)
		w := httptest.NewRecorder()
		a.ServeCommand(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}
