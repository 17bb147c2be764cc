package slack

import (
	"context"

	"github.com/whypending/whypending/chat"
)

var _ chat.ChannelPoster = (*Adapter)(nil)

// PostMessage posts m to the channel ID with chat.postMessage, waiting out rate limits like
// every other delivery. It makes the Adapter the bot's chat.ChannelPoster (the digest).
func (a *Adapter) PostMessage(ctx context.Context, channel string, m chat.Message) error {
	_, err := a.post(ctx, channel, m)
	return err
}
