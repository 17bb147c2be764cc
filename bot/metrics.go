package bot

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the bot's Prometheus metrics, served on /metrics.
type Metrics struct {
	// commands counts commands by name ("why-pending", "ipam", "unknown") and outcome
	// ("ok", "user-error", "unavailable", "error").
	commands *prometheus.CounterVec
	// transitions counts approval audit events by event name.
	transitions *prometheus.CounterVec
	// commandSeconds is how long handlers take, by command, in seconds.
	commandSeconds *prometheus.HistogramVec
	// AckSeconds is how long adapters take to acknowledge a platform request, by platform
	// and kind ("command", "interaction"), in seconds. Adapters observe it.
	AckSeconds *prometheus.HistogramVec
	// Deliveries counts follow-up deliveries (response_url posts, message updates) by
	// platform and outcome ("ok", "rate-limited", "error"). Adapters count them.
	Deliveries *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
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
		AckSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "whypending_ack_duration_seconds",
			Help:    "Time to acknowledge a chat platform request, by platform and kind.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"platform", "kind"}),
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whypending_deliveries_total",
			Help: "Follow-up deliveries to chat platforms, by platform and outcome.",
		}, []string{"platform", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.commands, m.transitions, m.commandSeconds, m.AckSeconds, m.Deliveries)
	}
	return m
}
