package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
	"github.com/whypending/whypending/internal/lease"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
)

// watchLeaseTiming is the watch's leader election timing (zero: client-go's defaults; tests
// shorten it to fail over in seconds).
var watchLeaseTiming struct{ Duration, Renew, Retry time.Duration }

// watchChannels are the channels the watch posts to: channels.digest for every namespace,
// channels.namespaces for its namespace.
func watchChannels(cfg *Config) []watch.Channel {
	var out []watch.Channel
	for _, id := range cfg.Channels.Digest {
		out = append(out, watch.Channel{Platform: chat.ChannelPlatform(id), ID: id})
	}
	for id, ns := range cfg.Channels.Namespaces {
		out = append(out, watch.Channel{Platform: chat.ChannelPlatform(id), ID: id, Namespace: ns})
	}
	return out
}

// newWatcher builds the watch over the clusters' informer caches: its posts kept in
// Notification objects on the store cluster, posted through the adapters' Threads, each
// workload answered by b as /why-pending answers.
func newWatcher(cfg *Config, b *bot.Bot, sl *slack.Adapter, dc *discord.Adapter, live []*fleet.Cluster, store *fleet.Cluster,
	reg prometheus.Registerer, log *slog.Logger) *watch.Watcher {
	platforms := thread.Platforms{}
	if cfg.SlackEnabled() {
		platforms["slack"] = sl.Threads()
	}
	if dc != nil {
		platforms[discord.Platform] = dc.Threads()
	}
	clusters := make([]watch.Cluster, len(live))
	for i, c := range live {
		clusters[i] = c
	}
	wc := cfg.Watch
	return watch.New(watch.Options{
		Clusters: clusters, Channels: watchChannels(cfg),
		Thresholds: watch.Thresholds{Pending: wc.Thresholds.Pending.Duration, ImagePull: wc.Thresholds.ImagePull.Duration,
			CrashLoopRestarts: int32(wc.Thresholds.CrashLoopRestarts), Terminating: wc.Thresholds.Terminating.Duration,
			FailedCreate: wc.Thresholds.FailedCreate.Duration},
		MaxPosts: wc.MaxPostsPer10m, RemindAfter: wc.RemindAfter.Duration, ExcludeNamespaces: wc.ExcludeNamespaces,
		Store:     ledger.New(nil, cfg.Store.Namespace, ledger.Options{Connect: store.Ledger, Self: ledgerIdentity()}),
		Platforms: platforms, Diagnose: b.DiagnoseResult,
		Resync: alertResync, Metrics: watch.NewMetrics(reg), Log: log,
	})
}

// runWatch runs w until ctx is done: only the holder of the whypending-watch Lease in the
// store namespace of store watches and posts.
func runWatch(ctx context.Context, cfg *Config, w *watch.Watcher, store *fleet.Cluster, log *slog.Logger) error {
	restCfg, err := store.WaitConfig(ctx)
	if err != nil {
		return nil // ctx done
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("watch lease cluster %s: %w", store.Name(), err)
	}
	self := ledgerIdentity()
	return w.Run(ctx, &lease.Elector{Leases: client.CoordinationV1(), Namespace: cfg.Store.Namespace, Name: watch.LeaseName, What: "watch",
		Identity:      fmt.Sprintf("%s_%d_%d", self.Host, self.PID, self.Start),
		LeaseDuration: watchLeaseTiming.Duration, RenewDeadline: watchLeaseTiming.Renew, RetryPeriod: watchLeaseTiming.Retry, Log: log})
}
