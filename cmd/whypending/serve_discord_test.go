package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// TestServeSlackAndDiscordTogether runs serve with both platforms in one process, as a user
// would configure it: the Discord commands are registered at start-up, the interactions
// endpoint answers PING, refuses an unsigned request and defers a signed /why-pending whose
// answer is edited into the deferred response, and a signed Slack command on the same
// listener is answered too.
func TestServeSlackAndDiscordTogether(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")

	// Discord's REST API: command registration and the edit of the deferred response.
	const appID, guildID, channelID, token = "1100000000000000001", "1200000000000000001", "1300000000000000001", "discord-serve-test-token"
	var mu sync.Mutex
	var registered, edits []string
	var auth []string
	discord := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/api/v9/applications/"+appID+"/guilds/"+guildID+"/commands":
			registered = append(registered, string(b))
			auth = append(auth, r.Header.Get("Authorization"))
			_, _ = w.Write(b)
		case r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/messages/@original"):
			edits = append(edits, string(b))
			fmt.Fprintf(w, `{"id": "1400000000000000001", "channel_id": %q, "type": 0, "content": "", "embeds": []}`, channelID)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"message": "404: Not Found", "code": 0}`)
		}
	}))
	defer discord.Close()
	var hookMu sync.Mutex
	var slackAnswers []string
	// Slack: the Web API's auth.test of the bot token at start, and the command's response_url.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/api/auth.test":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true,"url":"https://t1.slack.com/","team":"T1","user":"whypending","team_id":"T1","user_id":"U0BOT","bot_id":"B0BOT"}`)
		case "/answer":
			hookMu.Lock()
			slackAnswers = append(slackAnswers, string(b))
			hookMu.Unlock()
			_, _ = io.WriteString(w, "ok")
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer hook.Close()

	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const slackSecret = "serve-test-signing-secret"
	t.Setenv("WP_TEST_SIGNING_SECRET", slackSecret)
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-serve-test-token")
	t.Setenv("DISCORD_BOT_TOKEN", token)
	t.Setenv("DISCORD_PUBLIC_KEY", hex.EncodeToString(pub))
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.yaml"), fmt.Sprintf(`listen: 127.0.0.1:0
clusters:
- name: test
  kubeconfig: %s
slack:
  signingSecret: {env: WP_TEST_SIGNING_SECRET}
  apiURL: %s/api/
discord:
  applicationID: %s
  guilds: [%s]
  apiURL: %s/
approvals:
  approvers:
    users: [U0BOB]
    discord: {roles: ["1700000000000000001"]}
store: {backend: memory}
`, c.KubeconfigPath, hook.URL, appID, guildID, discord.URL))

	logs := &syncBuffer{}
	listening := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, filepath.Join(dir, "config.yaml"), logs, listening) }()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("serve stopped: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start listening")
	}
	base := "http://" + addr

	waitUntil(t, 60*time.Second, "the Discord commands to be registered", func() bool { mu.Lock(); defer mu.Unlock(); return len(registered) > 0 })
	mu.Lock()
	if len(registered) != 1 || auth[0] != "Bot "+token || !strings.Contains(registered[0], `"name":"why-pending"`) {
		t.Errorf("registrations = %q with auth %q, want one PUT of the commands with the bot token", registered, auth)
	}
	mu.Unlock()

	signed := func(body string, key ed25519.PrivateKey) *http.Request {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req, _ := http.NewRequest(http.MethodPost, base+"/discord/interactions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Signature-Timestamp", ts)
		req.Header.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(key, []byte(ts+body))))
		return req
	}
	post := func(req *http.Request) (int, string) {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post(signed(`{"id":"1","application_id":"`+appID+`","type":1,"token":"ping","version":1}`, priv)); status != 200 || body != `{"type":1}` {
		t.Errorf("PING = %d %s, want 200 {\"type\":1}", status, body)
	}
	_, stranger, _ := ed25519.GenerateKey(nil)
	if status, _ := post(signed(`{"id":"1","application_id":"`+appID+`","type":1,"token":"ping","version":1}`, stranger)); status != http.StatusUnauthorized {
		t.Errorf("PING signed with another key = %d, want 401", status)
	}

	command, _ := json.Marshal(map[string]any{
		"id": "1800000000000000001", "application_id": appID, "type": 2, "token": "command-token", "version": 1,
		"guild_id": guildID, "channel_id": channelID,
		"member": map[string]any{"user": map[string]any{"id": "1600000000000000001", "username": "alice"},
			"roles": []string{}, "permissions": "2248473465835073", "joined_at": "2025-01-15T09:30:00.000000+00:00"},
		"data": map[string]any{"id": "1500000000000000001", "name": "why-pending", "type": 1,
			"options": []map[string]any{{"name": "pod", "type": 3, "value": "seed-ipam-leaked/shop-7frd7stjbt-2kq8r"}}},
	})
	if status, body := post(signed(string(command), priv)); status != 200 || !strings.Contains(body, `"type":5`) {
		t.Fatalf("/why-pending = %d %s, want a deferred response", status, body)
	}
	waitUntil(t, 60*time.Second, "the Discord answer", func() bool { mu.Lock(); defer mu.Unlock(); return len(edits) > 0 })
	mu.Lock()
	if !strings.Contains(edits[0], "calico-ipam-exhausted") || !strings.Contains(edits[0], `"allowed_mentions":{"parse":[]`) {
		t.Errorf("edited answer = %s, want the diagnosis and no mentions", edits[0])
	}
	mu.Unlock()

	form := url.Values{"command": {"/why-pending"}, "text": {"seed-ipam-leaked/shop-7frd7stjbt-2kq8r"},
		"user_id": {"U0ALICE"}, "user_name": {"alice"}, "team_id": {"T1"}, "channel_id": {"C0OPS"},
		"response_url": {hook.URL + "/answer"}}.Encode()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(slackSecret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, form)
	req, _ := http.NewRequest(http.MethodPost, base+"/slack/commands", bytes.NewReader([]byte(form)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	if status, body := post(req); status != 200 || !strings.Contains(body, "Working on it") {
		t.Fatalf("Slack command = %d %s", status, body)
	}
	waitUntil(t, 60*time.Second, "the Slack answer", func() bool { hookMu.Lock(); defer hookMu.Unlock(); return len(slackAnswers) > 0 })
	hookMu.Lock()
	if !strings.Contains(slackAnswers[0], "calico-ipam-exhausted") {
		t.Errorf("Slack answer = %s, want the diagnosis", slackAnswers[0])
	}
	hookMu.Unlock()

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`whypending_ack_duration_seconds_count{kind="command",platform="discord"} 1`, `whypending_commands_total{command="why-pending",outcome="ok"} 2`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve returned %v after shutdown, want nil", err)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("logs contain the Discord bot token:\n%s", logs.String())
	}
}
