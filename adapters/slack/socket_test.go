package slack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	goslack "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/slackfake"
)

// TestSocketMode drives a real socketmode.Client against slacktest's WebSocket: a slash
// command envelope is acknowledged on the socket with "Working on it…" and answered on
// response_url; a block_actions envelope is acknowledged and handled by the same workers.
func TestSocketMode(t *testing.T) {
	fake := newFakeSlack(t, nil)
	hooks := newHookRecorder(t)
	core := &chattest.RecordingCore{}
	api := goslack.New("xoxb-test-token", goslack.OptionAPIURL(fake.srv.GetAPIURL()), goslack.OptionAppLevelToken("xapp-test-token"))
	client := socketmode.New(api, socketmode.OptionPingInterval(time.Minute))
	a := slack.New(slack.Options{Core: core, API: api, Log: chattest.QuietLog})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = a.Run(ctx); done <- struct{}{} }()
	go func() { _ = a.RunSocketMode(ctx, client, nil); done <- struct{}{} }()
	go func() { // slacktest's inbound feed is unbuffered: drain it
		for {
			select {
			case <-fake.srv.SeenFeed:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done; <-done })

	envelope := func(id, typ string, payload any) string {
		b, err := json.Marshal(map[string]any{"envelope_id": id, "type": typ, "accepts_response_payload": typ == "slash_commands", "payload": payload})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	acked := func(id string) (string, bool) {
		for _, m := range fake.srv.GetSeenInboundMessages() {
			if strings.Contains(m, `"envelope_id":"`+id+`"`) {
				return m, true
			}
		}
		return "", false
	}

	fake.srv.SendToWebsocket(envelope("env-command", "slash_commands", map[string]any{
		"token": "x", "team_id": "T0001", "team_domain": "acme", "channel_id": "C0OPS", "channel_name": "ops",
		"user_id": "U0ALICE", "user_name": "alice", "command": "/why-pending", "text": "shop/web-7f9c",
		"api_app_id": "A0WHYPEND", "is_enterprise_install": "false", "response_url": hooks.url("/socket/cmd"),
		"trigger_id": "1.2.3",
	}))
	chattest.WaitFor(t, 10*time.Second, "the command ack on the socket", func() bool { _, ok := acked("env-command"); return ok })
	if m, _ := acked("env-command"); !strings.Contains(m, "Working on it") {
		t.Errorf("command ack = %s, want the ephemeral Working on it… payload", m)
	}
	chattest.WaitFor(t, 10*time.Second, "the answer on response_url", func() bool { return len(hooks.get("/socket/cmd")) == 1 })
	if got := hooks.get("/socket/cmd")[0].Text; !strings.Contains(got, "answer to /why-pending shop/web-7f9c") {
		t.Errorf("answer = %q, want the core's answer", got)
	}

	var payload map[string]any
	_ = json.Unmarshal(clickPayload(t, "U0BOB", "bob", "C0OPS", "1764504000.000001", "approve", "rr-x", hooks.url("/socket/click")), &payload)
	fake.srv.SendToWebsocket(envelope("env-click", "interactive", payload))
	chattest.WaitFor(t, 10*time.Second, "the click ack on the socket", func() bool { _, ok := acked("env-click"); return ok })
	chattest.WaitFor(t, 10*time.Second, "the click's reply", func() bool { return len(hooks.get("/socket/click")) == 1 })
	if n := core.Clicks.Load(); n != 1 {
		t.Errorf("clicks handled = %d, want 1", n)
	}
}

// TestSocketModeReportsConnection drives a real socketmode.Client against slackfake, which
// speaks Slack's wire format (apps.connections.open, then a WebSocket that says hello):
// RunSocketMode reports the connection up only on Slack's hello, down when Slack closes the
// socket or asks for a new one and on every failed attempt to reconnect, and up again on the
// next hello; an app token Slack refuses ends RunSocketMode and is never reported up.
func TestSocketModeReportsConnection(t *testing.T) {
	type report struct {
		err     error
		retryAt time.Time
	}
	fake := slackfake.NewSocketMode(t, "xapp-good-token")
	run := func(t *testing.T, appToken string) (<-chan report, <-chan error) {
		t.Helper()
		api := goslack.New("xoxb-test-token", goslack.OptionAPIURL(fake.APIURL()), goslack.OptionAppLevelToken(appToken))
		a := slack.New(slack.Options{Core: &chattest.RecordingCore{}, API: api, Log: chattest.QuietLog})
		reports := make(chan report, 100)
		errc, done := make(chan error, 1), make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			defer close(done)
			errc <- a.RunSocketMode(ctx, socketmode.New(api), func(err error, retryAt time.Time) { reports <- report{err, retryAt} })
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("RunSocketMode did not return within 10s of its context's end")
			}
		})
		return reports, errc
	}
	next := func(t *testing.T, reports <-chan report, what string) report {
		t.Helper()
		select {
		case r := <-reports:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("no report within 10s, want %s", what)
			return report{}
		}
	}

	t.Run("an app token Slack refuses ends RunSocketMode, never up", func(t *testing.T) {
		reports, errc := run(t, "xapp-revoked-token")
		var err error
		select {
		case err = <-errc:
		case <-time.After(10 * time.Second):
			t.Fatal("RunSocketMode still runs 10s after apps.connections.open answered invalid_auth")
		}
		if err == nil || !strings.Contains(err.Error(), "invalid_auth") {
			t.Errorf("RunSocketMode = %v, want the invalid_auth error", err)
		}
		for range len(reports) {
			if r := <-reports; r.err == nil {
				t.Errorf("reported up with a refused app token")
			}
		}
	})

	t.Run("up on hello, down while closed and refused, up on the next hello", func(t *testing.T) {
		reports, _ := run(t, "xapp-good-token")
		if r := next(t, reports, "up on Slack's hello"); r.err != nil {
			t.Fatalf("first report = %v, want up (nil) on hello", r.err)
		}
		hellos := fake.Hellos()

		// Slack closes the socket and its socket hosts refuse for a while.
		fake.Refuse(true)
		if n := fake.CloseSockets(); n != 1 {
			t.Fatalf("CloseSockets closed %d sockets, want 1", n)
		}
		if r := next(t, reports, "down once the socket is closed"); r.err == nil || !strings.Contains(r.err.Error(), "connection ended") {
			t.Errorf("report after the close = %v, want the connection ended", r.err)
		}
		r := next(t, reports, "down on the refused reconnection")
		if r.err == nil || !strings.Contains(r.err.Error(), "bad handshake") || r.retryAt.IsZero() {
			t.Errorf("report on the refused reconnection = %v (retry at %v), want the failed attempt and when slack-go retries", r.err, r.retryAt)
		}

		// The socket hosts answer again: down until the new socket's hello.
		fake.Refuse(false)
		for r := next(t, reports, "up on the reconnection's hello"); r.err != nil; r = next(t, reports, "up on the reconnection's hello") {
			if !strings.Contains(r.err.Error(), "bad handshake") {
				t.Errorf("report while reconnecting = %v, want only failed attempts", r.err)
			}
		}
		if got := fake.Hellos(); got != hellos+1 {
			t.Errorf("hellos = %d, want %d: up before the new socket said hello", got, hellos+1)
		}

		// Slack asks for a new connection (disconnect, reason refresh_requested): down, then up on the new hello.
		if n := fake.Disconnect("refresh_requested"); n != 1 {
			t.Fatalf("Disconnect sent on %d sockets, want 1", n)
		}
		if r := next(t, reports, "down on Slack's disconnect request"); r.err == nil || !strings.Contains(r.err.Error(), "connection ended") {
			t.Errorf("report after the disconnect request = %v, want the connection ended", r.err)
		}
		if r := next(t, reports, "up on the new connection's hello"); r.err != nil {
			t.Errorf("report after the disconnect request's reconnection = %v, want up", r.err)
		}
	})
}
