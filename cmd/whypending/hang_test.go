package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/fleet"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// silentServer listens on loopback, completes the TLS handshake of every connection and
// then never sends a byte: an API server that accepts requests and hangs. It returns the
// server's URL and a kubeconfig for it.
func silentServer(t *testing.T) (server, kubeconfig string) {
	t.Helper()
	certs := httptest.NewUnstartedServer(nil)
	certs.StartTLS() // only for its certificate
	t.Cleanup(certs.Close)
	cfg := certs.TLS.Clone()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := tls.Server(c, cfg)
				_ = tc.Handshake()
				<-done
			}()
		}
	}()
	server = "https://" + ln.Addr().String()
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: silent, cluster: {server: %q, insecure-skip-tls-verify: true}}]
contexts: [{name: silent, context: {cluster: silent, user: u, namespace: shop}}]
current-context: silent
users: [{name: u, user: {token: not-a-secret}}]
`, server))
	return server, kubeconfig
}

// TestNoCommandHangs is issue 22 item 1 for the CLI: against an API server that accepts TLS
// and never answers, why-pending and ipam check give up after --request-timeout with one line
// naming the server and what timed out, print a progress line while they wait, and --timeout
// ends a command whatever its requests do.
func TestNoCommandHangs(t *testing.T) {
	server, kubeconfig := silentServer(t)
	for _, tc := range []struct {
		name      string
		args      []string
		want      string
		progress  bool
		withinSec int
	}{
		{"why-pending", []string{"why-pending", "web", "--request-timeout", "4s"},
			"the Kubernetes API server at " + server + " did not answer within 4s (GET /api/v1/namespaces/shop/pods/web)", true, 20},
		{"ipam check", []string{"ipam", "check", "--request-timeout", "4"},
			"the Kubernetes API server at " + server + " did not answer within 4s (GET /apis)", true, 20},
		{"the overall deadline", []string{"why-pending", "web", "--request-timeout", "0", "--timeout", "2s"},
			"did not finish within 2s (--timeout) while waiting for the Kubernetes API server at " + server, false, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, out, errOut := runCLI(t, append(tc.args, "--kubeconfig", kubeconfig)...)
			took := time.Since(start)
			if code != 1 || out != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
			}
			if took > time.Duration(tc.withinSec)*time.Second {
				t.Errorf("took %s, want under %ds", took, tc.withinSec)
			}
			var errLines []string
			for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
				if strings.HasPrefix(l, "error:") {
					errLines = append(errLines, l)
				}
			}
			if len(errLines) != 1 || !strings.Contains(errLines[0], tc.want) {
				t.Errorf("stderr = %q, want one error line with %q", errOut, tc.want)
			}
			if progress := strings.Contains(errOut, "whypending: still "); progress != tc.progress {
				t.Errorf("progress line printed: %v, want %v:\n%s", progress, tc.progress, errOut)
			}
		})
	}
}

// TestBotAnswerDoesNotHang is issue 22 item 1 for the bot: a connected cluster whose
// kube-apiserver then hangs (SIGSTOP: connections are accepted, nothing answers) gets an
// answer that says it did not answer within the request timeout, instead of a wait without
// end, for a command that reads live (/ipam release-ips plans from a fresh read).
func TestBotAnswerDoesNotHang(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	timing := fleet.DefaultTiming
	timing.RequestTimeout = 3 * time.Second
	fc := fleet.New(fleet.Options{Name: "test", Config: func() (*rest.Config, error) { return rest.CopyConfig(c.Config), nil },
		Timing: timing, Lock: fleet.Lock{Policy: actions.LockAlways, Owner: "whypending-bot:test"}, Log: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	fl := fleet.Start(ctx, []*fleet.Cluster{fc})
	t.Cleanup(func() { cancel(); fl.Wait() })
	waitUntil(t, 2*time.Minute, "the cluster to connect", func() bool { return fc.Ready(ctx) == nil })
	core := bot.New(bot.Options{Clusters: []*bot.Cluster{botCluster(fc, "default")},
		Policy: approval.Policy{Approvers: map[string]approval.Approvers{"console": {Users: []string{"bob"}}}}, Log: slog.New(slog.DiscardHandler)})
	session := console.NewSession(core, "alice")

	if err := c.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.ResumeAPIServer() })
	start := time.Now()
	answer := session.Handle(ctx, "/ipam release-ips")
	took := time.Since(start)
	if len(answer) != 1 {
		t.Fatalf("answer = %+v, want one message", answer)
	}
	want := "Cluster test did not answer within 3s: the Kubernetes API server at " + c.Config.Host + " did not answer within 3s"
	if title := answer[0].Title; !strings.HasPrefix(title, want) || !strings.HasSuffix(title, "Nothing was done.") {
		t.Errorf("answer = %q, want it to start with %q", title, want)
	}
	if took > 20*time.Second {
		t.Errorf("the answer took %s, want about the 3s request timeout", took)
	}
}
