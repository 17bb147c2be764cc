package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whypending/whypending/internal/slackfake"
)

// freeAddr returns a loopback address nothing listens on (a port just released).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestServeStartsWithDiscordDown is issue 22 item 3: with Slack and Discord both configured
// and Discord's API unreachable at start, serve used to exit 1 after a second, naming
// Discord's default URL. Now it serves Slack, says in /readyz and /metrics that Discord is
// down (naming the configured apiURL), retries, and registers the commands once Discord
// answers. Its listener opens before any cluster answers: /healthz works while the one
// cluster hangs (accepts TLS, never replies).
func TestServeStartsWithDiscordDown(t *testing.T) {
	_, hung := silentServer(t)
	discordAddr := freeAddr(t)
	listen := freeAddr(t)
	const appID, guildID = "1100000000000000001", "1200000000000000001"
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DISCORD_BOT_TOKEN", "discord-down-test-token")
	t.Setenv("DISCORD_PUBLIC_KEY", hex.EncodeToString(pub))
	fs := newFakeSlack(t, nil)
	t.Setenv("WP_TEST_SIGNING_SECRET", "serve-test-signing-secret")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-serve-test-token")
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, fmt.Sprintf(`listen: %s
clusters: [{name: hung, kubeconfig: %s}]
slack:
  signingSecret: {env: WP_TEST_SIGNING_SECRET}
  apiURL: %s/
discord:
  applicationID: %s
  guilds: [%s]
  apiURL: http://%s/
approvals: {approvers: {users: [U0BOB]}}
store: {backend: memory}
`, listen, hung, strings.TrimSuffix(fs.apiURL(), "/"), appID, guildID, discordAddr))

	logs := &syncBuffer{}
	start := time.Now()
	done := runServeUntilCleanup(t, path, logs)
	get := func(p string) (int, string) {
		resp, err := http.Get("http://" + listen + p)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitUntil(t, 10*time.Second, "/healthz while the cluster hangs", func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v\n%s", err, logs.String())
		default:
		}
		code, _ := get("/healthz")
		return code == 200
	})
	t.Logf("/healthz answered %s after start", time.Since(start).Round(time.Millisecond))
	wantDown := "discord: register discord commands in guild " + guildID + ": register commands: Put \"http://" + discordAddr + "/api/v9/applications/"
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for _, last = get("/readyz"); !strings.Contains(last, wantDown); _, last = get("/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz does not say %q:\n%s", wantDown, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, body := get("/readyz")
	if !strings.Contains(body, "slack: ok") || !strings.Contains(body, "(retrying at ") || strings.Contains(body, "discord.com") {
		t.Errorf("/readyz = %s, want slack ok and discord down at the configured apiURL, retrying", body)
	}
	if _, m := get("/metrics"); !strings.Contains(m, `whypending_chat_platform_up{platform="discord"} 0`) ||
		!strings.Contains(m, `whypending_chat_platform_up{platform="slack"} 1`) {
		t.Errorf("/metrics lacks the platforms' up gauges:\n%s", grepLines(m, "platform_up"))
	}

	// Discord comes back: the commands are registered, and /readyz says so.
	var mu sync.Mutex
	var registered int
	ln, err := net.Listen("tcp", discordAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPut && r.URL.Path == "/api/v9/applications/"+appID+"/guilds/"+guildID+"/commands" {
			mu.Lock()
			registered++
			mu.Unlock()
			_, _ = w.Write(b)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message": "404: Not Found", "code": 0}`)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	waitUntil(t, 90*time.Second, "the commands to be registered once Discord is back", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return registered == 1
	})
	waitUntil(t, 10*time.Second, "/readyz to say Discord is up", func() bool {
		_, body := get("/readyz")
		return strings.Contains(body, "discord: ok")
	})
	if _, m := get("/metrics"); !strings.Contains(m, `whypending_chat_platform_up{platform="discord"} 1`) {
		t.Errorf("/metrics after Discord is back:\n%s", grepLines(m, "platform_up"))
	}
}

// TestServeBadListenFailsAtOnce is issue 22 item 3's last point: a listen address that
// cannot be used fails serve at once, even while the cluster hangs.
func TestServeBadListenFailsAtOnce(t *testing.T) {
	_, hung := silentServer(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	t.Setenv("WP_TEST_SIGNING_SECRET", "serve-test-signing-secret")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-serve-test-token")
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, fmt.Sprintf(`listen: %s
clusters: [{name: hung, kubeconfig: %s}]
slack: {signingSecret: {env: WP_TEST_SIGNING_SECRET}}
approvals: {approvers: {users: [U0BOB]}}
store: {backend: memory}
`, busy.Addr(), hung))
	start := time.Now()
	err = runServe(t.Context(), path, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "listen on "+busy.Addr().String()) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("serve = %v, want a listen error naming the address", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("serve took %s to fail, want at once", took)
	}
}

