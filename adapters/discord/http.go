package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/whypending/whypending/chat"
)

// maxBody caps request bodies; interactions are far smaller.
const maxBody = 1 << 20

// maxSkew is how far X-Signature-Timestamp may be from the bot's clock, either way: a signed
// request older than this is a replay.
const maxSkew = 5 * time.Minute

// Mount registers the HTTP-mode route on mux (a bot.Server in serve): POST /discord/interactions.
func (a *Adapter) Mount(mux chat.Mux) {
	mux.Handle("POST /discord/interactions", http.HandlerFunc(a.ServeInteraction))
}

// verify reads the raw body and checks X-Signature-Ed25519 over X-Signature-Timestamp and
// the body with the application's public key (discordgo.VerifyInteraction), and that the
// timestamp is within 5 minutes of now. On failure it writes 401 (400 for an unreadable
// body) and returns false: Discord probes the endpoint with bad signatures and drops an
// endpoint that accepts one.
func (a *Adapter) verify(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "request body unreadable or too large", http.StatusBadRequest)
		return nil, false
	}
	reason := ""
	sig, ts := r.Header.Get("X-Signature-Ed25519"), r.Header.Get("X-Signature-Timestamp")
	switch {
	case len(a.key) == 0:
		reason = "public key not configured"
	case sig == "" || ts == "":
		reason = "missing X-Signature-Ed25519 or X-Signature-Timestamp"
	default:
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !discordgo.VerifyInteraction(r, a.key) {
			reason = "invalid signature"
		} else if sec, err := strconv.ParseInt(ts, 10, 64); err != nil || a.now().Sub(time.Unix(sec, 0)).Abs() > maxSkew {
			reason = "request timestamp outside the 5 minute window"
		}
	}
	if reason != "" {
		a.log.WarnContext(r.Context(), "rejected discord request", slog.String("reason", reason), slog.String("remote", r.RemoteAddr))
		http.Error(w, reason, http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

// ServeInteraction handles POST /discord/interactions: verify, parse, and answer within
// Discord's 3 seconds with the initial response in the HTTP body: PONG to a PING, a deferred
// response to a command or a click (their work goes to the workers, which edit it), or a
// message (a confirmation, a refusal, "busy").
func (a *Adapter) ServeInteraction(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := a.verify(w, r)
	if !ok {
		return
	}
	var i discordgo.Interaction
	if err := json.Unmarshal(body, &i); err != nil {
		http.Error(w, "malformed interaction", http.StatusBadRequest)
		return
	}
	resp, work, kind := a.dispatch(&i)
	b, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		if work != nil {
			a.queue.Submit(func(context.Context) {}) // give the reserved place back
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	a.observeAck(kind, start)
	// Hand the work over only after Discord has its response: the edit must follow it.
	if work != nil {
		a.queue.Submit(work)
	}
}
