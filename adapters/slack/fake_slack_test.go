package slack_test

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

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"
)

// fakeSlack is the Slack Web API for tests: slacktest plus recording handlers for what it
// lacks or does not record (chat.postMessage with thread_ts and message metadata, chat.update,
// conversations.history and conversations.replies with include_all_metadata,
// usergroups.users.list). Each call is form-encoded and carries the bot token, as Slack's are;
// a call without it gets {"ok": false, "error": "not_authed"}.
type fakeSlack struct {
	srv *slacktest.Server

	mu      sync.Mutex
	posts   []webMessage // chat.postMessage calls, in order (roots and thread replies)
	updates []webMessage // chat.update calls, in order
	reads   []string     // conversations.history and conversations.replies calls, by method
	groups  map[string][]string
	// emails are the verified emails of users' profiles (users.info); others have none.
	emails map[string]string
	seq    atomic.Int64
	// limitUpdates makes the next N chat.update calls answer 429 with Retry-After: 1.
	limitUpdates atomic.Int32
	// loseAnswers makes the next N chat.postMessage calls post the message and then answer
	// 500, as when the answer is lost on its way back.
	loseAnswers atomic.Int32
	// refusePosts makes the next N chat.postMessage calls post nothing and answer 503 (an
	// outage).
	refusePosts atomic.Int32
	changed     chan struct{} // signalled (non-blocking) on every recorded call
}

// webMessage is one recorded chat.postMessage or chat.update call.
type webMessage struct {
	Channel, TS, Text string
	// ThreadTS is the root's ts of a thread reply ("" for a root).
	ThreadTS string
	// Mark is the metadata payload's mark of a thread message ("" for others).
	Mark   string
	Blocks slack.Blocks
}

// fakeToken is the bot token the fake accepts.
const fakeToken = "xoxb-test-token"

func newFakeSlack(t testing.TB, groups map[string][]string) *fakeSlack {
	t.Helper()
	f := &fakeSlack{groups: groups, changed: make(chan struct{}, 1)}
	f.srv = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", f.authed(f.record(&f.posts, false)))
		c.Handle("/chat.update", f.authed(f.record(&f.updates, true)))
		c.Handle("/conversations.history", f.authed(f.history))
		c.Handle("/conversations.replies", f.authed(f.replies))
		c.Handle("/usergroups.users.list", f.authed(f.groupMembers))
		c.Handle("/users.info", f.authed(f.userInfo))
	})
	f.srv.Start()
	t.Cleanup(f.srv.Stop)
	return f
}

// api returns a Web API client pointed at the fake.
func (f *fakeSlack) api() *slack.Client {
	return slack.New(fakeToken, slack.OptionAPIURL(f.srv.GetAPIURL()))
}

// authed parses the form and refuses a call without the bot token, as Slack does.
func (f *fakeSlack) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+fakeToken && r.PostForm.Get("token") != fakeToken {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok": false, "error": "not_authed"}`)
			return
		}
		h(w, r)
	}
}

