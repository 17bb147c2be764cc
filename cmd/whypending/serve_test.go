package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/internal/testcluster"
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

// served is `whypending serve` running in this process, with the fake Slack of chat_test.go.
type served struct {
	base   string // http://127.0.0.1:<port>
	slack  *fakeSlack
	client *slackClient
	logs   *syncBuffer
	// stop stops serve (as a crash or a rollout would) and checks it stopped cleanly; it
	// runs at cleanup too.
	stop func()
}

// startServe runs serve with config (YAML, without the slack section, which it adds: the
// signing secret from an environment variable, the bot token from a file, the Web API on a
// fakeSlack). It stops serve at the end of the test and checks that it stopped cleanly and
// logged no secret.
func startServe(t *testing.T, config string) *served {
	t.Helper()
	return startServeOn(t, config, newFakeSlack(t, nil))
}

// startServeOn is startServe with the Web API on fake (replicas of one bot share it).
func startServeOn(t *testing.T, config string, fake *fakeSlack) *served {
	t.Helper()
	const secret, token = "serve-test-signing-secret", "xoxb-serve-test-token"
	s := &served{slack: fake, logs: &syncBuffer{}}
	t.Setenv("WP_TEST_SIGNING_SECRET", secret)
	tokenFile := filepath.Join(t.TempDir(), "bot-token")
	writeFile(t, tokenFile, token+"\n")
	config += fmt.Sprintf("slack:\n  signingSecret: {env: WP_TEST_SIGNING_SECRET}\n  botToken: {file: %s}\n  apiURL: %s/\n",
		tokenFile, strings.TrimSuffix(s.slack.apiURL(), "/"))
	s.run(t, config, secret, token)
	s.client = &slackClient{base: s.base, secret: secret, channel: "C0OPS", slack: s.slack}
	return s
}

// run starts serve with config and sets s.base and s.stop; the stop checks that serve
// stopped cleanly and that its logs hold none of secrets.
func (s *served) run(t *testing.T, config string, secrets ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, config)
	listening := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, path, s.logs, listening) }()
	select {
	case addr := <-listening:
		s.base = "http://" + addr
	case err := <-done:
		cancel()
		t.Fatalf("serve stopped: %v\n%s", err, s.logs.String())
	case <-time.After(90 * time.Second):
		cancel()
		t.Fatal("serve did not start listening")
	}
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v after shutdown, want nil", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("serve did not stop within 60s of its context ending")
		}
		for _, secret := range secrets {
			if strings.Contains(s.logs.String(), secret) {
				t.Errorf("logs contain a secret:\n%s", s.logs.String())
			}
		}
	}
	t.Cleanup(s.stop)
}

// get fetches path and returns the status and body.
func (s *served) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReadyz waits up to 90 s for /readyz to show line.
func (s *served) waitReadyz(t *testing.T, line string) {
	t.Helper()
	waitUntil(t, 90*time.Second, fmt.Sprintf("%q in /readyz", line), func() bool {
		_, body := s.get(t, "/readyz")
		return strings.Contains(body, line)
	})
}

// ask sends a signed slash command as user and returns the text of its answer.
func (s *served) ask(t *testing.T, user, command, text string) string {
	t.Helper()
	return s.slack.answer(t, s.client.command(t, user, command, text)).Text
}

// installStore installs the RemediationRequest CRD on c and, unless ns is "", creates the
// namespace ns.
func installStore(t *testing.T, c *testenv.Cluster, ns string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(t.Context(), os.DirFS(filepath.Join(root, "charts", "whypending", "crds")), "."); err != nil {
		t.Fatal(err)
	}
	if ns == "" {
		return
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestServeAnswersSignedCommands(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	installStore(t, c, "whypending")
	s := startServe(t, fmt.Sprintf(`listen: 127.0.0.1:0
clusters:
- name: test
  kubeconfig: %s
approvals:
  approvers: {users: [U0BOB]}
store: {namespace: whypending}
`, c.KubeconfigPath))

	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := s.get(t, p); code != 200 {
			t.Errorf("GET %s = %d %s, want 200", p, code, body)
		}
	}
	if answer := s.ask(t, "U0ALICE", "/why-pending", "seed-ipam-leaked/shop-7frd7stjbt-2kq8r"); !strings.Contains(answer, "seed-ipam-leaked/shop-7frd7stjbt-2kq8r") {
		t.Errorf("answer = %q, want the diagnosis of the pod", answer)
	}
	if _, metrics := s.get(t, "/metrics"); !strings.Contains(metrics, `whypending_commands_total{command="why-pending",outcome="ok"} 1`) {
		t.Errorf("/metrics lacks the command count:\n%s", metrics)
	}
}

func TestServeStartsWithAnUnreachableCluster(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: u}}]
current-context: nowhere
users: [{name: u, user: {token: not-a-secret}}]
`)
	s := startServe(t, `listen: "127.0.0.1:0"
