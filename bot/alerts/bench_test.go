package alerts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/alerts"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/proc"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

const token = "bench-token"

// board is a chat platform that records every post by its mark.
type board struct {
	mu    sync.Mutex
	marks map[string]int
	roots atomic.Int64
	posts atomic.Int64
	n     atomic.Int64
}

func (b *board) Post(ctx context.Context, channel, th, mark string, m chat.Message) (ledger.Ref, error) {
	id := fmt.Sprintf("m%d", b.n.Add(1))
	b.mu.Lock()
	b.marks[mark]++
	b.mu.Unlock()
	b.posts.Add(1)
	ref := ledger.Ref{Channel: channel, ID: id}
	if th == "" {
		b.roots.Add(1)
		ref.Thread = id
	}
	return ref, nil
}

func (b *board) Find(ctx context.Context, channel, th, mark string, since time.Time) (ledger.Ref, bool, error) {
	return ledger.Ref{}, false, nil
}

func (b *board) Edit(ctx context.Context, ref ledger.Ref, mark string, m chat.Message) error {
	return nil
}

func (b *board) duplicates() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := 0
	for _, n := range b.marks {
		d += n - 1
	}
	return d
}

// replicas starts n receivers (each with its own ledger identity) on one real control plane
// with the crash-looping pod loaded, diagnosing through a bot and writing through two clients
// with serve's client-side rate limit (fleet.RateLimit), as serve does.
func replicas(tb testing.TB, n int) ([]string, *board) {
	e := chattest.Start(tb, "seed-crash-app", true)
	b := bot.New(bot.Options{Clusters: []*bot.Cluster{e.BotCluster()},
		Policy: approval.Policy{Approvers: map[string]approval.Approvers{"slack": {Users: []string{"U0ALICE"}}}}, Log: chattest.QuietLog})
	bd := &board{marks: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	var urls []string
	warmStore(tb, e)
	for i := range n {
		self := ledger.Options{Self: proc.Identity{Host: fmt.Sprintf("replica-%d", i), PID: 1, Start: 1}}
		r := alerts.New(alerts.Options{Token: token, Receivers: map[string][]alerts.Channel{"team": {{Platform: "slack", ID: "C0OPS"}}},
			Store:     ledger.New(serveClient(tb, e), chattest.StoreNamespace, self),
			AckStore:  ledger.New(serveClient(tb, e), chattest.StoreNamespace, self),
			Platforms: thread.Platforms{"slack": bd}, Diagnose: b.Diagnose, Resync: time.Second, Log: chattest.QuietLog})
		go r.Run(ctx)
		srv := httptest.NewServer(r)
		tb.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return urls, bd
}

// serveClient is a dynamic client of e's cluster with serve's client-side rate limit.
func serveClient(tb testing.TB, e *chattest.Env) *ledger.Client {
	cfg := rest.CopyConfig(e.Cluster.Config)
	fleet.RateLimit(cfg)
	return chattest.LedgerClient(tb, cfg)
}

// warmStore makes the first Notification writes of a fresh cluster before the clock runs:
// within seconds of the CRD's creation they wait about 2 s in the API server (every first
// delivery of a round 0 did, all 20 at once), which a bot whose chart installed the CRD long
// ago never sees.
func warmStore(tb testing.TB, e *chattest.Env) {
	s := ledger.New(chattest.LedgerClient(tb, e.Cluster.Config), chattest.StoreNamespace, ledger.Options{})
	t0 := time.Now()
	if _, err := s.Update(context.Background(), ledger.Key{Source: "bench", Platform: "slack", Channel: "C0WARM", Subject: "warm-up"},
		func(*ledger.Entry) error { return nil }); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("first Notification write after the CRD install: %v", time.Since(t0))
}

// burst is 20 groups of 10 alerts each, one webhook body per group, as Alertmanager sends
// them; round names the groups apart.
func burst(round int) [][]byte {
	var out [][]byte
	start := time.Now().Add(-5 * time.Minute).UTC()
	for g := range 20 {
		hook := alerts.Webhook{Version: "4", GroupKey: fmt.Sprintf(`{}:{alertname="KubePodCrashLooping",round="%d",group="%d"}`, round, g),
			Status: "firing", Receiver: "team", ExternalURL: "http://alertmanager.example"}
		for a := range 10 {
			pod := "crash-app"
			if a > 0 {
				pod = fmt.Sprintf("web-%d-%d", g, a)
			}
			hook.Alerts = append(hook.Alerts, alerts.Alert{Status: "firing", StartsAt: start, Fingerprint: fmt.Sprintf("%d-%d-%d", round, g, a),
				Labels: map[string]string{"alertname": "KubePodCrashLooping", "namespace": "seed-crash-app", "pod": pod, "container": fmt.Sprint(a)}})
		}
		body, _ := json.Marshal(hook)
		out = append(out, body)
	}
	return out
}

// deliver posts every body at once, spread over the replicas, and returns each ack's latency.
func deliver(tb testing.TB, client *http.Client, urls []string, bodies [][]byte) []time.Duration {
	acks := make([]time.Duration, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, urls[i%len(urls)], bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			t0 := time.Now()
			resp, err := client.Do(req)
			acks[i] = time.Since(t0)
			if err != nil {
				tb.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				tb.Errorf("delivery = %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	return acks
}

// BenchmarkBurst: 200 alerts in 20 groups arrive at once at two replicas, then every body
// is delivered three more times (Alertmanager's retries, to the other replica too). It
// reports the ack p50/p99 over all 80 deliveries of a round, the time until every root and
// diagnosis is posted, and fails on a missing or duplicate post.
func BenchmarkBurst(b *testing.B) {
	urls, bd := replicas(b, 2)
	client := chattest.BenchClient(64)
	var acks, firsts, retries []time.Duration
	var settle time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		roots, posts := bd.roots.Load(), bd.posts.Load()
		bodies := burst(i)
		t0 := time.Now()
		firsts = append(firsts, deliver(b, client, urls, bodies)...)
		for range 3 {
			retries = append(retries, deliver(b, client, slices.Concat(urls[1:], urls[:1]), bodies)...)
		}
		chattest.WaitFor(b, 5*time.Minute, "every root and diagnosis", func() bool {
			return bd.roots.Load()-roots == 20 && bd.posts.Load()-posts == 220
		})
		settle += time.Since(t0)
	}
	b.StopTimer()
	time.Sleep(2 * time.Second) // a duplicate would show up now
	if d := bd.duplicates(); d != 0 {
		b.Fatalf("%d duplicate posts", d)
	}
	acks = slices.Concat(firsts, retries)
	for _, d := range [][]time.Duration{acks, firsts, retries} {
		slices.Sort(d)
	}
	ms := func(d []time.Duration, p float64) float64 {
		return float64(chattest.Percentile(d, p).Microseconds()) / 1000
	}
	b.ReportMetric(ms(acks, 0.50), "ack-p50-ms")
	b.ReportMetric(ms(acks, 0.99), "ack-p99-ms")
	// The first deliveries write the entries; the retries find them recorded.
	b.ReportMetric(ms(firsts, 0.99), "first-ack-p99-ms")
	b.ReportMetric(ms(retries, 0.99), "retry-ack-p99-ms")
	b.ReportMetric(settle.Seconds()/float64(b.N), "s-to-all-posted")
	b.ReportMetric(0, "duplicates")
}
