package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
	"github.com/whypending/whypending/triage/collect"
)

// demoFleet holds the demo's scenario clusters. Each scenario's control plane starts once,
// on first use (demoCluster.wait) or from the background warmer (warm), whichever comes
// first, so the prompt does not wait for any of them. close stops them all, including those
// still starting.
type demoFleet struct {
	ctx      context.Context // bounds every start and the wired clusters; canceled by close
	cancel   context.CancelFunc
	clusters []*demoCluster
	logDir   string    // one log per scenario: testenv's progress and any start error
	progress io.Writer // the demo's stderr
	// announce prints each cluster's ready line (with its KUBECONFIG) as soon as it is ready;
	// off at a terminal prompt, where only the clusters a question waits for are announced.
	announce bool

	wg     sync.WaitGroup // every start goroutine
	mu     sync.Mutex     // progress writes and the fields below
	closed bool           // close has begun: no new start
	took   time.Duration  // sum of the successful startup times
	starts int
}

// demoCluster is one scenario and, once started, its local control plane wired into the bot
// as a cluster named after the scenario. Its bot cluster exists from the beginning: its
// parts wait for the start, and its Health says "still starting" or "failed to start" until
// then, so the bot skips it where it looks at every cluster.
type demoCluster struct {
	scenario *testenv.Scenario
	bot      *bot.Cluster
	logPath  string
	fleet    *demoFleet
	start    func() // starts the control plane in the background, once
	done     chan struct{}

	mu    sync.Mutex
	began time.Time // when the start began (zero: not yet)

	// Set before done is closed.
	cluster *testenv.Cluster
	fc      *fleet.Cluster
	err     error
	ready   time.Duration // how long the start took
}

func newDemoFleet(ctx context.Context, scenarios []*testenv.Scenario, progress io.Writer, announce bool) (*demoFleet, error) {
	logDir, err := os.MkdirTemp("", "whypending-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo log dir: %w", err)
	}
	f := &demoFleet{logDir: logDir, progress: progress, announce: announce}
	f.ctx, f.cancel = context.WithCancel(ctx)
	for _, s := range scenarios {
		c := &demoCluster{scenario: s, fleet: f, done: make(chan struct{}), logPath: filepath.Join(logDir, s.Name+".log")}
		c.start = sync.OnceFunc(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.closed {
				c.err = fmt.Errorf("start cluster for %s: the demo is stopping: %w", s.Name, context.Canceled)
				close(c.done)
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				c.run()
			}()
		})
		c.bot = &bot.Cluster{Name: s.Name, Namespace: scenarioNamespace(s), Answerer: c, IPAM: c, Planner: c, Executor: c, Access: c, Health: c.health}
		f.clusters = append(f.clusters, c)
	}
	return f, nil
}

// warm starts the clusters in scenario order, parallel at a time, in the background.
func (f *demoFleet) warm(parallel int) {
	if parallel < 1 {
		parallel = 1
	}
	next := make(chan *demoCluster, len(f.clusters))
	for _, c := range f.clusters {
		next <- c
	}
	close(next)
	for range parallel {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for c := range next {
				if f.ctx.Err() != nil {
					return
				}
				c.start()
				select {
				case <-c.done:
				case <-f.ctx.Done():
					return
				}
			}
		}()
	}
}

// close stops every cluster, waiting for those still starting (their start is canceled), and
// removes the logs unless a start failed (then it says where they are).
func (f *demoFleet) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
	failed := false
	for _, c := range f.clusters {
		select {
		case <-c.done:
		default:
			continue // never started
		}
		if c.cluster != nil {
			_ = c.cluster.Stop()
		}
		failed = failed || (c.err != nil && !errors.Is(c.err, context.Canceled))
	}
	if failed {
		fmt.Fprintf(f.progress, "demo: the logs of the clusters that failed to start are kept in %s\n", f.logDir)
		return
	}
	_ = os.RemoveAll(f.logDir)
}

