package ledger

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Reconciler does the outstanding work of one entry (its posts, replies and edits, through
// Store.Send and Store.Edit) and clears Entry.Pending once nothing is left. It returns an
// error to be called again with back-off; an ErrBusy (another replica is posting) is retried
// after a while without being logged as a failure.
type Reconciler func(ctx context.Context, e *Entry) error

// Worker runs a Reconciler for the entries of one source: those handed to Enqueue (the entry
// just written by a webhook, say) and, every Resync, every entry still marked pending, so the
// work a crashed or partitioned replica left is finished by whichever replica looks next.
// Within one process an entry is never reconciled twice at once (client-go's workqueue).
type Worker struct {
	Store  *Store
	Source string
	// Reconcile does the work.
	Reconcile Reconciler
	// Resync is how often pending entries are listed (0: 30 s).
	Resync time.Duration
	// Workers is how many entries are reconciled at once (0: 2).
	Workers int
	// Log (nil: slog.Default()).
	Log *slog.Logger

	queue workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	hints map[string]*Entry // Offer's entries, taken by the next reconcile of their name
}

// Enqueue asks for the entry named name to be reconciled soon. It is safe before Run.
func (w *Worker) Enqueue(name string) {
	w.init()
	w.queue.Add(name)
}

// Offer is Enqueue of the entry e just written by this process: the reconcile starts from e
// instead of reading it again (an e that is behind by then fails its next compare-and-set,
// and that step reads). It is safe before Run.
func (w *Worker) Offer(e *Entry) {
	w.mu.Lock()
	if w.hints == nil {
		w.hints = map[string]*Entry{}
	}
	w.hints[e.Name()] = e
	w.mu.Unlock()
	w.Enqueue(e.Name())
}

// hint takes the entry Offer left for name, if any.
func (w *Worker) hint(name string) *Entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.hints[name]
	delete(w.hints, name)
	return e
}

func (w *Worker) init() {
	if w.queue == nil {
		w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 2*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "ledger-" + w.Source})
	}
}

// Run reconciles until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	w.init()
	log := w.Log
	if log == nil {
		log = slog.Default()
	}
	resync := w.Resync
	if resync <= 0 {
		resync = 30 * time.Second
	}
	workers := w.Workers
	if workers <= 0 {
		workers = 2
	}
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	go func() {
		t := time.NewTicker(resync)
		defer t.Stop()
		for {
			w.enqueuePending(ctx, log)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	done := make(chan struct{})
	for i := 0; i < workers; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for w.next(ctx, log) {
			}
		}()
	}
	for i := 0; i < workers; i++ {
		<-done
	}
}

func (w *Worker) enqueuePending(ctx context.Context, log *slog.Logger) {
	entries, err := w.Store.List(ctx, w.Source, true)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("list pending notifications", "source", w.Source, "err", err)
		}
		return
	}
	for _, e := range entries {
		w.queue.Add(e.Name())
	}
}

func (w *Worker) next(ctx context.Context, log *slog.Logger) bool {
	name, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(name)
	e, err := w.hint(name), error(nil)
	if e == nil || !e.Pending {
		e, err = w.Store.Get(ctx, name)
	}
	if errors.Is(err, ErrNotFound) {
		w.queue.Forget(name)
		return true
	}
	if err == nil {
		if !e.Pending {
			w.queue.Forget(name)
			return true
		}
		err = w.Reconcile(ctx, e)
	}
	switch {
	case err == nil:
		w.queue.Forget(name)
	case ctx.Err() != nil:
	case errors.Is(err, ErrBusy):
		w.queue.AddAfter(name, w.Store.claimTTL/4)
	default:
		log.Warn("notification not delivered yet; will retry", "notification", name, "source", w.Source, "err", err)
		w.queue.AddRateLimited(name)
	}
	return true
}
