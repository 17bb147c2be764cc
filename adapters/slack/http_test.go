package slack_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
)

const testSecret = "8f742231b10e8888abcd99yyyzzz85a5"

func TestServeCommandVerifiesSignature(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name       string
		secret     string        // secret the request is signed with
		age        time.Duration // how old the timestamp is
		tamper     bool          // change the body after signing
		noHeaders  bool
		wantStatus int
		wantBody   string
	}{
		{name: "a correctly signed command is acknowledged", secret: testSecret, wantStatus: 200, wantBody: "Working on it…"},
		{name: "a timestamp four minutes old is still accepted", secret: testSecret, age: 4 * time.Minute, wantStatus: 200, wantBody: "Working on it…"},
		{name: "a wrong secret is refused", secret: "not-the-secret", wantStatus: 401, wantBody: "invalid signature"},
		{name: "a body changed after signing is refused", secret: testSecret, tamper: true, wantStatus: 401, wantBody: "invalid signature"},
		{name: "a timestamp older than five minutes is refused (replay)", secret: testSecret, age: 6 * time.Minute, wantStatus: 401, wantBody: "request timestamp outside the 5 minute window"},
		{name: "a timestamp six minutes in the future is refused", secret: testSecret, age: -6 * time.Minute, wantStatus: 401, wantBody: "request timestamp outside the 5 minute window"},
		{name: "a request without signature headers is refused", secret: testSecret, noHeaders: true, wantStatus: 401, wantBody: "missing X-Slack-Signature or X-Slack-Request-Timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core := &chattest.RecordingCore{}
			hooks := newHookRecorder(t)
			a := slack.New(slack.Options{Core: core, SigningSecret: testSecret, Log: chattest.QuietLog})
			srv := chattest.Serve(t, a)
			body := commandBody("/why-pending", "shop/web-7f9c", "U0ALICE", "alice", "C0OPS", hooks.url("/c/1"))
			req := signedRequest(t, srv.URL+"/slack/commands", tt.secret, now.Add(-tt.age), body)
			if tt.tamper {
				req = signedRequest(t, srv.URL+"/slack/commands", tt.secret, now, body)
				req.Body = io.NopCloser(strings.NewReader(strings.Replace(body, "web-7f9c", "web-0000", 1)))
			}
			if tt.noHeaders {
				req.Header.Del("X-Slack-Signature")
				req.Header.Del("X-Slack-Request-Timestamp")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(got), tt.wantBody) {
				t.Fatalf("POST /slack/commands = %d %q, want %d containing %q", resp.StatusCode, got, tt.wantStatus, tt.wantBody)
			}
			if tt.wantStatus != 200 {
				if n := core.Commands.Load(); n != 0 {
					t.Errorf("core answered %d commands, want 0 (refused request)", n)
				}
				return
			}
			var ack struct{ ResponseType, Text string }
			_ = json.Unmarshal(got, &ack)
			if ack.Text != "Working on it…" {
				t.Errorf("ack text = %q, want the ephemeral working-on-it", ack.Text)
			}
			chattest.WaitFor(t, 5*time.Second, "the follow-up on response_url", func() bool { return len(hooks.get("/c/1")) == 1 })
			p := hooks.get("/c/1")[0]
			if p.ResponseType != "in_channel" || !strings.Contains(p.Text, "answer to /why-pending shop/web-7f9c") {
				t.Errorf("follow-up = %q (%s), want the in-channel answer", p.Text, p.ResponseType)
			}
		})
	}
}

func TestServeInteractionVerifiesSignature(t *testing.T) {
	core := &chattest.RecordingCore{}
	hooks := newHookRecorder(t)
	a := slack.New(slack.Options{Core: core, SigningSecret: testSecret, Log: chattest.QuietLog})
	srv := chattest.Serve(t, a)
	body := clickBody(t, "U0BOB", "bob", "C0OPS", "1764504000.000001", "approve", "rr-x", hooks.url("/i/1"))

	bad := signedRequest(t, srv.URL+"/slack/interactions", "wrong", time.Now(), body)
	resp, err := http.DefaultClient.Do(bad)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("badly signed click = %d, want 401", resp.StatusCode)
	}
	stale := signedRequest(t, srv.URL+"/slack/interactions", testSecret, time.Now().Add(-10*time.Minute), body)
	resp, err = http.DefaultClient.Do(stale)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("stale click = %d, want 401", resp.StatusCode)
	}
	good := signedRequest(t, srv.URL+"/slack/interactions", testSecret, time.Now(), body)
	resp, err = http.DefaultClient.Do(good)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("signed click = %d, want 200", resp.StatusCode)
	}
	chattest.WaitFor(t, 5*time.Second, "the click notice", func() bool { return len(hooks.get("/i/1")) == 1 })
	if n := core.Clicks.Load(); n != 1 {
		t.Errorf("core saw %d clicks, want 1 (only the signed, fresh one)", n)
	}
}

