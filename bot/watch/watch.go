package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/lease"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
	"github.com/whypending/whypending/triage"
	"github.com/whypending/whypending/triage/collect"
)

// Source is the ledger source of the watch's threads.
const Source = "watch"

// LeaseName is the Lease the replicas elect the watch's poster with.
const LeaseName = "whypending-watch"

// Cluster is one configured cluster as the watch reads it: fleet.Cluster.
type Cluster interface {
	Name() string
	// Collector is the current connection's collector (its informer caches), or why the
	// cluster is unavailable.
	Collector() (*collect.Collector, error)
}

// Channel is one chat channel stuck workloads are posted to.
type Channel struct {
	// Platform is "slack" or "discord"; ID the platform's channel ID.
	Platform, ID string
	// Namespace, when set, limits the channel to that namespace (channels.namespaces).
	Namespace string
}

// Result is the /why-pending answer for a workload, as the watch posts it.
type Result struct {
	// Code is the primary code: the post's state (never its text).
	Code triage.Code
	// Uncertain says the cause is not sure (or unknown): never posted on its own.
	Uncertain bool
	// Message is the answer /why-pending renders.
	Message chat.Message
	// Nodes says the answer has a per-node "why not here" table (a Pending pod); Logs that it
	// has a previous container's log (a crash-looping or terminated container). The post
	// offers a follow-up button for each (chat.FollowupButton).
	Nodes, Logs bool
}

// Diagnoser is the answer /why-pending gives for t on cluster (bot.Bot.DiagnoseResult).
type Diagnoser func(ctx context.Context, cluster string, t triage.Target) (Result, error)

// Options configures a Watcher.
type Options struct {
	Clusters []Cluster
	Channels []Channel
	// Thresholds (zero fields: DefaultThresholds).
	Thresholds Thresholds
	// MaxPosts is the most new posts per channel per RateWindow (0: 10); past it, the
	// channel's roll-up message lists the rest.
	MaxPosts int
	// RemindAfter is the least time between two "still stuck" replies (0: 4 h).
	RemindAfter time.Duration
	// ExcludeNamespaces are never watched.
	ExcludeNamespaces []string
	Store             *ledger.Store
	Platforms         thread.Platforms
	Diagnose          Diagnoser
	// Resync is how often pending threads are looked for (0: the ledger worker's default).
	Resync  time.Duration
	Metrics *Metrics
	Log     *slog.Logger
	Now     func() time.Time
}

// Watcher posts stuck workloads: once when one gets stuck, an edit and one reply when its
// primary code changes, an edit and one line when it recovers, a reminder per RemindAfter.
type Watcher struct {
	o Options

	mu sync.Mutex
	// seen is, per workload key, the signature of its stuck pods at the last diagnosis: a
	// pod event that changes nothing stuck re-diagnoses nothing.
	seen map[string]string
	// tracked are the workloads with a pod in a watched state, or a post open.
	tracked map[string]Workload
	// open are the workloads with a post open (the stuck-now gauge).
	open map[string]bool
	// written are the posts (entry names) this term has written: they exist even while the
	// followed copy does not show them yet.
	written map[string]bool
	// worker delivers the posts of the current term.
	worker *ledger.Worker
}

