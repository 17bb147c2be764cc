// Package chattest holds what the chat adapters' end-to-end tests share: a real local control
// plane with a scenario loaded, the RemediationRequest store and the Calico client on it, bot
// clusters whose executions are counted, and the polling and latency helpers of the tests and
// benchmarks. Only tests import it.
package chattest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
	"github.com/whypending/whypending/internal/proc"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/triage/collect"
)

const (
	// ClusterName is the configured name of the test cluster.
	ClusterName = "test"
	// StoreNamespace holds the RemediationRequests.
	StoreNamespace = "whypending"
)

// QuietLog discards everything.
var QuietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// Env is a real control plane with a scenario loaded, the RemediationRequest CRD and its
// namespace, the Calico client, and the cluster wired as serve wires it (fleet.Wire).
type Env struct {
	Cluster *testenv.Cluster
	Calico  *calico.Client
	Store   *approval.CRDStore
	// Runs counts executions of approved plans across every BotCluster.
	Runs atomic.Int32

	fleet *fleet.Cluster // answers /why-pending
}

// Start starts a cluster, loads scenario and installs the store; cached uses triage's
// informer-backed collector, as serve does.
func Start(t testing.TB, scenario string, cached bool) *Env {
	t.Helper()
	e := &Env{Cluster: testcluster.Start(t, testenv.Options{})}
	testcluster.Load(t, e.Cluster, scenario)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Cluster.InstallCRDs(ctx, os.DirFS(filepath.Join(root, "charts", "whypending", "crds")), "."); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cluster.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: StoreNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if e.Calico, err = calico.NewClient(ctx, e.Cluster.Config); err != nil {
		t.Fatal(err)
	}
	e.Store = approval.NewCRDStore(e.Cluster.Dynamic, StoreNamespace)
	collector := collect.New(e.Cluster.Client)
	wctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if cached {
		if collector, err = collect.NewCached(wctx, e.Cluster.Client); err != nil {
			t.Fatal(err)
		}
	}
	// The answers go through fleet, as serve's do: collect.Answer over the collector, with
	// Calico IPAM from the collector's caches when it is cached.
	if e.fleet, err = fleet.Wire(wctx, ClusterName, e.Cluster.Config, collector, lock, QuietLog); err != nil {
		t.Fatal(err)
	}
	return e
}

// lock is how the test cluster's repairs use the datastore lock: always locked while writing.
var lock = fleet.Lock{Policy: actions.LockAlways, TTL: time.Minute, Owner: "whypending-e2e"}

// BotCluster is the cluster as one bot replica sees it: /why-pending answered by the shared
// fleet.Cluster (serve's path), /ipam by the Calico client, and a runner of its own (locking
// the datastore while it writes) whose executions count in Runs.
func (e *Env) BotCluster() *bot.Cluster {
	runner := &actions.Runner{Cluster: ClusterName, IPAM: e.Calico, LockPolicy: lock.Policy,
		LockTTL: lock.TTL, LockOwner: lock.Owner}
	return &bot.Cluster{
		Name: ClusterName, Answerer: e.fleet,
		IPAM: e.Calico, Planner: runner, Executor: countingExecutor{runner, &e.Runs}, Access: e.fleet,
	}
}

// Authorizer is per-user authorization as o configures it (nil for a nil o) on the test
// cluster: its SubjectAccessReviews go to the cluster as serve's do
// (fleet.Cluster.ReviewAccess, with the admin's credentials here), its audit records to log.
// o's platform lookups (Directories, Profiles) are kept.
func (e *Env) Authorizer(o *authz.Options, log *slog.Logger) *authz.Authorizer {
	if o == nil {
		return nil
	}
	ao := *o
	if ao.Clusters[ClusterName] == nil {
		ao.Clusters = map[string]authz.Reviewer{ClusterName: e.fleet}
	}
	ao.Log = log
	return authz.New(ao)
}

// Reviewer is the test cluster's access reviewer as serve wires it (fleet.Cluster), for a
// test that wraps it (authz.Options.Clusters[ClusterName]).
func (e *Env) Reviewer() authz.Reviewer { return e.fleet }

// ReviewerAs is a reviewer that creates SubjectAccessReviews on the test cluster as user (the
// admin impersonating it), for a bot whose ServiceAccount the API server may refuse.
func (e *Env) ReviewerAs(t testing.TB, user string) authz.Reviewer {
	t.Helper()
	cfg := rest.CopyConfig(e.Cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ReviewerFunc(func(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
		out, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return authorizationv1.SubjectAccessReviewStatus{}, err
		}
		return out.Status, nil
	})
}

// ReviewerFunc is a function that answers SubjectAccessReviews (authz.Reviewer).
type ReviewerFunc func(context.Context, authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error)

// ReviewAccess calls f.
func (f ReviewerFunc) ReviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	return f(ctx, spec)
}

// SwitchReviewer is a bot's access reviewer that a test replaces while the bot runs (Set).
type SwitchReviewer struct {
	mu sync.Mutex
	r  authz.Reviewer
}