func (f *demoFleet) botClusters() []*bot.Cluster {
	var out []*bot.Cluster
	for _, c := range f.clusters {
		out = append(out, c.bot)
	}
	return out
}

func (f *demoFleet) byName(name string) *demoCluster {
	for _, c := range f.clusters {
		if c.scenario.Name == name {
			return c
		}
	}
	return nil
}

func (f *demoFleet) printf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.progress, format, args...)
}

// estimate is how long c's start should still take: the mean of this demo's startup times so
// far (5 s before the first), less what c has already run.
func (f *demoFleet) estimate(c *demoCluster) time.Duration {
	f.mu.Lock()
	est := 5 * time.Second
	if f.starts > 0 {
		est = f.took / time.Duration(f.starts)
	}
	f.mu.Unlock()
	c.mu.Lock()
	if !c.began.IsZero() {
		est -= time.Since(c.began)
	}
	c.mu.Unlock()
	return max(est, time.Second)
}

// run starts c's control plane, loads the scenario, waits for the scheduler where the
// scenario needs it and wires the cluster into the bot. testenv's progress lines and any
// error (with the components' log tails) go to c.logPath.
func (c *demoCluster) run() {
	f, s := c.fleet, c.scenario
	defer close(c.done)
	t0 := time.Now()
	c.mu.Lock()
	c.began = t0
	c.mu.Unlock()
	log, err := os.Create(c.logPath)
	if err != nil {
		c.err = fmt.Errorf("start cluster for %s: %w", s.Name, err)
		return
	}
	defer log.Close()
	c.err = c.load(log)
	if c.err != nil {
		fmt.Fprintf(log, "demo: %v\n", c.err)
		if c.cluster != nil {
			for _, comp := range []string{"kube-apiserver", "kube-scheduler"} {
				fmt.Fprintf(log, "--- %s log tail ---\n%s\n", comp, c.cluster.LogTail(comp, 40))
			}
			_ = c.cluster.Stop()
			c.cluster = nil
		}
		return
	}
	c.ready = time.Since(t0)
	f.mu.Lock()
	f.took += c.ready
	f.starts++
	f.mu.Unlock()
	if f.announce {
		c.announce()
	}
}

func (c *demoCluster) load(log io.Writer) error {
	f, s := c.fleet, c.scenario
	cl, err := testenv.Start(f.ctx, testenv.Options{Scheduler: !s.Expected.SchedulerMustBeStopped, Progress: log})
	if err != nil {
		return fmt.Errorf("start cluster for %s: %w", s.Name, err)
	}
	c.cluster = cl
	if err := cl.Load(f.ctx, s); err != nil {
		return fmt.Errorf("load %s: %w", s.Name, err)
	}
	if s.Expected.NeedsScheduler {
		ns, name, _ := strings.Cut(s.Expected.Pod, "/")
		if err := cl.WaitForScheduler(f.ctx, ns, name); err != nil {
			return fmt.Errorf("wait for the scheduler in %s: %w", s.Name, err)
		}
	}
	lock := fleet.Lock{Policy: actions.LockAlways, TTL: 2 * time.Minute, Owner: "whypending-demo"}
	fc, err := fleet.Wire(f.ctx, s.Name, cl.Config, collect.New(cl.Client), lock, slog.New(slog.DiscardHandler))
	if err != nil {
		return fmt.Errorf("wire %s into the bot: %w", s.Name, err)
	}
	c.fc = fc
	return nil
}

func (c *demoCluster) announce() {
	c.fleet.printf("demo: %-26s ready (%s)  KUBECONFIG=%s\n", c.scenario.Name, c.ready.Round(100*time.Millisecond), c.cluster.KubeconfigPath)
}

