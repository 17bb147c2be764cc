package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime/debug"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
	"github.com/whypending/whypending/triage/collect"
)

// connTiming is how serve watches and reconnects its clusters.
type connTiming struct {
	// connectTimeout bounds the first requests of a connection attempt (/version, a pod list).
	connectTimeout time.Duration
	// syncTimeout bounds the informer cache sync of a connection attempt (the pod, node,
	// event and storage caches, then the Calico IPAM caches).
	syncTimeout time.Duration
	// probeEvery is how often a connected cluster's /readyz is asked; probeTimeout bounds one
	// probe; probeFailures failed probes in a row make the cluster unavailable.
	probeEvery, probeTimeout time.Duration
	probeFailures            int
	// retryMin and retryMax bound the back-off between attempts to reconnect.
	retryMin, retryMax time.Duration
	// lockSweepEvery is how many probes pass between checks for a datastore lock of this
	// bot that outlived its run (calico.Client.RecoverLocks).
	lockSweepEvery int
	// firstAttempts bounds how long serve waits, before it listens, for the first attempt
	// to connect every cluster.
	firstAttempts time.Duration
}

// defaultConnTiming: an outage is noticed within about 10 s, and a cluster that comes back is
// used again within 15 s (plus the time its caches take to sync: tens of seconds for 100,000
// pods, see calico/BENCHMARKS.md).
var defaultConnTiming = connTiming{
	connectTimeout: 15 * time.Second,
	syncTimeout:    10 * time.Minute,
	probeEvery:     5 * time.Second,
	probeTimeout:   3 * time.Second,
	probeFailures:  2,
	retryMin:       time.Second,
	retryMax:       15 * time.Second,
	lockSweepEvery: 6,
	firstAttempts:  45 * time.Second,
}

// liveCluster is one configured cluster as serve uses it. It connects in the background and
// keeps probing the API server: while the cluster is unavailable (the API server does not
// answer, or the kubeconfig is broken) commands for it get a one-line answer naming the API
// server and its error, and once it answers again a fresh connection (new informer caches,
// Calico client and action runner) is used, without a restart. Its methods forward the bot's
// calls (bot.Diagnoser, bot.Answerer, bot.IPAM, bot.Planner, bot.Executor, bot.Recoverer) to the current
// connection.
type liveCluster struct {
	cc             bot.ClusterConfig
	lock           lockSettings
	storeNamespace string // RemediationRequest namespace when this is the store cluster, else ""
	timing         connTiming
	log            *slog.Logger

	mu      sync.RWMutex
	conn    *clusterConn // nil while unavailable
	restCfg *rest.Config // the last config loaded; nil until the kubeconfig loads
	err     error        // why unavailable: one line naming the API server
	since   time.Time    // when the cluster became unavailable
	syncing time.Time    // when the caches of the current attempt started syncing; zero otherwise
	tried   chan struct{}
}

// clusterConn is one connection to a cluster, from a successful connect until the API server
// stops answering.
type clusterConn struct {
	cluster   *bot.Cluster // wired by wireCluster
	client    kubernetes.Interface
	collector *collect.Collector // the pod, node, event and storage caches
	ipam      *calico.Client     // nil without Calico
	ipamCache *calico.Cache      // nil without Calico
	store     *bot.CRDStore      // nil unless this is the store cluster
	cancel    context.CancelFunc

	storeErr error // the last store check (CRDStore.Ping); guarded by liveCluster.mu
}

func newLiveCluster(cc bot.ClusterConfig, lock lockSettings, storeNamespace string, timing connTiming, log *slog.Logger) *liveCluster {
	return &liveCluster{
		cc: cc, lock: lock, storeNamespace: storeNamespace, timing: timing,
		log:   log.With(slog.String("cluster", cc.Name)),
		err:   errors.New("not connected yet"),
		since: time.Now(),
		tried: make(chan struct{}),
	}
}

// botCluster is the bot's view of l.
func (l *liveCluster) botCluster() *bot.Cluster {
	return &bot.Cluster{Name: l.cc.Name, Namespace: l.cc.Namespace, Diagnoser: l, Answerer: l, IPAM: l, Planner: l, Executor: l, Health: l.Health}
}

