package alerts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/whypending/whypending/bot/alerts"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
)

// TestRetryAckedFromMemory: Alertmanager's retry of a body the receiver recorded moments ago
// is acknowledged without reading the ledger (here: with the API server unreachable), and
// counted as deduplicated; a changed body, or the same body once SeenEvery has passed, goes to
// the ledger again (503 while it is unreachable, so Alertmanager retries).
func TestRetryAckedFromMemory(t *testing.T) {
	e := chattest.Start(t, "seed-crash-app", false)
	var down atomic.Bool
	notes := chattest.LedgerClient(t, e.Cluster.Config)
	store := ledger.New(nil, chattest.StoreNamespace, ledger.Options{Connect: func() (*ledger.Client, error) {
		if down.Load() {
			return nil, errors.New("the API server is down")
		}
		return notes, nil
	}})
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	metrics := alerts.NewMetrics(prometheus.NewRegistry())
	r := alerts.New(alerts.Options{Token: token, Receivers: map[string][]alerts.Channel{"team": {{Platform: "slack", ID: "C0OPS"}}},
		Store: store, Platforms: thread.Platforms{"slack": &board{marks: map[string]int{}}}, SeenEvery: time.Minute,
		Metrics: metrics, Log: chattest.QuietLog, Now: clock})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	body := func(fingerprint string) []byte {
		b, _ := json.Marshal(alerts.Webhook{Version: "4", GroupKey: `{}:{alertname="KubePodCrashLooping"}`, Status: "firing", Receiver: "team",
			Alerts: []alerts.Alert{{Status: "firing", StartsAt: now.Add(-time.Minute).UTC(), Fingerprint: fingerprint,
				Labels: map[string]string{"alertname": "KubePodCrashLooping", "namespace": "seed-crash-app", "pod": "crash-app"}}}})
		return b
	}
	post := func(b []byte) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	first := body("aaa")
	if code := post(first); code != http.StatusOK {
		t.Fatalf("first delivery = %d, want 200", code)
	}
	down.Store(true)
	if code := post(first); code != http.StatusOK {
		t.Fatalf("retry of the same body with the API server down = %d, want 200 from memory", code)
	}
	if got := testutil.ToFloat64(metrics.Deduplicated); got != 1 {
		t.Errorf("deduplicated = %v, want 1", got)
	}
	if code := post(body("bbb")); code != http.StatusServiceUnavailable {
		t.Errorf("a new alert with the API server down = %d, want 503", code)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if code := post(first); code != http.StatusServiceUnavailable {
		t.Errorf("the same body after SeenEvery with the API server down = %d, want 503 (the ledger path)", code)
	}
}
