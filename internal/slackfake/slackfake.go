// Package slackfake is Slack's side of Socket Mode for tests: apps.connections.open as the Web
// API answers it (JSON, the app-level token as a bearer token) and the WebSocket it names,
// which sends Slack's hello frame on connect and pings as Slack does, and can be closed,
// refused or asked to disconnect from the server side. It also delivers slash commands on
// the socket as Slack does (a slash_commands envelope), keeps the app's acknowledgement of
// each, and takes what the app posts to the command's response_url. slack-go's slacktest has
// a WebSocket but sends no hello and cannot drop a connection, so readiness cannot be tested
// with it.
//
// Its Web API also answers the bot token's auth.test and chat.postMessage as Slack does
// (form-encoded with the token in the body, as slack-go sends them, or a bearer token), and
// can refuse a bot token with Slack's errors or fail auth.test as Slack does when it cannot
// answer (HTTP 429 with Retry-After, 503), so that serve's check of the bot token can be
// tested in HTTP mode too. Only tests import it.
package slackfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// AppID is the app the fake's connections belong to.
const AppID = "A0WHYPEND"

// The workspace and bot user that auth.test names for a bot token the fake accepts.
const (
	TeamID    = "T0FAKE"
	TeamName  = "Fake Workspace"
	BotUserID = "U0WHYBOT"
	BotID     = "B0WHYBOT"
)

// pingEvery is how often the fake pings each socket (slack-go reconnects when no ping came
// for its ping interval, 30 s by default).
const pingEvery = 2 * time.Second

// SocketMode is apps.connections.open and the Socket Mode WebSocket of one Slack app.
type SocketMode struct {
	srv      *httptest.Server
	appToken string

	mu     sync.Mutex
	refuse bool                     // the WebSocket upgrade is answered 503
	conns  map[*websocket.Conn]bool // open sockets
	opens  int                      // apps.connections.open calls
	hellos int                      // hello frames sent

	commands  int                        // slash commands sent, to number their envelopes
	acks      map[string]json.RawMessage // acknowledgement payloads, by envelope ID
	responses map[string][]string        // bodies posted to a command's response_url, by envelope ID

	refused   map[string]string // bot token -> the error Slack answers it with
	failAuth  []int             // HTTP statuses the next auth.test calls answer
	authTests []Call            // auth.test calls
	posts     []Call            // chat.postMessage calls
}

// Call is one Web API call made with a bot token, as the fake received and answered it.
type Call struct {
	// Token is the token sent; Via says how: "form" (the token field of a form-encoded body,
	// as slack-go sends it) or "bearer" (an Authorization header).
	Token, Via string
	// Status is the HTTP status answered, and Error Slack's error code in an {"ok":false}
	// answer ("" for ok:true, and for an answer that is not Slack's JSON).
	Status int
	Error  string
	// Channel and Text are chat.postMessage's form fields.
	Channel, Text string
}

// NewSocketMode starts the fake; apps.connections.open accepts appToken (an "xapp-…" token)
// and answers any other token {"ok":false,"error":"invalid_auth"}, as Slack does. The bot
// token's methods accept any "xoxb-…" token, as one Slack issued to this app, unless
// RefuseToken refuses it, and answer other tokens invalid_auth.
func NewSocketMode(t testing.TB, appToken string) *SocketMode {
	t.Helper()
	s := &SocketMode{appToken: appToken, conns: map[*websocket.Conn]bool{},
		acks: map[string]json.RawMessage{}, responses: map[string][]string{}, refused: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apps.connections.open", s.open)
	mux.HandleFunc("POST /auth.test", s.authTest)
	mux.HandleFunc("POST /chat.postMessage", s.postMessage)
	mux.HandleFunc("GET /link/", s.link)
	mux.HandleFunc("POST /response/{envelope}", s.respond)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		s.CloseSockets()
		s.srv.Close()
	})
	return s
}

// APIURL is the Web API base URL: slack.OptionAPIURL, or slack.apiURL in a config.
func (s *SocketMode) APIURL() string { return s.srv.URL + "/" }

// Refuse makes WebSocket upgrades fail with 503 (true) or succeed again (false), as when
// Slack's socket hosts are unreachable while its Web API answers.
func (s *SocketMode) Refuse(refuse bool) {
	s.mu.Lock()
	s.refuse = refuse
	s.mu.Unlock()
}

// CloseSockets closes every open socket from the server side (a close frame, then the TCP
// connection) and returns how many it closed.
func (s *SocketMode) CloseSockets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, ""), time.Now().Add(time.Second))
		_ = c.Close()
		delete(s.conns, c)
		n++
	}
	return n
}

