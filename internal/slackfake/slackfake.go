// Package slackfake is Slack's side of Socket Mode for tests: apps.connections.open as the Web
// API answers it (JSON, the app-level token as a bearer token) and the WebSocket it names,
// which sends Slack's hello frame on connect and pings as Slack does, and can be closed,
// refused or asked to disconnect from the server side. slack-go's slacktest has a WebSocket
// but sends no hello and cannot drop a connection, so readiness cannot be tested with it.
// Only tests import it.
package slackfake

import (
	"encoding/json"
	"fmt"
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
}

// NewSocketMode starts the fake; it accepts appToken (an "xapp-…" token) and answers any
// other token {"ok":false,"error":"invalid_auth"}, as Slack does.
func NewSocketMode(t testing.TB, appToken string) *SocketMode {
	t.Helper()
	s := &SocketMode{appToken: appToken, conns: map[*websocket.Conn]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apps.connections.open", s.open)
	mux.HandleFunc("GET /link/", s.link)
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
	for { // read, so that pongs and close frames are handled; what the client sends is dropped
		if _, _, err := c.ReadMessage(); err != nil {
			s.drop(c)
			return
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
