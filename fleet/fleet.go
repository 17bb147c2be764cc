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

// WaitFirstAttempts waits until every cluster has tried to connect once (Tried), ctx is done
// or deadline has passed, whichever comes first.
func (f *Fleet) WaitFirstAttempts(ctx context.Context, deadline time.Time) {
	for _, c := range f.clusters {
		if !waitTried(ctx, c, deadline) {
			return
		}
	}
}

// WaitFirstAttempt is WaitFirstAttempts for the cluster named name only. "" names the first
// cluster (the default cluster of the bot's commands); a name no cluster has returns at
// once. Work about one cluster (an alert's diagnosis, the approval store's sweep) waits with
// it for that cluster only, not behind every cluster's first attempt.
func (f *Fleet) WaitFirstAttempt(ctx context.Context, name string, deadline time.Time) {
	for _, c := range f.clusters {
		if name == "" || c.Name() == name {
			waitTried(ctx, c, deadline)
			return
		}
	}
}

// waitTried waits until c has tried to connect once, and says so; false when ctx ended or
// deadline passed first.
func waitTried(ctx context.Context, c *Cluster, deadline time.Time) bool {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case <-c.Tried():
		return true
	case <-ctx.Done():
		return false
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