// Disconnect sends Slack's disconnect request on every open socket (the client is to open a
// new connection; Slack closes this one a little later) and returns how many it sent it on.
func (s *SocketMode) Disconnect(reason string) int {
	frame, _ := json.Marshal(map[string]any{"type": "disconnect", "reason": reason,
		"debug_info": map[string]any{"host": "applink-fake"}})
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if c.WriteMessage(websocket.TextMessage, frame) == nil {
			n++
		}
	}
	return n
}

// Command sends the slash command (command "/why-pending", text its arguments) from user
// U0ALICE in channel C0FAKE on every open socket, as Slack delivers one in Socket Mode, and
// returns its envelope ID and how many sockets it was sent on. Its response_url is the
// fake's: Acked and Responses tell what the app did with it.
func (s *SocketMode) Command(command, text string) (envelopeID string, sent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands++
	envelopeID = fmt.Sprintf("fake-envelope-%d", s.commands)
	frame, _ := json.Marshal(map[string]any{
		"type": "slash_commands", "envelope_id": envelopeID, "accepts_response_payload": true,
		"payload": map[string]any{
			"token": "fake-verification-token", "team_id": "T0FAKE", "team_domain": "fake",
			"channel_id": "C0FAKE", "channel_name": "ops", "user_id": "U0ALICE", "user_name": "alice",
			"command": command, "text": text, "api_app_id": AppID, "trigger_id": "fake-trigger",
			"response_url": s.srv.URL + "/response/" + envelopeID,
		},
	})
	for c := range s.conns {
		if c.WriteMessage(websocket.TextMessage, frame) == nil {
			sent++
		}
	}
	return envelopeID, sent
}

// Acked returns the payload the app acknowledged envelope envelopeID with (JSON null for an
// acknowledgement without one), and whether it acknowledged it.
func (s *SocketMode) Acked(envelopeID string) (payload json.RawMessage, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	payload, ok = s.acks[envelopeID]
	return payload, ok
}

// Responses are the bodies the app posted to the response_url of envelope envelopeID, in
// order.
func (s *SocketMode) Responses(envelopeID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.responses[envelopeID]...)
}

// respond takes a post to a command's response_url and answers {"ok":true}, as Slack does.
func (s *SocketMode) respond(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	id := r.PathValue("envelope")
	s.responses[id] = append(s.responses[id], string(body))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// Opens is how many times apps.connections.open was called.
func (s *SocketMode) Opens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// Hellos is how many hello frames were sent (one per accepted socket).
func (s *SocketMode) Hellos() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hellos
}

// open answers apps.connections.open: {"ok":true,"url":"ws://…/link/?ticket=…&app_id=…"}
// for the app token, {"ok":false,"error":"not_authed"} without a token and
// {"ok":false,"error":"invalid_auth"} for another.
func (s *SocketMode) open(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.opens++
	n := s.opens
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	var body map[string]any
	switch token {
	case "":
		body = map[string]any{"ok": false, "error": "not_authed"}
	case s.appToken:
		url := fmt.Sprintf("ws://%s/link/?ticket=fake-ticket-%d&app_id=%s", r.Host, n, AppID)
		body = map[string]any{"ok": true, "url": url}
	default:
		body = map[string]any{"ok": false, "error": "invalid_auth"}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// link is the WebSocket: hello at once, then a ping every pingEvery until either side
// closes it.
func (s *SocketMode) link(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	refuse := s.refuse
	s.mu.Unlock()
	if refuse {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered
	}
	s.mu.Lock()
	s.conns[c] = true
	s.hellos++
	hello, _ := json.Marshal(map[string]any{"type": "hello", "num_connections": len(s.conns),
		"debug_info":      map[string]any{"host": "applink-fake", "build_number": 10, "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": AppID}})
	err = c.WriteMessage(websocket.TextMessage, hello)
	s.mu.Unlock()
	if err != nil {
		s.drop(c)
		return
	}
	done := make(chan struct{})
	defer close(done)
	go s.ping(c, done)
	for { // read, so that pongs and close frames are handled; acknowledgements are kept
		_, msg, err := c.ReadMessage()
		if err != nil {
			s.drop(c)
			return
		}
		var ack struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(msg, &ack) == nil && ack.EnvelopeID != "" {
			if ack.Payload == nil {
				ack.Payload = json.RawMessage("null")
			}
			s.mu.Lock()
			s.acks[ack.EnvelopeID] = ack.Payload
			s.mu.Unlock()
		}
	}
}

// ping pings c every pingEvery until done. Writes to c hold s.mu (gorilla allows one
// writer at a time).
func (s *SocketMode) ping(c *websocket.Conn, done <-chan struct{}) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			s.mu.Lock()
			if s.conns[c] {
				_ = c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
			}
			s.mu.Unlock()
		}
	}
}

