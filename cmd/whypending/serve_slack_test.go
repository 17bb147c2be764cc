package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goslack "github.com/slack-go/slack"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/discordfake"
	"github.com/whypending/whypending/internal/slackfake"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// TestServeChecksSlackBotToken: serve asks Slack's auth.test whose the bot token is, in HTTP
// and Socket Mode alike. A token Slack refuses keeps Slack down in /readyz, naming Slack's
// error and slack.botToken, and in whypending_chat_platform_up, with one log line and the
// token nowhere in the logs, even with a Socket Mode connection up; an accepted one is up and
// its workspace and bot are logged; Slack failing to answer (429, then 503) is reported
// while serve asks again, and Slack is up once it answers. Slack is slackfake (auth.test,
// apps.connections.open and the WebSocket in Slack's wire format); the one cluster refuses
// connections, so /readyz as a whole is never ready and the test reads its slack line.
func TestServeChecksSlackBotToken(t *testing.T) {
	const appToken = "xapp-1-A0WHYPEND-serve-test"
	type run struct {
		readyz, gauge func() string
		status        func() int // /readyz's HTTP status
		logs          *syncBuffer
	}
	// serveOn starts serve on the cluster of kubeconfig with the bot token botToken against
	// fake, in mode "http" or "socket", and waits until it listens; serve does so on a cluster
	// that refuses connections.
	serveOn := func(t *testing.T, kubeconfig string, fake *slackfake.SocketMode, mode, botToken string) run {
		t.Helper()
		listen := freeAddr(t)
		t.Setenv("SLACK_BOT_TOKEN", botToken)
		t.Setenv("SLACK_APP_TOKEN", appToken)
		t.Setenv("SLACK_SIGNING_SECRET", "serve-test-signing-secret")
		path := filepath.Join(t.TempDir(), "config.yaml")
		writeFile(t, path, fmt.Sprintf(`listen: %s
clusters: [{name: down, kubeconfig: %q}]
slack: {mode: %s, apiURL: %q}
approvals: {approvers: {users: [U0BOB]}}
store: {backend: memory}
`, listen, kubeconfig, mode, fake.APIURL()))
		logs := &syncBuffer{}
		done := runServeUntilCleanup(t, path, logs)
		t.Cleanup(func() {
			if strings.Contains(logs.String(), botToken) {
				t.Errorf("the logs hold the bot token:\n%s", logs.String())
			}
		})
		get := func(p string) string {
			b := bodyOf("http://" + listen + p)
			if strings.Contains(b, botToken) {
				t.Errorf("GET %s shows the bot token", p)
			}
			return b
		}
		waitListening(t, "http://"+listen, done, logs)
		return run{
			readyz: func() string { return grepLines(get("/readyz"), "slack: ") },
			status: func() int {
				resp, err := http.Get("http://" + listen + "/readyz")
				if err != nil {
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			},
			gauge: func() string { return grepLines(get("/metrics"), `whypending_chat_platform_up{platform="slack"}`) },
			logs:  logs,
		}
	}
	serve := func(t *testing.T, fake *slackfake.SocketMode, mode, botToken string) run {
		t.Helper()
		return serveOn(t, refusingKubeconfig(t), fake, mode, botToken)
	}
	const (
		up   = `whypending_chat_platform_up{platform="slack"} 1`
		down = `whypending_chat_platform_up{platform="slack"} 0`
	)
	refusedLogs := func(logs string) int {
		return strings.Count(logs, `"msg":"chat platform unavailable: its bot token was refused"`)
	}

	for _, mode := range []string{"http", "socket"} {
		t.Run(mode+": a bot token Slack refuses is down, naming the error and slack.botToken", func(t *testing.T) {
			const token = "xoxb-revoked-serve-test"
			fake := slackfake.NewSocketMode(t, appToken)
			fake.RefuseToken(token, "invalid_auth")
			s := serve(t, fake, mode, token)
			want := "slack: the bot token was refused (invalid_auth): check slack.botToken (read from the environment variable SLACK_BOT_TOKEN; " +
				"with the chart, the key SLACK_BOT_TOKEN of its Secret): it is the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions page (retrying at "
			waitUntil(t, 10*time.Second, "/readyz to say the bot token was refused", func() bool { return strings.HasPrefix(s.readyz(), want) })
			if mode == "socket" {
				// The app token is good: the socket is up, and Slack still is not.
				waitUntil(t, 10*time.Second, "Slack's hello on the socket", func() bool { return fake.Hellos() == 1 })
				time.Sleep(500 * time.Millisecond)
				if got := s.readyz(); !strings.HasPrefix(got, want) {
					t.Errorf("/readyz with the socket up = %q, want %q…", got, want)
				}
			}
			if got := s.gauge(); got != down {
				t.Errorf("gauge = %q, want %q", got, down)
			}
			if n := refusedLogs(s.logs.String()); n != 1 {
				t.Errorf("%d log lines say the bot token was refused, want 1:\n%s", n, s.logs.String())
			}
			if calls := fake.AuthTests(); len(calls) != 1 || calls[0].Token != token || calls[0].Error != "invalid_auth" {
				t.Errorf("auth.test calls = %+v, want one, refused", calls)
			}
		})
	}

	t.Run("an accepted bot token is up, and its workspace and bot are logged", func(t *testing.T) {
		fake := slackfake.NewSocketMode(t, appToken)
		s := serve(t, fake, "http", "xoxb-good-serve-test")
		waitUntil(t, 10*time.Second, "/readyz to say slack: ok", func() bool { return s.readyz() == "slack: ok" })
		if got := s.gauge(); got != up {
			t.Errorf("gauge = %q, want %q", got, up)
		}
		for _, want := range []string{`"msg":"slack bot token accepted"`, `"teamID":"` + slackfake.TeamID + `"`,
			`"botUserID":"` + slackfake.BotUserID + `"`, `"botID":"` + slackfake.BotID + `"`} {
			if !strings.Contains(s.logs.String(), want) {
				t.Errorf("logs lack %s:\n%s", want, s.logs.String())
			}
		}
	})

	t.Run("Slack failing to answer auth.test is shown and retried, and leaves serve ready", func(t *testing.T) {
		// No answer says nothing of the token: an outage of Slack's Web API must not take
		// every replica out of the Service while response_url answers may get through.
		fake := slackfake.NewSocketMode(t, appToken)
		fake.FailAuthTests(http.StatusTooManyRequests, http.StatusServiceUnavailable)
		s := serve(t, fake, "http", "xoxb-good-serve-test")
		var seen []string
		waitUntil(t, 15*time.Second, "/readyz to say slack: ok after Slack answers", func() bool {
			got := s.readyz()
			if got != "slack: ok" && (len(seen) == 0 || seen[len(seen)-1] != got) {
				seen = append(seen, got)
				if g := s.gauge(); g != up && s.readyz() != "slack: ok" && s.readyz() != "slack: checking the bot token" {
					t.Errorf("gauge while %q = %q, want %q", got, g, up)
				}
			}
			return got == "slack: ok"
		})
		sawRetry := false
		for _, l := range seen {
			if strings.Contains(l, "refused") {
				t.Errorf("/readyz said %q: a 429 or 503 is no refusal", l)
			}
			if (strings.HasPrefix(l, "slack: cannot check the bot token: auth.test: slack server error: 503 Service Unavailable (retrying ") ||
				strings.HasPrefix(l, "slack: cannot check the bot token: auth.test: slack rate limit exceeded, retry after 1s (retrying ")) &&
				strings.HasSuffix(l, "; not checked until Slack answers") {
				sawRetry = true
			}
		}
		if !sawRetry {
			t.Errorf("/readyz said %q before ok, want the 429 or 503 shown, not checked, while retrying", seen)
		}
		if got := s.gauge(); got != up {
			t.Errorf("gauge = %q, want %q", got, up)
		}
		if n := len(fake.AuthTests()); n != 3 {
			t.Errorf("auth.test called %d times, want 3 (429, 503, ok)", n)
		}
		if n := refusedLogs(s.logs.String()); n != 0 {
			t.Errorf("%d log lines say the bot token was refused, want none", n)
		}
		if n := strings.Count(s.logs.String(), `"msg":"the chat platform's bot token cannot be checked; retrying"`); n != 2 {
			t.Errorf("%d log lines say the bot token cannot be checked, want 2 (the 429, the 503):\n%s", n, s.logs.String())
		}
	})

	t.Run("Slack not answering auth.test leaves serve ready on a cluster that answers", func(t *testing.T) {
		c := testcluster.Start(t, testenv.Options{})
		fake := slackfake.NewSocketMode(t, appToken)
		fails := make([]int, 30)
		for i := range fails {
			fails[i] = http.StatusBadGateway
		}
		fake.FailAuthTests(fails...)
		s := serveOn(t, c.KubeconfigPath, fake, "http", "xoxb-good-serve-test")
		waitUntil(t, 30*time.Second, "/readyz to show the 502 and be ready", func() bool {
			return strings.HasPrefix(s.readyz(), "slack: cannot check the bot token: auth.test: slack server error: 502 Bad Gateway (retrying ") &&
				s.status() == http.StatusOK
		})
		if got := s.gauge(); got != up {
			t.Errorf("gauge = %q, want %q", got, up)
		}
	})
}

// TestPlatformTokenUnanswered: a check of the bot token that got no answer is shown without
// making serve unready (bot.ErrNotChecked) and leaves a refusal in force; an answer clears it.
func TestPlatformTokenUnanswered(t *testing.T) {
	state := newPlatformState("slack", bot.NewMetrics(prometheus.NewRegistry()), chattest.QuietLog)
	state.up() // HTTP mode: nothing to connect
	state.checksToken()
	if err := state.Check(t.Context()); err == nil || errors.Is(err, bot.ErrNotChecked) {
		t.Errorf("before the first check: Check = %v, want not ready", err)
	}
	noAnswer := errors.New("cannot check the bot token: auth.test: connection refused")
	state.tokenUnanswered(noAnswer, time.Now().Add(time.Hour))
	if err := state.Check(t.Context()); !errors.Is(err, bot.ErrNotChecked) || !strings.HasPrefix(err.Error(), noAnswer.Error()+" (retrying at ") {
		t.Errorf("no answer: Check = %v, want %q shown, wrapping ErrNotChecked", err, noAnswer)
	}
	state.tokenUnanswered(noAnswer, time.Now().Add(-time.Second))
	if err := state.Check(t.Context()); err == nil || !strings.Contains(err.Error(), " (retrying now)") {
		t.Errorf("retry under way: Check = %v, want (retrying now)", err)
	}
	refused := &slack.TokenRefusedError{Method: "auth.test", Code: "invalid_auth"}
	state.setToken(refused, time.Now().Add(time.Hour))
	state.tokenUnanswered(noAnswer, time.Now().Add(time.Hour))
	if err := state.Check(t.Context()); !errors.Is(err, refused) || errors.Is(err, bot.ErrNotChecked) {
		t.Errorf("refused, then no answer: Check = %v, want the refusal, not ready", err)
	}
	state.setToken(nil, time.Time{})
	if err := state.Check(t.Context()); err != nil {
		t.Errorf("accepted: Check = %v, want nil", err)
	}
}

// TestSlackTokenRefusedWhileServing: a bot token revoked while serving, which Slack refuses on
// chat.postMessage (an alert thread, a watch post, a plan), turns Slack down with the same
// reason as a refusal at start, through the adapter's TokenRefused, the way serve wires it.
func TestSlackTokenRefusedWhileServing(t *testing.T) {
	const token = "xoxb-serve-revoked-later"
	fake := slackfake.NewSocketMode(t, "xapp-unused")
	reg := prometheus.NewRegistry()
	state := newPlatformState("slack", bot.NewMetrics(reg), chattest.QuietLog)
	state.up() // HTTP mode: nothing to connect
	check := newSlackToken(state, botTokenHint(Secret{Env: "SLACK_BOT_TOKEN"}, token), chattest.QuietLog)
	api := goslack.New(token, goslack.OptionAPIURL(fake.APIURL()))
	a := slack.New(slack.Options{Core: &chattest.RecordingCore{}, API: api, Log: chattest.QuietLog, TokenRefused: check.refused})
	go func() {
		_ = check.run(t.Context(), func(ctx context.Context) (slack.Identity, error) { return slack.CheckToken(ctx, api) })
	}()

	gauge := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "whypending_chat_platform_up" {
				for _, m := range mf.GetMetric() {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	waitUntil(t, 10*time.Second, "the token to be accepted", func() bool { return state.Check(t.Context()) == nil })
	if g := gauge(); g != 1 {
		t.Errorf("gauge once accepted = %v, want 1", g)
	}

	fake.RefuseToken(token, "token_revoked")
	if err := a.PostMessage(t.Context(), "C0FAKE", chat.Message{Sections: []chat.Section{{Text: "a watch post"}}}); err == nil {
		t.Fatal("PostMessage with a revoked token succeeded")
	}
	err := state.Check(t.Context())
	want := "the bot token was refused (token_revoked): check slack.botToken (read from the environment variable SLACK_BOT_TOKEN"
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "(retrying at ") {
		t.Errorf("Check after the refused post = %v, want %q…, retrying", err, want)
	}
	if g := gauge(); g != 0 {
		t.Errorf("gauge after the refused post = %v, want 0", g)
	}
	if n := len(fake.AuthTests()); n != 1 {
		t.Errorf("auth.test called %d times, want 1: the refusal is asked again only after %s", n, tokenRecheck)
	}
}

// TestBotTokenHint names where slack.botToken was read from, and says when the token is not a
// bot token, without ever showing it.
func TestBotTokenHint(t *testing.T) {
	tests := []struct {
		name   string
		secret Secret
		token  string
		want   string
	}{
		{"the chart's environment variable", Secret{Env: "SLACK_BOT_TOKEN"}, "xoxb-1-secret",
			"check slack.botToken (read from the environment variable SLACK_BOT_TOKEN; with the chart, the key SLACK_BOT_TOKEN of its Secret): it is the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions page"},
		{"another environment variable", Secret{Env: "BOT"}, "xoxb-1-secret",
			"check slack.botToken (read from the environment variable BOT): it is the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions page"},
		{"a file", Secret{File: "/etc/whypending/slack/bot-token"}, "xoxb-1-secret",
			"check slack.botToken (read from the file /etc/whypending/slack/bot-token): it is the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions page"},
		{"an app-level token in its place", Secret{File: "/t"}, "xapp-1-secret",
			"check slack.botToken (read from the file /t): it is the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions page; the configured token does not start with xoxb-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := botTokenHint(tt.secret, tt.token)
			if got != tt.want {
				t.Errorf("botTokenHint = %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "secret") {
				t.Errorf("botTokenHint = %q shows the token", got)
			}
		})
	}
}

// refusingKubeconfig writes a kubeconfig whose API server refuses connections (its first
// attempt fails at once, and /readyz as a whole is never ready) and returns its path.
func refusingKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: down, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
contexts: [{name: down, context: {cluster: down, user: u}}]
current-context: down
users: [{name: u, user: {token: not-a-secret}}]
`, freeAddr(t)))
	return path
}

// TestServeReportsARefusedDiscordToken: a Discord bot token Discord refuses is already reported
// without a check of its own, in both modes: serve registers the commands with it at start
// (before a gateway connection, in gateway mode), Discord answers 401 {"message": "401:
// Unauthorized", "code": 0} (discordfake), and /readyz names the refusal and
// discord.botToken while the gauge says 0; the token is in no log.
func TestServeReportsARefusedDiscordToken(t *testing.T) {
	for _, mode := range []string{"http", "gateway"} {
		t.Run(mode, func(t *testing.T) {
			const token = "discord-wrong-token-serve-test"
			fake := discordfake.New(t)
			pub, _, err := ed25519.GenerateKey(nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("DISCORD_BOT_TOKEN", token)
			t.Setenv("DISCORD_PUBLIC_KEY", hex.EncodeToString(pub))
			listen := freeAddr(t)
			path := filepath.Join(t.TempDir(), "config.yaml")
			writeFile(t, path, fmt.Sprintf(`listen: %s
clusters: [{name: down, kubeconfig: %q}]
discord: {mode: %s, applicationID: %q, guilds: [%q], apiURL: %q}
approvals: {approvers: {discord: {roles: ["1500000000000000001"]}}}
store: {backend: memory}
`, listen, refusingKubeconfig(t), mode, discordfake.AppID, discordfake.GuildID, fake.URL()+"/"))
			logs := &syncBuffer{}
			runServeUntilCleanup(t, path, logs)
			get := func(p string) string { return bodyOf("http://" + listen + p) }
			want := "The bot token was refused: check discord.botToken (default {env: DISCORD_BOT_TOKEN})"
			waitUntil(t, 10*time.Second, "/readyz to say Discord refused the bot token", func() bool {
				line := grepLines(get("/readyz"), "discord: ")
				return strings.Contains(line, "401 Unauthorized") && strings.Contains(line, want)
			})
			if got := grepLines(get("/metrics"), `whypending_chat_platform_up{platform="discord"}`); got != `whypending_chat_platform_up{platform="discord"} 0` {
				t.Errorf("gauge = %q, want 0", got)
			}
			if strings.Contains(logs.String(), token) {
				t.Errorf("the logs hold the bot token:\n%s", logs.String())
			}
		})
	}
}