// wait starts c if needed and waits until it is ready, printing one progress line when it
// is not ready yet. The error says the start failed and names the log.
func (c *demoCluster) wait(ctx context.Context) (*fleet.Cluster, error) {
	c.start()
	select {
	case <-c.done:
		return c.result()
	default:
	}
	c.fleet.printf("demo: starting scenario %s's cluster (about %d s)...\n", c.scenario.Name, int(c.fleet.estimate(c).Round(time.Second)/time.Second))
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("scenario %s's cluster is still starting: %w", c.scenario.Name, ctx.Err())
	}
	fc, err := c.result()
	if err == nil && !c.fleet.announce {
		c.announce()
	}
	return fc, err
}

// result is the outcome of a finished start.
func (c *demoCluster) result() (*fleet.Cluster, error) {
	if c.err != nil {
		return nil, fmt.Errorf("scenario %s's cluster failed to start (log: %s): %s", c.scenario.Name, c.logPath, firstLine(c.err.Error()))
	}
	return c.fc, nil
}

// state is "ready", "starting", "not started" or "failed (log: …)", for /kubeconfig.
func (c *demoCluster) state() string {
	select {
	case <-c.done:
		if c.err != nil {
			return "failed to start (log: " + c.logPath + ")"
		}
		return "ready"
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.began.IsZero() {
		return "not started"
	}
	return "starting"
}

// health is the bot cluster's Health: the wired cluster's once ready; until then, why the
// cluster cannot be used, without waiting.
func (c *demoCluster) health() error {
	select {
	case <-c.done:
		if _, err := c.result(); err != nil {
			return chat.ClusterUnavailable(c.scenario.Name, time.Time{}, err)
		}
		return c.fc.Health()
	default:
		return chat.ClusterUnavailable(c.scenario.Name, time.Time{}, errors.New("its local cluster is still starting"))
	}
}

// The bot's cluster parts, each waiting for the start (bot.Answerer, bot.IPAM, bot.Planner,
// approval.Executor and Recoverer, bot.Access).

func (c *demoCluster) Answer(ctx context.Context, t triage.Target) (*triage.Answer, error) {
	fc, err := c.wait(ctx)
	if err != nil {
		return nil, err
	}
	return fc.Answer(ctx, t)
}

func (c *demoCluster) Check(ctx context.Context, opts calico.CheckOptions) (*calico.CheckResult, error) {
	fc, err := c.wait(ctx)
	if err != nil {
		return nil, err
	}
	return fc.Check(ctx, opts)
}

func (c *demoCluster) Utilization(ctx context.Context) (*calico.Utilization, error) {
	fc, err := c.wait(ctx)
	if err != nil {
		return nil, err
	}
	return fc.Utilization(ctx)
}

func (c *demoCluster) Plan(ctx context.Context, kind actions.Kind, opts actions.PlanOptions) (actions.Plan, error) {
	fc, err := c.wait(ctx)
	if err != nil {
		return actions.Plan{}, err
	}
	return fc.Plan(ctx, kind, opts)
}

func (c *demoCluster) Execute(ctx context.Context, ap actions.Approved) (actions.Result, error) {
	fc, err := c.wait(ctx)
	if err != nil {
		return actions.Result{}, err
	}
	return fc.Execute(ctx, ap)
}

func (c *demoCluster) Recover(ctx context.Context, p actions.Plan) (actions.Recovery, error) {
	fc, err := c.wait(ctx)
	if err != nil {
		return actions.Recovery{}, err
	}
	return fc.Recover(ctx, p)
}

// RepairAccess and CheckAccess never wait (they take no context): before the start they
// fail with Health's reason.
func (c *demoCluster) RepairAccess(kind actions.Kind) ([]authorizationv1.ResourceAttributes, error) {
	if err := c.health(); err != nil {
		return nil, err
	}
	return c.fc.RepairAccess(kind)
}

func (c *demoCluster) CheckAccess() (authorizationv1.ResourceAttributes, error) {
	if err := c.health(); err != nil {
		return authorizationv1.ResourceAttributes{}, err
	}
	return c.fc.CheckAccess()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