func (s *SocketMode) drop(c *websocket.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

// RefuseToken makes auth.test and chat.postMessage answer {"ok":false,"error":code} for the
// bot token token, as Slack answers a token it does not know ("invalid_auth"), one revoked or
// uninstalled ("token_revoked"), one whose bot user was deactivated ("account_inactive"); an
// empty code accepts it again.
func (s *SocketMode) RefuseToken(token, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == "" {
		delete(s.refused, token)
		return
	}
	s.refused[token] = code
}

// FailAuthTests makes the next auth.test calls fail as Slack does when it cannot answer, one
// call per status: http.StatusTooManyRequests answers 429 with Retry-After: 1 and
// {"ok":false,"error":"ratelimited"}, any other status an HTML error page.
func (s *SocketMode) FailAuthTests(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAuth = append(s.failAuth, statuses...)
}

// AuthTests returns the auth.test calls so far, in order.
func (s *SocketMode) AuthTests() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.authTests...)
}

// Posts returns the chat.postMessage calls so far, in order.
func (s *SocketMode) Posts() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.posts...)
}

// botCall reads the token of a bot-token call (the form's token field, else a bearer token)
// and says how Slack answers it: "" when it accepts it, else its error code.
func (s *SocketMode) botCall(r *http.Request) (c Call, refusal string) {
	_ = r.ParseForm()
	c.Token, c.Via = r.PostForm.Get("token"), "form"
	if c.Token == "" {
		c.Token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		c.Via = "bearer"
	}
	switch {
	case c.Token == "":
		c.Via = ""
		return c, "not_authed"
	case s.refused[c.Token] != "":
		return c, s.refused[c.Token]
	case !strings.HasPrefix(c.Token, "xoxb-"):
		return c, "invalid_auth"
	}
	return c, ""
}

// authTest answers auth.test as Slack does for a bot token: {"ok":true,"url":…,"team":…,
// "user":…,"team_id":…,"user_id":…,"bot_id":…,"is_enterprise_install":false}, or
// {"ok":false,"error":…} (with HTTP 200) for a token it refuses.
func (s *SocketMode) authTest(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, refusal := s.botCall(r)
	if len(s.failAuth) > 0 {
		c.Status, s.failAuth = s.failAuth[0], s.failAuth[1:]
		if c.Status == http.StatusTooManyRequests {
			c.Error = "ratelimited"
			w.Header().Set("Retry-After", "1")
			writeJSON(w, c.Status, map[string]any{"ok": false, "error": c.Error})
		} else {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(c.Status)
			_, _ = fmt.Fprintf(w, "<html><body><h1>%d %s</h1></body></html>", c.Status, http.StatusText(c.Status))
		}
		s.authTests = append(s.authTests, c)
		return
	}
	c.Status, c.Error = http.StatusOK, refusal
	s.authTests = append(s.authTests, c)
	if refusal != "" {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": refusal})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "url": "https://fake-workspace.slack.com/",
		"team": TeamName, "user": "whypending", "team_id": TeamID, "user_id": BotUserID, "bot_id": BotID,
		"is_enterprise_install": false})
}

// postMessage answers chat.postMessage as Slack does: {"ok":true,"channel":…,"ts":…,
// "message":{…}}, or {"ok":false,"error":…} for a token it refuses and channel_not_found
// without a channel.
func (s *SocketMode) postMessage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, refusal := s.botCall(r)
	c.Channel, c.Text = r.PostForm.Get("channel"), r.PostForm.Get("text")
	if refusal == "" && c.Channel == "" {
		refusal = "channel_not_found"
	}
	c.Status, c.Error = http.StatusOK, refusal
	s.posts = append(s.posts, c)
	if refusal != "" {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": refusal})
		return
	}
	ts := fmt.Sprintf("%d.%06d", time.Now().Unix(), len(s.posts))
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "channel": c.Channel, "ts": ts,
		"message": map[string]any{"type": "message", "user": BotUserID, "bot_id": BotID, "text": c.Text, "ts": ts}})
}

// writeJSON answers status with body as JSON.
func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
