package bot

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/whypending/whypending/chat"
)

// Silencer makes and ends the Alertmanager silences of alert threads (bot/alerts.Receiver).
type Silencer interface {
	// Silence silences (s.For > 0) or unsilences the group of thread s.Thread for who, once
	// however often it is asked, and says what happened.
	Silence(ctx context.Context, who chat.Principal, channel string, s chat.SilenceButton) chat.Outcome
}

// Who may silence an alert group from chat (Options.SilencePolicy).
const (
	// SilenceApprovers: the approvers of the approval policy only (the default).
	SilenceApprovers = "approvers"
	// SilenceChannel: anyone in a channel the bot answers in (channels.allowed).
	SilenceChannel = "channel"
)

// SetSilencer connects the Silence and Unsilence buttons to s (set once, before serving).
func (b *Bot) SetSilencer(s Silencer) { b.silencer = s }

// silence handles a Silence or Unsilence click.
func (b *Bot) silence(ctx context.Context, c chat.Click, s chat.SilenceButton) chat.Outcome {
	if b.silencer == nil {
		return chat.Outcome{Notice: "Silencing from chat is not configured (alertmanager.url); nothing was done."}
	}
	if err := b.maySilence(ctx, c.Principal, c.Channel); err != nil {
		b.log.InfoContext(ctx, "audit: silence refused", slog.String("user", c.Principal.ID), slog.String("platform", c.Principal.Platform),
			slog.String("channel", c.Channel), slog.String("thread", s.Thread), slog.String("why", err.Error()))
		return chat.Outcome{Notice: err.Error() + " Nothing was done."}
	}
	return b.silencer.Silence(ctx, c.Principal, c.Channel, s)
}

// maySilence is the one decision of who may silence an alert group from chat: nil when who
// may, else why not. Per-user authorization (issue 21) adds its check here.
func (b *Bot) maySilence(ctx context.Context, who chat.Principal, channel string) error {
	switch b.silencePolicy {
	case SilenceChannel:
		if allowed := b.allowedChannels[who.Platform]; len(allowed) > 0 && !slices.Contains(allowed, channel) {
			return fmt.Errorf("silences are made from the channels the bot answers in")
		}
		return nil
	default:
		ok, _, err := b.approvals.IsApprover(ctx, who)
		if err != nil {
			return fmt.Errorf("could not check whether you are an approver: %v", err)
		}
		if !ok {
			return fmt.Errorf("only approvers may silence alerts (alertmanager.silencers: approvers).")
		}
		return nil
	}
}