// readyCheck reports l in /readyz, in the "clusters" group (ready while any cluster is): a
// cluster is ready once connected with every cache synced.
func (l *liveCluster) readyCheck() bot.ReadyCheck {
	return bot.ReadyCheck{Name: "cluster " + l.cc.Name, Group: "clusters", Check: func(context.Context) error {
		l.mu.RLock()
		defer l.mu.RUnlock()
		if l.conn != nil {
			return nil
		}
		if !l.syncing.IsZero() {
			return fmt.Errorf("caches syncing since %s", l.syncing.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("unavailable since %s: %w", l.since.UTC().Format(time.RFC3339), l.err)
	}}
}

// cacheStats reports the caches of l's current connection for /metrics: objects per informer
// and whether each has synced; while the caches of a new connection fill, one "all" entry
// that has not synced.
func (l *liveCluster) cacheStats() []bot.CacheStats {
	l.mu.RLock()
	conn, syncing := l.conn, !l.syncing.IsZero()
	l.mu.RUnlock()
	if conn == nil {
		if syncing {
			return []bot.CacheStats{{Cluster: l.cc.Name, Cache: "all"}}
		}
		return nil
	}
	var out []bot.CacheStats
	synced := conn.collector.HasSynced()
	for name, n := range conn.collector.CacheObjects() {
		out = append(out, bot.CacheStats{Cluster: l.cc.Name, Cache: name, Objects: n, Synced: synced})
	}
	if conn.ipamCache != nil {
		objects, ok := conn.ipamCache.Objects()
		for name, n := range objects {
			out = append(out, bot.CacheStats{Cluster: l.cc.Name, Cache: "calico/" + name, Objects: n, Synced: ok[name]})
		}
	}
	return out
}

// Health implements bot.Cluster.Health.
func (l *liveCluster) Health() error {
	_, err := l.current()
	return err
}

// current returns the current connection, or the *bot.UnavailableError saying why there is
// none.
func (l *liveCluster) current() (*clusterConn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.conn == nil && !l.syncing.IsZero() {
		return nil, chat.ClusterUnavailable(l.cc.Name, l.since,
			fmt.Errorf("the bot's caches of it are still syncing (started %s)", l.syncing.UTC().Format(time.RFC3339)))
	}
	if l.conn == nil {
		return nil, chat.ClusterUnavailable(l.cc.Name, l.since, l.err)
	}
	return l.conn, nil
}

// run connects, watches and reconnects until ctx is done.
func (l *liveCluster) run(ctx context.Context) {
	backoff := l.timing.retryMin
	first := true
	for {
		conn, err := l.connect(ctx)
		if ctx.Err() != nil {
			if conn != nil {
				conn.cancel()
			}
			return
		}
		if err != nil {
			l.setUnavailable(err)
		} else {
			l.setConnected(conn)
		}
		if first {
			close(l.tried)
			first = false
		}
		if err != nil {
			if sleepCtx(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, l.timing.retryMax)
			continue
		}
		backoff = l.timing.retryMin
		err = l.watch(ctx, conn)
		l.mu.Lock()
		l.conn = nil
		l.mu.Unlock()
		conn.cancel()
		if ctx.Err() != nil {
			return
		}
		l.setUnavailable(err)
	}
}

// setSyncing records that the caches of a connection attempt started syncing at t (zero: no
// longer syncing).
func (l *liveCluster) setSyncing(t time.Time) {
	l.mu.Lock()
	l.syncing = t
	l.mu.Unlock()
}

func (l *liveCluster) setConnected(conn *clusterConn) {
	l.mu.Lock()
	l.conn, l.err = conn, nil
	host := l.restCfg.Host
	l.mu.Unlock()
	l.log.Info("cluster connected", slog.String("server", host))
}

// setUnavailable records why the cluster cannot be used; a change of state or reason is
// logged.
func (l *liveCluster) setUnavailable(err error) {
	l.mu.Lock()
	changed := l.err == nil || l.err.Error() != err.Error()
	if l.err == nil {
		l.since = time.Now()
	}
	l.err = err
	l.mu.Unlock()
	if changed {
		l.log.Warn("cluster unavailable; retrying in the background", slog.String("why", err.Error()))
	}
}

// connect loads the kubeconfig, checks that the API server answers and lets the bot list
// pods, starts the informer caches and the Calico IPAM caches, waits until they have synced
// (bounded by syncTimeout) and wires the cluster.
func (l *liveCluster) connect(ctx context.Context) (*clusterConn, error) {
	restCfg, err := clusterConfig(l.cc)
	if err != nil {
		return nil, fmt.Errorf("misconfigured: %w", err)
	}
	l.mu.Lock()
	l.restCfg = restCfg
	l.mu.Unlock()
	host := restCfg.Host
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("misconfigured: build client for %s: %w", host, err)
	}
	pctx, cancel := context.WithTimeout(ctx, l.timing.connectTimeout)
	_, err = client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(pctx)
	if err == nil {
		// Informers would retry a forbidden list forever; ask once, to name the problem.
		_, err = client.CoreV1().Pods("").List(pctx, metav1.ListOptions{Limit: 1})
	}
	cancel()
	if err != nil {
		return nil, apiError(host, err)
	}
	// The caches decode every pod of the cluster: protobuf is several times cheaper than JSON.
	pbCfg := rest.CopyConfig(restCfg)
	pbCfg.ContentType = "application/vnd.kubernetes.protobuf"
	pbClient, err := kubernetes.NewForConfig(pbCfg)
	if err != nil {
		return nil, fmt.Errorf("misconfigured: build client for %s: %w", host, err)
	}
	started := time.Now()
	l.setSyncing(started)
	defer l.setSyncing(time.Time{})
	sctx, scancel := context.WithCancel(ctx)
	timer := time.AfterFunc(l.timing.syncTimeout, scancel)
	collector, err := collect.NewCached(sctx, pbClient)
	var c *bot.Cluster
	if err == nil {
		c, err = wireCluster(sctx, l.cc.Name, l.cc.Namespace, restCfg, collector, l.lock, l.log)
	}
	if !timer.Stop() {
		scancel()
		return nil, fmt.Errorf("the informer caches of %s did not sync within %s", host, l.timing.syncTimeout)
	}
	if err != nil {
		scancel()
		return nil, apiError(host, err)
	}
	conn := &clusterConn{cluster: c, client: client, collector: collector, cancel: scancel}
	if r, ok := c.Planner.(*actions.Runner); ok {
		conn.ipam, _ = r.IPAM.(*calico.Client)
	}
	conn.ipamCache, _ = c.IPAM.(*calico.Cache)
	// The initial lists decode every object of the cluster once and leave that much garbage;
	// return it to the OS now rather than over the next minutes, so the pod's memory right
	// after the sync is what the caches hold (BENCHMARKS.md, "serve RSS").
	debug.FreeOSMemory()
	objects := collector.CacheObjects()
	l.log.Info("caches synced", slog.Duration("took", time.Since(started).Round(time.Millisecond)),
		slog.Int("pods", objects["pods"]), slog.Int("nodes", objects["nodes"]), slog.Int("events", objects["events"]))
	if l.storeNamespace != "" {
		dyn, err := dynamic.NewForConfig(restCfg)
		if err != nil {
			scancel()
			return nil, fmt.Errorf("misconfigured: build dynamic client for %s: %w", host, err)
		}
		conn.store = bot.NewCRDStore(dyn, l.storeNamespace)
		l.checkStore(ctx, conn)
	}
	return conn, nil
}

// checkStore runs the store's readiness check (a dry-run create, see bot.CRDStore.Ping) and
// keeps the result for /readyz, which must answer at once.
func (l *liveCluster) checkStore(ctx context.Context, conn *clusterConn) {
	pctx, cancel := context.WithTimeout(ctx, l.timing.connectTimeout)
	err := conn.store.Ping(pctx)
	cancel()
	l.mu.Lock()
	conn.storeErr = err
	l.mu.Unlock()
}

// watch probes the API server's /readyz until probeFailures probes in a row fail (it returns
// the last failure) or ctx is done. Every lockSweepEvery probes it undoes a datastore lock of
// this bot that outlived its run, such as one whose unlock failed while the API server was
// away.
func (l *liveCluster) watch(ctx context.Context, conn *clusterConn) error {
	t := time.NewTicker(l.timing.probeEvery)
	defer t.Stop()
	failures, probes := 0, 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, l.timing.probeTimeout)
		_, err := conn.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(pctx)
		cancel()
		if err != nil {
			if failures++; failures >= l.timing.probeFailures {
				return apiError(l.host(), err)
			}
			continue
		}
		failures = 0
		if conn.store != nil {
			l.checkStore(ctx, conn)
		}
		if probes++; conn.ipam != nil && probes%l.timing.lockSweepEvery == 0 {
			if recovered, err := conn.ipam.RecoverLocks(ctx, l.lock.owner); err != nil {
				l.log.Warn("recover datastore lock", slog.Any("err", err))
			} else if recovered {
				l.log.Warn("unlocked a calico datastore lock of this bot that outlived its run")
			}
		}
	}
}

