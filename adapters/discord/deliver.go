package discord

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/whypending/whypending/chat"
)

// retryAfter reports whether err is Discord's 429 and how long it asked to wait: the body's
// retry_after, else one second.
func retryAfter(err error) (time.Duration, bool) {
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
		return rl.RetryAfter, true
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusTooManyRequests {
		return time.Second, true
	}
	return 0, false
}

// editOriginal replaces the interaction's original response (for a button, the message the
// button is on) with p, through the interaction token, and returns the edited message.
func (a *Adapter) editOriginal(ctx context.Context, i *discordgo.Interaction, p Page) (*discordgo.Message, error) {
	var msg *discordgo.Message
	err := a.deliver.Do(ctx, "edit the interaction response", func() error {
		var err error
		msg, err = a.session.InteractionResponseEdit(i, editOf(p), discordgo.WithContext(ctx))
		return err
	})
	return msg, err
}

// followup posts p as a follow-up message of the interaction, only for the user when
// ephemeral, and returns it.
func (a *Adapter) followup(ctx context.Context, i *discordgo.Interaction, p Page, ephemeral bool) (*discordgo.Message, error) {
	var msg *discordgo.Message
	err := a.deliver.Do(ctx, "post a follow-up message", func() error {
		var err error
		msg, err = a.session.FollowupMessageCreate(i, true, paramsOf(p, ephemeral), discordgo.WithContext(ctx))
		return err
	})
	return msg, err
}

// editChannelMessage replaces a message the bot posted with p, with the bot token (no
// interaction token needed, so it works after the 15 minutes one lasts).
func (a *Adapter) editChannelMessage(ctx context.Context, channel, id string, p Page) error {
	e := editOf(p)
	return a.deliver.Do(ctx, "edit a channel message", func() error {
		_, err := a.session.ChannelMessageEditComplex(&discordgo.MessageEdit{
			ID: id, Channel: channel, Embeds: e.Embeds, Components: e.Components, AllowedMentions: e.AllowedMentions,
		}, discordgo.WithContext(ctx))
		return err
	})
}

var _ chat.Platform = (*Adapter)(nil)

// UpdateMessage replaces a message the adapter posted, given the reference it attached
// ("discord:<channel>/<message>"), with the bot token. The expiry sweeper uses it.
func (a *Adapter) UpdateMessage(ctx context.Context, r string, m chat.Message) error {
	channel, id, _, err := parseRef(r)
	if err != nil {
		return err
	}
	if err := a.editChannelMessage(ctx, channel, id, RenderOne(m)); err != nil {
		return err
	}
	a.editContinuations(ctx, r, m)
	return nil
}

// PostMessage posts m to a channel with the bot token (Create Message), in as many messages
// as Render makes, waiting out rate limits like every other delivery. It makes the Adapter a
// chat.ChannelPoster (the digest).
func (a *Adapter) PostMessage(ctx context.Context, channel string, m chat.Message) error {
	for _, p := range Render(m) {
		w := paramsOf(p, false)
		err := a.deliver.Do(ctx, "post a channel message", func() error {
			_, err := a.session.ChannelMessageSendComplex(channel, &discordgo.MessageSend{
				Embeds: w.Embeds, Components: w.Components, AllowedMentions: w.AllowedMentions,
			}, discordgo.WithContext(ctx))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
