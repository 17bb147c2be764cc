package bot

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
)

// Metrics are the bot's Prometheus metrics, served on /metrics.
type Metrics struct {
	// commands counts commands by name ("why-pending", "ipam", "unknown") and outcome
	// ("ok", "user-error", "refused", "unavailable", "error").
	commands *prometheus.CounterVec
	// transitions counts approval audit events by event name.
	transitions *prometheus.CounterVec
	// commandSeconds is how long handlers take, by command, in seconds.
	commandSeconds *prometheus.HistogramVec
	// Adapters are the metrics the chat adapters observe (acknowledgements, deliveries).
	Adapters *chat.Metrics
	// caches reports the informer caches at each scrape (ReportCaches).
	caches *cacheCollector
	// Authorization counts per-user authorization's reviews (cache hits and misses) and
	// refusals (authz.Options.Metrics).
	Authorization *authz.Metrics
	// platformUp is 1 while a configured chat platform is connected (its commands
	// registered, its connection open, Slack's bot token accepted), else 0, by platform
	// (SetPlatformUp).
	platformUp *prometheus.GaugeVec
}

// SetPlatformUp sets whypending_chat_platform_up{platform} to 1 (up) or 0.
func (m *Metrics) SetPlatformUp(platform string, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.platformUp.WithLabelValues(platform).Set(v)
}

// ReportCaches makes /metrics export what fn returns at each scrape, as
// whypending_cache_objects{cluster,cache} and whypending_cache_synced{cluster,cache} (1 or
// 0). fn must be quick and safe to call concurrently.
func (m *Metrics) ReportCaches(fn func() []fleet.CacheStats) {
	m.caches.mu.Lock()
	defer m.caches.mu.Unlock()
	m.caches.fn = fn
}

// cacheCollector is the prometheus.Collector behind ReportCaches.
type cacheCollector struct {
	mu              sync.Mutex
	fn              func() []fleet.CacheStats
	objects, synced *prometheus.Desc
}

func newCacheCollector() *cacheCollector {
	return &cacheCollector{
		objects: prometheus.NewDesc("whypending_cache_objects", "Objects held by an informer cache, by cluster and cached resource.", []string{"cluster", "cache"}, nil),
		synced:  prometheus.NewDesc("whypending_cache_synced", "1 when an informer cache has synced (its initial list is in), else 0, by cluster and cached resource.", []string{"cluster", "cache"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.objects
	ch <- c.synced
}

// Collect implements prometheus.Collector.
func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fn := c.fn
	c.mu.Unlock()
	if fn == nil {
		return
	}
	for _, s := range fn() {
		synced := 0.0
		if s.Synced {
			synced = 1
		}
		ch <- prometheus.MustNewConstMetric(c.objects, prometheus.GaugeValue, float64(s.Objects), s.Cluster, s.Cache)
		ch <- prometheus.MustNewConstMetric(c.synced, prometheus.GaugeValue, synced, s.Cluster, s.Cache)
	}
}

// NewMetrics creates the metrics, the adapters' included, and registers them with reg (nil:
// not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whypending_commands_total",
			Help: "Chat commands handled, by command and outcome.",
		}, []string{"command", "outcome"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whypending_approval_transitions_total",
			Help: "Approval audit events recorded, by event.",
		}, []string{"event"}),
		commandSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "whypending_command_duration_seconds",
			Help:    "Time to answer a chat command, by command.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}, []string{"command"}),
		Adapters:      chat.NewMetrics(reg),
		caches:        newCacheCollector(),
		Authorization: authz.NewMetrics(reg),
		platformUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "whypending_chat_platform_up",
			Help: "1 while a configured chat platform is connected (commands registered, connection open, Slack's bot token accepted), 0 while serve retries it, by platform.",
		}, []string{"platform"}),
	}
	if reg != nil {
		reg.MustRegister(m.commands, m.transitions, m.commandSeconds, m.caches, m.platformUp)
	}
	return m
}

// approvalTransitions is the counter of approval audit events, nil when m is.
func (m *Metrics) approvalTransitions() *prometheus.CounterVec {
	if m == nil {
		return nil
	}
	return m.transitions
}
