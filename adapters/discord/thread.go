package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/ledger"
)

// Threads is Discord as a thread sees it (thread.Platform). A root is a channel message; its
// replies go in a Discord thread started on it (the thread's channel ID is the root's message
// ID), started when the first reply is posted. Every message is sent with a nonce derived from
// its mark and enforce_nonce, so a retry within Discord's nonce window returns the message the
// first try made, and carries the mark's short form in its footer ("ref 3f9a1c2b4d5e"): Discord
// does not keep nonces, so Find reads the channel (or the thread) back after since and matches
// that footer. Edits are Edit Message with the bot token.
type Threads struct{ a *Adapter }

// Threads returns the adapter as a thread.Platform.
func (a *Adapter) Threads() Threads { return Threads{a} }

// findPages bounds how many pages (100 messages each) Find reads after since.
const findPages = 20

// threadArchiveMinutes is auto_archive_duration of the threads the bot starts (a day); a
// reply to an archived thread unarchives it.
const threadArchiveMinutes = 1440

// nonceOf is the nonce of a marked message: 25 hex characters of its mark's SHA-256 (Discord
// allows 25).
func nonceOf(mark string) string {
	h := sha256.Sum256([]byte(mark))
	return hex.EncodeToString(h[:])[:25]
}

// refOf is the mark's short form shown in the footer, "ref " and 12 hex characters.
func refOf(mark string) string { return "ref " + nonceOf(mark)[:12] }

// marked renders m as one message with refOf(mark) leading its footer.
func marked(m chat.Message, mark string) Page {
	m.Footer = joinFooter(refOf(mark), m.Footer)
	return RenderOne(m)
}

func joinFooter(a, b string) string {
	if b == "" {
		return a
	}
	return a + " · " + b
}

// markedSend is Create Message with the nonce fields discordgo's MessageSend lacks.
type markedSend struct {
	Embeds          []*discordgo.MessageEmbed         `json:"embeds"`
	Components      []discordgo.MessageComponent      `json:"components"`
	AllowedMentions *discordgo.MessageAllowedMentions `json:"allowed_mentions,omitempty"`
	Nonce           string                            `json:"nonce"`
	EnforceNonce    bool                              `json:"enforce_nonce"`
}

// Post posts m in channel, or in the thread of the root message thread when it is set
// (starting that thread if the root has none yet), marked with mark.
func (t Threads) Post(ctx context.Context, channel, thread, mark string, m chat.Message) (ledger.Ref, error) {
	p := marked(m, mark)
	body := &markedSend{Embeds: []*discordgo.MessageEmbed{p.Embed}, Components: p.Components, AllowedMentions: noMentions(),
		Nonce: nonceOf(mark), EnforceNonce: true}
	if body.Components == nil {
		body.Components = []discordgo.MessageComponent{}
	}
	target := channel
	if thread != "" {
		target = thread
	}
	msg, err := t.send(ctx, target, body)
	if thread != "" && isCode(err, discordgo.ErrCodeUnknownChannel) {
		if err = t.startThread(ctx, channel, thread); err == nil {
			msg, err = t.send(ctx, target, body)
		}
	}
	if err != nil {
		return ledger.Ref{}, err
	}
	ref := ledger.Ref{Channel: target, ID: msg.ID}
	if thread == "" {
		ref.Thread = msg.ID // a thread started on a message has the message's ID
	}
	return ref, nil
}

// send makes one Create Message call in the channel (or thread) target.
func (t Threads) send(ctx context.Context, target string, body *markedSend) (*discordgo.Message, error) {
	var msg *discordgo.Message
	err := t.a.deliver.Do(ctx, "post a thread message", func() error {
		endpoint := discordgo.EndpointChannelMessages(target)
		raw, err := t.a.session.RequestWithBucketID(http.MethodPost, endpoint, body, endpoint, discordgo.WithContext(ctx))
		if err != nil {
			return err
		}
		msg = new(discordgo.Message)
		return json.Unmarshal(raw, msg)
	})
	return msg, err
}

// startThread starts the thread of the root message id in channel, named after the root's
// title; a thread another replica started already is fine.
func (t Threads) startThread(ctx context.Context, channel, id string) error {
	name := "whypending"
	err := t.a.deliver.Do(ctx, "read the thread's root message", func() error {
		root, err := t.a.session.ChannelMessage(channel, id, discordgo.WithContext(ctx))
		if err == nil && len(root.Embeds) > 0 && root.Embeds[0].Title != "" {
			name = root.Embeds[0].Title
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("start a thread on message %s: %w", id, err)
	}
	err = t.a.deliver.Do(ctx, "start a thread", func() error {
		_, err := t.a.session.MessageThreadStartComplex(channel, id, &discordgo.ThreadStart{
			Name: chat.Cut(chat.OneLine(name), 100), AutoArchiveDuration: threadArchiveMinutes}, discordgo.WithContext(ctx))
		return err
	})
	if isCode(err, discordgo.ErrCodeThreadAlreadyCreatedForThisMessage) {
		return nil
	}
	return err
}

// Find reads the channel (or the thread) back from since, oldest first, for the bot's
// message whose footer carries mark's ref. A thread that does not exist holds no message.
func (t Threads) Find(ctx context.Context, channel, thread, mark string, since time.Time) (ledger.Ref, bool, error) {
	target := channel
	if thread != "" {
		target = thread
	}
	want := refOf(mark)
	after := snowflakeAt(since)
	for range findPages {
		var msgs []*discordgo.Message
		err := t.a.deliver.Do(ctx, "read messages back", func() error {
			var err error
			msgs, err = t.a.session.ChannelMessages(target, 100, "", after, "", discordgo.WithContext(ctx))
			return err
		})
		if thread != "" && isCode(err, discordgo.ErrCodeUnknownChannel) {
			return ledger.Ref{}, false, nil
		}
		if err != nil {
			return ledger.Ref{}, false, err
		}
		for _, msg := range msgs {
			if !slices.ContainsFunc(msg.Embeds, func(e *discordgo.MessageEmbed) bool {
				return e.Footer != nil && strings.HasPrefix(e.Footer.Text, want)
			}) {
				continue
			}
			ref := ledger.Ref{Channel: target, ID: msg.ID}
			if thread == "" {
				ref.Thread = msg.ID
			}
			return ref, true, nil
		}
		if len(msgs) < 100 {
			return ledger.Ref{}, false, nil
		}
		for _, msg := range msgs {
			if later(msg.ID, after) {
				after = msg.ID
			}
		}
	}
	return ledger.Ref{}, false, fmt.Errorf("channel %s has more than %d messages since %s: cannot tell whether %s was posted",
		target, 100*findPages, since.UTC().Format(time.RFC3339), mark)
}

// Edit replaces the message at ref with m, keeping its mark's ref in the footer.
func (t Threads) Edit(ctx context.Context, ref ledger.Ref, mark string, m chat.Message) error {
	return t.a.editChannelMessage(ctx, ref.Channel, ref.ID, marked(m, mark))
}

// discordEpoch is the start of Discord snowflake time.
const discordEpoch = 1420070400000

// snowflakeAt is the smallest snowflake of a moment, for Get Channel Messages' after.
func snowflakeAt(t time.Time) string {
	ms := max(t.UnixMilli()-discordEpoch, 0)
	return strconv.FormatUint(uint64(ms)<<22, 10)
}

// later reports whether snowflake a is after b.
func later(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

// isCode reports whether err is a Discord REST error with JSON error code code.
func isCode(err error, code int) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Message != nil && re.Message.Code == code
}
