package alerts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/whypending/whypending/bot/alerts"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
)

// TestSilenceWhereAlertsAreHidden: with channels.namespaces giving C0TWO workload-grouped, a
// group whose alerts are all in another namespace gets no thread in C0TWO (counted in
// not_shown), and once the group has a root there that does not show all of it, a click
// there (forged: the root has no Silence button) is refused without calling Alertmanager,
// while C0OPS, which sees every alert, silences the group.
func TestSilenceWhereAlertsAreHidden(t *testing.T) {
	e := chattest.Start(t, "seed-crash-app", false)
	var posts atomic.Int64
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v2/silences" {
			posts.Add(1)
			_, _ = w.Write([]byte(`{"silenceID":"s-1"}`))
			return
		}
		_, _ = w.Write([]byte(`[]`))
	}))
	t.Cleanup(am.Close)
	store := ledger.New(chattest.LedgerClient(t, e.Cluster.Config), chattest.StoreNamespace, ledger.Options{})
	metrics := alerts.NewMetrics(prometheus.NewRegistry())
	r := alerts.New(alerts.Options{Token: token, Store: store, Platforms: thread.Platforms{"slack": &board{marks: map[string]int{}}},
		Receivers:         map[string][]alerts.Channel{"team": {{Platform: "slack", ID: "C0OPS"}, {Platform: "slack", ID: "C0TWO"}}},
		ChannelNamespaces: map[string]string{"C0TWO": "workload-grouped"},
		Silences:          &alerts.Silences{URL: am.URL}, Metrics: metrics, Log: chattest.QuietLog})
	const groupKey = `{}:{alertname="KubePodCrashLooping"}`
	deliver := func(namespaces ...string) {
		t.Helper()
		h := alerts.Webhook{Version: "4", GroupKey: groupKey, Status: "firing", Receiver: "team",
			GroupLabels: map[string]string{"alertname": "KubePodCrashLooping"}}
		for _, ns := range namespaces {
			h.Alerts = append(h.Alerts, alerts.Alert{Status: "firing", StartsAt: time.Now().Add(-time.Minute).UTC(), Fingerprint: "fp-" + ns,
				Labels: map[string]string{"alertname": "KubePodCrashLooping", "namespace": ns, "pod": "crash-app"}})
		}
		b, _ := json.Marshal(h)
		req := httptest.NewRequest(http.MethodPost, alerts.Path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("delivery = %d %s, want 200", w.Code, w.Body)
		}
	}
	thread := func(channel string) string {
		return ledger.Key{Source: alerts.Source, Platform: "slack", Channel: channel, Subject: groupKey}.Name()
	}
	ctx := context.Background()

	deliver("seed-crash-app")
	if _, err := store.Get(ctx, thread("C0TWO")); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("C0TWO's entry of a group all in another namespace: err %v, want none (ErrNotFound)", err)
	}
	if _, err := store.Get(ctx, thread("C0OPS")); err != nil {
		t.Errorf("C0OPS's entry: %v", err)
	}
	if got := testutil.ToFloat64(metrics.NotShown); got != 1 {
		t.Errorf("not_shown = %v, want 1", got)
	}

	deliver("seed-crash-app", "workload-grouped")
	if _, err := store.Get(ctx, thread("C0TWO")); err != nil {
		t.Fatalf("C0TWO's entry once the group has an alert of its namespace: %v", err)
	}
	bob := chat.Principal{Platform: "slack", ID: "U0BOB"}
	out := r.Silence(ctx, bob, "C0TWO", chat.SilenceButton{Thread: thread("C0TWO"), For: time.Hour})
	if !strings.Contains(out.Notice, "would mute alerts it does not see") || !strings.Contains(out.Notice, "Nothing was done") {
		t.Errorf("C0TWO's forged click answered %q, want refused", out.Notice)
	}
	if n := posts.Load(); n != 0 {
		t.Errorf("Alertmanager got %d silences after the refused click, want 0", n)
	}
	out = r.Silence(ctx, bob, "C0OPS", chat.SilenceButton{Thread: thread("C0OPS"), For: 24 * time.Hour})
	tomorrow := time.Now().Add(24 * time.Hour).UTC().Format("2006-01-02")
	if !strings.Contains(out.Notice, "Silenced for 24h (until "+tomorrow) || posts.Load() != 1 {
		t.Errorf("C0OPS's click answered %q with %d silences made, want one, until %s", out.Notice, posts.Load(), tomorrow)
	}
}
