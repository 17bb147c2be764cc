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

// SocketReport is told how a Socket Mode connection stands: err is nil once Slack has sent
// its hello on the socket (connected and ready for envelopes), else why there is no usable
// connection; retryAt is when slack-go tries again (zero when it says nothing, or at once).
type SocketReport func(err error, retryAt time.Time)

// errSocketEnded is reported when a connection that was open has ended and slack-go opens a
// new one (Slack closed it or asked to disconnect, a read failed, or Slack's pings stopped).
var errSocketEnded = errors.New("socket mode connection ended; reconnecting")

// RunSocketMode connects through Socket Mode (the client is built with the bot token and
// slack.OptionAppLevelToken) and handles slash commands and clicks with the same workers as
// HTTP mode, acknowledging each envelope on the socket. It returns when ctx is done or the
// client stops with an error. Run must be running too.
//
// report (nil: not reported) is called from client.Events as the connection changes (see
// reportConnection): up on Slack's hello, down on a failed attempt and when a connection
// ends. slack-go retries failed attempts itself, so it stays down, with the reason, until
// Slack says hello; when RunSocketMode returns, the connection is gone, and the caller
// records why.
func (a *Adapter) RunSocketMode(ctx context.Context, client *socketmode.Client, report SocketReport) error {
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
			if !reportConnection(evt, report) {
				a.HandleSocketEvent(ctx, evt, client)
			}
		}
	}
}

// reportConnection tells report (nil: nobody) what evt says of the connection, and says
// whether evt was about the connection. What slack-go v0.35 sends on client.Events, and when:
//   - connecting before each attempt (apps.connections.open, then the WebSocket dial);
//     attempt 1 of any connection but the first means the one before it ended, and is
//     reported; later attempts follow a connection_error, which stands;
//   - connection_error when an attempt failed; slack-go tries again after its Backoff;
//   - invalid_auth only when apps.connections.open answered 404 (RunContext then returns);
//     Slack's own invalid_auth, not_authed, account_inactive and token_revoked errors send
//     no event: RunContext returns them;
//   - connected when the WebSocket is open, before Slack's hello: not yet reported as up;
//   - hello when Slack says the connection is ready: up.
//
// Slack's disconnect request is handled inside slack-go, which reconnects without sending
// an event: the next connecting says so.
func reportConnection(evt socketmode.Event, report SocketReport) bool {
	if report == nil {
		report = func(error, time.Time) {}
	}
	switch evt.Type {
	case socketmode.EventTypeHello:
		report(nil, time.Time{})
	case socketmode.EventTypeConnecting:
		if c, _ := evt.Data.(*slack.ConnectingEvent); c != nil && c.Attempt == 1 && c.ConnectionCount > 0 {
			report(errSocketEnded, time.Time{})
		}
	case socketmode.EventTypeConnected:
	case socketmode.EventTypeConnectionError:
		ce, _ := evt.Data.(*slack.ConnectionErrorEvent)
		if ce == nil || ce.ErrorObj == nil {
			report(errors.New("socket mode connection failed"), time.Time{})
			break
		}
		report(fmt.Errorf("socket mode connection failed: %w", ce.ErrorObj), time.Now().Add(ce.Backoff))
	case socketmode.EventTypeInvalidAuth:
		report(errors.New("socket mode: apps.connections.open answered 404 Not Found"), time.Time{})
	default:
		return false
	}
	return true
}

// HandleSocketEvent handles one Socket Mode event: slash commands are acknowledged with the
// ephemeral "Working on it…" payload, clicks with an empty payload, both within the 3 s
// rule; the work goes to the worker pool. Other events are ignored (RunSocketMode reports
// the connection's own).
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
	}
}

func (a *Adapter) ack(ctx context.Context, acker Acker, envelopeID string, payload any) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := acker.AckCtx(ctx, envelopeID, payload); err != nil {
		a.log.WarnContext(ctx, "socket mode ack failed", slog.Any("err", err))
	}
}
