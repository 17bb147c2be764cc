package chat

import (
	"context"
	"sync"
	"time"
)

// Queue is the bounded pool of workers that chat adapters answer acknowledged requests with.
// A platform wants its acknowledgement within 3 seconds, long before a diagnosis or a repair
// is done, so an adapter reserves a place (Reserve), acknowledges, and then hands the work
// over (Submit): the acknowledgement never waits for a worker, and a full queue is known
// before answering, so the adapter can say "busy" instead of losing the request silently.
type Queue struct {
	workers    int
	jobTimeout time.Duration
	jobs       chan func(context.Context)
	// slots holds one token per free place in jobs.
	slots chan struct{}
	wg    sync.WaitGroup
}

// QueueOptions configures NewQueue.
type QueueOptions struct {
	// Workers is how many jobs run at once (default 8).
	Workers int
	// Size is how many acknowledged jobs may wait for a worker (default 1024).
	Size int
	// JobTimeout bounds one job, including execution of an approved plan (default 10 min).
	JobTimeout time.Duration
}

// NewQueue returns a Queue; call Run to start its workers.
func NewQueue(o QueueOptions) *Queue {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Size <= 0 {
		o.Size = 1024
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = 10 * time.Minute
	}
	q := &Queue{
		workers: o.Workers, jobTimeout: o.JobTimeout,
		jobs:  make(chan func(context.Context), o.Size),
		slots: make(chan struct{}, o.Size),
	}
	for range o.Size {
		q.slots <- struct{}{}
	}
	return q
}

// shutdownGrace is how long a job in progress may continue after Run's context is done (an
// approved plan finishing its writes and unlocking), before its context is cancelled.
const shutdownGrace = 20 * time.Second

// Run works on submitted jobs until ctx is done, then waits for jobs in progress. Each job
// gets its own context: JobTimeout long, not cancelled by the platform request that caused
// it, and cancelled shutdownGrace (20 s) after ctx is done.
func (q *Queue) Run(ctx context.Context) error {
	for range q.workers {
		q.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-q.jobs:
					q.slots <- struct{}{}
					q.work(ctx, j)
				}
			}
		})
	}
	<-ctx.Done()
	q.wg.Wait()
	return nil
}

func (q *Queue) work(ctx context.Context, j func(context.Context)) {
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.jobTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(shutdownGrace, cancel) })
	defer stop()
	j(jctx)
}

// Reserve takes a place in the queue; false means the queue is full.
func (q *Queue) Reserve() bool {
	select {
	case <-q.slots:
		return true
	default:
		return false
	}
}

// Submit hands j to the workers in the place Reserve took; it never blocks.
func (q *Queue) Submit(j func(context.Context)) { q.jobs <- j }

// Enqueue reserves a place and submits j; false means the queue is full.
func (q *Queue) Enqueue(j func(context.Context)) bool {
	if !q.Reserve() {
		return false
	}
	q.Submit(j)
	return true
}
