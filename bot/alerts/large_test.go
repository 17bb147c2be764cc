package alerts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending/bot/alerts"
	"github.com/whypending/whypending/internal/chattest"
)

// TestLargeGroup: a group of 3000 alerts (a 2.5 MB body, under the 4 MiB limit) is answered
// 200 against the real kube-apiserver and etcd (the entry is capped, not refused for its size),
// and its thread is posted: one root, at most 20 diagnoses and one line for the rest. An
// empty group before it is answered 200 and posts nothing.
func TestLargeGroup(t *testing.T) {
	urls, bd := replicas(t, 1)
	// An empty group first: 200 and no root (it is counted below: one root in all).
	empty, _ := json.Marshal(alerts.Webhook{Version: "4", GroupKey: `{}:{alertname="Empty"}`, Status: "firing", Receiver: "team", Alerts: []alerts.Alert{}})
	ereq, _ := http.NewRequest(http.MethodPost, urls[0], bytes.NewReader(empty))
	ereq.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(ereq); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("empty group: %v %v, want 200", resp, err)
	}
	hook := alerts.Webhook{Version: "4", GroupKey: `{}:{alertname="KubePodCrashLooping",big="yes"}`, Status: "firing", Receiver: "team"}
	start := time.Now().Add(-5 * time.Minute).UTC()
	for i := range 3000 {
		hook.Alerts = append(hook.Alerts, alerts.Alert{Status: "firing", StartsAt: start, Fingerprint: fmt.Sprintf("big-%d", i),
			Labels:      map[string]string{"alertname": "KubePodCrashLooping", "namespace": "seed-crash-app", "pod": fmt.Sprintf("web-%d", i)},
			Annotations: map[string]string{"summary": strings.Repeat("s", 700)}})
	}
	body, _ := json.Marshal(hook)
	if len(body) < 2<<20 || len(body) > alerts.DefaultMaxBody {
		t.Fatalf("body is %d bytes, want about 2.5 MB", len(body))
	}
	for range 2 { // a retry of the same body is answered the same
		req, _ := http.NewRequest(http.MethodPost, urls[0], bytes.NewReader(body))
		req.Header.Set("Authorization", "bearer "+token) // the scheme is case-insensitive
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("delivery = %d, want 200", resp.StatusCode)
		}
	}
	chattest.WaitFor(t, 2*time.Minute, "the root, 20 diagnoses and the rest's line", func() bool {
		return bd.roots.Load() == 1 && bd.posts.Load() == 1+20+1
	})
	time.Sleep(time.Second)
	if n := bd.posts.Load(); n != 22 || bd.duplicates() != 0 {
		t.Errorf("%d posts, %d duplicates; want 22, 0", n, bd.duplicates())
	}
}
