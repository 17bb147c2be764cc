package collect

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

func TestEventLastSeen(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	mt := func(m int) metav1.Time { return metav1.NewTime(at(m)) }
	mmt := func(m int) metav1.MicroTime { return metav1.NewMicroTime(at(m)) }
	tests := []struct {
		name string
		got  triage.Event
		want triage.Event
	}{
		{
			name: "core/v1 with a series uses series.lastObservedTime and series.count",
			got: eventFromCore(&corev1.Event{Reason: "FailedScheduling", Type: "Warning", Message: "m",
				FirstTimestamp: mt(1), LastTimestamp: mt(2), EventTime: mmt(1),
				Series: &corev1.EventSeries{Count: 7, LastObservedTime: mmt(9)}, Source: corev1.EventSource{Component: "default-scheduler"}}),
			want: triage.Event{Type: "Warning", Reason: "FailedScheduling", Message: "m", Count: 7, FirstSeen: at(1), LastSeen: at(9), Source: "default-scheduler"},
		},
		{
			name: "core/v1 without a series uses lastTimestamp and count",
			got: eventFromCore(&corev1.Event{Reason: "BackOff", Count: 3, FirstTimestamp: mt(1), LastTimestamp: mt(5),
				InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{app}"}, Source: corev1.EventSource{Component: "kubelet"}}),
			want: triage.Event{Reason: "BackOff", Count: 3, FirstSeen: at(1), LastSeen: at(5), Source: "kubelet", FieldPath: "spec.containers{app}"},
		},
		{
			name: "core/v1 written by an events.k8s.io client has only eventTime",
			got:  eventFromCore(&corev1.Event{Reason: "FailedScheduling", EventTime: mmt(4), ReportingController: "default-scheduler"}),
			want: triage.Event{Reason: "FailedScheduling", Count: 1, FirstSeen: at(4), LastSeen: at(4), Source: "default-scheduler"},
		},
		{
			name: "core/v1 with only firstTimestamp falls back to it",
			got:  eventFromCore(&corev1.Event{Reason: "Pulled", FirstTimestamp: mt(2)}),
			want: triage.Event{Reason: "Pulled", Count: 1, FirstSeen: at(2), LastSeen: at(2)},
		},
		{
			name: "events.k8s.io/v1 uses note, series and reportingController",
			got: eventFromEventsV1(&eventsv1.Event{Reason: "FailedScheduling", Type: "Warning", Note: "0/3 nodes are available",
				EventTime: mmt(1), Series: &eventsv1.EventSeries{Count: 4, LastObservedTime: mmt(6)}, ReportingController: "default-scheduler"}),
			want: triage.Event{Type: "Warning", Reason: "FailedScheduling", Message: "0/3 nodes are available", Count: 4, FirstSeen: at(1), LastSeen: at(6), Source: "default-scheduler"},
		},
		{
			name: "events.k8s.io/v1 of a core/v1 writer uses the deprecated fields",
			got: eventFromEventsV1(&eventsv1.Event{Reason: "FailedMount", DeprecatedCount: 12, DeprecatedFirstTimestamp: mt(1),
				DeprecatedLastTimestamp: mt(8), DeprecatedSource: corev1.EventSource{Component: "kubelet"}}),
			want: triage.Event{Reason: "FailedMount", Count: 12, FirstSeen: at(1), LastSeen: at(8), Source: "kubelet"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("normalised event mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStripForCache(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	annotations := func() map[string]string {
		return map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "keep": "me"}
	}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{
			name: "a pod loses managedFields and last-applied-configuration, nothing else",
			in: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", ManagedFields: managed, Annotations: annotations()},
				Spec: corev1.PodSpec{NodeName: "n1"}},
			want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{"keep": "me"}},
				Spec: corev1.PodSpec{NodeName: "n1"}},
		},
		{
			name: "a node also loses its image list",
			in: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: managed},
				Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"nginx"}, SizeBytes: 1}},
					NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}}},
			want: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
				Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stripForCache(tt.in)
			if err != nil {
				t.Fatalf("stripForCache() error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("stripForCache() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// loggingTransport records the API requests a client sends, except watches (an informer's
// long-running watch, possibly re-established mid-test, is not per-diagnosis work).
type loggingTransport struct {
	rt http.RoundTripper
	mu *sync.Mutex
	// log receives "METHOD path?query" of each request.
	log *[]string
}

func (c loggingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Query().Get("watch") == "true" {
		return c.rt.RoundTrip(r)
	}
	c.mu.Lock()
	*c.log = append(*c.log, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	c.mu.Unlock()
	return c.rt.RoundTrip(r)
}

// requestLog is a clientset whose requests are recorded.
type requestLog struct {
	client kubernetes.Interface
	mu     sync.Mutex
	log    []string
}

func newRequestLog(t *testing.T, cfg *rest.Config) *requestLog {
	t.Helper()
	rc := &requestLog{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return loggingTransport{rt: rt, mu: &rc.mu, log: &rc.log}
	})
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc.client = client
	return rc
}

// take returns the requests recorded since the last take and forgets them.
func (rc *requestLog) take() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := rc.log
	rc.log = nil
	return out
}

// TestCollectorRequestBudget diagnoses a Pending pod in a real control plane with both
// backends: the warm cached Collector stays within 4 API requests, the direct one within 6
// (pod, events ×2, nodes, bound pods, /version), the two agree on every finding, and the merged
// events hold each event once.
func TestCollectorRequestBudget(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{Scheduler: true})
	testcluster.Load(t, c, "seed-frontend-cpu")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.WaitForScheduler(ctx, "seed-frontend-cpu", "frontend"); err != nil {
		t.Fatal(err)
	}

	direct := newRequestLog(t, c.Config)
	cold, err := Diagnose(ctx, New(direct.client), "seed-frontend-cpu", "frontend")
	if err != nil {
		t.Fatalf("Diagnose(direct) error: %v", err)
	}
	reqs := direct.take()
	t.Logf("direct Diagnose: %d API requests: %v", len(reqs), reqs)
	if len(reqs) > 6 {
		t.Errorf("direct Diagnose sent %d API requests, want at most 6:\n%v", len(reqs), reqs)
	}

	cached := newRequestLog(t, c.Config)
	informerCtx, stop := context.WithCancel(ctx)
	defer stop()
	cc, err := NewCached(informerCtx, cached.client)
	if err != nil {
		t.Fatalf("NewCached() error: %v", err)
	}
	cached.take() // the initial lists and watches
	warm, err := Diagnose(ctx, cc, "seed-frontend-cpu", "frontend")
	if err != nil {
		t.Fatalf("Diagnose(cached) error: %v", err)
	}
	reqs = cached.take()
	t.Logf("warm cached Diagnose: %d API requests: %v", len(reqs), reqs)
	if len(reqs) > 4 {
		t.Errorf("warm cached Diagnose sent %d API requests, want at most 4:\n%v", len(reqs), reqs)
	}

	if diff := cmp.Diff(cold.Findings, warm.Findings); diff != "" {
		t.Errorf("cold (direct) and warm (cached) findings differ (-direct +cached):\n%s", diff)
	}
	var failed int
	for _, e := range cold.Events {
		if e.Reason == "FailedScheduling" {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("merged events hold %d FailedScheduling events, want exactly 1 (core/v1 and events.k8s.io/v1 show the same object)", failed)
	}
}

// TestDiagnosePodNotFound asks for a misspelled pod and expects pod-not-found with the real
// pod among the suggestions, from both backends.
func TestDiagnosePodNotFound(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-frontend-cpu")
	ctx := t.Context()
	cc, err := NewCached(ctx, c.Client)
	if err != nil {
		t.Fatal(err)
	}
	for name, col := range map[string]*Collector{"direct": New(c.Client), "cached": cc} {
		t.Run(name, func(t *testing.T) {
			d, err := Diagnose(ctx, col, "seed-frontend-cpu", "frontent")
			if err != nil {
				t.Fatalf("Diagnose() error: %v", err)
			}
			if got := d.Primary().Code; got != triage.CodePodNotFound {
				t.Errorf("Diagnose(frontent).Findings[0].Code = %s, want %s", got, triage.CodePodNotFound)
			}
			var similar []string
			for _, e := range d.Primary().Evidence {
				similar = append(similar, e.Object)
			}
			if !slices.Contains(similar, "Pod seed-frontend-cpu/frontend") {
				t.Errorf("pod-not-found evidence = %v, want Pod seed-frontend-cpu/frontend among them", similar)
			}
			if len(similar) > maxSimilarPods {
				t.Errorf("pod-not-found suggests %d pods, want at most %d", len(similar), maxSimilarPods)
			}
		})
	}
}

// TestDiagnoseUnreachable expects an error that still carries the transport error (so the CLI
// can name the server in one line) when no API server listens.
func TestDiagnoseUnreachable(t *testing.T) {
	client, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Diagnose(t.Context(), New(client), "shop", "web")
	if err == nil {
		t.Fatalf("Diagnose() = %v, want an error", d.Primary().Code)
	}
	var urlErr *url.Error
	if !errors.As(err, &urlErr) {
		t.Errorf("Diagnose() error = %v, want it to wrap a *url.Error", err)
	}
}

// TestNotAKubernetesAPI: a server that answers 404 to everything (a mistyped proxy URL) is an
// error, not "there is no pod".
func TestNotAKubernetesAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound)
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Diagnose(t.Context(), New(client), "shop", "web")
	if err == nil {
		t.Fatalf("Diagnose() = %s, want an error", d.Primary().Code)
	}
}

