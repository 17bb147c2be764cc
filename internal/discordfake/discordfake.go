// Package discordfake is Discord's REST API v9 for tests: an HTTP server that speaks the wire
// format of the endpoints the Discord adapter calls, records every call and keeps what the bot
// posted as Discord does (messages by channel, threads started on messages, nonces); with
// helpers that build interactions as Discord sends them and sign them with the application's
// ed25519 key. Only tests import it.
package discordfake

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/whypending/whypending/adapters/discord"
)

// IDs of the test application and guild.
const (
	AppID     = "1100000000000000001"
	GuildID   = "1200000000000000001"
	ChannelID = "1300000000000000001"
	BotToken  = "test-bot-token"
)

// Fake is Discord's REST API for tests: it speaks the wire format of the endpoints
// the adapter calls (API v9), records every call, keeps registered commands, and answers
// 429 with a retry_after body when asked to.
type Fake struct {
	srv *httptest.Server

	mu       sync.Mutex
	calls    []Call
	byToken  map[string][]int                           // interaction token -> indexes in calls
	commands map[string][]*discordgo.ApplicationCommand // by "<app>/<guild>"
	commIDs  map[string]string                          // command ID by "<app>/<guild>/<name>"
	channels map[string]string                          // interaction token -> channel ID
	original map[string]string                          // interaction token -> message ID of @original
	limit    map[string]int                             // route -> 429 answers still to give
	acked    map[string]bool                            // interaction IDs with a response
	nextID   atomic.Int64

	// What the bot token posted, as Discord keeps it: messages by channel (a thread is a
	// channel whose ID is its root message's), the threads started, and the nonces seen.
	stored  map[string][]*discordgo.Message
	msgIDs  map[string]bool               // IDs of every stored message
	threads map[string]string             // thread ID -> the channel of its root message
	nonces  map[string]*discordgo.Message // "<channel>/<nonce>" -> the message it made
	// LoseAnswers makes the next N channel-send calls store the message and answer 500, as
	// when the answer is lost on its way back.
	LoseAnswers atomic.Int32
}

// Call is one recorded request.
type Call struct {
	Method, Route, Path string
	Auth                string
	Status              int
	Body                []byte
	At                  time.Time
	// Message is the message the call created or edited (nil for others).
	Message *discordgo.Message
}

