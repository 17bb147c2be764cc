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

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
	"github.com/whypending/whypending/triage/collect"
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
// thread stacks, kernel buffers).
const memLimitRatio = 0.9

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

// runServe runs the bot until ctx is done. listening, when not nil, receives the HTTP
// listener's address once it accepts connections (tests).
func runServe(ctx context.Context, configPath string, stderr io.Writer, listening chan<- string) error {
	cfg, err := bot.LoadConfig(configPath)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	setGoMemLimit(log, memlimit.FromCgroup)
	var secrets bot.SlackSecrets
	if cfg.SlackEnabled() {
		if secrets, err = cfg.ResolveSlack(os.LookupEnv, os.ReadFile); err != nil {
			return fmt.Errorf("config %s:\n%w", configPath, err)
		}
	}
	var discordSecrets bot.DiscordSecrets
	if cfg.DiscordEnabled() {
		if discordSecrets, err = cfg.ResolveDiscord(os.LookupEnv, os.ReadFile); err != nil {
			return fmt.Errorf("config %s:\n%w", configPath, err)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := bot.NewMetrics(reg)

	lock := lockSettings{policy: actions.LockPolicy(cfg.Lock.Policy), ttl: cfg.Lock.MaxDuration.Duration,
		owner: "whypending-bot:" + cfg.Store.Namespace}
	// Clusters connect in the background and reconnect after an outage: one that is down or
	// misconfigured does not stop the others (see liveCluster).
	cctx, stopClusters := context.WithCancel(ctx)
	cs := startClusters(cctx, cfg, lock, defaultConnTiming, log)
	defer cs.wait()
	defer stopClusters()
	metrics.ReportCaches(cs.cacheStats)
	clusters := cs.botClusters()
	checks := cs.readyChecks()
	var store bot.Store
	if cs.store != nil {
		s := liveStore{l: cs.store}
		store = s
		checks = append(checks, bot.ReadyCheck{Name: "store", Check: s.Ping})
	}
	if cfg.Store.Backend == "memory" {
		log.Warn("approval records are kept in memory: lost on restart, and only safe with one replica")
		store = bot.NewMemoryStore()
	}
	cs.waitFirstAttempts(ctx, defaultConnTiming.firstAttempts)

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
	b := bot.New(bot.Options{
		Clusters: clusters, Store: store, Policy: cfg.Policy(),
		Directories: map[string]bot.Directory{"slack": slack.NewDirectory(api, time.Minute)},
		LockNote:    lockNote, AllowedChannels: cfg.AllowedChannels(),
		ChannelNamespaces: cfg.Channels.Namespaces, Metrics: metrics, Log: log,
	})
	adapter := slack.New(slack.Options{Core: b, API: api, SigningSecret: secrets.SigningSecret, Metrics: metrics.Adapters, Log: log})
	server := bot.NewServer(reg, log, checks...)
	platforms := chat.Platforms{}
	if cfg.SlackEnabled() {
		platforms["slack"] = adapter
		if cfg.Slack.Mode == "http" {
			adapter.Mount(server)
		}
	}
	var discordAdapter *discord.Adapter
	if cfg.DiscordEnabled() {
		if discordAdapter, err = startDiscord(ctx, cfg, discordSecrets, b, metrics, log); err != nil {
			return err
		}
		platforms[discord.Platform] = discordAdapter
		if cfg.Discord.Mode == "http" {
			discordAdapter.Mount(server)
		}
	}

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	log.Info("whypending serving", slog.String("listen", ln.Addr().String()), slog.String("slack", platformMode(cfg.SlackEnabled(), cfg.Slack.Mode)),
		slog.String("discord", platformMode(cfg.DiscordEnabled(), cfg.Discord.Mode)),
		slog.Int("clusters", len(clusters)), slog.String("store", cfg.Store.Backend))
	if listening != nil {
		listening <- ln.Addr().String()
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return server.Serve(gctx, ln) })
	if cfg.SlackEnabled() {
		g.Go(func() error { return adapter.Run(gctx) })
	}
	if discordAdapter != nil {
		g.Go(func() error { return discordAdapter.Run(gctx) })
		if cfg.Discord.Mode == "gateway" {
			g.Go(func() error { return discordAdapter.RunGateway(gctx) })
		}
	}
	if cfg.Digest.Schedule != "" {
		g.Go(func() error { return runDigestSchedule(gctx, cfg, clusters, platforms, cs.store, log) })
	}
	g.Go(func() error {
		b.Approvals().RunSweeper(gctx, sweepEvery, func(ctx context.Context, a *bot.Approval, m chat.Message) {
			if a.MessageRef == "" {
				return
			}
			if err := platforms.UpdateMessage(ctx, a.MessageRef, m); err != nil {
				log.WarnContext(ctx, "update plan message", slog.String("plan", a.Plan.ID), slog.String("state", string(a.State)), slog.Any("err", err))
			}
		})
		return nil
	})
	if cfg.SlackEnabled() && cfg.Slack.Mode == "socket" {
		g.Go(func() error {
			return adapter.RunSocketMode(gctx, socketmode.New(api))
		})
	}
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// clusterConfig builds the REST config of one configured cluster: the in-cluster config, or
// kubectl's loading rules with the configured kubeconfig and context.
func clusterConfig(cc bot.ClusterConfig) (*rest.Config, error) {
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
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// lockSettings is how a cluster's repairs use the Calico datastore lock.
type lockSettings struct {
	policy actions.LockPolicy
	ttl    time.Duration
	owner  string
}

// wireCluster makes the bot's view of one cluster: /why-pending through collector, and, when
// Calico is installed, /ipam and repairs through calico/ and actions/ (recovering a datastore
// lock an earlier run of this owner left behind). A cluster without Calico still answers
// /why-pending. serve and demo share it.
//
// With a cached collector (serve), Calico IPAM is read from a calico.Cache that shares the
// collector's pods and nodes: /ipam check, /ipam blocks, the digest and diagnoses answer from
// it (bot.Cluster.IPAM is the *calico.Cache), and wireCluster waits until it has synced (bound
// it with ctx). Plans and repairs always read and write live through the *calico.Client.
func wireCluster(ctx context.Context, name, namespace string, restCfg *rest.Config, collector *collect.Collector, lock lockSettings, log *slog.Logger) (*bot.Cluster, error) {
	collector.WithCalico(restCfg)
	c := &bot.Cluster{
		Name:      name,
		Namespace: namespace,
		Diagnoser: bot.DiagnoserFunc(func(ctx context.Context, ns, pod string) (*triage.Diagnosis, error) {
			return collect.Diagnose(ctx, collector, ns, pod)
		}),
		Answerer: bot.AnswererFunc(func(ctx context.Context, t triage.Target) (*triage.Answer, error) {
			return collect.Answer(ctx, collector, t)
		}),
	}
	ipam, err := calico.NewClient(ctx, restCfg)
	if errors.Is(err, calico.ErrCalicoNotInstalled) {
		log.Warn("calico is not installed: /ipam is off for this cluster", slog.String("cluster", name))
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("connect to calico: %w", err)
	}
	if recovered, err := ipam.RecoverLocks(ctx, lock.owner); err != nil {
		log.Warn("recover datastore lock", slog.String("cluster", name), slog.Any("err", err))
	} else if recovered {
		log.Warn("unlocked a calico datastore lock an earlier run left behind", slog.String("cluster", name))
	}
	runner := &actions.Runner{Cluster: name, IPAM: ipam, LockPolicy: lock.policy, LockTTL: lock.ttl, LockOwner: lock.owner}
	c.IPAM, c.Planner, c.Executor = ipam, runner, runner
	users := collector.AddressUsers()
	if users == nil {
		collector.WithIPAM(ipam)
		return c, nil
	}
	cache := calico.NewCache(ctx, ipam, users)
	if err := cache.WaitForSync(ctx); err != nil {
		return nil, err
	}
	collector.WithIPAM(cache)
	c.IPAM = cache
	return c, nil
}
