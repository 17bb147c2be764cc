package fleet

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
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/clock"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/triage/collect"
)

// Timing is how a Cluster watches and reconnects its API server.
type Timing struct {
	// ConnectTimeout bounds the first requests of a connection attempt (/version, a pod list).
	ConnectTimeout time.Duration
	// RequestTimeout bounds every request of a connection while the API server sends
	// nothing (see RequestTimeout): a call through a cluster that stopped answering fails
	// with "cluster X did not answer within N" instead of waiting forever. Zero: none.
	RequestTimeout time.Duration
	// SyncTimeout bounds the informer cache sync of a connection attempt (the pod, node,
	// event and storage caches, then the Calico IPAM caches).
	SyncTimeout time.Duration
	// ProbeEvery is how often a connected cluster's /readyz is asked; ProbeTimeout bounds one
	// probe; ProbeFailures failed probes in a row make the cluster unavailable.
	ProbeEvery, ProbeTimeout time.Duration
	ProbeFailures            int
	// RetryMin and RetryMax bound the back-off between attempts to reconnect.
	RetryMin, RetryMax time.Duration
	// LockSweepEvery is how many probes pass between checks for a datastore lock of this
	// bot that outlived its run (calico.Client.RecoverLocks).
	LockSweepEvery int
	// FirstAttempts bounds how long after start serve's work about a cluster (an alert's
	// diagnosis, the approval store's sweep) waits for that cluster's first attempt to
	// connect, and its digest schedule for every cluster's. Commands and the chat platforms
	// are served from the start.
	FirstAttempts time.Duration
}

// DefaultTiming: an outage is noticed within about 10 s, and a cluster that comes back is
// used again within 15 s (plus the time its caches take to sync: tens of seconds for 100,000
// pods, see calico/BENCHMARKS.md).
var DefaultTiming = Timing{
	ConnectTimeout: 15 * time.Second,
	RequestTimeout: DefaultRequestTimeout,
	SyncTimeout:    10 * time.Minute,
	ProbeEvery:     5 * time.Second,
	ProbeTimeout:   3 * time.Second,
	ProbeFailures:  2,
	RetryMin:       time.Second,
	RetryMax:       15 * time.Second,
	LockSweepEvery: 6,
	FirstAttempts:  45 * time.Second,
}

// Lock is how a cluster's repairs use the Calico datastore lock (actions.Runner's LockPolicy,
// LockTTL and LockOwner).
type Lock struct {
	Policy actions.LockPolicy
	TTL    time.Duration
	Owner  string
}

// Options configures New.
type Options struct {
	// Name is the configured cluster name.
	Name string
	// Config loads the cluster's REST config at each connection attempt (a kubeconfig that
	// fails to load makes the cluster unavailable, "misconfigured: …").
	Config func() (*rest.Config, error)
	// Lock is how repairs use the datastore lock.
	Lock Lock
	// Timing is how the cluster is probed and reconnected (zero: DefaultTiming).
	Timing Timing
	// Check, when set, is an extra readiness check run with each connection's dynamic client
	// when it connects and after every successful probe (serve: the approval store's dry-run
	// create on the store cluster); its last result is CheckErr.
	Check func(ctx context.Context, dyn dynamic.Interface) error
	// Log is the operational log (nil: slog.Default()).
	Log *slog.Logger
}

// Cluster is one configured cluster as serve uses it. It connects in the background (Run) and
// keeps probing the API server: while the cluster is unavailable (the API server does not
// answer, or the kubeconfig is broken) its calls return a *chat.UnavailableError naming the
// API server and its error, and once it answers again a fresh connection (new informer caches,
// Calico client and action runner) is used, without a restart.
type Cluster struct {
	name   string
	config func() (*rest.Config, error)
	lock   Lock
	check  func(ctx context.Context, dyn dynamic.Interface) error
	timing Timing
	log    *slog.Logger

	mu      sync.RWMutex
	conn    *conn        // nil while unavailable
	restCfg *rest.Config // the last config loaded; nil until the kubeconfig loads
	err     error        // why unavailable: one line naming the API server
	since   time.Time    // when the cluster became unavailable
	syncing time.Time    // when the caches of the current attempt started syncing; zero otherwise
	tried   chan struct{}
}

