// Package amtest runs the real Alertmanager (v0.31.1, built by hack/alertmanager/build.sh)
// for tests: on a loopback port, with a temp dir for its config and state, stopped at
// cleanup, with its gossip cluster off. Tests fire alerts through its API v2 as Prometheus
// does and read its silences. Only tests import it, so the binary does not link it.
package amtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending/internal/testenv"
)

// Options is the route and receiver of the Alertmanager under test.
type Options struct {
	// WebhookURL is where the receiver "team" posts (http_config.authorization Bearer Token).
	WebhookURL, Token string
	// GroupBy is the route's group_by (nil: alertname, namespace).
	GroupBy []string
	// GroupWait, GroupInterval, RepeatInterval are the route's timers (0: 1s, 2s, 1h).
	GroupWait, GroupInterval, RepeatInterval time.Duration
}

// Alertmanager is one running Alertmanager.
type Alertmanager struct {
	// URL is its base URL (http://127.0.0.1:PORT).
	URL  string
	proc *testenv.Process
}

// Start starts an Alertmanager for the test and stops it in t.Cleanup.
func Start(t testing.TB, o Options) *Alertmanager {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin, err := testenv.Alertmanager(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.GroupBy == nil {
		o.GroupBy = []string{"alertname", "namespace"}
	}
	dur := func(d, def time.Duration) string {
		if d <= 0 {
			d = def
		}
		return d.String()
	}
	groupBy, _ := json.Marshal(o.GroupBy)
	token, _ := json.Marshal(o.Token)
	url, _ := json.Marshal(o.WebhookURL)
	config := fmt.Sprintf(`route:
  receiver: team
  group_by: %s
  group_wait: %s
  group_interval: %s
  repeat_interval: %s
receivers:
  - name: team
    webhook_configs:
      - url: %s
        send_resolved: true
        http_config:
          authorization:
            type: Bearer
            credentials: %s
`, groupBy, dur(o.GroupWait, time.Second), dur(o.GroupInterval, 2*time.Second), dur(o.RepeatInterval, time.Hour), url, token)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// freePort's port can be taken before Alertmanager binds it: start again on another.
	for attempt := 1; ; attempt++ {
		a, inUse := start(t, bin, dir, freePort(t))
		if a != nil {
			return a
		}
		if !inUse || attempt == 3 {
			t.Fatal("alertmanager did not start")
		}
	}
}

// start runs Alertmanager on port; inUse says it failed because the port was taken.
func start(t testing.TB, bin, dir string, port int) (*Alertmanager, bool) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := testenv.StartProcess("alertmanager", bin, []string{
		"--config.file=" + filepath.Join(dir, "alertmanager.yml"), "--storage.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--cluster.listen-address=", "--log.level=debug",
	}, filepath.Join(dir, "alertmanager.log"))
	if err != nil {
		t.Fatal(err)
	}
	a := &Alertmanager{URL: "http://" + addr, proc: p}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("alertmanager log:\n%s", p.LogTail(40))
					}
					if err := p.Stop(); err != nil {
						t.Error(err)
					}
				})
				return a, false
			}
		}
		if p.Exited() && strings.Contains(p.LogTail(20), "address already in use") {
			_ = p.Stop()
			t.Logf("alertmanager: port %d taken, starting again", port)
			return nil, true
		}
		if p.Exited() || time.Now().After(deadline) {
			tail := p.LogTail(20)
			_ = p.Stop()
			t.Fatalf("alertmanager did not become ready: %v\n%s", err, tail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Alert is a postable alert (API v2).
type Alert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Fire posts alerts as Prometheus does (POST /api/v2/alerts). An alert with EndsAt in the
// past resolves it.
func (a *Alertmanager) Fire(t testing.TB, alerts ...Alert) {
	t.Helper()
	body, err := json.Marshal(alerts)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(a.URL+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/v2/alerts = %d", resp.StatusCode)
	}
}

// Get decodes GET path (e.g. /api/v2/silences) into v.
func (a *Alertmanager) Get(t testing.TB, path string, v any) {
	t.Helper()
	resp, err := http.Get(a.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// ExpireSilence expires silence id (DELETE /api/v2/silence/{id}), as someone in
// Alertmanager's UI or amtool would.
func (a *Alertmanager) ExpireSilence(t testing.TB, id string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, a.URL+"/api/v2/silence/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /api/v2/silence/%s = %d", id, resp.StatusCode)
	}
}

// LogTail is the last n lines of Alertmanager's log.
func (a *Alertmanager) LogTail(n int) string { return a.proc.LogTail(n) }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
