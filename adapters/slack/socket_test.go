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
	go func() { _ = a.RunSocketMode(ctx, client); done <- struct{}{} }()
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
