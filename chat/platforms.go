package chat

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Platform is a connected chat adapter as the bot's background work sees it: the digest
// posts to channels, the expiry sweeper updates posted plan messages.
type Platform interface {
	ChannelPoster
	// UpdateMessage replaces a message the adapter posted, given the reference it attached
	// (approval.Record.MessageRef, "<platform>:…").
	UpdateMessage(ctx context.Context, ref string, m Message) error
}

// Platforms routes messages that answer no request to the adapter they belong to, keyed by
// platform name ("slack", "discord"): a channel ID goes to the platform it has the shape of
// (ChannelPlatform), a message reference to the platform it starts with.
type Platforms map[string]Platform

var _ Platform = Platforms(nil)

// PostMessage posts m to channel through the channel's platform.
func (p Platforms) PostMessage(ctx context.Context, channel string, m Message) error {
	name := ChannelPlatform(channel)
	pl, ok := p[name]
	if !ok {
		return fmt.Errorf("channel %s: no connected platform has channels like it", channel)
	}
	return pl.PostMessage(ctx, channel, m)
}

// UpdateMessage replaces the message ref names through ref's platform.
func (p Platforms) UpdateMessage(ctx context.Context, ref string, m Message) error {
	name, _, _ := strings.Cut(ref, ":")
	pl, ok := p[name]
	if !ok {
		return fmt.Errorf("message %s: platform %q is not connected", ref, name)
	}
	return pl.UpdateMessage(ctx, ref, m)
}

// ChannelPoster posts a message to a chat channel. The Slack adapter implements it with
// chat.postMessage, the Discord adapter with Create Message; Platforms picks the adapter by
// the channel ID's shape.
type ChannelPoster interface {
	PostMessage(ctx context.Context, channel string, m Message) error
}

var (
	slackChannelID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
	// discordID is a Discord snowflake: a 64-bit integer in decimal, 17 to 20 digits for
	// anything created since 2015.
	discordID = regexp.MustCompile(`^[1-9][0-9]{16,19}$`)
)

// ChannelPlatform names the platform a configured channel ID belongs to by its shape: "slack"
// (C…, G…, D…), "discord" (a snowflake), or "" for neither.
func ChannelPlatform(id string) string {
	switch {
	case slackChannelID.MatchString(id):
		return "slack"
	case discordID.MatchString(id):
		return "discord"
	}
	return ""
}