func (f *fakeSlack) record(into *[]webMessage, isUpdate bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if isUpdate && f.limitUpdates.Load() > 0 {
			f.limitUpdates.Add(-1)
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if !isUpdate && f.refusePosts.Load() > 0 {
			f.refusePosts.Add(-1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		m := webMessage{Channel: r.PostForm.Get("channel"), TS: r.PostForm.Get("ts"), Text: r.PostForm.Get("text"),
			ThreadTS: r.PostForm.Get("thread_ts")}
		if b := r.PostForm.Get("blocks"); b != "" {
			if err := json.Unmarshal([]byte(b), &m.Blocks); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		if md := r.PostForm.Get("metadata"); md != "" {
			var meta slack.SlackMetadata
			if err := json.Unmarshal([]byte(md), &meta); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			m.Mark, _ = meta.EventPayload["mark"].(string)
		}
		if !isUpdate {
			m.TS = fmt.Sprintf("%d.%06d", time.Now().Unix(), f.seq.Add(1)%1000000)
		}
		f.mu.Lock()
		*into = append(*into, m)
		f.mu.Unlock()
		f.signal()
		if !isUpdate && f.loseAnswers.Load() > 0 {
			f.loseAnswers.Add(-1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "text": m.Text})
	}
}

// history is conversations.history: the channel's top-level messages (roots, not replies)
// no older than oldest, newest first, with their metadata when include_all_metadata is set.
func (f *fakeSlack) history(w http.ResponseWriter, r *http.Request) {
	f.read("conversations.history")
	f.messages(w, r, func(m webMessage) bool { return m.ThreadTS == "" }, true)
}

// replies is conversations.replies: the thread's root and replies no older than oldest,
// oldest first.
func (f *fakeSlack) replies(w http.ResponseWriter, r *http.Request) {
	f.read("conversations.replies")
	ts := r.PostForm.Get("ts")
	f.messages(w, r, func(m webMessage) bool { return m.TS == ts || m.ThreadTS == ts }, false)
}

func (f *fakeSlack) read(method string) {
	f.mu.Lock()
	f.reads = append(f.reads, method)
	f.mu.Unlock()
}

// messages answers a history read of the channel's messages that keep holds.
func (f *fakeSlack) messages(w http.ResponseWriter, r *http.Request, keep func(webMessage) bool, newestFirst bool) {
	channel, oldest := r.PostForm.Get("channel"), r.PostForm.Get("oldest")
	withMeta := r.PostForm.Get("include_all_metadata") == "1"
	f.mu.Lock()
	var out []map[string]any
	for _, m := range f.posts {
		if m.Channel != channel || !keep(m) || (oldest != "" && tsBefore(m.TS, oldest)) {
			continue
		}
		msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "bot_id": "B0BOT"}
		if m.ThreadTS != "" {
			msg["thread_ts"] = m.ThreadTS
		}
		if withMeta && m.Mark != "" {
			msg["metadata"] = map[string]any{"event_type": "whypending_notification", "event_payload": map[string]any{"mark": m.Mark}}
		}
		out = append(out, msg)
	}
	f.mu.Unlock()
	if newestFirst {
		slices.Reverse(out)
	}
	if out == nil {
		out = []map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "messages": out, "has_more": false,
		"response_metadata": map[string]any{"next_cursor": ""}})
}

// tsBefore reports whether Slack timestamp a is before b.
func tsBefore(a, b string) bool {
	x, errA := strconv.ParseFloat(a, 64)
	y, errB := strconv.ParseFloat(b, 64)
	return errA == nil && errB == nil && x < y
}

func (f *fakeSlack) groupMembers(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "users": f.groups[r.PostForm.Get("usergroup")]})
}

// userInfo answers users.info as Slack does: the user object, with profile.email and
// is_email_confirmed (an unverified address is still sent, unconfirmed).
func (f *fakeSlack) userInfo(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	id := r.PostForm.Get("user")
	f.mu.Lock()
	email, verified := f.emails[id]
	f.mu.Unlock()
	if !verified {
		email = strings.ToLower(id) + "@unverified.example"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "user": map[string]any{
		"id": id, "team_id": "T0001", "name": strings.ToLower(id), "deleted": false, "is_bot": false,
		"is_email_confirmed": verified, "profile": map[string]any{"email": email, "real_name": id},
	}})
}

func (f *fakeSlack) signal() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeSlack) snapshot() (posts, updates []webMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]webMessage(nil), f.posts...), append([]webMessage(nil), f.updates...)
}

// hookRecorder is a response_url endpoint: it records every JSON post by path.
type hookRecorder struct {
	srv *httptest.Server

	mu    sync.Mutex
	posts map[string][]hookPost
	// limitNext makes the next N posts answer 429 with Retry-After: 1.
	limitNext atomic.Int32
	changed   chan struct{}
}

