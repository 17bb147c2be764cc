package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/slack-go/slack"

	"github.com/whypending/whypending/chat"
)

// maxBody caps request bodies; Slack's slash commands and block_actions payloads are far
// smaller.
const maxBody = 1 << 20

// ackText is the immediate, ephemeral reply to a slash command.
const ackText = "Working on it…"

// busyText is the reply when the work queue is full.
const busyText = "whypending is busy right now; nothing was done. Please try again in a minute."

// ack is the immediate reply to a slash command: just the fields Slack reads (slack.Msg
// would add null blocks and empty metadata).
type ack struct {
	ResponseType string `json:"response_type"`
	Text         string `json:"text"`
}

// ephemeral returns an ack only the user who typed the command sees.
func ephemeral(text string) ack { return ack{ResponseType: slack.ResponseTypeEphemeral, Text: text} }

// Mount registers the HTTP-mode routes on mux (a bot.Server in serve): POST /slack/commands and
// POST /slack/interactions.
func (a *Adapter) Mount(mux chat.Mux) {
	mux.Handle("POST /slack/commands", http.HandlerFunc(a.ServeCommand))
	mux.Handle("POST /slack/interactions", http.HandlerFunc(a.ServeInteraction))
}

// verify reads the raw body and checks X-Slack-Signature over it with the signing secret
// and a ±5 minute timestamp window (slack.NewSecretsVerifier). On failure it writes 401
// (400 for an unreadable body) and returns false.
func (a *Adapter) verify(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "request body unreadable or too large", http.StatusBadRequest)
		return nil, false
	}
	sv, err := slack.NewSecretsVerifier(r.Header, a.secret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		reason := "invalid signature"
		switch {
		case errors.Is(err, slack.ErrExpiredTimestamp):
			reason = "request timestamp outside the 5 minute window"
		case errors.Is(err, slack.ErrMissingHeaders):
			reason = "missing X-Slack-Signature or X-Slack-Request-Timestamp"
		case errors.Is(err, slack.ErrInvalidConfiguration):
			reason = "signing secret not configured"
		}
		a.log.WarnContext(r.Context(), "rejected slack request", slog.String("path", r.URL.Path),
			slog.String("reason", reason), slog.String("remote", r.RemoteAddr))
		http.Error(w, reason, http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

// ServeCommand handles POST /slack/commands: verify, parse, enqueue, and acknowledge with
// an ephemeral "Working on it…" (Slack's 3 second rule). The answer goes to response_url.
func (a *Adapter) ServeCommand(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := a.verify(w, r)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	cmd, err := slack.SlashCommandParse(r)
	if err != nil {
		http.Error(w, "malformed slash command", http.StatusBadRequest)
		return
	}
	if !a.reserve() {
		writeJSON(w, ephemeral(busyText))
		a.observeAck("command", start)
		return
	}
	// Acknowledge first, then hand the work over: the answer starts only after Slack has its
	// 200, so a busy worker pool never delays an ack.
	writeJSON(w, ephemeral(ackText))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	a.observeAck("command", start)
	a.submit(job{command: commandJobFor(cmd)})
}

// commandJobFor turns a parsed slash command into a job.
func commandJobFor(cmd slack.SlashCommand) *commandJob {
	name, args := chat.ParseCommand(cmd.Command, cmd.Text)
	return &commandJob{
		req: chat.Request{
			Principal: chat.Principal{Platform: "slack", Team: cmd.TeamID, ID: cmd.UserID, Name: cmd.UserName},
			Channel:   cmd.ChannelID,
			Command:   name,
			Args:      args,
		},
		responseURL: cmd.ResponseURL,
	}
}

// ServeInteraction handles POST /slack/interactions (block_actions): verify, parse,
// enqueue, and acknowledge with an empty 200. Outcomes update the message or reply to the
// clicker through response_url.
func (a *Adapter) ServeInteraction(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := a.verify(w, r)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	cb, err := slack.InteractionCallbackParse(r)
	if err != nil {
		http.Error(w, "malformed interaction payload", http.StatusBadRequest)
		return
	}
	if cj := clickJobFor(&cb); cj != nil {
		if !a.enqueue(job{click: cj}) {
			a.log.WarnContext(r.Context(), "work queue full; click dropped", slog.String("action", cj.click.ActionID))
		}
	}
	w.WriteHeader(http.StatusOK)
	a.observeAck("interaction", start)
}

// clickJobFor turns a block_actions callback into a job; nil for other interaction types.
func clickJobFor(cb *slack.InteractionCallback) *clickJob {
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		return nil
	}
	act := cb.ActionCallback.BlockActions[0]
	channel := cb.Channel.ID
	if channel == "" {
		channel = cb.Container.ChannelID
	}
	cj := &clickJob{
		click: chat.Click{
			Principal: chat.Principal{Platform: "slack", Team: cb.Team.ID, ID: cb.User.ID, Name: cb.User.Name},
			Channel:   channel,
			ActionID:  ParseActionID(act.ActionID),
			Value:     act.Value,
		},
		responseURL: cb.ResponseURL,
	}
	if !cb.Container.IsEphemeral {
		cj.channelID = cb.Container.ChannelID
		cj.messageTS = cb.Container.MessageTs
		if cj.messageTS == "" {
			cj.messageTS = cb.Message.Timestamp
		}
	}
	return cj
}

func (a *Adapter) observeAck(kind string, start time.Time) {
	if a.metrics != nil {
		a.metrics.AckSeconds.WithLabelValues("slack", kind).Observe(time.Since(start).Seconds())
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