// Set makes r answer the reviews from now on.
func (s *SwitchReviewer) Set(r authz.Reviewer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r = r
}

// ReviewAccess asks the reviewer Set last.
func (s *SwitchReviewer) ReviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	s.mu.Lock()
	r := s.r
	s.mu.Unlock()
	return r.ReviewAccess(ctx, spec)
}

// countingExecutor counts executions of approved plans.
type countingExecutor struct {
	approval.Executor
	runs *atomic.Int32
}

func (c countingExecutor) Execute(ctx context.Context, ap actions.Approved) (actions.Result, error) {
	c.runs.Add(1)
	return c.Executor.Execute(ctx, ap)
}

// Record reads an approval record from the store.
func (e *Env) Record(t testing.TB, id string) *approval.Record {
	t.Helper()
	a, err := e.Store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Leaked counts the leaked IPs a fresh IPAM check finds.
func (e *Env) Leaked(t testing.TB) int {
	t.Helper()
	res, err := e.Calico.Check(context.Background(), calico.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.LeakedIPs)
}

// Pods lists "namespace/name" of every pod in namespace.
func (e *Env) Pods(t testing.TB, namespace string) []string {
	t.Helper()
	pods, err := e.Cluster.Client.CoreV1().Pods(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// AuditEvents lists a record's audit events in order.
func AuditEvents(a *approval.Record) []string {
	var out []string
	for _, r := range a.History {
		out = append(out, string(r.Event))
	}
	return out
}

// WaitFor polls cond every 5 ms until it holds or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Percentile returns the p-quantile (0..1) of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// BenchClient is an HTTP client that keeps up to conns connections open, for bursts.
func BenchClient(conns int) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns,
	}}
}

// BurstMetrics reports a benchmark's ack and follow-up latencies (sorted) in milliseconds:
// ack p50, p99 and max, follow-up p50 and p99.
func BurstMetrics(b *testing.B, acks, followUps []time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(Percentile(acks, 0.50)), "ack-p50-ms")
	b.ReportMetric(ms(Percentile(acks, 0.99)), "ack-p99-ms")
	b.ReportMetric(ms(acks[len(acks)-1]), "ack-max-ms")
	b.ReportMetric(ms(Percentile(followUps, 0.50)), "followup-p50-ms")
	b.ReportMetric(ms(Percentile(followUps, 0.99)), "followup-p99-ms")
}

// RecordingCore is a chat.Core for adapter tests: it answers every command with its words
// ("answer to /ipam check --cluster prod"), every click with the notice "clicked", and
// records what it got. Block, when set, holds commands until closed.
type RecordingCore struct {
	Commands, Clicks atomic.Int32
	Block            chan struct{}

	mu    sync.Mutex
	req   chat.Request
	click chat.Click
}

var _ chat.Core = (*RecordingCore)(nil)

// Command implements chat.Core.
func (c *RecordingCore) Command(_ context.Context, req chat.Request) chat.Reply {
	if c.Block != nil {
		<-c.Block
	}
	c.mu.Lock()
	c.req = req
	c.mu.Unlock()
	c.Commands.Add(1)
	return chat.Reply{Message: chat.Message{Title: "answer to /" + req.Command + " " + strings.Join(req.Args, " ")}, Public: true}
}

// Click implements chat.Core.
func (c *RecordingCore) Click(_ context.Context, click chat.Click, _ func(context.Context, chat.Message)) chat.Outcome {
	c.mu.Lock()
	c.click = click
	c.mu.Unlock()
	c.Clicks.Add(1)
	return chat.Outcome{Notice: "clicked"}
}

// Attach implements chat.Core.
func (c *RecordingCore) Attach(context.Context, string, string) error { return nil }

// Last returns the last command and click the core got.
func (c *RecordingCore) Last() (chat.Request, chat.Click) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.req, c.click
}

// Adapter is a chat adapter in HTTP mode.
type Adapter interface {
	Mount(s chat.Mux)
	Run(ctx context.Context) error
}