func TestAckBeforeSlowAnswer(t *testing.T) {
	core := &chattest.RecordingCore{Block: make(chan struct{})}
	hooks := newHookRecorder(t)
	a := slack.New(slack.Options{Core: core, SigningSecret: testSecret, Log: chattest.QuietLog})
	srv := chattest.Serve(t, a)
	body := commandBody("/ipam", "check", "U0ALICE", "alice", "C0OPS", hooks.url("/c/slow"))
	start := time.Now()
	resp, err := http.DefaultClient.Do(signedRequest(t, srv.URL+"/slack/commands", testSecret, start, body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != 200 || took > time.Second {
		t.Fatalf("ack = %d after %s, want 200 well within Slack's 3 s", resp.StatusCode, took)
	}
	if n := len(hooks.get("/c/slow")); n != 0 {
		t.Fatalf("follow-ups before the answer was ready = %d, want 0", n)
	}
	close(core.Block)
	chattest.WaitFor(t, 5*time.Second, "the follow-up after the slow answer", func() bool { return len(hooks.get("/c/slow")) == 1 })
}

func TestFollowUpWaitsOutRateLimit(t *testing.T) {
	core := &chattest.RecordingCore{}
	hooks := newHookRecorder(t)
	hooks.limitNext.Store(1)
	reg := prometheus.NewRegistry()
	metrics := chat.NewMetrics(reg)
	a := slack.New(slack.Options{Core: core, SigningSecret: testSecret, Log: chattest.QuietLog, Metrics: metrics})
	srv := chattest.Serve(t, a)
	start := time.Now()
	resp, err := http.DefaultClient.Do(signedRequest(t, srv.URL+"/slack/commands", testSecret, start,
		commandBody("/whypending", "help", "U0ALICE", "alice", "C0OPS", hooks.url("/c/429"))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	chattest.WaitFor(t, 10*time.Second, "the follow-up after a 429", func() bool { return len(hooks.get("/c/429")) == 1 })
	if took := hooks.get("/c/429")[0].At.Sub(start); took < time.Second {
		t.Errorf("follow-up delivered %s after the command, want at least the 1 s Retry-After", took)
	}
	mfs, _ := reg.Gather()
	limited := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "whypending_deliveries_total" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == "rate-limited" {
						limited += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	if limited != 1 {
		t.Errorf("rate-limited deliveries counted = %v, want 1", limited)
	}
}

func TestUpdateMessageWaitsOutRateLimit(t *testing.T) {
	fake := newFakeSlack(t, nil)
	fake.limitUpdates.Store(1)
	a := slack.New(slack.Options{Core: &chattest.RecordingCore{}, API: fake.api(), Log: chattest.QuietLog})
	start := time.Now()
	if err := a.UpdateMessage(t.Context(), "slack:C0OPS/1764504000.000001", chat.Message{Title: "Expired: release 3 leaked IPs"}); err != nil {
		t.Fatalf("UpdateMessage: %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("UpdateMessage returned after %s, want at least the 1 s Retry-After", took)
	}
	_, updates := fake.snapshot()
	if len(updates) != 1 || updates[0].Channel != "C0OPS" || updates[0].TS != "1764504000.000001" {
		t.Errorf("chat.update calls = %+v, want one for C0OPS/1764504000.000001", updates)
	}
	if err := a.UpdateMessage(t.Context(), "console:1", chat.Message{Title: "x"}); err == nil {
		t.Errorf("UpdateMessage(console ref) = nil error, want a refusal")
	}
}
