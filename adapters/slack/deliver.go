package slack

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/whypending/whypending/chat"
)

var errBadRef = errors.New("not a slack message reference")

// ref formats a message reference for approval.Record.MessageRef.
func ref(channel, ts string) string { return "slack:" + channel + "/" + ts }

func parseRef(r string) (channel, ts string, ok bool) {
	rest, ok := strings.CutPrefix(r, "slack:")
	if !ok {
		return "", "", false
	}
	channel, ts, ok = strings.Cut(rest, "/")
	return channel, ts, ok && channel != "" && ts != ""
}

// withRetry calls f, waiting out 429 responses as Slack asks (chat.Deliverer). When Slack
// refuses the bot token, Options.TokenRefused is told; what names the call (for Web API
// calls, its method).
func (a *Adapter) withRetry(ctx context.Context, what string, f func() error) error {
	err := a.deliver.Do(ctx, what, f)
	if r := tokenRefused(err, what); r != nil && a.refused != nil {
		a.refused(r)
	}
	return err
}

// retryAfter reports whether err is a 429 and how long to wait: the Retry-After header when
// Slack sent one, else one second.
func retryAfter(err error) (time.Duration, bool) {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return rl.RetryAfter, true
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code == 429 {
		return time.Second, true
	}
	return 0, false
}

// respond posts m to a response_url: in the channel when public, else only to the user;
// replacing the original message when replace is set. Failures are logged.
func (a *Adapter) respond(ctx context.Context, url string, m chat.Message, public, replace bool) {
	if url == "" {
		return
	}
	blocks, text := Render(m)
	msg := &slack.WebhookMessage{
		Text:            text,
		Blocks:          &slack.Blocks{BlockSet: blocks},
		ResponseType:    slack.ResponseTypeEphemeral,
		ReplaceOriginal: replace,
	}
	if public {
		msg.ResponseType = slack.ResponseTypeInChannel
	}
	err := a.withRetry(ctx, "post to response_url", func() error {
		return slack.PostWebhookCustomHTTPContext(ctx, url, a.httpClient, msg)
	})
	if err != nil {
		a.log.WarnContext(ctx, "deliver reply", slog.Any("err", err))
	}
}

// post sends m to channel with chat.postMessage and returns its reference.
func (a *Adapter) post(ctx context.Context, channel string, m chat.Message) (string, error) {
	if a.api == nil {
		return "", errors.New("no bot token configured")
	}
	blocks, text := Render(m)
	var ch, ts string
	err := a.withRetry(ctx, "chat.postMessage", func() error {
		var err error
		ch, ts, err = a.api.PostMessageContext(ctx, channel, slack.MsgOptionText(text, false),
			slack.MsgOptionBlocks(blocks...), slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl())
		return err
	})
	if err != nil {
		return "", err
	}
	return ref(ch, ts), nil
}

// update replaces the message at channel/ts with chat.update.
func (a *Adapter) update(ctx context.Context, channel, ts string, m chat.Message) error {
	if a.api == nil {
		return errors.New("no bot token configured")
	}
	blocks, text := Render(m)
	return a.withRetry(ctx, "chat.update", func() error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, channel, ts, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...))
		return err
	})
}
