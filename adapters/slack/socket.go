package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// Acker acknowledges a Socket Mode envelope; *socketmode.Client implements it.
type Acker interface {
	AckCtx(ctx context.Context, envelopeID string, payload any) error
}

// RunSocketMode connects through Socket Mode (the client is built with the bot token and
// slack.OptionAppLevelToken) and handles slash commands and clicks with the same workers as
// HTTP mode, acknowledging each envelope on the socket. It returns when ctx is done or the
// client stops with an error. Run must be running too.
func (a *Adapter) RunSocketMode(ctx context.Context, client *socketmode.Client) error {
	errc := make(chan error, 1)
	go func() { errc <- client.RunContext(ctx) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if err == nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return fmt.Errorf("socket mode: %w", err)
		case evt := <-client.Events:
			a.HandleSocketEvent(ctx, evt, client)
		}
	}
}

// HandleSocketEvent handles one Socket Mode event: slash commands are acknowledged with the
// ephemeral "Working on it…" payload, clicks with an empty payload, both within the 3 s
// rule; the work goes to the worker pool. Other events are ignored.
func (a *Adapter) HandleSocketEvent(ctx context.Context, evt socketmode.Event, acker Acker) {
	start := time.Now()
	switch evt.Type {
	case socketmode.EventTypeSlashCommand:
		cmd, ok := evt.Data.(slack.SlashCommand)
		if !ok || evt.Request == nil {
			return
		}
		text := ackText
		if !a.enqueue(job{command: commandJobFor(cmd)}) {
			text = busyText
		}
		a.ack(ctx, acker, evt.Request.EnvelopeID, ephemeral(text))
		a.observeAck("command", start)
	case socketmode.EventTypeInteractive:
		cb, ok := evt.Data.(slack.InteractionCallback)
		if !ok || evt.Request == nil {
			return
		}
		if cj := clickJobFor(&cb); cj != nil && !a.enqueue(job{click: cj}) {
			a.log.WarnContext(ctx, "work queue full; click dropped", slog.String("action", cj.click.ActionID))
		}
		a.ack(ctx, acker, evt.Request.EnvelopeID, nil)
		a.observeAck("interaction", start)
	case socketmode.EventTypeConnectionError, socketmode.EventTypeInvalidAuth:
		a.log.WarnContext(ctx, "socket mode connection problem", slog.String("event", string(evt.Type)))
	}
}

func (a *Adapter) ack(ctx context.Context, acker Acker, envelopeID string, payload any) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := acker.AckCtx(ctx, envelopeID, payload); err != nil {
		a.log.WarnContext(ctx, "socket mode ack failed", slog.Any("err", err))
	}
}