clusters: [{name: a, kubeconfig: `+dir+`/kubeconfig}, {name: b, kubeconfig: `+dir+`/missing}]
approvals: {approvers: {users: [U024BE7LH]}}
store: {backend: memory}
`)
	code, body := s.get(t, "/readyz")
	for _, want := range []string{
		"cluster a: unavailable since ",
		"cannot reach the Kubernetes API server at https://127.0.0.1:1: connection refused",
		"cluster b: unavailable since ",
		"misconfigured: load kubeconfig: ",
		"clusters: 0 of 2 ready",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz body lacks %q:\n%s", want, body)
		}
	}
	if code != 503 {
		t.Errorf("GET /readyz = %d, want 503 (no cluster answers)", code)
	}
	answer := s.ask(t, "U0ALICE", "/why-pending", "web")
	if !strings.Contains(answer, "Cluster a is unavailable: cannot reach the Kubernetes API server at https://127.0.0.1:1: connection refused (since ") ||
		strings.Contains(answer, "\n") {
		t.Errorf("answer = %q, want one line naming the cluster, the API server and its error", answer)
	}
	if strings.Contains(s.logs.String()+body+answer, "not-a-secret") {
		t.Errorf("the token leaked into logs, /readyz or the answer")
	}
}

// TestServeSurvivesADownCluster is the end-to-end run of issue 9: two clusters configured,
// one API server stopped. serve starts, answers for the live one, names the dead one, and
// answers for it again after its API server is back, without a restart.
func TestServeSurvivesADownCluster(t *testing.T) {
	live := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, live, "seed-crash-app")
	installStore(t, live, "") // the namespace comes later: readiness must name it
	dead := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, dead, "seed-web-test")
	if err := dead.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	deadServer := dead.Config.Host

	s := startServe(t, fmt.Sprintf(`listen: 127.0.0.1:0
