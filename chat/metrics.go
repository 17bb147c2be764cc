package chat

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Prometheus metrics the chat adapters observe, served on /metrics.
type Metrics struct {
	// AckSeconds is how long adapters take to acknowledge a platform request, by platform
	// and kind ("command", "interaction"), in seconds.
	AckSeconds *prometheus.HistogramVec
	// Deliveries counts follow-up deliveries (response_url posts, message updates) by
	// platform and outcome ("ok", "rate-limited", "error"); Deliverer counts them.
	Deliveries *prometheus.CounterVec
}

// NewMetrics creates the adapters' metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
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
		reg.MustRegister(m.AckSeconds, m.Deliveries)
	}
	return m
}
