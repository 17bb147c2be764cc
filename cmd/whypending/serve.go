package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/alerts"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
	"github.com/whypending/whypending/internal/proc"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
)

// sweepEvery is how often pending plans past their expiry are marked Expired, Running plans
// whose bot process died are marked Interrupted, and their messages updated.
const sweepEvery = 30 * time.Second

func newServeCommand() *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Run the chat bot (Slack HTTP or Socket Mode, Discord HTTP or gateway) with /healthz, /readyz and /metrics",
		Long: `Run the chat bot. The config file (see config.example.yaml) names the clusters, the
Slack app and the Discord application (each platform whose section is present is served), the
approvers and the approval policy. Secrets come from environment variables or files named in
the config: by default SLACK_SIGNING_SECRET (HTTP mode), SLACK_BOT_TOKEN and SLACK_APP_TOKEN
(Socket Mode), DISCORD_BOT_TOKEN and DISCORD_PUBLIC_KEY (HTTP mode). An invalid config is
reported one problem per line, each with its key path, and the bot does not start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), configPath, cmd.ErrOrStderr(), nil)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the config file (required)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// memLimitRatio is the part of the container's memory limit given to the Go garbage collector
// as its soft limit (GOMEMLIMIT): the rest is for what the runtime does not count (the binary,
// thread stacks, kernel buffers) and for the margin to the OOM kill. At 120,800 pods a soft
// limit of 384 MiB (a 512 MiB limit) held serve's peak RSS at 412 MiB while answering, a mass
// event included, for no measurable CPU (calico/BENCHMARKS.md, issue 20).
const memLimitRatio = 0.75

// setGoMemLimit sets the garbage collector's soft memory limit to memLimitRatio of the
// container's memory limit as limit reports it (serve passes memlimit.FromCgroup: cgroup v2
// memory.max or v1 memory.limit_in_bytes, read by automemlimit), so that near the limit the
// collector works harder instead of the container being OOM-killed while the caches of a
// large cluster fill it. GOMEMLIMIT in the environment overrides it (and AUTOMEMLIMIT=off
// turns it off, AUTOMEMLIMIT=0.8 sets another ratio). It logs the limit in force in bytes;
// with no limit anywhere it logs nothing.
func setGoMemLimit(log *slog.Logger, limit memlimit.Provider) {
	soft, err := memlimit.Set(memlimit.WithRatio(memLimitRatio), memlimit.WithProvider(limit))
	switch {
	case err != nil:
		log.Warn("no garbage collector soft memory limit: cannot read the container's memory limit", slog.Any("error", err))
	case soft > 0 && soft < math.MaxInt64:
		source := "container memory limit"
		if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
			source = "GOMEMLIMIT"
		}
		log.Info("garbage collector soft memory limit", slog.Int64("bytes", soft), slog.String("from", source))
	}
}

// serveLogger is the bot's log: JSON lines on w, from Info up. A duration is written as a Go
// duration string ("took":"1.52s"), as the config writes durations, not as the JSON
// handler's integer nanoseconds.
func serveLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: durationText}))
}

// durationText is a slog ReplaceAttr that writes duration values as Go duration strings.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// runServe runs the bot until ctx is done. listening, when not nil, receives the HTTP
// listener's address once every cluster has had its first attempt to connect, or
// fleet.DefaultTiming.FirstAttempts after start (tests); the bot serves from the start.
func runServe(ctx context.Context, configPath string, stderr io.Writer, listening chan<- string) error {
	cfg, err := LoadConfig(configPath)
	if err != nil {
		return err
	}
	log := serveLogger(stderr)
	klog.SetSlogLogger(log.With(slog.String("from", "client-go")))
	setGoMemLimit(log, memlimit.FromCgroup)
	tuneGC := setGCPercent(log)
	var secrets SlackSecrets
	if cfg.SlackEnabled() {
		if secrets, err = cfg.ResolveSlack(os.LookupEnv, os.ReadFile); err != nil {
			return fmt.Errorf("config %s:\n%w", configPath, err)
		}
	}
	var alertToken, silenceToken string
	if cfg.Alertmanager != nil {
		if alertToken, silenceToken, err = cfg.ResolveAlertmanager(os.LookupEnv, os.ReadFile); err != nil {
			return fmt.Errorf("config %s:\n%w", configPath, err)
		}
	}
	var discordSecrets DiscordSecrets
	if cfg.DiscordEnabled() {
		if discordSecrets, err = cfg.ResolveDiscord(os.LookupEnv, os.ReadFile); err != nil {
			return fmt.Errorf("config %s:\n%w", configPath, err)
		}
	}

	// Listen before anything connects: a bad listen address fails at once, and /healthz
	// answers while a cluster or a chat platform is still connecting.
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	var pprofLn net.Listener
	if cfg.PprofListen != "" {
		if pprofLn, err = lc.Listen(ctx, "tcp", cfg.PprofListen); err != nil {
			return fmt.Errorf("listen on %s (pprofListen): %w", cfg.PprofListen, err)
		}
		defer pprofLn.Close()
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := bot.NewMetrics(reg)

	lock := fleet.Lock{Policy: actions.LockPolicy(cfg.Lock.Policy), TTL: cfg.Lock.MaxDuration.Duration,
		Owner: "whypending-bot:" + cfg.Store.Namespace}
	// Clusters connect in the background and reconnect after an outage: one that is down or
	// misconfigured does not stop the others (see fleet.Cluster).
	var (
		live      []*fleet.Cluster
		clusters  []*bot.Cluster
		checks    []bot.ReadyCheck
		store     approval.Store
		liveStore *crdStore // the approval store on the store cluster (kubernetes backend), else nil
	)
	for _, cc := range cfg.Clusters {
		o := fleet.Options{Name: cc.Name, Config: func() (*rest.Config, error) { return clusterConfig(cc) }, Lock: lock, Log: log}
		var s *crdStore
		if cfg.Store.Backend == "kubernetes" && cc.Name == cfg.Store.Cluster {
			s = &crdStore{namespace: cfg.Store.Namespace}
			o.Check = s.check
		}
		c := fleet.New(o)
		if s != nil {
			s.cluster, store, liveStore = c, s, s
		}
		live = append(live, c)
		clusters = append(clusters, botCluster(c, cc.Namespace))
		checks = append(checks, bot.ReadyCheck{Name: "cluster " + cc.Name, Group: "clusters", Check: c.Ready})
	}
	if liveStore != nil {
		checks = append(checks, bot.ReadyCheck{Name: "store", Check: liveStore.Ping})
	}
	if cfg.Store.Backend == "memory" {
		log.Warn("approval records are kept in memory: lost on restart, and only safe with one replica")
		store = approval.NewMemoryStore()
	}
	cctx, stopClusters := context.WithCancel(ctx)
	fl := fleet.Start(cctx, live)
	defer fl.Wait()
	defer stopClusters()
	metrics.ReportCaches(fl.CacheStats)

	opts := []slackgo.Option{slackgo.OptionHTTPClient(&http.Client{Timeout: 15 * time.Second})}
	if cfg.Slack.APIURL != "" {
		opts = append(opts, slackgo.OptionAPIURL(cfg.Slack.APIURL))
	}
	if cfg.Slack.Mode == "socket" {
		opts = append(opts, slackgo.OptionAppLevelToken(secrets.AppToken))
	}
	api := slackgo.New(secrets.BotToken, opts...)

	lockNote := ""
	if cfg.Lock.Policy == string(actions.LockAlways) {
		lockNote = fmt.Sprintf("The Calico datastore is locked while it runs (new pods wait; at most %s).", cfg.Lock.MaxDuration.Duration)
	}
	// Slack is up only while Slack accepts the bot token (auth.test at start, and no call
	// refused since), whatever the mode: every answer in a channel, alert thread, watch post
	// and digest needs it.
	var slackState *platformState
	var botToken *slackToken
	var tokenRefused func(*slack.TokenRefusedError)
	if cfg.SlackEnabled() {
		slackState = newPlatformState("slack", metrics, log)
		botToken = newSlackToken(slackState, botTokenHint(cfg.Slack.BotToken, secrets.BotToken), log)
		tokenRefused = botToken.refused
	}
	dir := slack.NewDirectory(api, time.Minute)
	b := bot.New(bot.Options{
		Clusters: clusters, Store: store, Policy: cfg.Policy(),
		Directories: map[string]approval.Directory{"slack": dir},
		Authorizer:  newAuthorizer(cfg, live, dir, metrics, log),
		LockNote:    lockNote, AllowedChannels: cfg.AllowedChannels(),
		ChannelNamespaces: cfg.Channels.Namespaces, Metrics: metrics, Log: log,
		SilencePolicy: silencePolicy(cfg),
	})
	adapter := slack.New(slack.Options{Core: b, API: api, SigningSecret: secrets.SigningSecret, Metrics: metrics.Adapters, Log: log,
		TokenRefused: tokenRefused})
	// Each chat platform comes up on its own: one that is down (Discord's API unreachable,
	// Socket Mode refused) is retried with back-off and shown in /readyz and /metrics, and
	// never stops the other.
	platforms := chat.Platforms{}
	var discordState *platformState
	if cfg.SlackEnabled() {
		platforms["slack"] = adapter
		checks = append(checks, bot.ReadyCheck{Name: "slack", Group: "chat platforms", Check: slackState.Check})
	}
	var discordAdapter *discord.Adapter
	if cfg.DiscordEnabled() {
		if discordAdapter, err = newDiscord(cfg, discordSecrets, b, metrics, log); err != nil {
			return err
		}
		platforms[discord.Platform] = discordAdapter
		discordState = newPlatformState(discord.Platform, metrics, log)
		checks = append(checks, bot.ReadyCheck{Name: "discord", Group: "chat platforms", Check: discordState.Check})
	}
	server := bot.NewServer(reg, log, checks...)
	if cfg.SlackEnabled() && cfg.Slack.Mode == "http" {
		adapter.Mount(server)
		slackState.up() // nothing to connect: Slack calls us
	}
	if discordAdapter != nil && cfg.Discord.Mode == "http" {
		discordAdapter.Mount(server)
	}
	// Nothing waits for every cluster's first attempt to connect: the chat platforms come up
	// at once, and a command about a cluster still connecting is answered that it is (see
	// fleet.Cluster). Work about one cluster waits, at most until firstBy, for that cluster's
	// first attempt only (fleet.Fleet.WaitFirstAttempt), not for the others'.
	firstBy := time.Now().Add(fleet.DefaultTiming.FirstAttempts)
	waitFirst := func(ctx context.Context, cluster string) { fl.WaitFirstAttempt(ctx, cluster, firstBy) }
	var receiver *alerts.Receiver
	if cfg.Alertmanager != nil {
		receiver = newReceiver(cfg, alertToken, silenceToken, b, adapter, discordAdapter, storeCluster(liveStore), waitFirst, reg, log)
		server.Handle(alerts.Path, receiver)
		if cfg.Alertmanager.URL != "" {
			b.SetSilencer(receiver)
		}
	}
	var watcher *watch.Watcher
	if cfg.Watch.Enabled {
		watcher = newWatcher(cfg, b, adapter, discordAdapter, live, storeCluster(liveStore), reg, log)
		b.SetWatch(watcher)
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return server.Serve(gctx, ln) })
	if tuneGC {
		g.Go(func() error { runGCTuner(gctx, gcTargetGauge(reg), log); return nil })
	}
	if pprofLn != nil {
		g.Go(func() error { return servePprof(gctx, pprofLn) })
		log.Info("profiles served", slog.String("pprofListen", pprofLn.Addr().String()))
	}
	log.Info("whypending serving", slog.String("listen", ln.Addr().String()), slog.String("slack", platformMode(cfg.SlackEnabled(), cfg.Slack.Mode)),
		slog.String("discord", platformMode(cfg.DiscordEnabled(), cfg.Discord.Mode)),
		slog.Int("clusters", len(clusters)), slog.String("store", cfg.Store.Backend), slog.String("authorization", string(cfg.Authorization.Mode)))
	if cfg.SlackEnabled() {
		g.Go(func() error { return adapter.Run(gctx) })
		g.Go(func() error {
			return botToken.run(gctx, func(ctx context.Context) (slack.Identity, error) { return slack.CheckToken(ctx, api) })
		})
	}
	if cfg.SlackEnabled() && cfg.Slack.Mode == "socket" {
		g.Go(func() error {
			// Slack is up from Slack's hello on a socket until that socket ends:
			// slack-go retries failed attempts inside RunSocketMode, which reports
			// each, and each socket that ends; keep records why RunSocketMode
			// returned (a token Slack refuses) and runs it again after a back-off.
			return slackState.keep(gctx, func(ctx context.Context) error {
				return adapter.RunSocketMode(ctx, socketmode.New(api), slackState.set)
			})
		})
	}
	if discordAdapter != nil {
		g.Go(func() error { return discordAdapter.Run(gctx) })
		g.Go(func() error {
			if err := discordState.retry(gctx, func(ctx context.Context) error {
				return registerDiscord(ctx, discordAdapter, cfg.Discord.APIURL)
			}); err != nil {
				return nil // serve is stopping
			}
			if cfg.Discord.Mode == "gateway" {
				return discordState.keep(gctx, func(ctx context.Context) error {
					err := discordAdapter.RunGateway(ctx)
					return discordURLError(err, cfg.Discord.APIURL)
				})
			}
			return nil
		})
	}
	// The receiver, the watch and the sweeper keep their state on the store cluster (the
	// pending alert threads and open watch posts listed once at start, the plans swept): each
	// waits for its first attempt, then starts. An alert's diagnosis waits for the alert's
	// cluster (alerts.Options.WaitCluster); the watch follows each cluster once it is
	// connected and retries a workload whose cluster is not; a plan whose cluster is not
	// connected is recovered at a later sweep.
	storeC := storeCluster(liveStore)
	waitStore := func(ctx context.Context) {
		if storeC != nil {
			waitFirst(ctx, storeC.Name())
		}
	}
	if receiver != nil {
		g.Go(func() error { waitStore(gctx); receiver.Run(gctx); return nil })
	}
	if watcher != nil {
		g.Go(func() error { waitStore(gctx); return runWatch(gctx, cfg, watcher, storeC, log) })
	}
	if cfg.Digest.Schedule != "" {
		g.Go(func() error {
			// A digest covers every cluster: as before, its schedule starts once each has had
			// its first attempt (or at firstBy), so that a round does not report a cluster
			// still making its first connection as skipped; a round due before then is not run.
			fl.WaitFirstAttempts(gctx, firstBy)
			return runDigestSchedule(gctx, cfg, clusters, platforms, watcher, storeC, log)
		})
	}
	g.Go(func() error {
		waitStore(gctx)
		b.RunSweeper(gctx, sweepEvery, func(ctx context.Context, a *approval.Record, m chat.Message) {
			if a.MessageRef == "" {
				return
			}
			if err := platforms.UpdateMessage(ctx, a.MessageRef, m); err != nil {
				log.WarnContext(ctx, "update plan message", slog.String("plan", a.Plan.ID), slog.String("state", string(a.State)), slog.Any("err", err))
			}
		})
		return nil
	})
	if listening != nil {
		// Tests: told once every cluster has had its first attempt and Slack's bot token its
		// first check (bounded), so that their first commands find the clusters that answer
		// connected, and /readyz the token's verdict.
		fl.WaitFirstAttempts(ctx, firstBy)
		if botToken != nil {
			select {
			case <-botToken.first:
			case <-ctx.Done():
			case <-time.After(time.Until(firstBy)):
			}
		}
		listening <- ln.Addr().String()
	}
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// silencePolicy is alertmanager.silencers as bot's SilencePolicy.
func silencePolicy(cfg *Config) string {
	if cfg.Alertmanager != nil && cfg.Alertmanager.Silencers == "channel" {
		return bot.SilenceChannel
	}
	return bot.SilenceApprovers
}

// ledgerIdentity names this process in the ledger's claims (tests run two replicas in one
// process and give each its own).
var ledgerIdentity = proc.Self

// alertResync is how often a replica looks for alert threads another left unfinished and
// compares the silences made from chat with Alertmanager's (0: the defaults; tests shorten
// it).
var alertResync time.Duration

// newReceiver builds the Alertmanager receiver: its threads kept in Notification objects on
// the store cluster (through its current connection), posted through the Slack and Discord
// adapters' Threads, each alert answered by b as /why-pending answers.
func newReceiver(cfg *Config, token, silenceToken string, b *bot.Bot, sl *slack.Adapter, dc *discord.Adapter, store *fleet.Cluster,
	waitCluster func(ctx context.Context, cluster string), reg prometheus.Registerer, log *slog.Logger) *alerts.Receiver {
	platforms := thread.Platforms{}
	if cfg.SlackEnabled() {
		platforms["slack"] = sl.Threads()
	}
	if dc != nil {
		platforms[discord.Platform] = dc.Threads()
	}
	receivers := map[string][]alerts.Channel{}
	for name, ids := range cfg.Alertmanager.Receivers {
		for _, id := range ids {
			receivers[name] = append(receivers[name], alerts.Channel{Platform: chat.ChannelPlatform(id), ID: id})
		}
	}
	var silences *alerts.Silences
	if cfg.Alertmanager.URL != "" {
		silences = &alerts.Silences{URL: cfg.Alertmanager.URL, Token: silenceToken}
	}
	return alerts.New(alerts.Options{Silences: silences,
		Token: token, Receivers: receivers, ClusterLabel: cfg.Alertmanager.ClusterLabel,
		ChannelNamespaces: cfg.Channels.Namespaces,
		Store:             ledger.New(nil, cfg.Store.Namespace, ledger.Options{Connect: store.Ledger, Self: ledgerIdentity()}),
		AckStore:          ledger.New(nil, cfg.Store.Namespace, ledger.Options{Connect: store.AckLedger, Self: ledgerIdentity()}),
		Platforms:         platforms, Diagnose: b.Diagnose, WaitCluster: waitCluster, RemindEvery: cfg.Alertmanager.RemindEvery.Duration,
		Resync: alertResync, SilenceCheck: alertResync, Metrics: alerts.NewMetrics(reg), Log: log,
	})
}

// clusterConfig builds the REST config of one configured cluster: the in-cluster config, or
// kubectl's loading rules with the configured kubeconfig and context.
func clusterConfig(cc ClusterConfig) (*rest.Config, error) {
	if cc.InCluster {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = cc.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: cc.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	fleet.RateLimit(cfg)
	return cfg, nil
}

// botCluster is the bot's view of c: c answers every call, through its current connection.
func botCluster(c *fleet.Cluster, namespace string) *bot.Cluster {
	return &bot.Cluster{Name: c.Name(), Namespace: namespace, Answerer: c, IPAM: c, Planner: c, Executor: c, Access: c, Health: c.Health}
}

// newAuthorizer is per-user authorization as cfg configures it (nil when its mode is off):
// each cluster's SubjectAccessReviews through its live connection, Slack user groups and
// verified emails through dir.
func newAuthorizer(cfg *Config, clusters []*fleet.Cluster, dir *slack.Directory, metrics *bot.Metrics, log *slog.Logger) *authz.Authorizer {
	o := cfg.AuthorizationOptions()
	o.Clusters = map[string]authz.Reviewer{}
	for _, c := range clusters {
		o.Clusters[c.Name()] = c
	}
	o.Directories = map[string]authz.Directory{"slack": dir}
	o.Profiles = map[string]authz.Profiles{"slack": dir}
	o.Metrics, o.Log = metrics.Authorization, log
	return authz.New(o)
}

// servePprof serves Go's profiles (net/http/pprof) on ln until ctx is done: the heap, CPU,
// goroutine and trace profiles of /debug/pprof/. It has no write timeout, since a CPU
// profile or a trace writes for as long as its ?seconds= asks.
func servePprof(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve profiles: %w", err)
	}
	return nil
}