// New returns a Cluster that is not connected yet; Run connects it.
func New(o Options) *Cluster {
	if o.Timing == (Timing{}) {
		o.Timing = DefaultTiming
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Cluster{
		name: o.Name, config: o.Config, lock: o.Lock, check: o.Check, timing: o.Timing,
		log:   o.Log.With(slog.String("cluster", o.Name)),
		err:   errors.New("not connected yet"),
		since: time.Now(),
		tried: make(chan struct{}),
	}
}

// Name is the configured cluster name.
func (c *Cluster) Name() string { return c.name }

// Tried is closed once the first attempt to connect has ended, connected or not.
func (c *Cluster) Tried() <-chan struct{} { return c.tried }

// Ready is the cluster's /readyz check: nil once connected with every cache synced.
func (c *Cluster) Ready(context.Context) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.conn != nil {
		return nil
	}
	if !c.syncing.IsZero() {
		return fmt.Errorf("caches syncing since %s", c.syncing.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("unavailable since %s: %w", c.since.UTC().Format(time.RFC3339), c.err)
}

// CacheStats is the state of one informer cache of one cluster, for /metrics.
type CacheStats struct {
	// Cluster is the configured cluster name; Cache the cached resource ("pods", "nodes",
	// "calico/ipamblocks", …, or "all" while a new connection's caches fill).
	Cluster, Cache string
	// Objects is how many objects the cache holds; Synced whether its initial list is in.
	Objects int
	Synced  bool
}

// CacheStats reports the caches of the current connection for /metrics: objects per informer
// and whether each has synced; while the caches of a new connection fill, one "all" entry
// that has not synced.
func (c *Cluster) CacheStats() []CacheStats {
	c.mu.RLock()
	conn, syncing := c.conn, !c.syncing.IsZero()
	c.mu.RUnlock()
	if conn == nil {
		if syncing {
			return []CacheStats{{Cluster: c.name, Cache: "all"}}
		}
		return nil
	}
	var out []CacheStats
	synced := conn.collector.HasSynced()
	for name, n := range conn.collector.CacheObjects() {
		out = append(out, CacheStats{Cluster: c.name, Cache: name, Objects: n, Synced: synced})
	}
	if conn.ipamCache != nil {
		objects, ok := conn.ipamCache.Objects()
		for name, n := range objects {
			out = append(out, CacheStats{Cluster: c.name, Cache: "calico/" + name, Objects: n, Synced: ok[name]})
		}
	}
	return out
}

// Health returns nil while the cluster can be used, else the *chat.UnavailableError saying
// why not (bot.Cluster.Health).
func (c *Cluster) Health() error {
	_, err := c.current()
	return err
}

// current returns the current connection, or the *chat.UnavailableError saying why there is
// none.
func (c *Cluster) current() (*conn, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.conn == nil && !c.syncing.IsZero() {
		return nil, chat.ClusterUnavailable(c.name, c.since,
			fmt.Errorf("the bot's caches of it are still syncing (started %s)", c.syncing.UTC().Format(time.RFC3339)))
	}
	if c.conn == nil {
		why := c.err
		switch {
		case c.connecting():
			why = errors.New("the bot is still making its first connection to it")
			if c.restCfg != nil {
				why = fmt.Errorf("the bot is still making its first connection to it (the Kubernetes API server at %s has not answered yet)", c.restCfg.Host)
			}
		case why == nil: // stopped: no error recorded
			why = errors.New("not connected")
		}
		return nil, chat.ClusterUnavailable(c.name, c.since, why)
	}
	return c.conn, nil
}

// connecting reports whether the first attempt to connect has not ended yet.
func (c *Cluster) connecting() bool {
	select {
	case <-c.tried:
		return false
	default:
		return true
	}
}

// Run connects, watches and reconnects until ctx is done.
func (c *Cluster) Run(ctx context.Context) {
	backoff := c.timing.RetryMin
	first := true
	for {
		conn, err := c.connect(ctx)
		if ctx.Err() != nil {
			if conn != nil {
				conn.cancel()
			}
			return
		}
		if err != nil {
			c.setUnavailable(err)
		} else {
			c.setConnected(conn)
		}
		if first {
			close(c.tried)
			first = false
		}
		if err != nil {
			if clock.Sleep(ctx, backoff) != nil {
				return
			}
			backoff = min(2*backoff, c.timing.RetryMax)
			continue
		}
		backoff = c.timing.RetryMin
		err = c.watch(ctx, conn)
		c.mu.Lock()
		c.conn = nil
		c.mu.Unlock()
		conn.cancel()
		if ctx.Err() != nil {
			return
		}
		c.setUnavailable(err)
	}
}

// setSyncing records that the caches of a connection attempt started syncing at t (zero: no
// longer syncing).
func (c *Cluster) setSyncing(t time.Time) {
	c.mu.Lock()
	c.syncing = t
	c.mu.Unlock()
}

func (c *Cluster) setConnected(conn *conn) {
	c.mu.Lock()
	c.conn, c.err = conn, nil
	host := c.restCfg.Host
	c.mu.Unlock()
	c.log.Info("cluster connected", slog.String("server", host))
}

// setUnavailable records why the cluster cannot be used; a change of state or reason is
// logged.
func (c *Cluster) setUnavailable(err error) {
	c.mu.Lock()
	changed := c.err == nil || c.err.Error() != err.Error()
	if c.err == nil {
		c.since = time.Now()
	}
	c.err = err
	c.mu.Unlock()
	if changed {
		c.log.Warn("cluster unavailable; retrying in the background", slog.String("why", err.Error()))
	}
}

// connect loads the kubeconfig, checks that the API server answers and lets the bot list
// pods, starts the informer caches and the Calico IPAM caches, waits until they have synced
// (bounded by SyncTimeout) and wires the connection.
func (c *Cluster) connect(ctx context.Context) (*conn, error) {
	restCfg, err := c.config()
	if err != nil {
		return nil, fmt.Errorf("misconfigured: %w", err)
	}
	restCfg = rest.CopyConfig(restCfg)
	RequestTimeout(restCfg, c.timing.RequestTimeout)
	c.mu.Lock()
	c.restCfg = restCfg
	c.mu.Unlock()
	host := restCfg.Host
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("misconfigured: build client for %s: %w", host, err)
	}
	pctx, cancel := context.WithTimeout(ctx, c.timing.ConnectTimeout)
	_, err = client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(pctx)
	if err == nil {
		// Informers would retry a forbidden list forever; ask once, to name the problem.
		_, err = client.CoreV1().Pods("").List(pctx, metav1.ListOptions{Limit: 1})
	}
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && pctx.Err() != nil {
		return nil, fmt.Errorf("the Kubernetes API server at %s did not answer within %s", host, c.timing.ConnectTimeout)
	}
	if err != nil {
		return nil, APIError(host, err)
	}
	// The caches decode every pod of the cluster: protobuf is several times cheaper than JSON.
	pbCfg := rest.CopyConfig(restCfg)
	pbCfg.ContentType = "application/vnd.kubernetes.protobuf"
	pbClient, err := kubernetes.NewForConfig(pbCfg)
	if err != nil {
		return nil, fmt.Errorf("misconfigured: build client for %s: %w", host, err)
	}
	started := time.Now()
	c.setSyncing(started)
	defer c.setSyncing(time.Time{})
	sctx, scancel := context.WithCancel(ctx)
	timer := time.AfterFunc(c.timing.SyncTimeout, scancel)
	collector, err := collect.NewCached(sctx, pbClient)
	var cn *conn
	if err == nil {
		cn, err = wire(sctx, c.name, restCfg, collector, c.lock, c.log)
	}
	if !timer.Stop() {
		scancel()
		return nil, fmt.Errorf("the informer caches of %s did not sync within %s", host, c.timing.SyncTimeout)
	}
	if err != nil {
		scancel()
		return nil, APIError(host, err)
	}
	cn.client, cn.cancel = client, scancel
	// The initial lists decode every object of the cluster once and leave that much garbage;
	// return it to the OS now rather than over the next minutes, so the pod's memory right
	// after the sync is what the caches hold (BENCHMARKS.md, "serve RSS").
	debug.FreeOSMemory()
	objects := collector.CacheObjects()
	c.log.Info("caches synced", slog.Duration("took", time.Since(started).Round(time.Millisecond)),
		slog.Int("pods", objects["pods"]), slog.Int("nodes", objects["nodes"]), slog.Int("events", objects["events"]))
	if c.check != nil {
		dyn, err := dynamic.NewForConfig(restCfg)
		if err != nil {
			scancel()
			return nil, fmt.Errorf("misconfigured: build dynamic client for %s: %w", host, err)
		}
		// Each client has its own client-side rate limiter: the acknowledgements' one never
		// waits behind the requests of the bot's own posting.
		notes, err := ledger.NewClient(restCfg)
		if err != nil {
			scancel()
			return nil, fmt.Errorf("misconfigured: %w", err)
		}
		ackNotes, err := ledger.NewClient(restCfg)
		if err != nil {
			scancel()
			return nil, fmt.Errorf("misconfigured: %w", err)
		}
		cn.dyn, cn.ledger, cn.ackLedger = dyn, notes, ackNotes
		c.runCheck(ctx, cn)
	}
	return cn, nil
}

// runCheck runs Options.Check on conn and keeps the result for CheckErr, which must answer at
// once (/readyz).
func (c *Cluster) runCheck(ctx context.Context, conn *conn) {
	pctx, cancel := context.WithTimeout(ctx, c.timing.ConnectTimeout)
	err := c.check(pctx, conn.dyn)
	cancel()
	c.mu.Lock()
	conn.checkErr = err
	c.mu.Unlock()
}

// CheckErr is the last result of Options.Check on the current connection, or the
// *chat.UnavailableError saying why there is no connection.
func (c *Cluster) CheckErr() error {
	conn, err := c.current()
	if err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return conn.checkErr
}

// Dynamic is the current connection's dynamic client (built when Options.Check is set), or
// the *chat.UnavailableError saying why there is no connection.
func (c *Cluster) Dynamic() (dynamic.Interface, error) {
	conn, err := c.current()
	if err != nil {
		return nil, err
	}
	return conn.dyn, nil
}

// Ledger is the current connection's Notification client (built when Options.Check is set),
// or the *chat.UnavailableError saying why there is no connection.
func (c *Cluster) Ledger() (*ledger.Client, error) {
	conn, err := c.current()
	if err != nil {
		return nil, err
	}
	return conn.ledger, nil
}

// AckLedger is Ledger with its own client-side rate limit (ClientQPS), for the requests a
// remote caller waits on: the Alertmanager receiver acknowledges a delivery once its
// Notification is written, and that write must not queue behind the hundreds of requests the
// posting of a burst makes through Ledger.
func (c *Cluster) AckLedger() (*ledger.Client, error) {
	conn, err := c.current()
	if err != nil {
		return nil, err
	}
	return conn.ackLedger, nil
}

// watch probes the API server's /readyz until ProbeFailures probes in a row fail (it returns
// the last failure) or ctx is done. Every LockSweepEvery probes it undoes a datastore lock of
// this bot that outlived its run, such as one whose unlock failed while the API server was
// away.
func (c *Cluster) watch(ctx context.Context, conn *conn) error {
	t := time.NewTicker(c.timing.ProbeEvery)
	defer t.Stop()
	failures, probes := 0, 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, c.timing.ProbeTimeout)
		_, err := conn.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(pctx)
		cancel()
		if err != nil {
			if failures++; failures >= c.timing.ProbeFailures {
				return APIError(c.host(), err)
			}
			continue
		}
		failures = 0
		if c.check != nil {
			c.runCheck(ctx, conn)
		}
		if probes++; conn.ipam != nil && probes%c.timing.LockSweepEvery == 0 {
			if recovered, err := conn.ipam.RecoverLocks(ctx, c.lock.Owner); err != nil {
				c.log.Warn("recover datastore lock", slog.Any("err", err))
			} else if recovered {
				c.log.Warn("unlocked a calico datastore lock of this bot that outlived its run")
			}
		}
	}
}

