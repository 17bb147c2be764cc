package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/internal/clock"
)

// tokenRecheck is how long after Slack refused the bot token serve asks auth.test again. The
// token is read once at start, so a refused one rarely comes back (a fixed token needs a
// restart), but a bot user reactivated, or an unknown error that was Slack's own, may.
const tokenRecheck = 5 * time.Minute

// slackToken checks Slack's bot token with auth.test: at start, with back-off while Slack
// cannot answer, every tokenRecheck while it refuses the token, and again after a Web API
// call was refused while serving (refused). What it learns is the slack platform's token
// condition (platformState.setToken): /readyz names a refusal and what to check, and
// whypending_chat_platform_up{platform="slack"} is 0. A check Slack does not answer changes
// nothing but /readyz's line (platformState.tokenUnanswered). The token is never logged.
type slackToken struct {
	state *platformState
	hint  string // what to check, after a refusal
	log   *slog.Logger
	wake  chan struct{} // a call was refused while the token was accepted
	first chan struct{} // closed once the first check has an outcome

	// accepted is whether the last check accepted the token and no call was refused since:
	// only then does a refused call tell something new.
	accepted atomic.Bool
}

func newSlackToken(state *platformState, hint string, log *slog.Logger) *slackToken {
	state.checksToken()
	return &slackToken{state: state, hint: hint, log: log, wake: make(chan struct{}, 1), first: make(chan struct{})}
}

// refused is slack.Options.TokenRefused: a Web API call was answered with a token error.
// While the token is accepted, the platform goes down with that refusal and auth.test is
// asked again tokenRecheck later; otherwise run is already asking.
func (c *slackToken) refused(err *slack.TokenRefusedError) {
	if !c.accepted.CompareAndSwap(true, false) {
		return
	}
	c.state.setToken(c.explain(err), time.Now().Add(tokenRecheck))
	c.wake <- struct{}{} // never blocks: one refusal per acceptance, and run takes it
}

// explain adds what to check to a refusal.
func (c *slackToken) explain(err *slack.TokenRefusedError) error {
	return &rewrittenError{msg: err.Error() + ": " + c.hint, err: err}
}

// run checks the token with check (slack.CheckToken) until ctx ends. It always returns nil.
func (c *slackToken) run(ctx context.Context, check func(context.Context) (slack.Identity, error)) error {
	wait := platformRetryMin
	var known slack.Identity
	var refused *slack.TokenRefusedError
	firstDone := false
	for {
		id, err := check(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var next time.Duration
		switch {
		case err == nil:
			wait = platformRetryMin
			if id != known {
				known = id
				c.log.Info("slack bot token accepted", slog.String("teamID", id.TeamID), slog.String("enterpriseID", id.EnterpriseID),
					slog.String("botUserID", id.UserID), slog.String("botID", id.BotID))
			}
			c.state.setToken(nil, time.Time{})
			c.accepted.Store(true)
		case errors.As(err, &refused):
			wait = platformRetryMin
			next = tokenRecheck
			c.state.setToken(c.explain(refused), time.Now().Add(next))
		default:
			next = wait
			var rl *slackgo.RateLimitedError
			if errors.As(err, &rl) && rl.RetryAfter > next {
				next = rl.RetryAfter
			}
			wait = min(2*wait, platformRetryMax)
			c.state.tokenUnanswered(fmt.Errorf("cannot check the bot token: %w", err), time.Now().Add(next))
		}
		if !firstDone {
			firstDone = true
			close(c.first)
		}
		if next == 0 { // accepted: ask again once a call is refused
			select {
			case <-ctx.Done():
				return nil
			case <-c.wake:
			}
			next = tokenRecheck
		}
		if clock.Sleep(ctx, next) != nil {
			return nil
		}
	}
}

// botTokenHint says what to check when Slack refuses the bot token: slack.botToken and where
// it was read from (with the chart, the Secret's key SLACK_BOT_TOKEN), and what the token is.
// It never includes the token; only whether it has a bot token's "xoxb-" prefix.
func botTokenHint(s Secret, token string) string {
	var b strings.Builder
	b.WriteString("check slack.botToken")
	switch {
	case s.File != "":
		fmt.Fprintf(&b, " (read from the file %s)", s.File)
	case s.Env == "SLACK_BOT_TOKEN":
		b.WriteString(" (read from the environment variable SLACK_BOT_TOKEN; with the chart, the key SLACK_BOT_TOKEN of its Secret)")
	case s.Env != "":
		fmt.Fprintf(&b, " (read from the environment variable %s)", s.Env)
	}
	b.WriteString(": it is the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions page")
	if !strings.HasPrefix(token, "xoxb-") {
		b.WriteString("; the configured token does not start with xoxb-")
	}
	return b.String()
}
