package fleet

import (
	"context"
	"sync"
	"time"
)

// Fleet is every configured cluster, each connecting and reconnecting in the background.
type Fleet struct {
	clusters []*Cluster
	wg       sync.WaitGroup
}

// Start runs every cluster (Cluster.Run) until ctx is done; call Wait after cancelling ctx.
func Start(ctx context.Context, clusters []*Cluster) *Fleet {
	f := &Fleet{clusters: clusters}
	for _, c := range clusters {
		f.wg.Go(func() { c.Run(ctx) })
	}
	return f
}

// WaitFirstAttempts waits until every cluster has tried to connect once, or timeout.
func (f *Fleet) WaitFirstAttempts(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, c := range f.clusters {
		select {
		case <-c.Tried():
		case <-ctx.Done():
			return
		}
	}
}

// WaitFirstAttempt waits until the cluster named name has tried to connect once (Tried), ctx
// is done or deadline has passed, whichever comes first. "" names the first cluster (the
// default cluster of the bot's commands); a name no cluster has returns at once. Work about
// one cluster (an alert's diagnosis, the approval store's sweep) waits with it for that
// cluster only, not behind every cluster's first attempt as with WaitFirstAttempts.
func (f *Fleet) WaitFirstAttempt(ctx context.Context, name string, deadline time.Time) {
	var c *Cluster
	for _, x := range f.clusters {
		if name == "" || x.Name() == name {
			c = x
			break
		}
	}
	if c == nil {
		return
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case <-c.Tried():
	case <-ctx.Done():
	}
}

// Wait waits for the clusters' background work to stop (after Start's ctx is done).
func (f *Fleet) Wait() { f.wg.Wait() }

// CacheStats are every cluster's caches for /metrics.
func (f *Fleet) CacheStats() []CacheStats {
	var out []CacheStats
	for _, c := range f.clusters {
		out = append(out, c.CacheStats()...)
	}
	return out
}