// host is the API server URL of the last loaded config ("" before one loaded).
func (c *Cluster) host() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.restCfg == nil {
		return ""
	}
	return c.restCfg.Host
}

// WaitConfig waits until the kubeconfig of c has loaded once and returns it.
func (c *Cluster) WaitConfig(ctx context.Context) (*rest.Config, error) {
	for {
		c.mu.RLock()
		cfg := c.restCfg
		c.mu.RUnlock()
		if cfg != nil {
			return cfg, nil
		}
		if err := clock.Sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// Unavailable turns a transport error of a call through the cluster (the API server stopped
// answering before a probe noticed, or sent nothing for Timing.RequestTimeout), or etcd's
// failure behind it, into the *chat.UnavailableError naming it; other errors stay as they are.
func (c *Cluster) Unavailable(err error) error {
	var ue *chat.UnavailableError
	var urlErr *url.Error
	var timeout *TimeoutError
	switch {
	case err == nil || errors.As(err, &ue):
		return err
	case errors.As(err, &timeout):
		return chat.ClusterDidNotAnswer(c.name, timeout.After, timeout)
	case errors.As(err, &urlErr) || isEtcdError(err):
		return chat.ClusterUnavailable(c.name, time.Time{}, APIError(c.host(), err))
	}
	return err
}