// bodyOf is the body GET url answers, "" when it cannot be had (serve not listening yet).
// waitListening waits until serve, started with done and logs (runServeUntilCleanup), answers
// /healthz at base; it fails the test when serve stops first.
func waitListening(t *testing.T, base string, done <-chan error, logs *syncBuffer) {
	t.Helper()
	waitUntil(t, 10*time.Second, "serve to listen", func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v\n%s", err, logs.String())
		default:
		}
		return bodyOf(base+"/healthz") != ""
	})
}

func bodyOf(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestServeSocketModeReadiness: serve in Socket Mode says Slack is up in /readyz and in
// whypending_chat_platform_up{platform="slack"} only while a connection Slack said hello on
// stands. It used to mark Slack up once RunSocketMode had run 5 s, while slack-go retried a
// failing connection inside it. Slack is slackfake (apps.connections.open and a WebSocket
// that says hello, in Slack's wire format); the one cluster refuses connections, so /readyz
// as a whole is never ready and the test reads its slack line.
func TestServeSocketModeReadiness(t *testing.T) {
	const appToken = "xapp-1-A0WHYPEND-serve-test"
	// serve starts serve in Socket Mode with the app token against fake and returns its
	// /readyz slack line and its slack gauge.
	serve := func(t *testing.T, fake *slackfake.SocketMode, token string) (readyz func() string, gauge func() string) {
		t.Helper()
		listen, path := socketModeConfig(t, "down", refusingKubeconfig(t), token, fake.APIURL())
		logs := &syncBuffer{}
		done := runServeUntilCleanup(t, path, logs)
		get := func(p string) string { return bodyOf("http://" + listen + p) }
		waitListening(t, "http://"+listen, done, logs)
		readyz = func() string { return grepLines(get("/readyz"), "slack: ") }
		gauge = func() string { return grepLines(get("/metrics"), `whypending_chat_platform_up{platform="slack"}`) }
		return readyz, gauge
	}
	// staysDown checks that Slack is still down well past the 5 s that used to mark it up.
	staysDown := func(t *testing.T, readyz, gauge func() string, want string) {
		t.Helper()
		time.Sleep(8 * time.Second)
		if got := readyz(); strings.Contains(got, "slack: ok") || !strings.Contains(got, want) {
			t.Errorf("/readyz after 8s says %q, want slack down: %s", got, want)
		}
		if got := gauge(); got != `whypending_chat_platform_up{platform="slack"} 0` {
			t.Errorf("gauge after 8s = %q, want 0", got)
		}
	}

	t.Run("an app token Slack refuses is down", func(t *testing.T) {
		fake := slackfake.NewSocketMode(t, appToken)
		readyz, gauge := serve(t, fake, "xapp-1-A0WHYPEND-revoked")
		staysDown(t, readyz, gauge, "invalid_auth")
		if fake.Hellos() != 0 {
			t.Errorf("hellos = %d, want none", fake.Hellos())
		}
	})

	t.Run("socket hosts that refuse the WebSocket are down", func(t *testing.T) {
		fake := slackfake.NewSocketMode(t, appToken)
		fake.Refuse(true)
		readyz, gauge := serve(t, fake, appToken)
		staysDown(t, readyz, gauge, "bad handshake")
		if fake.Opens() < 2 {
			t.Errorf("apps.connections.open called %d times, want retries", fake.Opens())
		}
	})

	t.Run("up on hello, down when Slack closes the socket until it reconnects", func(t *testing.T) {
		fake := slackfake.NewSocketMode(t, appToken)
		readyz, gauge := serve(t, fake, appToken)
		waitUntil(t, 10*time.Second, "/readyz to say slack: ok after Slack's hello", func() bool { return readyz() == "slack: ok" })
		if got := gauge(); got != `whypending_chat_platform_up{platform="slack"} 1` {
			t.Errorf("gauge after hello = %q, want 1", got)
		}

		fake.Refuse(true)
		if n := fake.CloseSockets(); n != 1 {
			t.Fatalf("CloseSockets closed %d sockets, want 1", n)
		}
		waitUntil(t, 10*time.Second, "/readyz to say slack is down once Slack closed the socket", func() bool {
			return strings.HasPrefix(readyz(), "slack: socket mode connection failed: websocket: bad handshake")
		})
		if got := gauge(); got != `whypending_chat_platform_up{platform="slack"} 0` {
			t.Errorf("gauge while the socket is closed = %q, want 0", got)
		}

		fake.Refuse(false)
		waitUntil(t, 30*time.Second, "/readyz to say slack: ok after reconnecting", func() bool { return readyz() == "slack: ok" })
		if got := gauge(); got != `whypending_chat_platform_up{platform="slack"} 1` {
			t.Errorf("gauge after reconnecting = %q, want 1", got)
		}
		if got := fake.Hellos(); got != 2 {
			t.Errorf("hellos = %d, want 2 (the first connection and the reconnection)", got)
		}
	})
}

// TestServeSocketModeWhileAClusterHangs: serve in Socket Mode connects to Slack at once, while
// its one cluster's API server accepts connections and never answers. It used to start Socket
// Mode only after every cluster's first attempt to connect had ended (at most 45 s; here the
// 15 s of that attempt's ConnectTimeout), so Slack had no socket to deliver a slash command on
// and failed every command of that time on its side ("dispatch_failed"). A command about the
// cluster still making its first connection is acknowledged and answered that it is, naming
// its API server, without waiting for the attempt to end.
func TestServeSocketModeWhileAClusterHangs(t *testing.T) {
	const appToken = "xapp-1-A0WHYPEND-serve-test"
	server, hung := silentServer(t)
	fake := slackfake.NewSocketMode(t, appToken)
	listen, path := socketModeConfig(t, "hung", hung, appToken, fake.APIURL())
	logs := &syncBuffer{}
	start := time.Now()
	done := runServeUntilCleanup(t, path, logs)
	readyz := func() string {
		resp, err := http.Get("http://" + listen + "/readyz")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return grepLines(string(b), "slack: ")
	}

	// The first attempt to connect the cluster lasts 15 s (ConnectTimeout): well within it.
	waitUntil(t, 5*time.Second, "Slack's hello on the socket", func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v\n%s", err, logs.String())
		default:
		}
		return fake.Hellos() == 1
	})
	waitUntil(t, 2*time.Second, "/readyz to say slack: ok", func() bool { return readyz() == "slack: ok" })
	t.Logf("Socket Mode up %s after start", time.Since(start).Round(time.Millisecond))

	id, sent := fake.Command("/why-pending", "-n shop frontend")
	if sent != 1 {
		t.Fatalf("the command was sent on %d sockets, want 1", sent)
	}
	waitUntil(t, 5*time.Second, "the command's reply on its response_url", func() bool { return len(fake.Responses(id)) > 0 })
	if ack, ok := fake.Acked(id); !ok || !strings.Contains(string(ack), "Working on it") {
		t.Errorf("acknowledgement = %s (acknowledged: %v), want the ephemeral Working on it…", ack, ok)
	}
	var reply struct {
		Text         string `json:"text"`
		ResponseType string `json:"response_type"`
	}
	if err := json.Unmarshal([]byte(fake.Responses(id)[0]), &reply); err != nil {
		t.Fatalf("reply %s: %v", fake.Responses(id)[0], err)
	}
	want := "Cluster hung is unavailable: the bot is still making its first connection to it (the Kubernetes API server at " +
		server + " has not answered yet)"
	if !strings.Contains(reply.Text, want) || !strings.HasSuffix(reply.Text, "Nothing was done.") {
		t.Errorf("reply = %q, want it to contain %q and end Nothing was done.", reply.Text, want)
	}
	t.Logf("answered %s after start: %s", time.Since(start).Round(time.Millisecond), reply.Text)
}

// runServeUntilCleanup runs serve with the config at path, logging to logs, until the test
// ends, without waiting for it to listen (what serve does before its clusters answer), and
// checks at cleanup that it stopped cleanly. done receives serve's result if it stops first.
func runServeUntilCleanup(t *testing.T, path string, logs io.Writer) (done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- runServe(ctx, path, logs, nil) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-result:
			if err != nil {
				t.Errorf("serve returned %v after shutdown, want nil", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("serve did not stop within 60s")
		}
	})
	return result
}

// socketModeConfig writes a serve config with one cluster (name, its kubeconfig) and Slack in
// Socket Mode on apiURL, the tokens in the environment, and returns its listen address and
// path.
func socketModeConfig(t *testing.T, name, kubeconfig, appToken, apiURL string) (listen, path string) {
	t.Helper()
	listen = freeAddr(t)
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-serve-test-token")
	t.Setenv("SLACK_APP_TOKEN", appToken)
	path = filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, fmt.Sprintf(`listen: %s
clusters: [{name: %s, kubeconfig: %q}]
slack: {mode: socket, apiURL: %q}
approvals: {approvers: {users: [U0BOB]}}
store: {backend: memory}
`, listen, name, kubeconfig, apiURL))
	return listen, path
}
