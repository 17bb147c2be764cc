package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/chat"
)

// fakeSlack is the Slack side of a `whypending serve` under test: the Web API (slacktest with
// recording handlers for the methods the bot calls) and response_url endpoints.
type fakeSlack struct {
	api   *slacktest.Server
	hooks *httptest.Server

	mu       sync.Mutex
	methods  map[string]int        // Web API method → calls
	messages []slackMessage        // chat.postMessage and chat.update calls, in order
	answers  map[string][]hookPost // response_url path → posts
	groups   map[string][]string   // user group → members
	seq      atomic.Int64
}

// slackMessage is one chat.postMessage or chat.update call.
type slackMessage struct {
	Method, Channel, TS, Text string
	// ThreadTS is a reply's root ts; Mark the metadata payload's mark of a thread message.
	ThreadTS, Mark string
	Blocks         slackgo.Blocks
}

// hookPost is one message posted to a response_url.
type hookPost struct {
	Text   string         `json:"text"`
	Blocks slackgo.Blocks `json:"blocks"`
	// ResponseType is "in_channel" for a public answer; "ephemeral" or empty (Slack's
	// default) for the asker only.
	ResponseType string `json:"response_type"`
}

func newFakeSlack(t *testing.T, groups map[string][]string) *fakeSlack {
	t.Helper()
	f := &fakeSlack{methods: map[string]int{}, answers: map[string][]hookPost{}, groups: groups}
	f.api = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", f.message("chat.postMessage"))
		c.Handle("/chat.update", f.message("chat.update"))
		c.Handle("/usergroups.users.list", f.groupMembers)
		c.Handle("/conversations.history", f.history("conversations.history"))
		c.Handle("/conversations.replies", f.history("conversations.replies"))
	})
	f.api.Start()
	t.Cleanup(f.api.Stop)
	f.hooks = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p hookPost
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.answers[r.URL.Path] = append(f.answers[r.URL.Path], p)
		f.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(f.hooks.Close)
	return f
}

// apiURL is the Web API base URL for config slack.apiURL.
func (f *fakeSlack) apiURL() string { return f.api.GetAPIURL() }

func (f *fakeSlack) message(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := slackMessage{Method: method, Channel: r.PostForm.Get("channel"), TS: r.PostForm.Get("ts"), Text: r.PostForm.Get("text"),
			ThreadTS: r.PostForm.Get("thread_ts")}
		if md := r.PostForm.Get("metadata"); md != "" {
			var meta slackgo.SlackMetadata
			if err := json.Unmarshal([]byte(md), &meta); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			m.Mark, _ = meta.EventPayload["mark"].(string)
		}
		if b := r.PostForm.Get("blocks"); b != "" {
			if err := json.Unmarshal([]byte(b), &m.Blocks); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		if method == "chat.postMessage" {
			m.TS = fmt.Sprintf("%d.%06d", time.Now().Unix(), f.seq.Add(1)%1000000)
		}
		f.mu.Lock()
		f.methods[method]++
		f.messages = append(f.messages, m)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "text": m.Text})
	}
}

// history answers conversations.history (a channel's roots) and conversations.replies (a
// thread: its root and replies), with each message's metadata when include_all_metadata is
// set, from the messages posted so far.
func (f *fakeSlack) history(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		channel, ts := r.PostForm.Get("channel"), r.PostForm.Get("ts")
		withMeta := r.PostForm.Get("include_all_metadata") == "1"
		f.mu.Lock()
		f.methods[method]++
		out := []map[string]any{}
		for _, m := range f.messages {
			in := m.ThreadTS == "" && method == "conversations.history" || method == "conversations.replies" && (m.TS == ts || m.ThreadTS == ts)
			if m.Method != "chat.postMessage" || m.Channel != channel || !in {
				continue
			}
			msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text}
			if withMeta && m.Mark != "" {
				msg["metadata"] = map[string]any{"event_type": "whypending_notification", "event_payload": map[string]any{"mark": m.Mark}}
			}
			out = append(out, msg)
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "messages": out, "has_more": false})
	}
}

func (f *fakeSlack) groupMembers(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	f.methods["usergroups.users.list"]++
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "users": f.groups[r.PostForm.Get("usergroup")]})
}