// TestCollectExtras loads scenarios into the real control plane and checks what collectExtras
// adds: IPAM state through package calico (counts from the scenario notes), calico-node pods,
// and a previous-log read that fails (no kubelet) recorded with its reason.
func TestCollectExtras(t *testing.T) {
	tests := []struct {
		scenario string
		check    func(t *testing.T, s *triage.Snapshot)
	}{
		{"seed-ipam-leaked", func(t *testing.T, s *triage.Snapshot) {
			if s.IPAM == nil {
				t.Fatalf("IPAM = nil (err %v), want state", s.IPAMErr)
			}
			if s.IPAM.LeakedIPs != 181 || s.IPAM.LeakedIPsByNode["worker-2"] != 128 {
				t.Errorf("LeakedIPs = %d (worker-2 %d), want 181 (worker-2 128)", s.IPAM.LeakedIPs, s.IPAM.LeakedIPsByNode["worker-2"])
			}
			if len(s.IPAM.Pools) != 1 || s.IPAM.Pools[0].InUse != 256 || s.IPAM.Pools[0].Total != 256 {
				t.Errorf("Pools = %+v, want one pool 256/256", s.IPAM.Pools)
			}
			if len(s.CalicoNodePods) != 1 || s.CalicoNodePods[0].Spec.NodeName != "worker-1" {
				t.Errorf("CalicoNodePods = %d pods, want worker-1's calico-node", len(s.CalicoNodePods))
			}
		}},
		{"seed-block-limit", func(t *testing.T, s *triage.Snapshot) {
			if s.IPAM == nil {
				t.Fatalf("IPAM = nil (err %v), want state", s.IPAMErr)
			}
			got := []int{s.IPAM.MaxBlocksPerHost, s.IPAM.NodeBlocks["worker-1"], s.IPAM.EmptyBlocksByNode["worker-1"], s.IPAM.LeakedIPs}
			if want := []int{4, 4, 1, 86}; !cmp.Equal(got, want) {
				t.Errorf("maxBlocksPerHost, worker-1 blocks, worker-1 empty blocks, leaked = %v, want %v", got, want)
			}
		}},
		{"case-42", func(t *testing.T, s *triage.Snapshot) {
			lt, ok := s.PreviousLogs["manager"]
			if !ok || lt.Err == nil {
				t.Errorf("PreviousLogs[manager] = %+v (present %t), want a read error (the test cluster has no kubelet)", lt, ok)
			}
			if s.IPAM != nil || s.CalicoNodePods != nil {
				t.Errorf("a crash-looping pod read IPAM (%v) or calico-node pods (%d); want neither", s.IPAM != nil, len(s.CalicoNodePods))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			t.Parallel()
			c := testcluster.Start(t, testenv.Options{})
			sc := testcluster.Load(t, c, tt.scenario)
			ns, name, _ := strings.Cut(sc.Expected.Pod, "/")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			s, err := New(c.Client).WithCalico(c.Config).Collect(ctx, ns, name)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}
