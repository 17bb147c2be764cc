package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/whypending/whypending/adapters/slack"
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
// /metrics (whypending_chat_platform_up). It is up while its connection is (set: commands
// registered, a gateway or Socket Mode connection open, or nothing to connect) and, for a
// platform whose bot token is checked (Slack: checksToken), while that token is accepted
// (setToken). One platform that is down never stops the other: serve keeps retrying it
// (retry, keep).
type platformState struct {
	name    string
	metrics *bot.Metrics
	log     *slog.Logger

	mu      sync.Mutex
	err     error // the connection: nil while up
	retryAt time.Time
	token   error // the bot token: nil while accepted (or not checked)
	tokenAt time.Time
	// unchecked is why the last check of the bot token got no answer (Slack or the way to it
	// down), nil once one answered. It says nothing of the token: the platform keeps the
	// state the last answer gave it.
	unchecked error
}

func newPlatformState(name string, metrics *bot.Metrics, log *slog.Logger) *platformState {
	p := &platformState{name: name, metrics: metrics, log: log, err: errConnecting}
	metrics.SetPlatformUp(name, false)
	return p
}

// errCheckingToken is the bot token's state before its first check answered.
var errCheckingToken = errors.New("checking the bot token")

// checksToken makes the platform down until setToken records that its bot token was
// accepted. Call it before the platform is used.
func (p *platformState) checksToken() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.token = errCheckingToken
	p.metrics.SetPlatformUp(p.name, false)
}

// Check is the platform's ReadyCheck: nil while it is up, else why not and when the next
// attempt is. A bot token that is not accepted comes first: no connection helps then. A check
// of the token that got no answer is shown but wraps bot.ErrNotChecked, so it does not make
// the bot unready: an outage of Slack's Web API, or of the way to it, must not take every
// replica out of the Service while the slash commands' answers (to response_url) may still
// get through.
func (p *platformState) Check(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err, at := p.err, p.retryAt
	switch {
	case p.token != nil:
		err, at = p.token, p.tokenAt
	case err == nil && p.unchecked != nil:
		return fmt.Errorf("%w%s; %w until Slack answers", p.unchecked, retrying(p.tokenAt), bot.ErrNotChecked)
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w%s", err, retrying(at))
}

// retrying says when the next attempt is: at (" (retrying at 09:10:22Z)"), or " (retrying now)"
// once at has passed (the attempt is under way); "" when at is zero.
func retrying(at time.Time) string {
	switch {
	case at.IsZero():
		return ""
	case !time.Now().Before(at):
		return " (retrying now)"
	}
	return " (retrying at " + at.UTC().Format("15:04:05Z") + ")"
}

// upLocked says whether the platform is up; p.mu is held.
func (p *platformState) upLocked() bool { return p.err == nil && p.token == nil }

// set records the outcome of an attempt, or how a Socket Mode connection stands (it is
// RunSocketMode's slack.SocketReport); retryAt is when the next attempt is (zero: none, or
// not known).
func (p *platformState) set(err error, retryAt time.Time) {
	p.mu.Lock()
	wasUp := p.upLocked()
	p.err, p.retryAt = err, retryAt
	isUp := p.upLocked()
	p.metrics.SetPlatformUp(p.name, isUp)
	p.mu.Unlock()
	switch {
	case err != nil:
		attrs := []any{slog.String("platform", p.name), slog.Any("err", err)}
		if !retryAt.IsZero() {
			attrs = append(attrs, slog.Time("retryAt", retryAt))
		}
		p.log.Error("chat platform unavailable; retrying", attrs...)
	case isUp && !wasUp:
		p.log.Info("chat platform up", slog.String("platform", p.name))
	}
}

// setToken records what the platform says of its bot token: nil when it accepted it, else
// its refusal; retryAt is when it is asked again. A new reason
// is logged once, not each time the same answer comes again.
func (p *platformState) setToken(err error, retryAt time.Time) {
	p.mu.Lock()
	wasUp := p.upLocked()
	was := p.token
	p.token, p.tokenAt, p.unchecked = err, retryAt, nil
	isUp := p.upLocked()
	p.metrics.SetPlatformUp(p.name, isUp)
	p.mu.Unlock()
	var refused *slack.TokenRefusedError
	switch {
	case err == nil:
		if isUp && !wasUp {
			p.log.Info("chat platform up", slog.String("platform", p.name))
		}
	case was != nil && was.Error() == err.Error():
	default:
		attrs := []any{slog.String("platform", p.name), slog.Any("err", err)}
		if errors.As(err, &refused) {
			attrs = append(attrs, slog.String("method", refused.Method), slog.String("code", refused.Code))
		}
		p.log.Error("chat platform unavailable: its bot token was refused", attrs...)
	}
}

// tokenUnanswered records that a check of the bot token got no answer (err), and when it is
// asked again. The platform keeps the state the last answer gave it; before any answer it no
// longer waits for one (Check shows err without making the bot unready). A new reason is
// logged once.
func (p *platformState) tokenUnanswered(err error, retryAt time.Time) {
	p.mu.Lock()
	wasUp := p.upLocked()
	was := p.unchecked
	p.unchecked, p.tokenAt = err, retryAt
	if p.token == errCheckingToken {
		p.token = nil
	}
	isUp := p.upLocked()
	p.metrics.SetPlatformUp(p.name, isUp)
	p.mu.Unlock()
	if was == nil || was.Error() != err.Error() {
		p.log.Warn("the chat platform's bot token cannot be checked; retrying", slog.String("platform", p.name),
			slog.Any("err", err), slog.Time("retryAt", retryAt))
	}
	if isUp && !wasUp {
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
