package slack_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/adapters/slack"
)

// concurrentCommands is how many signed slash commands are sent at once.
const concurrentCommands = 200

// scenarioPods lists "namespace/name" of every pod of the seed-ipam-leaked scenario (74
// running pods and the stuck one), the targets of the burst.
func scenarioPods(t testing.TB, e *e2eEnv) []string {
	t.Helper()
	pods, err := e.cluster.Client.CoreV1().Pods("seed-ipam-leaked").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// burst sends n signed /why-pending commands at once to the serve listener of e, asking
// about targets round-robin, and waits for every follow-up. It returns each command's ack
// latency (request sent to 200 read) and follow-up latency (request sent to answer received
// on its response_url), sorted.
func burst(t testing.TB, e *e2eEnv, client *http.Client, targets []string, round, n int) (acks, followUps []time.Duration) {
	t.Helper()
	type sent struct {
		path  string
		start time.Time
	}
	sends := make([]sent, n)
	acks = make([]time.Duration, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		path := fmt.Sprintf("/bench/%d/%d", round, i)
		body := commandBody("/why-pending", targets[i%len(targets)], alice, "alice", channel, e.hooks.url(path))
		req := signedRequest(t, e.replicas[0].URL+"/slack/commands", testSecret, time.Now(), body)
		wg.Go(func() {
			<-gate
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			acks[i] = time.Since(start)
			sends[i] = sent{path, start}
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("command %d: status %d", i, resp.StatusCode)
			}
		})
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitFor(t, 120*time.Second, fmt.Sprintf("%d follow-ups", n), func() bool {
		for _, s := range sends {
			if len(e.hooks.get(s.path)) == 0 {
				return false
			}
		}
		return true
	})
	for _, s := range sends {
		got := e.hooks.get(s.path)
		if len(got) != 1 || got[0].ResponseType != "in_channel" {
			t.Fatalf("%s: %d follow-ups, want exactly one in-channel answer", s.path, len(got))
		}
		followUps = append(followUps, got[0].At.Sub(s.start))
	}
	slices.Sort(acks)
	slices.Sort(followUps)
	return acks, followUps
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func benchClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: concurrentCommands, MaxIdleConnsPerHost: concurrentCommands,
	}}
}

// TestServe200ConcurrentCommands sends 200 signed /why-pending commands at once to the
// serve listener (real bot, cached triage collector, real control plane): every one is
// acknowledged well within Slack's 3 s and gets exactly one answer on its response_url.
func TestServe200ConcurrentCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a control plane")
	}
	e := newE2E(t, e2eOptions{scenario: "seed-ipam-leaked", cached: true})
	targets := scenarioPods(t, e)
	acks, followUps := burst(t, e, benchClient(), targets, 0, concurrentCommands)
	t.Logf("%d concurrent commands about %d pods: ack p50 %s p99 %s max %s; follow-up p50 %s p99 %s max %s",
		concurrentCommands, len(targets), percentile(acks, 0.50), percentile(acks, 0.99), acks[len(acks)-1],
		percentile(followUps, 0.50), percentile(followUps, 0.99), followUps[len(followUps)-1])
	// The 100 ms target is the benchmark's; the test guards Slack's hard 3 s limit with a
	// margin for a loaded CI machine.
	if p99 := percentile(acks, 0.99); p99 > 2*time.Second {
		t.Errorf("ack p99 = %s, want well under Slack's 3 s (target 100 ms)", p99)
	}
}

// BenchmarkServe200ConcurrentCommands measures ack latency (p50/p99, target p99 <= 100 ms)
// and follow-up latency for bursts of 200 concurrent signed slash commands.
func BenchmarkServe200ConcurrentCommands(b *testing.B) {
	e := newE2E(b, e2eOptions{scenario: "seed-ipam-leaked", cached: true})
	client := benchClient()
	targets := scenarioPods(b, e)
	burst(b, e, client, targets, -1, 20) // warm the caches and connections
	var acks, followUps []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		a, f := burst(b, e, client, targets, i, concurrentCommands)
		acks, followUps = append(acks, a...), append(followUps, f...)
	}
	slices.Sort(acks)
	slices.Sort(followUps)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(acks, 0.50)), "ack-p50-ms")
	b.ReportMetric(ms(percentile(acks, 0.99)), "ack-p99-ms")
	b.ReportMetric(ms(acks[len(acks)-1]), "ack-max-ms")
	b.ReportMetric(ms(percentile(followUps, 0.50)), "followup-p50-ms")
	b.ReportMetric(ms(percentile(followUps, 0.99)), "followup-p99-ms")
}

// BenchmarkAckHandler measures the CPU cost of acknowledging one signed slash command
// (read body, verify the signature, parse, reserve a queue place, write the ack), without
// the network: a load-independent figure for the ack path.
func BenchmarkAckHandler(b *testing.B) {
	hooks := newHookRecorder(b)
	a := slack.New(slack.Options{Core: &recordingCore{}, SigningSecret: testSecret, Log: quietLog, QueueSize: 1 << 20})
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
