package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/internal/clock"
)

// Back-off between attempts to bring up a chat platform that failed (registration of its
// commands, its gateway or Socket Mode connection).
const (
	platformRetryMin = time.Second
	platformRetryMax = 2 * time.Minute
)

// errConnecting is a platform's state before its first attempt finished.
var errConnecting = errors.New("connecting")

// platformState is whether one configured chat platform is up, for /readyz (Check) and
// /metrics (whypending_chat_platform_up). One platform that is down never stops the other:
// serve keeps retrying it (retry, keep).
type platformState struct {
	name    string
	metrics *bot.Metrics
	log     *slog.Logger

	mu      sync.Mutex
	err     error
	retryAt time.Time
}

func newPlatformState(name string, metrics *bot.Metrics, log *slog.Logger) *platformState {
	p := &platformState{name: name, metrics: metrics, log: log, err: errConnecting}
	metrics.SetPlatformUp(name, false)
	return p
}

// Check is the platform's ReadyCheck: nil while it is up, else the last failure and when
// the next attempt is.
func (p *platformState) Check(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil || p.retryAt.IsZero() {
		return p.err
	}
	return fmt.Errorf("%w (retrying at %s)", p.err, p.retryAt.UTC().Format("15:04:05Z"))
}

// set records the outcome of an attempt, or how a Socket Mode connection stands (it is
// RunSocketMode's slack.SocketReport); retryAt is when the next attempt is (zero: none, or
// not known).
func (p *platformState) set(err error, retryAt time.Time) {
	p.mu.Lock()
	was := p.err
	p.err, p.retryAt = err, retryAt
	p.mu.Unlock()
	p.metrics.SetPlatformUp(p.name, err == nil)
	switch {
	case err != nil:
		attrs := []any{slog.String("platform", p.name), slog.Any("err", err)}
		if !retryAt.IsZero() {
			attrs = append(attrs, slog.Time("retryAt", retryAt))
		}
		p.log.Error("chat platform unavailable; retrying", attrs...)
	case was != nil:
		p.log.Info("chat platform up", slog.String("platform", p.name))
	}
}

// up marks the platform up.
func (p *platformState) up() { p.set(nil, time.Time{}) }

// retry runs step until it succeeds, with back-off between failures, and then marks the
// platform up. It returns ctx's error when ctx ends first.
func (p *platformState) retry(ctx context.Context, step func(context.Context) error) error {
	wait := platformRetryMin
	for {
		err := step(ctx)
		if err == nil {
			p.up()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.set(err, time.Now().Add(wait))
		if err := clock.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, platformRetryMax)
	}
}

// keep runs a platform's long-lived connection (a gateway, Socket Mode) until ctx ends: when
// run returns an error it is recorded and run again after a back-off. It always returns nil.
func (p *platformState) keep(ctx context.Context, run func(context.Context) error) error {
	wait := platformRetryMin
	for {
		started := time.Now()
		err := run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("connection closed")
		}
		if time.Since(started) > platformRetryMax {
			wait = platformRetryMin // it ran for a while: start the back-off over
		}
		p.set(err, time.Now().Add(wait))
		if clock.Sleep(ctx, wait) != nil {
			return nil
		}
		wait = min(2*wait, platformRetryMax)
	}
}