// New returns a Watcher; Run must run for anything to be posted.
func New(o Options) *Watcher {
	if o.Thresholds.Pending <= 0 {
		o.Thresholds.Pending = DefaultThresholds.Pending
	}
	if o.Thresholds.ImagePull <= 0 {
		o.Thresholds.ImagePull = DefaultThresholds.ImagePull
	}
	if o.Thresholds.CrashLoopRestarts <= 0 {
		o.Thresholds.CrashLoopRestarts = DefaultThresholds.CrashLoopRestarts
	}
	if o.Thresholds.Terminating <= 0 {
		o.Thresholds.Terminating = DefaultThresholds.Terminating
	}
	if o.Thresholds.FailedCreate <= 0 {
		o.Thresholds.FailedCreate = DefaultThresholds.FailedCreate
	}
	if o.MaxPosts <= 0 {
		o.MaxPosts = 10
	}
	if o.RemindAfter <= 0 {
		o.RemindAfter = 4 * time.Hour
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	return &Watcher{o: o}
}

// Run watches and posts while this replica holds el's Lease, until ctx ends; a nil el runs
// without an election (one replica only). Snooze works on any replica, leading or not.
func (w *Watcher) Run(ctx context.Context, el *lease.Elector) error {
	if el == nil {
		w.o.Log.WarnContext(ctx, "watch runs without leader election: run one replica only")
		w.lead(ctx)
		return nil
	}
	return el.Run(ctx, w.lead)
}

// lead is one term as the poster: every cached pod is looked at again (a failover or restart
// misses nothing), every open post is checked for recovery, and the threads are delivered.
func (w *Watcher) lead(ctx context.Context) {
	w.mu.Lock()
	w.seen, w.tracked, w.open, w.written = map[string]string{}, map[string]Workload{}, map[string]bool{}, map[string]bool{}
	w.mu.Unlock()
	// The posts' and roll-ups' followed copies: most reads of a reconcile need no request
	// (ledger.Store.UpdateFromCopy, Exists, Copy).
	w.o.Store.Follow(ctx, Source, RollupSource)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[Workload](time.Second, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[Workload]{Name: "watch"})
	worker := &ledger.Worker{Store: w.o.Store, Source: Source, Reconcile: w.deliver, Resync: w.o.Resync, Workers: 2, Log: w.o.Log}
	var wg sync.WaitGroup
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	rollups := &ledger.Worker{Store: w.o.Store, Source: RollupSource, Reconcile: w.deliverRollup, Resync: RollupEvery, Workers: 1, Log: w.o.Log}
	w.mu.Lock()
	w.worker = worker
	w.mu.Unlock()
	run(func() { worker.Run(ctx) })
	run(func() { rollups.Run(ctx) })
	for _, c := range w.o.Clusters {
		run(func() { w.attach(ctx, c, q) })
	}
	run(func() { w.reopen(ctx, q) })
	run(func() { <-ctx.Done(); q.ShutDown() })
	for range 2 {
		run(func() {
			for w.next(ctx, q) {
			}
		})
	}
	wg.Wait()
	w.mu.Lock()
	w.worker = nil
	w.mu.Unlock()
}

// attach follows c's pod and workload caches, across reconnects (each connection has fresh
// caches, whose first objects arrive as adds).
func (w *Watcher) attach(ctx context.Context, c Cluster, q workqueue.TypedRateLimitingInterface[Workload]) {
	var (
		cur    *collect.Collector
		remove func()
	)
	defer func() {
		if remove != nil {
			remove()
		}
	}()
	for {
		col, err := c.Collector()
		if err == nil && col != cur {
			if remove != nil {
				remove()
			}
			remove, err = w.follow(c.Name(), col, q)
			if err != nil {
				w.o.Log.Error("watch: cannot follow the informer caches", slog.String("cluster", c.Name()), slog.Any("err", err))
				remove = nil
			} else {
				cur = col
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// follow registers the watch's handlers on col's pod and workload caches.
func (w *Watcher) follow(cluster string, col *collect.Collector, q workqueue.TypedRateLimitingInterface[Workload]) (remove func(), err error) {
	pods, err := col.WatchPods(func(p *corev1.Pod, gone bool) { w.podChanged(cluster, p, gone, q) })
	if err != nil {
		return nil, fmt.Errorf("pod cache: %w", err)
	}
	workloads, err := col.WatchWorkloads(func(kind triage.Kind, obj runtime.Object, gone bool) {
		w.workloadChanged(cluster, col, kind, obj, gone, q)
	})
	if err != nil {
		pods()
		return nil, fmt.Errorf("workload cache: %w", err)
	}
	namespaces, err := col.WatchNamespaces(func(old, ns metav1.Object) { w.namespaceChanged(cluster, old, ns, q) })
	if err != nil {
		pods()
		workloads()
		return nil, fmt.Errorf("namespace cache: %w", err)
	}
	return func() { pods(); workloads(); namespaces() }, nil
}

// namespaceChanged queues the tracked workloads of a namespace that opted out of the watch
// (whypending.io/watch: "false"): an open post must say it is no longer watched, and no pod
// event may come to tell. A namespace that opts back in gets the workloads of its unwatched
// posts queued: one still stuck sends no event either. (One that opted back in while no
// replica watched is seen by reopen.)
func (w *Watcher) namespaceChanged(cluster string, old, ns metav1.Object, q workqueue.TypedRateLimitingInterface[Workload]) {
	if ns.GetAnnotations()[OptOut] != "false" {
		if old != nil && old.GetAnnotations()[OptOut] == "false" {
			// Off the informer's handler: the followed copy may not have synced, and then
			// the list is a request.
			go w.rewatch(cluster, ns.GetName(), q)
		}
		return
	}
	w.mu.Lock()
	var wls []Workload
	for _, wl := range w.tracked {
		if wl.Cluster == cluster && wl.Namespace == ns.GetName() {
			wls = append(wls, wl)
		}
	}
	w.mu.Unlock()
	for _, wl := range wls {
		q.Add(wl)
	}
}

// rewatch queues the workloads of namespace's posts that ended unwatched.
func (w *Watcher) rewatch(cluster, namespace string, q workqueue.TypedRateLimitingInterface[Workload]) {
	entries, err := w.o.Store.ListFollowed(context.Background(), Source)
	if err != nil {
		w.o.Log.Warn("watch: list the posts of a namespace that opted back in", slog.String("namespace", namespace), slog.Any("err", err))
		return
	}
	for _, e := range entries {
		var d post
		if e.DataInto(&d) == nil && d.endedUnwatched() && d.Workload.Cluster == cluster && d.Workload.Namespace == namespace {
			q.Add(d.Workload)
		}
	}
}

// reopen queues the workload of every open post (state stuck), of every post that ended
// unwatched (its opt-out may have been removed meanwhile) and of every roll-up line, so a workload that recovered
// or vanished while no replica watched is seen (its pods send no event).
func (w *Watcher) reopen(ctx context.Context, q workqueue.TypedRateLimitingInterface[Workload]) {
	for {
		entries, err := w.o.Store.List(ctx, Source, false)
		var held []*ledger.Entry
		if err == nil {
			held, err = w.o.Store.List(ctx, RollupSource, false)
		}
		if err == nil {
			for _, e := range entries {
				var d post
				switch {
				case e.DataInto(&d) != nil:
				case d.State == stateStuck:
					w.setOpen(d.Workload, true)
					w.track(d.Workload)
					q.Add(d.Workload)
				case d.endedUnwatched():
					q.Add(d.Workload) // watched again and still stuck: "Watched again"
				}
			}
			for _, e := range held {
				var r rollup
				if e.DataInto(&r) == nil {
					for _, it := range append(r.Held, r.Unclear...) {
						w.track(it.Workload)
						q.Add(it.Workload)
					}
				}
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		w.o.Log.Warn("watch: list open posts; retrying", slog.Any("err", err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

func (w *Watcher) excluded(ns string) bool { return slices.Contains(w.o.ExcludeNamespaces, ns) }

// podChanged queues the pod's workload when the pod is in a watched state, or its workload is
// tracked already (it may have recovered). Nothing else is done in the informer's handler.
func (w *Watcher) podChanged(cluster string, p *corev1.Pod, gone bool, q workqueue.TypedRateLimitingInterface[Workload]) {
	if w.excluded(p.Namespace) {
		return
	}
	wl := workloadOf(cluster, &p.ObjectMeta)
	if !gone && podState(p, w.o.Thresholds, w.o.Now()).name != "" {
		w.track(wl)
		q.Add(wl)
		return
	}
	w.mu.Lock()
	_, ok := w.tracked[wl.Subject()]
	w.mu.Unlock()
	if ok {
		q.Add(wl)
	}
}

// workloadChanged queues the workload of a workload object when its controller is in a
// watched state (refused its pods, past its progress deadline), or the workload is tracked
// already. It reads the object's events from the cache's index, nothing more.
func (w *Watcher) workloadChanged(cluster string, col *collect.Collector, kind triage.Kind, obj runtime.Object, gone bool,
	q workqueue.TypedRateLimitingInterface[Workload]) {
	m, ok := obj.(metav1.Object)
	if !ok || w.excluded(m.GetNamespace()) {
		return
	}
	wl := workloadOfObject(cluster, kind, m)
	if !gone && workloadState(obj, col.CachedWorkloadEvents(m.GetUID()), w.o.Thresholds).name != "" {
		w.track(wl)
		q.Add(wl)
		return
	}
	w.mu.Lock()
	_, ok = w.tracked[wl.Subject()]
	w.mu.Unlock()
	if ok || !gone && w.wasUnwatched(wl) {
		q.Add(wl) // tracked, or its opt-out may be gone (stuck again: a new episode)
	}
}

// wasUnwatched says whether a post of wl ended because wl was opted out, as the followed
// copies show (no request).
func (w *Watcher) wasUnwatched(wl Workload) bool {
	for _, ch := range w.channels(wl) {
		e, ok := w.o.Store.Copy(key(ch, wl).Name())
		if !ok {
			continue
		}
		var d post
		if e.DataInto(&d) == nil && d.endedUnwatched() {
			return true
		}
	}
	return false
}

func (w *Watcher) track(wl Workload) {
	w.mu.Lock()
	if w.tracked != nil {
		w.tracked[wl.Subject()] = wl
		w.o.Metrics.Watched.Set(float64(len(w.tracked)))
	}
	w.mu.Unlock()
}

func (w *Watcher) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[Workload]) bool {
	wl, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(wl)
	after, err := w.reconcile(ctx, wl)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		w.o.Log.Warn("watch: workload not reconciled; will retry", slog.String("workload", wl.Subject()), slog.Any("err", err))
		q.AddRateLimited(wl)
	default:
		q.Forget(wl)
		if after > 0 {
			q.AddAfter(wl, after)
		}
	}
	return true
}

// reconcile looks at the workload's controller and pods in the cache: past a threshold, it is diagnosed and
// its posts written to the ledger (delivered by the worker); none stuck, its open posts are
// marked recovered. It returns when to look again (a threshold still ahead, a reminder).
func (w *Watcher) reconcile(ctx context.Context, wl Workload) (time.Duration, error) {
	var c Cluster
	for _, x := range w.o.Clusters {
		if x.Name() == wl.Cluster {
			c = x
		}
	}
	if c == nil {
		return 0, nil
	}
	col, err := c.Collector()
	if err != nil {
		return 0, err
	}
	now := w.o.Now()
	if o, ok := w.optedOut(col, wl); ok {
		// Not watched (any more): an open post says so, once, and a roll-up drops it.
		w.untrack(wl)
		return 0, w.unwatched(ctx, wl, now, o)
	}
	pods, err := col.CachedPods(wl.Namespace, func(m *metav1.ObjectMeta) bool { return workloadOf(wl.Cluster, m) == wl })
	if err != nil {
		return 0, err
	}
	var (
		stuck   []string
		since   time.Time
		next    time.Time
		pending bool // a pod in a watched state, not stuck yet
	)
	see := func(what string, st state) {
		switch {
		case st.name == "":
		case !st.due.IsZero() && !now.Before(st.due):
			stuck = append(stuck, what+"="+st.name)
			if since.IsZero() || st.since.Before(since) {
				since = st.since
			}
		default:
			pending = true
			if !st.due.IsZero() && (next.IsZero() || st.due.Before(next)) {
				next = st.due
			}
		}
	}
	end := endRecovered
	if wl.Kind != triage.KindPod {
		// The controller itself: refused its pods (there may be none), or past its deadline.
		if obj, ok := col.CachedWorkload(wl.Kind, wl.Namespace, wl.Name); ok {
			if m, ok := obj.(metav1.Object); ok {
				see(wl.Arg(), workloadState(obj, col.CachedWorkloadEvents(m.GetUID()), w.o.Thresholds))
			}
			if scaledToZero(obj) {
				end = endNoPods
			}
		} else if col.CachedWorkloadGone(wl.Kind, wl.Namespace, wl.Name) {
			end = endDeleted
		}
	}
	found := false
	var optedOut []string // its pods opted out in a watched state
	for _, p := range pods {
		found = true
		st := podState(p, w.o.Thresholds, now)
		if p.Annotations[OptOut] == "false" {
			if st.name != "" {
				optedOut = append(optedOut, p.Name)
			}
			continue
		}
		see(p.Name, st)
	}
	if wl.Kind == triage.KindPod && !found {
		end = endDeleted // the pod is its own workload: not in the synced cache, it was deleted
	}
	after := time.Duration(0)
	if !next.IsZero() {
		after = next.Sub(now) + 100*time.Millisecond
	}
	if len(stuck) == 0 {
		if pending {
			// A pod moved to another watched state (Pending to ImagePullBackOff, say) and its
			// threshold is ahead: not recovered; looked at again when it is due.
			return after, nil
		}
		w.untrack(wl)
		if len(optedOut) > 0 {
			// What is still stuck opted out: not a recovery, and not a deletion.
			sort.Strings(optedOut)
			return 0, w.unwatched(ctx, wl, now, optOut{Where: optOutPod, Names: optedOut})
		}
		return 0, w.recovered(ctx, wl, now, end)
	}
	sort.Strings(stuck)
	sig := strings.Join(stuck, ",")
	w.mu.Lock()
	same := w.seen[wl.Subject()] == sig
	w.seen[wl.Subject()] = sig
	w.mu.Unlock()
	remind := w.o.RemindAfter
	if after == 0 || remind < after {
		after = remind
	}
	due, at := w.attention(ctx, wl, now)
	if !at.IsZero() && at.Sub(now) < after {
		after = at.Sub(now) + 100*time.Millisecond
	}
	if same && !due {
		return after, nil
	}
	res, err := w.o.Diagnose(ctx, wl.Cluster, wl.Target())
	if err != nil {
		w.forget(wl)
		return 0, err
	}
	if res.Code == "" {
		res.Code, res.Uncertain = triage.CodeUnknown, true
	}
	if err := w.stuck(ctx, wl, since, res, now); err != nil {
		// Not recorded: the retry must diagnose and record again, not find the signature
		// seen and skip it (the workload would never be posted).
		w.forget(wl)
		return 0, err
	}
	return after, nil
}

// optedOut says whether wl is out of the watch, and where that is said: its namespace in
// watch.excludeNamespaces, or whypending.io/watch: "false" on the namespace or the workload.
// A pod's own annotation is read with the pod (reconcile).
func (w *Watcher) optedOut(col *collect.Collector, wl Workload) (optOut, bool) {
	if w.excluded(wl.Namespace) {
		return optOut{Where: optOutExcluded, Names: []string{wl.Namespace}}, true
	}
	if m, ok := col.CachedObjectMeta("", wl.Namespace, ""); ok && m.GetAnnotations()[OptOut] == "false" {
		return optOut{Where: optOutNamespace, Names: []string{wl.Namespace}}, true
	}
	if wl.Kind != triage.KindPod {
		if m, ok := col.CachedObjectMeta(wl.Kind, wl.Namespace, wl.Name); ok && m.GetAnnotations()[OptOut] == "false" {
			return optOut{Where: optOutWorkload, Names: []string{wl.Kind.Short() + "/" + wl.Name}}, true
		}
	}
	return optOut{}, false
}

func (w *Watcher) untrack(wl Workload) {
	w.mu.Lock()
	delete(w.tracked, wl.Subject())
	delete(w.seen, wl.Subject())
	w.o.Metrics.Watched.Set(float64(len(w.tracked)))
	w.mu.Unlock()
}

func (w *Watcher) forget(wl Workload) {
	w.mu.Lock()
	delete(w.seen, wl.Subject())
	w.mu.Unlock()
}

// channels are the channels wl is posted to.
func (w *Watcher) channels(wl Workload) []Channel {
	var out []Channel
	for _, ch := range w.o.Channels {
		if ch.Namespace == "" || ch.Namespace == wl.Namespace {
			out = append(out, ch)
		}
	}
	return out
}

func key(ch Channel, wl Workload) ledger.Key {
	return ledger.Key{Source: Source, Platform: ch.Platform, Channel: ch.ID, Subject: wl.Subject()}
}

// attention says whether an open post of wl needs a look now (a reminder is due, a snooze
// ended), and when one next will (zero: none).
func (w *Watcher) attention(ctx context.Context, wl Workload, now time.Time) (due bool, next time.Time) {
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, ch := range w.channels(wl) {
		// The followed copy: this only says when to look again; what is written is decided
		// on a compare-and-set read (change).
		e, ok := w.o.Store.Copy(key(ch, wl).Name())
		if !ok {
			continue
		}
		var d post
		if e.DataInto(&d) != nil || d.State != stateStuck {
			continue
		}
		switch {
		case d.Snooze != nil && d.Snooze.UntilRecovered:
		case d.Snooze != nil && d.Snooze.active(now):
			soonest(d.Snooze.Until)
		case d.Snooze != nil:
			due = true
		case now.Sub(d.RemindedAt) >= w.o.RemindAfter:
			due = true
		default:
			soonest(d.RemindedAt.Add(w.o.RemindAfter))
		}
	}
	return due, next
}

// stuck records what the posts of wl must say now that it is stuck with res.
func (w *Watcher) stuck(ctx context.Context, wl Workload, since time.Time, res Result, now time.Time) error {
	var errs []error
	for _, ch := range w.channels(wl) {
		k := key(ch, wl)
		// From the followed copy, or this term's own writes, which the copy may not show yet.
		exists, err := w.wrote(k.Name()), error(nil)
		if !exists {
			exists, err = w.o.Store.Exists(ctx, k.Name())
		}
		switch {
		case err == nil && !exists:
			// A new post: only a sure answer within the channel's rate limit.
			ok, err := w.admit(ctx, ch, wl, since, res, now)
			if err != nil {
				errs = append(errs, err)
			}
			if !ok {
				continue
			}
		case err != nil:
			errs = append(errs, err)
			continue
		}
		if err := w.change(ctx, k, func(d *post) bool { return d.update(wl, since, res, now, w.o.RemindAfter) }); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		w.setOpen(wl, true)
	}
	return errors.Join(errs...)
}

// recovered marks the open posts of wl ended: recovered, deleted or scaled to zero (end).
func (w *Watcher) recovered(ctx context.Context, wl Workload, now time.Time, end string) error {
	var errs []error
	for _, ch := range w.channels(wl) {
		if err := w.release(ctx, ch, wl); err != nil {
			errs = append(errs, err)
		}
		k := key(ch, wl)
		if err := w.change(ctx, k, func(d *post) bool { return d.recover(now, end) }); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		w.setOpen(wl, false)
	}
	return errors.Join(errs...)
}

// unwatched ends the open posts of wl, which the watch no longer follows (o says where the
// opt-out is), and takes it out of the roll-ups: nothing more is posted about it until it is
// watched and stuck again (a new episode).
func (w *Watcher) unwatched(ctx context.Context, wl Workload, now time.Time, o optOut) error {
	var errs []error
	for _, ch := range w.channels(wl) {
		// An opted-out workload's pods keep sending events: only what may hold it is written
		// (a compare-and-set that finds nothing to change would still cost a request).
		if w.mayHold(ctx, rollupKey(ch).Name(), func(e *ledger.Entry) bool {
			var r rollup
			return e.DataInto(&r) != nil || r.holds(wl)
		}) {
			if err := w.release(ctx, ch, wl); err != nil {
				errs = append(errs, err)
			}
		}
		k := key(ch, wl)
		if w.mayHold(ctx, k.Name(), func(e *ledger.Entry) bool {
			var d post
			return e.DataInto(&d) != nil || d.State == stateStuck
		}) {
			if err := w.change(ctx, k, func(d *post) bool { return d.unwatch(now, o) }); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) == 0 {
		w.setOpen(wl, false)
	}
	return errors.Join(errs...)
}

// mayHold says whether the entry named name may need a change (open says so of an entry):
// this term wrote it, or its followed copy says so, or there is no copy to tell. A copy
// behind a previous term's last write is looked at again on the workload's next event.
func (w *Watcher) mayHold(ctx context.Context, name string, open func(e *ledger.Entry) bool) bool {
	if w.wrote(name) {
		return true
	}
	if e, ok := w.o.Store.Copy(name); ok {
		return open(e)
	}
	exists, err := w.o.Store.Exists(ctx, name)
	return err != nil || exists
}

// change applies fn to the post of k by compare-and-set and queues its delivery; fn returns
// false when the post already says it all (or, for a post that does not exist, when there is
// nothing to post: then none is made). It starts from the followed copy of the post, so a
// change costs one request when the copy is current.
func (w *Watcher) change(ctx context.Context, k ledger.Key, fn func(d *post) bool) error {
	e, err := w.o.Store.UpdateFromCopy(ctx, k, func(e *ledger.Entry) error {
		var d post
		if err := e.DataInto(&d); err != nil {
			return err
		}
		if !fn(&d) {
			return ledger.ErrUnchanged
		}
		return d.save(e)
	})
	if errors.Is(err, ledger.ErrUnchanged) || errors.Is(err, ledger.ErrNotFound) {
		return nil // nothing to change, or no post to change
	}
	if err == nil {
		w.mu.Lock()
		if w.written != nil {
			w.written[e.Name()] = true
		}
		w.mu.Unlock()
	}
	if err == nil && e.Pending {
		w.enqueue(e)
	}
	return err
}

// wrote says whether this term wrote the post named name.
func (w *Watcher) wrote(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written[name]
}

// enqueue asks this replica's delivery worker to deliver e, just written, soon (starting
// from e: ledger.Worker.Offer); a replica that does not lead leaves it to the leader's
// resync (the entry is pending).
func (w *Watcher) enqueue(e *ledger.Entry) {
	w.mu.Lock()
	worker := w.worker
	w.mu.Unlock()
	if worker != nil {
		worker.Offer(e)
	}
}

// setOpen records whether wl has a post open, for the stuck-now gauge.
func (w *Watcher) setOpen(wl Workload, open bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open == nil {
		return
	}
	if open {
		w.open[wl.Subject()] = true
	} else {
		delete(w.open, wl.Subject())
	}
	w.o.Metrics.Stuck.Set(float64(len(w.open)))
}

// deliver posts and edits what an entry's thread still lacks (the ledger worker's
// Reconciler).
func (w *Watcher) deliver(ctx context.Context, e *ledger.Entry) error {
	return deliver(ctx, w.o.Store, w.o.Platforms, e, w.render)
}

// deliver makes e's thread show what render says, then clears its pending mark.
func deliver(ctx context.Context, s *ledger.Store, p thread.Platforms, e *ledger.Entry, render thread.Render) error {
	var cur *ledger.Entry
	for range 3 {
		var err error
		if cur, err = thread.Deliver(ctx, s, p, e, render); err != nil || !cur.Pending {
			return err // an error, or done: the last record cleared the mark
		}
		if thread.Done(cur, render(cur)) {
			break
		}
		// A newer revision came in while posting (a roll-up growing in a mass event): deliver
		// it now rather than wait for a retry's back-off.
		e = cur
	}
	_, err := s.UpdateFrom(ctx, cur, func(e *ledger.Entry) error {
		if !thread.Done(e, render(e)) {
			return fmt.Errorf("notification %s: not done yet", e.Name())
		}
		if !e.Pending {
			return ledger.ErrUnchanged
		}
		e.Pending = false
		return nil
	})
	if errors.Is(err, ledger.ErrUnchanged) {
		return nil
	}
	return err
}

// Metrics are the watch's.
type Metrics struct {
	Watched, Stuck                    prometheus.Gauge
	Posts, Edits, Suppressed, Snoozed prometheus.Counter
}

// NewMetrics registers the watch's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	g := func(name, help string) prometheus.Gauge {
		x := prometheus.NewGauge(prometheus.GaugeOpts{Name: "whypending_watch_" + name, Help: help})
		reg.MustRegister(x)
		return x
	}
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Name: "whypending_watch_" + name + "_total", Help: help})
		reg.MustRegister(x)
		return x
	}
	return &Metrics{
		Watched:    g("watched_objects", "Workloads (or bare pods) the watch follows now: a pod in a watched state, or a post open."),
		Stuck:      g("stuck", "Workloads stuck now (a post open)."),
		Posts:      c("posts", "Messages posted by the watch (roots and replies)."),
		Edits:      c("edits", "Root messages edited by the watch (cause changed, recovered)."),
		Suppressed: c("suppressed", "Stuck workloads not posted on their own because of the per-channel rate limit."),
		Snoozed:    c("snoozed", "Workloads snoozed from chat."),
	}
}
