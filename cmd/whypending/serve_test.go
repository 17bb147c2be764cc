package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/internal/testenv"
)

func TestServeRejectsInvalidConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	config := "clusters:\n- name: Prod\nslack:\n  botToken: xoxb-literal-token\napprovals:\n  approvers: {users: [bob]}\n  expiry: 2d\n"
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "serve", "--config", path)
	if code != 1 {
		t.Fatalf("exit code = %d, want 1", code)
	}
	for _, want := range []string{
		"clusters[0].name:",
		"slack.botToken: secrets must not be written in the config file",
		"approvals.expiry: \"2d\" is not a duration",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "xoxb-literal-token") {
		t.Errorf("stderr echoes the token:\n%s", stderr)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestServeAnswersSignedCommands(t *testing.T) {
	c := testenv.StartT(t, testenv.Options{})
	testenv.LoadT(t, c, "seed-ipam-leaked")
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := c.InstallCRDs(ctx, os.DirFS(filepath.Join(root, "charts", "whypending", "crds")), "."); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "whypending"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var answers []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		answers = append(answers, string(b))
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	defer hook.Close()

	const secret, token = "serve-test-signing-secret", "xoxb-serve-test-token"
	t.Setenv("WP_TEST_SIGNING_SECRET", secret)
	tokenFile := filepath.Join(t.TempDir(), "bot-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`listen: 127.0.0.1:0
clusters:
- name: test
  kubeconfig: %s
slack:
  signingSecret: {env: WP_TEST_SIGNING_SECRET}
  botToken: {file: %s}
  apiURL: %s/api/
approvals:
  approvers: {users: [U0BOB]}
store: {namespace: whypending}
`, c.KubeconfigPath, tokenFile, hook.URL)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	logs := &syncBuffer{}
	listening := make(chan string, 1)
	serveCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(serveCtx, path, logs, listening) }()
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("serve stopped: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start listening")
	}
	base := "http://" + addr

	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s = %d, want 200", p, resp.StatusCode)
		}
	}

	form := url.Values{"command": {"/why-pending"}, "text": {"seed-ipam-leaked/shop-7frd7stjbt-2kq8r"},
		"user_id": {"U0ALICE"}, "user_name": {"alice"}, "team_id": {"T1"}, "channel_id": {"C0OPS"},
		"response_url": {hook.URL + "/answer"}}.Encode()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, form)
	req, _ := http.NewRequest(http.MethodPost, base+"/slack/commands", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ack, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(ack), "Working on it") {
		t.Fatalf("ack = %d %s, want 200 Working on it", resp.StatusCode, ack)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(answers)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer on response_url; logs:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var answer struct{ Text, ResponseType string }
	mu.Lock()
	_ = json.Unmarshal([]byte(answers[0]), &answer)
	mu.Unlock()
	if !strings.Contains(answer.Text, "seed-ipam-leaked/shop-7frd7stjbt-2kq8r") {
		t.Errorf("answer = %q, want the diagnosis of the pod", answer.Text)
	}

	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `whypending_commands_total{command="why-pending",outcome="ok"} 1`) {
		t.Errorf("/metrics lacks the command count:\n%s", metrics)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve returned %v after shutdown, want nil", err)
	}
	for _, s := range []string{secret, token} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("logs contain a secret:\n%s", logs.String())
		}
	}
}

func TestServeUnreachableClusterFailsFast(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: u}}]
current-context: nowhere
users: [{name: u, user: {token: not-a-secret}}]
`)
	writeFile(t, dir+"/config.yaml", `listen: "127.0.0.1:0"
clusters: [{name: a, kubeconfig: `+dir+`/kubeconfig}]
approvals: {approvers: {users: [U024BE7LH]}}
store: {backend: memory}
`)
	t.Setenv("SLACK_SIGNING_SECRET", "s")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-t")
	code, _, errOut := runCLI(t, "serve", "--config", dir+"/config.yaml")
	if code != 1 || !strings.Contains(errOut, "cannot reach the Kubernetes API server at https://127.0.0.1:1") {
		t.Errorf("exit %d, stderr %q; want 1 and one line naming the server", code, errOut)
	}
}
