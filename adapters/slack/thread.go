package slack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/slack-go/slack"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/ledger"
)

// Threads is Slack as a thread sees it (thread.Platform): it posts a thread's messages with
// chat.postMessage, each marked with message metadata (event type MetadataType, payload
// {"mark": …}), a reply with thread_ts set to its root's ts; it edits with chat.update; and it
// finds a message whose post had no answer (a crash, a timeout) by its mark, in
// conversations.history for a root and conversations.replies for a reply, both with
// include_all_metadata. Reading history needs the scopes channels:history (public channels)
// and groups:history (private ones).
type Threads struct{ a *Adapter }

// Threads returns the adapter as a thread.Platform.
func (a *Adapter) Threads() Threads { return Threads{a} }

// MetadataType is the event type of the metadata on every thread message the bot posts.
const MetadataType = "whypending_notification"

// findPages bounds how many pages (200 messages each) Find reads back to since.
const findPages = 10

func metadata(mark string) slack.MsgOption {
	return slack.MsgOptionMetadata(slack.SlackMetadata{EventType: MetadataType, EventPayload: map[string]any{"mark": mark}})
}

// Post posts m in channel (in thread, a root's ts, when it is set), marked with mark.
func (t Threads) Post(ctx context.Context, channel, thread, mark string, m chat.Message) (ledger.Ref, error) {
	if t.a.api == nil {
		return ledger.Ref{}, errors.New("no bot token configured")
	}
	blocks, text := Render(m)
	opts := []slack.MsgOption{slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...),
		slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl(), metadata(mark)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	var ch, ts string
	err := t.a.withRetry(ctx, "chat.postMessage", func() error {
		var err error
		ch, ts, err = t.a.api.PostMessageContext(ctx, channel, opts...)
		return err
	})
	if err != nil {
		return ledger.Ref{}, err
	}
	ref := ledger.Ref{Channel: ch, ID: ts}
	if thread == "" {
		ref.Thread = ts
	}
	return ref, nil
}

// Find looks for the message marked with mark posted since: in the channel's history for a
// root, in the thread's replies for a reply.
func (t Threads) Find(ctx context.Context, channel, thread, mark string, since time.Time) (ledger.Ref, bool, error) {
	if t.a.api == nil {
		return ledger.Ref{}, false, errors.New("no bot token configured")
	}
	oldest := strconv.FormatFloat(float64(since.UnixMicro())/1e6, 'f', 6, 64)
	cursor := ""
	for range findPages {
		var msgs []slack.Message
		var next string
		err := t.a.withRetry(ctx, "read messages back", func() error {
			if thread == "" {
				resp, err := t.a.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
					ChannelID: channel, Oldest: oldest, Limit: 200, Cursor: cursor, IncludeAllMetadata: true})
				if err != nil {
					return err
				}
				msgs, next = resp.Messages, resp.ResponseMetaData.NextCursor
				return nil
			}
			var err error
			msgs, _, next, err = t.a.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: channel, Timestamp: thread, Oldest: oldest, Limit: 200, Cursor: cursor, IncludeAllMetadata: true})
			return err
		})
		if err != nil {
			return ledger.Ref{}, false, err
		}
		for _, msg := range msgs {
			if msg.Metadata.EventType != MetadataType || msg.Metadata.EventPayload["mark"] != mark {
				continue
			}
			ref := ledger.Ref{Channel: channel, ID: msg.Timestamp}
			if thread == "" {
				ref.Thread = msg.Timestamp
			}
			return ref, true, nil
		}
		if next == "" {
			return ledger.Ref{}, false, nil
		}
		cursor = next
	}
	return ledger.Ref{}, false, fmt.Errorf("channel %s has more than %d messages since %s: cannot tell whether %s was posted",
		channel, 200*findPages, since.UTC().Format(time.RFC3339), mark)
}

// Edit replaces the message at ref with m (chat.update), keeping its mark.
func (t Threads) Edit(ctx context.Context, ref ledger.Ref, mark string, m chat.Message) error {
	if t.a.api == nil {
		return errors.New("no bot token configured")
	}
	blocks, text := Render(m)
	return t.a.withRetry(ctx, "chat.update", func() error {
		_, _, _, err := t.a.api.UpdateMessageContext(ctx, ref.Channel, ref.ID, slack.MsgOptionText(text, false),
			slack.MsgOptionBlocks(blocks...), metadata(mark))
		return err
	})
}