clusters:
- {name: live, kubeconfig: %s}
- {name: dead, kubeconfig: %s}
approvals: {approvers: {users: [U0BOB]}}
store: {namespace: whypending}
`, live.KubeconfigPath, dead.KubeconfigPath))

	t.Run("readiness names the dead cluster and the missing store namespace", func(t *testing.T) {
		code, body := s.get(t, "/readyz")
		for _, want := range []string{
			"cluster live: ok\n",
			"cluster dead: unavailable since ",
			"cannot reach the Kubernetes API server at " + deadServer + ": connection refused",
			`store: The approval store is not ready: namespace "whypending" does not exist`,
			"clusters: 1 of 2 ready\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/readyz body lacks %q:\n%s", want, body)
			}
		}
		if code != 503 {
			t.Errorf("GET /readyz = %d, want 503 while the store namespace is missing", code)
		}
		if _, err := live.Client.CoreV1().Namespaces().Create(t.Context(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "whypending"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The store is checked after every probe of its cluster (5 s).
		waitUntil(t, 30*time.Second, "GET /readyz = 200 with the store namespace created", func() bool {
			code, body := s.get(t, "/readyz")
			return code == 200 && strings.Contains(body, "store: ok\n")
		})
	})

	ask := func(t *testing.T, text string) string {
		t.Helper()
		return s.ask(t, "U0ALICE", "/why-pending", text)
	}
	t.Run("the live cluster answers", func(t *testing.T) {
		if answer := ask(t, "seed-crash-app/crash-app"); !strings.Contains(answer, "container-exits-immediately") {
			t.Errorf("answer = %q, want the diagnosis", answer)
		}
	})
	t.Run("the dead cluster gets one line naming it and the API server's error", func(t *testing.T) {
		answer := ask(t, "seed-web-test/web-test --cluster dead")
		want := "Cluster dead is unavailable: cannot reach the Kubernetes API server at " + deadServer + ": connection refused (since "
		if !strings.Contains(answer, want) || strings.Contains(answer, "\n") {
			t.Errorf("answer = %q, want one line starting %q", answer, want)
		}
	})
	t.Run("the dead cluster answers again once its API server is back", func(t *testing.T) {
		if err := dead.StartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.waitReadyz(t, "cluster dead: ok\n")
		if answer := ask(t, "seed-web-test/web-test --cluster dead"); !strings.Contains(answer, "image-not-found") {
			t.Errorf("answer = %q, want the diagnosis", answer)
		}
		if code, body := s.get(t, "/readyz"); code != 200 || !strings.Contains(body, "clusters: 2 of 2 ready\n") {
			t.Errorf("GET /readyz = %d\n%s\nwant 200 with both clusters", code, body)
		}
	})
	t.Run("an outage of a connected cluster is noticed, and it is used again after", func(t *testing.T) {
		if err := live.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		s.waitReadyz(t, "cluster live: unavailable since ")
		if answer := ask(t, "seed-crash-app/crash-app"); !strings.Contains(answer, "Cluster live is unavailable: ") {
			t.Errorf("answer = %q, want the one-line unavailable answer", answer)
		}
		if err := live.StartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.waitReadyz(t, "cluster live: ok\n")
		if answer := ask(t, "seed-crash-app/crash-app"); !strings.Contains(answer, "container-exits-immediately") {
			t.Errorf("answer = %q, want the diagnosis", answer)
		}
	})
}

// TestSetGoMemLimit checks the garbage collector's soft limit: 75% of the container's limit,
// logged; GOMEMLIMIT in the environment wins over it (the runtime has applied it at start).
func TestSetGoMemLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	for _, env := range []string{"AUTOMEMLIMIT", "GOMEMLIMIT"} { // unset for the test, restored after
		t.Setenv(env, "")
		os.Unsetenv(env)
	}

	var out bytes.Buffer
	setGoMemLimit(slog.New(slog.NewJSONHandler(&out, nil)), memlimit.Limit(1000<<20))
	if got, want := debug.SetMemoryLimit(-1), int64(750<<20); got != want {
		t.Errorf("soft limit = %d, want %d (75%% of 1000 MiB)", got, want)
	}
	if !strings.Contains(out.String(), `"bytes":786432000,"from":"container memory limit"`) {
		t.Errorf("log lacks the limit set:\n%s", out.String())
	}

	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetMemoryLimit(300 << 20) // what the runtime does with GOMEMLIMIT at start
	out.Reset()
	setGoMemLimit(slog.New(slog.NewJSONHandler(&out, nil)), memlimit.Limit(1000<<20))
	if got, want := debug.SetMemoryLimit(-1), int64(300<<20); got != want {
		t.Errorf("with GOMEMLIMIT=300MiB the soft limit = %d, want %d", got, want)
	}
	if !strings.Contains(out.String(), `"bytes":314572800,"from":"GOMEMLIMIT"`) {
		t.Errorf("log lacks GOMEMLIMIT's limit:\n%s", out.String())
	}

	os.Unsetenv("GOMEMLIMIT")
	debug.SetMemoryLimit(math.MaxInt64)
	out.Reset()
	setGoMemLimit(slog.New(slog.NewJSONHandler(&out, nil)), func() (uint64, error) { return 0, memlimit.ErrNoLimit })
	if out.Len() != 0 {
		t.Errorf("no limit anywhere logged:\n%s", out.String())
	}
}

// TestServeLoggerDurations: the bot's log writes durations ("took", "retryAfter", inside a
// group too) as Go duration strings, not as integer nanoseconds.
func TestServeLoggerDurations(t *testing.T) {
	var out bytes.Buffer
	serveLogger(&out).Info("caches synced", slog.Duration("took", 1520*time.Millisecond),
		slog.Group("call", slog.Duration("retryAfter", 2*time.Second)), slog.Int("pods", 3))
	var line struct {
		Took string `json:"took"`
		Call struct {
			RetryAfter string `json:"retryAfter"`
		} `json:"call"`
		Pods int `json:"pods"`
	}
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("decode %s: %v", out.String(), err)
	}
	if line.Took != "1.52s" || line.Call.RetryAfter != "2s" || line.Pods != 3 {
		t.Errorf("log line = %s, want took 1.52s, call.retryAfter 2s, pods 3", out.String())
	}
}