func New(t testing.TB) *Fake {
	t.Helper()
	f := &Fake{
		commands: map[string][]*discordgo.ApplicationCommand{}, commIDs: map[string]string{},
		channels: map[string]string{}, original: map[string]string{}, limit: map[string]int{}, byToken: map[string][]int{},
		acked: map[string]bool{}, stored: map[string][]*discordgo.Message{}, msgIDs: map[string]bool{},
		threads: map[string]string{}, nonces: map[string]*discordgo.Message{},
	}
	// IDs are snowflakes of the fake's start (Discord epoch 2015), as Discord's carry the time
	// they were made: Find reads a channel back "after" a time's snowflake.
	f.nextID.Store((time.Now().UnixMilli() - 1420070400000) << 22)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v9/interactions/{id}/{token}/callback", f.handle("callback", false, f.callback))
	mux.HandleFunc("PATCH /api/v9/webhooks/{app}/{token}/messages/{msg}", f.handle("webhook-edit", false, f.webhookEdit))
	mux.HandleFunc("POST /api/v9/webhooks/{app}/{token}", f.handle("followup", false, f.followup))
	mux.HandleFunc("DELETE /api/v9/webhooks/{app}/{token}/messages/{msg}", f.handle("webhook-delete", false, f.webhookDelete))
	mux.HandleFunc("PATCH /api/v9/channels/{channel}/messages/{msg}", f.handle("channel-edit", true, f.channelEdit))
	mux.HandleFunc("POST /api/v9/channels/{channel}/messages", f.handle("channel-send", true, f.channelSend))
	mux.HandleFunc("GET /api/v9/channels/{channel}/messages", f.handle("channel-read", true, f.channelRead))
	mux.HandleFunc("GET /api/v9/channels/{channel}/messages/{msg}", f.handle("message-get", true, f.messageGet))
	mux.HandleFunc("POST /api/v9/channels/{channel}/messages/{msg}/threads", f.handle("thread-start", true, f.threadStart))
	mux.HandleFunc("PUT /api/v9/applications/{app}/guilds/{guild}/commands", f.handle("commands", true, f.putCommands))
	mux.HandleFunc("PUT /api/v9/applications/{app}/commands", f.handle("commands", true, f.putCommands))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the fake's base URL: discord.apiURL in a config is URL()+"/".
func (f *Fake) URL() string { return f.srv.URL }

// Session returns a REST session for the bot token pointed at the fake through the
// adapter's apiURL rewrite (the way discord.apiURL works in production).
func (f *Fake) Session(t testing.TB) *discordgo.Session {
	t.Helper()
	s, err := discord.NewSession(BotToken, f.srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// RateLimit makes the next n calls of route answer 429.
func (f *Fake) RateLimit(route string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limit[route] = n
}

// Expect tells the fake which channel an interaction token's messages are in (Discord knows
// it from the interaction).
func (f *Fake) Expect(token, channel string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[token] = channel
}

type handler func(r *http.Request, body []byte) (status int, reply any, msg *discordgo.Message)

// handle records the call, checks the bot token where Discord needs one, answers 429 when
// asked to, and runs h.
func (f *Fake) handle(route string, needsBot bool, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		limited := f.limit[route] > 0
		if limited {
			f.limit[route]--
		}
		f.mu.Unlock()
		if limited {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"message": "You are being rate limited.", "retry_after": 0.25, "global": false}`)
			return
		}
		if needsBot && r.Header.Get("Authorization") != "Bot "+BotToken {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"message": "401: Unauthorized", "code": 0}`)
			return
		}
		status, reply, msg := h(r, body)
		f.mu.Lock()
		f.calls = append(f.calls, Call{Method: r.Method, Route: route, Path: r.URL.Path, Auth: r.Header.Get("Authorization"),
			Status: status, Body: body, At: time.Now(), Message: msg})
		if token := r.PathValue("token"); token != "" {
			f.byToken[token] = append(f.byToken[token], len(f.calls)-1)
		}
		f.mu.Unlock()
		if reply == nil {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(reply)
	}
}

func (f *Fake) id() string { return strconv.FormatInt(f.nextID.Add(1), 10) }

// callback is Create Interaction Response: an interaction takes one response.
func (f *Fake) callback(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	var resp struct {
		Type discordgo.InteractionResponseType `json:"type"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Type == 0 {
		return http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035}, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.acked[r.PathValue("id")] {
		return http.StatusBadRequest, map[string]any{"message": "Interaction has already been acknowledged.", "code": 40060}, nil
	}
	f.acked[r.PathValue("id")] = true
	return http.StatusNoContent, nil, nil
}

// message builds the message Discord returns for a create or edit with body.
func (f *Fake) message(id, channel string, body []byte, flags discordgo.MessageFlags) (*discordgo.Message, error) {
	var content struct {
		Embeds          []*discordgo.MessageEmbed `json:"embeds"`
		Components      json.RawMessage           `json:"components"`
		AllowedMentions *struct {
			Parse []string `json:"parse"`
		} `json:"allowed_mentions"`
		Flags discordgo.MessageFlags `json:"flags"`
	}
	if err := json.Unmarshal(body, &content); err != nil {
		return nil, err
	}
	raw := map[string]any{
		"id": id, "channel_id": channel, "type": 0, "content": "", "embeds": content.Embeds,
		"timestamp": time.Now().UTC().Format(time.RFC3339), "flags": flags | content.Flags,
		"author": map[string]any{"id": AppID, "username": "whypending", "bot": true, "discriminator": "0"},
	}
	if len(content.Components) > 0 {
		raw["components"] = content.Components
	}
	b, _ := json.Marshal(raw)
	var m discordgo.Message
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

func (f *Fake) webhookEdit(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	token, id := r.PathValue("token"), r.PathValue("msg")
	f.mu.Lock()
	channel := f.channels[token]
	if id == "@original" {
		if f.original[token] == "" {
			f.original[token] = f.id()
		}
		id = f.original[token]
	}
	f.mu.Unlock()
	if channel == "" {
		return http.StatusNotFound, map[string]any{"message": "Unknown Webhook", "code": 10015}, nil
	}
	m, err := f.message(id, channel, body, 0)
	if err != nil {
		return http.StatusBadRequest, map[string]any{"message": err.Error(), "code": 50035}, nil
	}
	return http.StatusOK, m, m
}

// webhookDelete deletes a message of the interaction (@original: its response), as Discord
// answers: 204 No Content.
func (f *Fake) webhookDelete(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.channels[r.PathValue("token")] == "" {
		return http.StatusNotFound, map[string]any{"message": "Unknown Webhook", "code": 10015}, nil
	}
	return http.StatusNoContent, nil, nil
}

func (f *Fake) followup(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	f.mu.Lock()
	channel := f.channels[r.PathValue("token")]
	f.mu.Unlock()
	if channel == "" {
		return http.StatusNotFound, map[string]any{"message": "Unknown Webhook", "code": 10015}, nil
	}
	m, err := f.message(f.id(), channel, body, 0)
	if err != nil {
		return http.StatusBadRequest, map[string]any{"message": err.Error(), "code": 50035}, nil
	}
	if r.URL.Query().Get("wait") != "true" {
		return http.StatusNoContent, nil, m
	}
	return http.StatusOK, m, m
}

func (f *Fake) channelEdit(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	m, err := f.message(r.PathValue("msg"), r.PathValue("channel"), body, 0)
	if err != nil {
		return http.StatusBadRequest, map[string]any{"message": err.Error(), "code": 50035}, nil
	}
	f.mu.Lock()
	for _, old := range f.stored[m.ChannelID] {
		if old.ID == m.ID {
			old.Embeds, old.Components = m.Embeds, m.Components
		}
	}
	f.mu.Unlock()
	return http.StatusOK, m, m
}

// unknownChannel is Discord's answer for a channel that does not exist, such as the thread of
// a message nobody started one on.
var unknownChannel = map[string]any{"message": "Unknown Channel", "code": 10003}

// channelSend is Create Message: a message ID as the channel is a thread, which must have
// been started; with enforce_nonce, a nonce this channel saw returns that message and makes
// none.
func (f *Fake) channelSend(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	channel := r.PathValue("channel")
	var marks struct {
		Nonce        string `json:"nonce"`
		EnforceNonce bool   `json:"enforce_nonce"`
	}
	if err := json.Unmarshal(body, &marks); err != nil {
		return http.StatusBadRequest, map[string]any{"message": err.Error(), "code": 50035}, nil
	}
	f.mu.Lock()
	if f.msgIDs[channel] && f.threads[channel] == "" {
		f.mu.Unlock()
		return http.StatusNotFound, unknownChannel, nil
	}
	if m := f.nonces[channel+"/"+marks.Nonce]; marks.EnforceNonce && marks.Nonce != "" && m != nil {
		f.mu.Unlock()
		return http.StatusOK, m, nil
	}
	f.mu.Unlock()
	m, err := f.message(f.id(), channel, body, 0)
	if err != nil {
		return http.StatusBadRequest, map[string]any{"message": err.Error(), "code": 50035}, nil
	}
	f.mu.Lock()
	f.stored[channel] = append(f.stored[channel], m)
	f.msgIDs[m.ID] = true
	if marks.Nonce != "" {
		f.nonces[channel+"/"+marks.Nonce] = m
	}
	f.mu.Unlock()
	if f.LoseAnswers.Load() > 0 {
		f.LoseAnswers.Add(-1)
		return http.StatusInternalServerError, map[string]any{"message": "500: Internal Server Error", "code": 0}, m
	}
	return http.StatusOK, m, m
}

// channelRead is Get Channel Messages with after and limit: the limit oldest messages after
// the given ID, newest first, as Discord returns them.
func (f *Fake) channelRead(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	channel := r.PathValue("channel")
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit <= 0 || limit > 100 {
		limit = 50
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.msgIDs[channel] && f.threads[channel] == "" {
		return http.StatusNotFound, unknownChannel, nil
	}
	out := []*discordgo.Message{}
	for _, m := range f.stored[channel] {
		if id, _ := strconv.ParseUint(m.ID, 10, 64); id > after && len(out) < limit {
			out = append(out, m)
		}
	}
	slices.Reverse(out)
	return http.StatusOK, out, nil
}

// messageGet is Get Channel Message.
func (f *Fake) messageGet(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.stored[r.PathValue("channel")] {
		if m.ID == r.PathValue("msg") {
			return http.StatusOK, m, nil
		}
	}
	return http.StatusNotFound, map[string]any{"message": "Unknown Message", "code": 10008}, nil
}

// threadStart is Start Thread from Message: the thread's ID is the message's; a message has at
// most one thread.
func (f *Fake) threadStart(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	var start discordgo.ThreadStart
	if err := json.Unmarshal(body, &start); err != nil || start.Name == "" || len(start.Name) > 100 {
		return http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035}, nil
	}
	channel, id := r.PathValue("channel"), r.PathValue("msg")
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.ContainsFunc(f.stored[channel], func(m *discordgo.Message) bool { return m.ID == id }) {
		return http.StatusNotFound, map[string]any{"message": "Unknown Message", "code": 10008}, nil
	}
	if f.threads[id] != "" {
		return http.StatusBadRequest, map[string]any{"message": "A thread has already been created for this message", "code": 160004}, nil
	}
	f.threads[id] = channel
	return http.StatusCreated, map[string]any{"id": id, "type": 11, "parent_id": channel, "name": start.Name, "guild_id": GuildID}, nil
}

// Thread returns the messages of a channel or thread, oldest first.
func (f *Fake) Thread(channel string) []*discordgo.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.stored[channel])
}

// putCommands is Bulk Overwrite: the set becomes exactly the body's commands; a command
// whose name was registered before keeps its ID, as Discord does.
func (f *Fake) putCommands(r *http.Request, body []byte) (int, any, *discordgo.Message) {
	var cmds []*discordgo.ApplicationCommand
	if err := json.Unmarshal(body, &cmds); err != nil {
		return http.StatusBadRequest, map[string]any{"message": err.Error(), "code": 50035}, nil
	}
	key := r.PathValue("app") + "/" + r.PathValue("guild")
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cmds {
		k := key + "/" + c.Name
		if f.commIDs[k] == "" {
			f.commIDs[k] = f.id()
		}
		c.ID, c.ApplicationID, c.GuildID, c.Version = f.commIDs[k], r.PathValue("app"), r.PathValue("guild"), "1"
	}
	f.commands[key] = cmds
	return http.StatusOK, cmds, nil
}

// Commands returns the registered commands, by "<app>/<guild>".
func (f *Fake) Commands() map[string][]*discordgo.ApplicationCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]*discordgo.ApplicationCommand{}
	for k, cmds := range f.commands {
		out[k] = slices.Clone(cmds)
	}
	return out
}

// Snapshot returns the recorded calls of route ("" for all).
func (f *Fake) Snapshot(route string) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, c := range f.calls {
		if route == "" || c.Route == route {
			out = append(out, c)
		}
	}
	return out
}

// CallsFor returns the calls made with an interaction token, in order.
func (f *Fake) CallsFor(token string) []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Call
	for _, i := range f.byToken[token] {
		out = append(out, f.calls[i])
	}
	return out
}

// ChannelEdits returns the bot-token edits of one message.
func (f *Fake) ChannelEdits(messageID string) []Call {
	var out []Call
	for _, c := range f.Snapshot("channel-edit") {
		if strings.HasSuffix(c.Path, "/"+messageID) {
			out = append(out, c)
		}
	}
	return out
}

// MessageText flattens what a user sees of a message: embed titles, descriptions, field
// names and values, footers and button labels.
func MessageText(m *discordgo.Message) string {
	var parts []string
	for _, e := range m.Embeds {
		parts = append(parts, e.Title, e.Description)
		for _, f := range e.Fields {
			parts = append(parts, f.Name, f.Value)
		}
		if e.Footer != nil {
			parts = append(parts, e.Footer.Text)
		}
	}
	for _, b := range ButtonsOf(m) {
		parts = append(parts, "["+b.Label+"]")
	}
	return strings.Join(parts, "\n")
}

// ButtonsOf lists a message's buttons.
func ButtonsOf(m *discordgo.Message) []*discordgo.Button {
	var out []*discordgo.Button
	for _, row := range m.Components {
		if r, ok := row.(*discordgo.ActionsRow); ok {
			for _, c := range r.Components {
				if b, ok := c.(*discordgo.Button); ok {
					out = append(out, b)
				}
			}
		}
	}
	return out
}

// NoMentionsSent checks a message body carried allowed_mentions {parse: []}.
func NoMentionsSent(t testing.TB, c Call) {
	t.Helper()
	var body struct {
		AllowedMentions *struct {
			Parse *[]string `json:"parse"`
		} `json:"allowed_mentions"`
	}
	if err := json.Unmarshal(c.Body, &body); err != nil {
		t.Fatalf("%s %s: %v", c.Method, c.Path, err)
	}
	if body.AllowedMentions == nil || body.AllowedMentions.Parse == nil || len(*body.AllowedMentions.Parse) != 0 {
		t.Errorf("%s %s sent allowed_mentions %s, want {\"parse\": []}", c.Method, c.Path, c.Body)
	}
}

// Member is a guild Member (or, with dm set, a user in a direct message).
type Member struct {
	ID, Name string
	Roles    []string
	DM       bool
}

// interactionSeq numbers interactions, for unique IDs and tokens.
var interactionSeq atomic.Int64

// InteractionJSON is an interaction as Discord sends it: real field names and types,
// Member.permissions as a string, a fresh token.
func InteractionJSON(t testing.TB, typ discordgo.InteractionType, data any, who Member, message *discordgo.Message) (token string, body []byte) {
	t.Helper()
	n := interactionSeq.Add(1)
	token = fmt.Sprintf("aW50ZXJhY3Rpb246%d", n)
	user := map[string]any{"id": who.ID, "username": who.Name, "global_name": strings.ToUpper(who.Name[:1]) + who.Name[1:],
		"discriminator": "0", "avatar": nil, "public_flags": 0}
	roles := who.Roles
	if roles == nil {
		roles = []string{}
	}
	in := map[string]any{
		"id": fmt.Sprint(1800000000000000000 + n), "application_id": AppID, "type": typ, "data": data,
		"channel_id": ChannelID, "token": token, "version": 1, "locale": "en-US",
		"app_permissions": "2248473465835073", "entitlements": []any{},
	}
	if who.DM {
		in["user"] = user
		in["context"] = 1
		in["channel"] = map[string]any{"id": ChannelID, "type": 1}
		in["authorizing_integration_owners"] = map[string]any{"1": who.ID}
	} else {
		in["guild_id"] = GuildID
		in["guild_locale"] = "en-US"
		in["context"] = 0
		in["channel"] = map[string]any{"id": ChannelID, "type": 0, "guild_id": GuildID, "name": "ops"}
		in["authorizing_integration_owners"] = map[string]any{"0": GuildID}
		in["Member"] = map[string]any{
			"user": user, "roles": roles, "nick": nil, "avatar": nil, "premium_since": nil,
			"joined_at": "2025-01-15T09:30:00.000000+00:00", "deaf": false, "mute": false, "flags": 0,
			"pending": false, "permissions": "2248473465835073", "communication_disabled_until": nil,
		}
	}
	if message != nil {
		in["message"] = MessageJSON(t, message)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return token, b
}

// MessageJSON is m as Discord sends it inside an interaction (discordgo does not marshal a
// message's components, so they are added here).
func MessageJSON(t testing.TB, m *discordgo.Message) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	out["components"] = m.Components
	return out
}

// CommandData is the data of a slash command: opts are option name/value pairs; sub, when
// set, is the subcommand they belong to.
func CommandData(name, sub string, opts ...string) map[string]any {
	var options []map[string]any
	for i := 0; i+1 < len(opts); i += 2 {
		options = append(options, map[string]any{"name": opts[i], "type": 3, "value": opts[i+1]})
	}
	data := map[string]any{"id": "1500000000000000001", "name": name, "type": 1, "guild_id": GuildID}
	if sub != "" {
		data["options"] = []map[string]any{{"name": sub, "type": 1, "options": options}}
	} else if options != nil {
		data["options"] = options
	}
	return data
}

// ClickData is the data of a button click.
func ClickData(customID string) map[string]any {
	return map[string]any{"custom_id": customID, "component_type": 2}
}

// Signer signs interactions with the application's key pair.
type Signer struct {
	Pub  ed25519.PublicKey
	Priv ed25519.PrivateKey
}

func NewSigner(t testing.TB) Signer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return Signer{pub, priv}
}

// Request builds the POST Discord sends to the interactions endpoint: the body, signed over
// timestamp + body with the application's key.
func (s Signer) Request(t testing.TB, target string, ts time.Time, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Discord-Interactions/1.0 (+https://discord.com)")
	req.Header.Set("X-Signature-Timestamp", stamp)
	req.Header.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(s.Priv, append([]byte(stamp), body...))))
	return req
}

// InitialResponse is the part of an interaction response tests look at (discordgo cannot
// decode response components).
type InitialResponse struct {
	Type discordgo.InteractionResponseType `json:"type"`
	Data *struct {
		Flags discordgo.MessageFlags `json:"flags"`
	} `json:"data"`
}

// Post sends a signed interaction and returns the status and the decoded response.
func (s Signer) Post(t testing.TB, client *http.Client, url string, body []byte) (int, *InitialResponse, string) {
	t.Helper()
	resp, err := client.Do(s.Request(t, url, time.Now(), body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, string(raw)
	}
	var out InitialResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("response %s: %v", raw, err)
	}
	if out.Data == nil {
		out.Data = &struct {
			Flags discordgo.MessageFlags `json:"flags"`
		}{}
	}
	return resp.StatusCode, &out, string(raw)
}