// hookPost is one message posted to a response_url.
type hookPost struct {
	Text            string       `json:"text"`
	ResponseType    string       `json:"response_type"`
	ReplaceOriginal bool         `json:"replace_original"`
	Blocks          slack.Blocks `json:"blocks"`
	At              time.Time    `json:"-"`
}

func newHookRecorder(t testing.TB) *hookRecorder {
	t.Helper()
	h := &hookRecorder{posts: map[string][]hookPost{}, changed: make(chan struct{}, 1)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.limitNext.Load() > 0 {
			h.limitNext.Add(-1)
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var p hookPost
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.At = time.Now()
		h.mu.Lock()
		h.posts[r.URL.Path] = append(h.posts[r.URL.Path], p)
		h.mu.Unlock()
		select {
		case h.changed <- struct{}{}:
		default:
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// url returns the response_url for a named conversation, e.g. "/commands/1".
func (h *hookRecorder) url(path string) string { return h.srv.URL + path }

func (h *hookRecorder) get(path string) []hookPost {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookPost(nil), h.posts[path]...)
}

func (h *hookRecorder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, p := range h.posts {
		n += len(p)
	}
	return n
}

// sign returns Slack's v0 signature of body at ts with secret.
func sign(secret string, ts time.Time, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:%s", ts.Unix(), body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// signedRequest builds a POST as Slack sends it: form body, timestamp and signature headers.
func signedRequest(t testing.TB, target, secret string, ts time.Time, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("X-Slack-Signature", sign(secret, ts, body))
	return req
}

// commandBody is a slash command form as Slack posts it.
func commandBody(command, text, userID, userName, channelID, responseURL string) string {
	return url.Values{
		"token":                 {"deprecated-verification-token"},
		"team_id":               {"T0001"},
		"team_domain":           {"acme"},
		"channel_id":            {channelID},
		"channel_name":          {"ops"},
		"user_id":               {userID},
		"user_name":             {userName},
		"command":               {command},
		"text":                  {text},
		"api_app_id":            {"A0WHYPEND"},
		"is_enterprise_install": {"false"},
		"response_url":          {responseURL},
		"trigger_id":            {"13345224609.738474920.8088930838d88f008e0"},
	}.Encode()
}

// clickBody is a block_actions interaction as Slack posts it (form field "payload").
func clickBody(t testing.TB, userID, userName, channelID, messageTS, actionID, value, responseURL string) string {
	t.Helper()
	return url.Values{"payload": {string(clickPayload(t, userID, userName, channelID, messageTS, actionID, value, responseURL))}}.Encode()
}

// clickPayload is a block_actions interaction payload (JSON), as in the HTTP form field
// "payload" and the Socket Mode "interactive" envelope.
func clickPayload(t testing.TB, userID, userName, channelID, messageTS, actionID, value, responseURL string) []byte {
	t.Helper()
	payload := map[string]any{
		"type":       "block_actions",
		"user":       map[string]any{"id": userID, "username": userName, "name": userName, "team_id": "T0001"},
		"api_app_id": "A0WHYPEND",
		"token":      "deprecated-verification-token",
		"container": map[string]any{
			"type": "message", "message_ts": messageTS, "channel_id": channelID, "is_ephemeral": false,
		},
		"trigger_id": "13345224609.738474920.8088930838d88f008e0",
		"team":       map[string]any{"id": "T0001", "domain": "acme"},
		"enterprise": nil, "is_enterprise_install": false,
		"channel":      map[string]any{"id": channelID, "name": "ops"},
		"message":      map[string]any{"type": "message", "ts": messageTS, "text": "plan", "bot_id": "B0BOT"},
		"state":        map[string]any{"values": map[string]any{}},
		"response_url": responseURL,
		"actions": []map[string]any{{
			"action_id": actionID, "block_id": "b1", "value": value, "type": "button",
			"text":      map[string]any{"type": "plain_text", "text": actionID, "emoji": true},
			"action_ts": fmt.Sprintf("%d.000100", time.Now().Unix()),
		}},
	}
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
