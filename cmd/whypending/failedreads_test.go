package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// hangingProxy is a TLS reverse proxy to c's kube-apiserver (as its admin) that never answers a
// request whose path contains one of hang: it waits until the client gives up, like an API
// server whose events or nodes reads hang. It returns a kubeconfig for the proxy.
func hangingProxy(t *testing.T, c *testenv.Cluster, hang ...string) string {
	t.Helper()
	target, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	direct := proxy.Director
	proxy.Director = func(r *http.Request) {
		direct(r)
		r.Host = target.Host
		r.Header.Del("Authorization") // the transport's admin token
	}
	done := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range hang {
			if strings.Contains(r.URL.Path, h) {
				select {
				case <-r.Context().Done():
				case <-done:
				}
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first: no handler keeps Close waiting
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q, insecure-skip-tls-verify: true}}]
contexts: [{name: proxy, context: {cluster: proxy, user: u, namespace: default}}]
current-context: proxy
users: [{name: u, user: {token: replaced-by-the-proxy}}]
`, srv.URL))
	return kubeconfig
}

// TestFailedReadsMakeThePartialAnswer: a supplementary read that times out is recorded like a
// refused one. With /events hanging, the image-pull answer does not claim the events expired,
// says they could not be read, lists "events: timed out after 3s" in the evidence and JSON
// and exits 3; the two event lists (core/v1 and events.k8s.io/v1) wait one request timeout,
// not two. With /nodes hanging, the Pending pod's answer exits 3 with a Fix section.
func TestFailedReadsMakeThePartialAnswer(t *testing.T) {
	t.Run("events hang", func(t *testing.T) {
		c := testcluster.Start(t, testenv.Options{})
		typo := testcluster.Load(t, c, "image-registry-typo")
		kubeconfig := hangingProxy(t, c, "/events")
		ns, name, _ := strings.Cut(typo.Expected.Pod, "/")
		start := time.Now()
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "--request-timeout", "3s", "-n", ns, name, "-o", "json")
		took := time.Since(start)
		if code != exitPartial {
			t.Fatalf("exit %d, want %d (partial); stderr:\n%s\nstdout:\n%s", code, exitPartial, errOut, out)
		}
		if took > 5500*time.Millisecond {
			t.Errorf("took %s with --request-timeout 3s, want about 3s: the event lists wait one timeout, not one each", took)
		}
		var d triage.Diagnosis
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("decode -o json: %v\n%s", err, out)
		}
		p := d.Primary()
		if p.Code != triage.CodeImagePullFailed || !p.Uncertain || !d.Partial {
			t.Errorf("primary = %s (uncertain %t), partial %t; want %s, uncertain, partial", p.Code, p.Uncertain, d.Partial, triage.CodeImagePullFailed)
		}
		if strings.Contains(p.Summary, "no event") || strings.Contains(p.Summary, "expire") {
			t.Errorf("summary reads the failed events read as no events: %q", p.Summary)
		}
		if len(d.Refused) != 1 || d.Refused[0].Resource != "events" || d.Refused[0].Failure != triage.ReadTimedOut || d.Refused[0].WaitedSeconds != 3 {
			t.Errorf("refused = %+v, want the events list, timed out after 3s", d.Refused)
		}
		var evidence []string
		for _, e := range p.Evidence {
			evidence = append(evidence, e.Message)
		}
		if want := "events: timed out after 3s (list in namespace " + ns + ")"; !strings.Contains(strings.Join(evidence, "\n"), want) {
			t.Errorf("evidence = %q, want %q", evidence, want)
		}
	})

	t.Run("nodes hang", func(t *testing.T) {
		c := testcluster.Start(t, testenv.Options{Scheduler: true})
		cpu := testcluster.Load(t, c, "seed-frontend-cpu")
		cpuNS, cpuName, _ := strings.Cut(cpu.Expected.Pod, "/")
		if err := c.WaitForScheduler(t.Context(), cpuNS, cpuName); err != nil {
			t.Fatal(err)
		}
		kubeconfig := hangingProxy(t, c, "/nodes")
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "--request-timeout", "2s", "-n", cpuNS, cpuName)
		if code != exitPartial {
			t.Fatalf("exit %d, want %d (partial); stderr:\n%s\nstdout:\n%s", code, exitPartial, errOut, out)
		}
		for _, want := range []string{string(triage.CodeInsufficientCPU), "nodes: timed out after 2s (list cluster-wide)", "\nFix\n", "kubectl get --raw='/readyz?verbose'", "kubectl get nodes --request-timeout=2m"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestFailedWorkloadListMakesAPartialSweep: --all whose ReplicaSet list hangs still sweeps
// the pods it could read: a partial answer (exit 3) naming the list, not an error.
func TestFailedWorkloadListMakesAPartialSweep(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	crash := testcluster.Load(t, c, "seed-crash-app")
	ns, _, _ := strings.Cut(crash.Expected.Pod, "/")
	kubeconfig := hangingProxy(t, c, "/replicasets")
	code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "--request-timeout", "2s", "-n", ns, "--all")
	if code != exitPartial {
		t.Fatalf("exit %d, want %d (partial); stderr:\n%s\nstdout:\n%s", code, exitPartial, errOut, out)
	}
	for _, want := range []string{"list replicasets.apps in namespace " + ns + ": timed out after 2s", string(crash.Expected.Code)} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestQuestionDeadline: against an API server that accepts TLS and never answers, --all gives
// up at its deadline (the six workload lists stop at the first that timed out, then the pods
// list times out: two request timeouts at most, not seven one after another), and
// why-pending without --timeout still ends within its own default deadline, saying so.
func TestQuestionDeadline(t *testing.T) {
	server, kubeconfig := silentServer(t)
	defer func(d time.Duration) { questionTimeout = d }(questionTimeout)
	questionTimeout = 3 * time.Second
	for _, tc := range []struct {
		name   string
		args   []string
		want   string
		within time.Duration
	}{
		{"--all", []string{"why-pending", "--all", "--request-timeout", "2s"},
			"did not finish within 3s (--timeout) while waiting for the Kubernetes API server at " + server, 5 * time.Second},
		{"the default deadline", []string{"why-pending", "web", "--request-timeout", "0"},
			"did not finish within 3s (--timeout) while waiting for the Kubernetes API server at " + server, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, out, errOut := runCLI(t, append(tc.args, "--kubeconfig", kubeconfig)...)
			took := time.Since(start)
			if code != 1 || out != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
			}
			if took > tc.within {
				t.Errorf("took %s, want under %s", took, tc.within)
			}
			if !strings.Contains(errOut, "error: "+tc.want) {
				t.Errorf("stderr = %q, want the error %q", errOut, tc.want)
			}
		})
	}
}