// host is the API server URL of the last loaded config ("" before one loaded).
func (l *liveCluster) host() string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.restCfg == nil {
		return ""
	}
	return l.restCfg.Host
}

// waitConfig waits until the kubeconfig of l has loaded once and returns it.
func (l *liveCluster) waitConfig(ctx context.Context) (*rest.Config, error) {
	for {
		l.mu.RLock()
		cfg := l.restCfg
		l.mu.RUnlock()
		if cfg != nil {
			return cfg, nil
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// unavailable turns a transport error of a call through the cluster (the API server stopped
// answering before a probe noticed) into the *bot.UnavailableError naming it; other errors
// stay as they are.
func (l *liveCluster) unavailable(err error) error {
	var ue *chat.UnavailableError
	var urlErr *url.Error
	if err == nil || errors.As(err, &ue) || !errors.As(err, &urlErr) {
		return err
	}
	return chat.ClusterUnavailable(l.cc.Name, time.Time{}, apiError(l.host(), err))
}

// errNoCalico is returned by the IPAM calls of a cluster without Calico.
func (l *liveCluster) errNoCalico() error {
	return fmt.Errorf("cluster %s: %w", l.cc.Name, calico.ErrCalicoNotInstalled)
}

// Diagnose implements bot.Diagnoser.
func (l *liveCluster) Diagnose(ctx context.Context, namespace, name string) (*triage.Diagnosis, error) {
	c, err := l.current()
	if err != nil {
		return nil, err
	}
	d, err := c.cluster.Diagnoser.Diagnose(ctx, namespace, name)
	return d, l.unavailable(err)
}

// Answer implements bot.Answerer.
func (l *liveCluster) Answer(ctx context.Context, t triage.Target) (*triage.Answer, error) {
	c, err := l.current()
	if err != nil {
		return nil, err
	}
	a, err := c.cluster.Answerer.Answer(ctx, t)
	return a, l.unavailable(err)
}

// Check implements bot.IPAM.
func (l *liveCluster) Check(ctx context.Context, opts calico.CheckOptions) (*calico.CheckResult, error) {
	c, err := l.current()
	if err != nil {
		return nil, err
	}
	if c.cluster.IPAM == nil {
		return nil, l.errNoCalico()
	}
	r, err := c.cluster.IPAM.Check(ctx, opts)
	return r, l.unavailable(err)
}

// Utilization implements bot.IPAM.
func (l *liveCluster) Utilization(ctx context.Context) (*calico.Utilization, error) {
	c, err := l.current()
	if err != nil {
		return nil, err
	}
	if c.cluster.IPAM == nil {
		return nil, l.errNoCalico()
	}
	u, err := c.cluster.IPAM.Utilization(ctx)
	return u, l.unavailable(err)
}

// Plan implements bot.Planner.
func (l *liveCluster) Plan(ctx context.Context, kind actions.Kind, opts actions.PlanOptions) (actions.Plan, error) {
	c, err := l.current()
	if err != nil {
		return actions.Plan{}, err
	}
	if c.cluster.Planner == nil {
		return actions.Plan{}, l.errNoCalico()
	}
	p, err := c.cluster.Planner.Plan(ctx, kind, opts)
	return p, l.unavailable(err)
}

// Execute implements bot.Executor.
func (l *liveCluster) Execute(ctx context.Context, ap actions.Approved) (actions.Result, error) {
	c, err := l.current()
	if err != nil {
		return actions.Result{PlanID: ap.Plan.ID, Kind: ap.Plan.Kind, Planned: len(ap.Plan.Items), Remaining: -1}, err
	}
	if c.cluster.Executor == nil {
		return actions.Result{}, l.errNoCalico()
	}
	r, err := c.cluster.Executor.Execute(ctx, ap)
	return r, l.unavailable(err)
}

// Recover implements bot.Recoverer.
func (l *liveCluster) Recover(ctx context.Context, p actions.Plan) (actions.Recovery, error) {
	c, err := l.current()
	if err != nil {
		return actions.Recovery{}, err
	}
	rc, ok := c.cluster.Executor.(bot.Recoverer)
	if !ok {
		return actions.Recovery{}, l.errNoCalico()
	}
	r, err := rc.Recover(ctx, p)
	return r, l.unavailable(err)
}

var (
	_ bot.Diagnoser = (*liveCluster)(nil)
	_ bot.Answerer  = (*liveCluster)(nil)
	_ bot.IPAM      = (*liveCluster)(nil)
	_ bot.Planner   = (*liveCluster)(nil)
	_ bot.Executor  = (*liveCluster)(nil)
	_ bot.Recoverer = (*liveCluster)(nil)
)

// liveStore is the kubernetes approval store on the store cluster: RemediationRequests
// through its current connection. While the store cluster is unavailable every call returns
// the *bot.UnavailableError naming it.
type liveStore struct{ l *liveCluster }

var _ bot.Store = liveStore{}

func (s liveStore) store() (*bot.CRDStore, error) {
	c, err := s.l.current()
	if err != nil {
		return nil, err
	}
	return c.store, nil
}

// Create implements bot.Store.
func (s liveStore) Create(ctx context.Context, a *bot.Approval) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	return s.l.unavailable(st.Create(ctx, a))
}

// Get implements bot.Store.
func (s liveStore) Get(ctx context.Context, id string) (*bot.Approval, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	a, err := st.Get(ctx, id)
	return a, s.l.unavailable(err)
}

// Update implements bot.Store.
func (s liveStore) Update(ctx context.Context, a *bot.Approval) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	return s.l.unavailable(st.Update(ctx, a))
}

// List implements bot.Store.
func (s liveStore) List(ctx context.Context, state bot.State) ([]*bot.Approval, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	out, err := st.List(ctx, state)
	return out, s.l.unavailable(err)
}

// Ping is the /readyz check of the store: the result of the last dry-run create, run at
// connection and after every probe, which names a missing namespace or CRD (see
// bot.CRDStore.Ping). While the store cluster is unavailable the store is not checked (that
// cluster's own line says why) and does not make the bot unready.
func (s liveStore) Ping(context.Context) error {
	c, err := s.l.current()
	if err != nil {
		return fmt.Errorf("%w: cluster %s is unavailable", bot.ErrNotChecked, s.l.cc.Name)
	}
	s.l.mu.RLock()
	defer s.l.mu.RUnlock()
	return c.storeErr
}

// clusterSet is every configured cluster as serve uses it.
type clusterSet struct {
	live  []*liveCluster
	store *liveCluster // the store cluster (kubernetes backend), else nil
	wg    sync.WaitGroup
}

// startClusters starts connecting every configured cluster in the background, until ctx is
// done; call wait after cancelling ctx.
func startClusters(ctx context.Context, cfg *bot.Config, lock lockSettings, timing connTiming, log *slog.Logger) *clusterSet {
	s := &clusterSet{}
	for _, cc := range cfg.Clusters {
		ns := ""
		if cfg.Store.Backend == "kubernetes" && cc.Name == cfg.Store.Cluster {
			ns = cfg.Store.Namespace
		}
		l := newLiveCluster(cc, lock, ns, timing, log)
		if ns != "" {
			s.store = l
		}
		s.live = append(s.live, l)
		s.wg.Go(func() { l.run(ctx) })
	}
	return s
}

// waitFirstAttempts waits until every cluster has tried to connect once, or timeout.
func (s *clusterSet) waitFirstAttempts(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, l := range s.live {
		select {
		case <-l.tried:
		case <-ctx.Done():
			return
		}
	}
}

// wait waits for the clusters' background work to stop (after ctx is done).
func (s *clusterSet) wait() { s.wg.Wait() }

// botClusters are the bot's views of the clusters, in configuration order.
func (s *clusterSet) botClusters() []*bot.Cluster {
	out := make([]*bot.Cluster, len(s.live))
	for i, l := range s.live {
		out[i] = l.botCluster()
	}
	return out
}

// cacheStats are the clusters' caches for /metrics.
func (s *clusterSet) cacheStats() []bot.CacheStats {
	var out []bot.CacheStats
	for _, l := range s.live {
		out = append(out, l.cacheStats()...)
	}
	return out
}

// readyChecks are the clusters' /readyz checks.
func (s *clusterSet) readyChecks() []bot.ReadyCheck {
	out := make([]bot.ReadyCheck, len(s.live))
	for i, l := range s.live {
		out[i] = l.readyCheck()
	}
	return out
}

// sleepCtx sleeps for d or until ctx is done (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