// Serve mounts a's routes on a bot.Server on a loopback listener and runs its workers until
// the test ends.
func Serve(t testing.TB, a Adapter) *httptest.Server {
	t.Helper()
	s := bot.NewServer(prometheus.NewRegistry(), QuietLog)
	a.Mount(s)
	srv := httptest.NewServer(s.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return srv
}

// Burst sends every request at once through client and returns, per request, when it was
// sent and how long its answer (the platform's ack) took; a transport error or a status
// other than 200 fails t.
func Burst(t testing.TB, client *http.Client, reqs []*http.Request) (starts []time.Time, acks []time.Duration) {
	t.Helper()
	starts, acks = make([]time.Time, len(reqs)), make([]time.Duration, len(reqs))
	errs := make(chan error, len(reqs))
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i, req := range reqs {
		wg.Go(func() {
			<-gate
			starts[i] = time.Now()
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			acks[i] = time.Since(starts[i])
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("request %d: status %d", i, resp.StatusCode)
			}
		})
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return starts, acks
}

// Ledgers starts a real control plane with the chart's CRDs and the store namespace, and
// returns the ledger store of the replica named host there (each host its own identity in
// claims), for the thread tests of the adapters.
func Ledgers(t testing.TB) func(host string) *ledger.Store {
	t.Helper()
	c := testcluster.Start(t, testenv.Options{})
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.InstallCRDs(ctx, os.DirFS(filepath.Join(root, "charts", "whypending", "crds")), "."); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: StoreNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	notes := LedgerClient(t, c.Config)
	return func(host string) *ledger.Store {
		return ledger.New(notes, StoreNamespace, ledger.Options{Self: proc.Identity{Host: host, PID: 1, Start: 1}})
	}
}

// LedgerClient is a Notification client over cfg.
func LedgerClient(tb testing.TB, cfg *rest.Config) *ledger.Client {
	tb.Helper()
	c, err := ledger.NewClient(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// The Kubernetes identities of the per-user authorization tests (InstallRBAC).
const (
	// DevUser may only get pods in the scenario's namespace (Role pod-reader).
	DevUser = "dev@example.com"
	// RequesterUser may make the Calico writes of every repair (ClusterRole
	// calico-ipam-repairer), and so plan them.
	RequesterUser = "alice@example.com"
	// SREGroup may make the Calico writes of every repair too, and so approve them.
	SREGroup = "sre"
	// HiddenNamespace is a namespace DevUser may not read; it holds HiddenPod, whose name is
	// close to the scenario's pods (a typo's suggestion must not name it).
	HiddenNamespace = "payments"
	// EmptyNamespace has no pods; DevUser may get and list pods in it (a sweep of it names
	// the namespaces with stuck pods).
	EmptyNamespace = "dev-empty"
)

// InstallRBAC creates the Roles and bindings of the per-user authorization tests on the real
// API server: DevUser gets pods in namespace (a Role and RoleBinding "dev-reads-pods") and
// gets and lists them in EmptyNamespace, and
// RequesterUser and SREGroup may make the Calico writes of every repair (a ClusterRole and
// ClusterRoleBinding); HiddenNamespace holds a pod named hiddenPod.
func (e *Env) InstallRBAC(t testing.TB, namespace, hiddenPod string) {
	t.Helper()
	ctx := context.Background()
	cs := e.Cluster.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: HiddenNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: hiddenPod, Namespace: HiddenNamespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/payments:1"}}}}
	if _, err := cs.CoreV1().Pods(HiddenNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: EmptyNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rbac := cs.RbacV1()
	for ns, verbs := range map[string][]string{namespace: {"get"}, EmptyNamespace: {"get", "list"}} {
		if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: verbs}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-reads-pods"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: DevUser}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "calico-ipam-repairer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"crd.projectcalico.org"}, Resources: []string{"ipamblocks", "ipamhandles", "blockaffinities"}, Verbs: []string{"update", "delete"}},
			{APIGroups: []string{"crd.projectcalico.org"}, Resources: []string{"clusterinformations"}, Verbs: []string{"update"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "calico-ipam-repairers"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "calico-ipam-repairer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: RequesterUser},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: SREGroup}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// HostPortHolder is the pod of HiddenNamespace that HostPortConflict binds to the node with
// hostPort 80: an answer to DevUser must not name it.
const HostPortHolder = "secret-payments-proxy"

// HostPortConflict creates, on the real API server, a pod of HiddenNamespace bound to node
// (HostPortHolder) holding hostPort 80, and a Pending pod of namespace that needs hostPort 80
// on node (its nodeSelector), unschedulable with the scheduler's FailedScheduling event and
// condition for that, as kube-scheduler writes them for two nodes. It returns the Pending
// pod's name.
func (e *Env) HostPortConflict(t testing.TB, namespace, node string) string {
	t.Helper()
	ctx := context.Background()
	cs := e.Cluster.Client
	port := []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80, Protocol: corev1.ProtocolTCP}}
	holder := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: HostPortHolder, Namespace: HiddenNamespace},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "proxy", Image: "registry.example/proxy:1", Ports: port}}}}
	if _, err := cs.CoreV1().Pods(HiddenNamespace).Create(ctx, holder, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const msg = "0/2 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, 1 node(s) didn't match Pod's node affinity/selector. " +
		"preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-hostport", Namespace: namespace},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1", Ports: port}}}}
	created, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: now}}
	if _, err := cs.CoreV1().Pods(namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web-hostport.failedscheduling", Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: created.Name, UID: created.UID, APIVersion: "v1"},
		Reason:         "FailedScheduling", Message: msg, Type: corev1.EventTypeWarning, Count: 3,
		Source:         corev1.EventSource{Component: "default-scheduler"},
		FirstTimestamp: metav1.NewTime(now.Add(-time.Minute)), LastTimestamp: now}
	if _, err := cs.CoreV1().Events(namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return created.Name
}

// AuditLines returns the JSON log records in logs whose msg is msg.
func AuditLines(t testing.TB, logs string, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// LogBuffer collects a bot's JSON log records, safe for concurrent writes.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Logger returns a JSON logger writing to the buffer.
func (l *LogBuffer) Logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was logged so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
