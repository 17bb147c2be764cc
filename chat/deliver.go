package chat

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Deliverer makes an adapter's follow-up calls to its platform (answers, message updates,
// the digest), waiting out rate limits as the platform asks and counting each outcome in
// Metrics.Deliveries.
type Deliverer struct {
	// Platform labels metrics and log lines ("slack", "discord").
	Platform string
	// RetryAfter reports whether err is the platform's rate-limit refusal (HTTP 429) and
	// how long it asked to wait (Slack's Retry-After header, Discord's retry_after).
	RetryAfter func(err error) (time.Duration, bool)
	// Metrics may be nil.
	Metrics *Metrics
	// Log receives the waits (nil: slog.Default()).
	Log *slog.Logger
}

const (
	// maxRateLimitWait caps one wait, whatever the platform asks.
	maxRateLimitWait = time.Minute
	// maxDeliveryAttempts caps the tries of one delivery.
	maxDeliveryAttempts = 5
)

// Do calls f, and again after each rate-limit refusal once the asked wait (capped at a
// minute) has passed, up to 5 tries; other errors return at once, wrapped with what. It
// returns ctx's error if ctx ends during a wait.
func (d Deliverer) Do(ctx context.Context, what string, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			d.count("ok")
			return nil
		}
		wait, limited := d.RetryAfter(err)
		if !limited || attempt >= maxDeliveryAttempts {
			d.count("error")
			return fmt.Errorf("%s: %w", what, err)
		}
		wait = min(max(wait, 0), maxRateLimitWait)
		d.count("rate-limited")
		log := d.Log
		if log == nil {
			log = slog.Default()
		}
		log.InfoContext(ctx, d.Platform+" rate limit; waiting", slog.String("call", what), slog.Duration("retryAfter", wait))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

func (d Deliverer) count(outcome string) {
	if d.Metrics != nil {
		d.Metrics.Deliveries.WithLabelValues(d.Platform, outcome).Inc()
	}
}