// called returns the Web API methods called so far, sorted.
func (f *fakeSlack) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for m := range f.methods {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// plan waits for a posted plan message whose Approve button is not in seen, and returns the
// message and the button.
func (f *fakeSlack) plan(t *testing.T, seen map[string]bool) (slackMessage, *slackgo.ButtonBlockElement) {
	t.Helper()
	var msg slackMessage
	var approve *slackgo.ButtonBlockElement
	waitUntil(t, 60*time.Second, "a plan message with an Approve button", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, m := range f.messages {
			if m.Method != "chat.postMessage" {
				continue
			}
			for _, b := range m.Blocks.BlockSet {
				ab, ok := b.(*slackgo.ActionBlock)
				if !ok {
					continue
				}
				for _, el := range ab.Elements.ElementSet {
					if btn, ok := el.(*slackgo.ButtonBlockElement); ok && slack.ParseActionID(btn.ActionID) == chat.ActionApprove && !seen[btn.Value] {
						msg, approve = m, btn
						return true
					}
				}
			}
		}
		return false
	})
	seen[approve.Value] = true
	return msg, approve
}

// lastUpdate returns the text of the last chat.update of the message at ts.
func (f *fakeSlack) lastUpdate(ts string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	text := ""
	for _, m := range f.messages {
		if m.Method == "chat.update" && m.TS == ts {
			text = m.Text
		}
	}
	return text
}

// answer waits for the first post to the response_url path.
func (f *fakeSlack) answer(t *testing.T, path string) hookPost {
	t.Helper()
	var p hookPost
	waitUntil(t, 60*time.Second, "an answer on "+path, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.answers[path]) == 0 {
			return false
		}
		p = f.answers[path][0]
		return true
	})
	return p
}

// slackClient posts signed requests to one serving bot, as Slack would.
type slackClient struct {
	base, secret, channel string
	slack                 *fakeSlack
	seq                   atomic.Int64
}

// command posts a signed slash command as user and returns the response_url path its answer
// goes to.
func (c *slackClient) command(t *testing.T, user, command, text string) string {
	t.Helper()
	path := fmt.Sprintf("/commands/%d", c.seq.Add(1))
	form := url.Values{"command": {command}, "text": {text}, "user_id": {user}, "user_name": {strings.ToLower(user)},
		"team_id": {"T0001"}, "channel_id": {c.channel}, "response_url": {c.slack.hooks.URL + path}}
	c.post(t, "/slack/commands", form.Encode())
	return path
}

// click posts a signed block_actions payload pressing btn on the message at ts as user.
func (c *slackClient) click(t *testing.T, user, ts string, btn *slackgo.ButtonBlockElement) {
	t.Helper()
	c.post(t, "/slack/interactions", c.clickBody(t, user, ts, btn))
}

// clickBody is the form body of a block_actions payload pressing btn on the message at ts as
// user.
func (c *slackClient) clickBody(t *testing.T, user, ts string, btn *slackgo.ButtonBlockElement) string {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"type":         "block_actions",
		"user":         map[string]any{"id": user, "username": strings.ToLower(user), "name": strings.ToLower(user), "team_id": "T0001"},
		"team":         map[string]any{"id": "T0001"},
		"channel":      map[string]any{"id": c.channel},
		"container":    map[string]any{"type": "message", "message_ts": ts, "channel_id": c.channel},
		"message":      map[string]any{"type": "message", "ts": ts},
		"response_url": c.slack.hooks.URL + fmt.Sprintf("/clicks/%d", c.seq.Add(1)),
		"actions":      []map[string]any{{"action_id": btn.ActionID, "block_id": "b1", "value": btn.Value, "type": "button"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return url.Values{"payload": {string(payload)}}.Encode()
}

// post posts body to path signed with the client's secret and fails the test unless it is
// answered 200.
func (c *slackClient) post(t *testing.T, path, body string) {
	t.Helper()
	if code, b := c.send(t, path, body, true); code != http.StatusOK {
		t.Fatalf("POST %s = %d %s", path, code, b)
	}
}

// send posts body to path, signed with the client's secret when signed, and returns the
// status and body of the answer.
func (c *slackClient) send(t *testing.T, path, body string, signed bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if signed {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(c.secret))
		fmt.Fprintf(mac, "v0:%s:%s", ts, body)
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// httpGet returns the status code of GET url.
func httpGet(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// waitUntil polls cond until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
