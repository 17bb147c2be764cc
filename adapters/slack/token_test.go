package slack_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	goslack "github.com/slack-go/slack"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/slackfake"
)

// TestCheckToken asks slackfake, which answers auth.test in Slack's wire format, through
// slack-go: an accepted bot token gives the workspace and bot IDs; a token Slack refuses gives
// a *TokenRefusedError with Slack's code, an unknown code included; Slack failing or busy
// (503, 429, ok:false with a code that says so) is no refusal, and a 429 keeps its Retry-After.
func TestCheckToken(t *testing.T) {
	const token = "xoxb-check-token-test"
	tests := []struct {
		name        string
		refuse      string // the code slackfake refuses the token with ("": accepted)
		fail        int    // the HTTP status of a failed auth.test (0: none)
		token       string // default token
		wantRefused string // the refusal's code ("": not refused)
		wantErr     string // part of a non-refusal error ("": none)
	}{
		{name: "an accepted bot token names its workspace and bot"},
		{name: "a token Slack does not know is refused", refuse: "invalid_auth", wantRefused: "invalid_auth"},
		{name: "a revoked token is refused", refuse: "token_revoked", wantRefused: "token_revoked"},
		{name: "a deactivated bot user's token is refused", refuse: "account_inactive", wantRefused: "account_inactive"},
		{name: "an unknown error code counts as a refusal", refuse: "some_new_error", wantRefused: "some_new_error"},
		{name: "no token is refused (not_authed)", token: "-", wantRefused: "not_authed"},
		{name: "an app-level token is refused", token: "xapp-1-A0WHYPEND-1-abc", wantRefused: "invalid_auth"},
		{name: "Slack's internal_error is no refusal", refuse: "internal_error", wantErr: "auth.test: internal_error"},
		{name: "HTTP 503 is no refusal", fail: http.StatusServiceUnavailable, wantErr: "auth.test: slack server error: 503 Service Unavailable"},
		{name: "HTTP 429 is no refusal", fail: http.StatusTooManyRequests, wantErr: "auth.test: slack rate limit exceeded, retry after 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := slackfake.NewSocketMode(t, "xapp-unused")
			tok := token
			switch tt.token {
			case "":
			case "-":
				tok = ""
			default:
				tok = tt.token
			}
			if tt.refuse != "" {
				fake.RefuseToken(tok, tt.refuse)
			}
			if tt.fail != 0 {
				fake.FailAuthTests(tt.fail)
			}
			api := goslack.New(tok, goslack.OptionAPIURL(fake.APIURL()))
			id, err := slack.CheckToken(t.Context(), api)

			var refused *slack.TokenRefusedError
			switch {
			case tt.wantRefused != "":
				if !errors.As(err, &refused) || refused.Code != tt.wantRefused || refused.Method != "auth.test" {
					t.Fatalf("CheckToken = %v, want a refusal %s by auth.test", err, tt.wantRefused)
				}
				if got, want := err.Error(), "the bot token was refused ("+tt.wantRefused+")"; got != want {
					t.Errorf("error = %q, want %q", got, want)
				}
			case tt.wantErr != "":
				if err == nil || errors.As(err, &refused) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("CheckToken = %v, want an error that is no refusal, containing %q", err, tt.wantErr)
				}
				var rl *goslack.RateLimitedError
				if tt.fail == http.StatusTooManyRequests && (!errors.As(err, &rl) || rl.RetryAfter != time.Second) {
					t.Errorf("CheckToken = %#v, want a *RateLimitedError with Retry-After 1s", err)
				}
			default:
				if err != nil {
					t.Fatalf("CheckToken = %v, want the token accepted", err)
				}
				want := slack.Identity{TeamID: slackfake.TeamID, UserID: slackfake.BotUserID, BotID: slackfake.BotID}
				if id != want {
					t.Errorf("CheckToken = %+v, want %+v", id, want)
				}
			}
			if err != nil && tok != "" && strings.Contains(err.Error(), tok) {
				t.Errorf("error %q names the token", err)
			}
			calls := fake.AuthTests()
			if len(calls) != 1 {
				t.Fatalf("auth.test called %d times, want 1", len(calls))
			}
			if tok != "" && (calls[0].Token != tok || calls[0].Via != "form") {
				t.Errorf("auth.test got token %q via %q, want the token in the form body, as slack-go sends it", calls[0].Token, calls[0].Via)
			}
		})
	}
}

// TestTokenRefusedOnPost: a chat.postMessage Slack answers with a token error (the token was
// revoked while serving) tells Options.TokenRefused, and the post fails; an error about the
// call itself (channel_not_found) does not.
func TestTokenRefusedOnPost(t *testing.T) {
	const token = "xoxb-post-test"
	fake := slackfake.NewSocketMode(t, "xapp-unused")
	var mu sync.Mutex
	var refusals []*slack.TokenRefusedError
	a := slack.New(slack.Options{Core: &chattest.RecordingCore{}, API: goslack.New(token, goslack.OptionAPIURL(fake.APIURL())),
		Log: chattest.QuietLog, TokenRefused: func(err *slack.TokenRefusedError) {
			mu.Lock()
			defer mu.Unlock()
			refusals = append(refusals, err)
		}})
	got := func() []*slack.TokenRefusedError {
		mu.Lock()
		defer mu.Unlock()
		return append([]*slack.TokenRefusedError(nil), refusals...)
	}
	m := chat.Message{Sections: []chat.Section{{Text: "hello"}}}

	if err := a.PostMessage(t.Context(), "C0FAKE", m); err != nil {
		t.Fatalf("PostMessage with an accepted token = %v", err)
	}
	if err := a.PostMessage(t.Context(), "", m); err == nil || !strings.Contains(err.Error(), "channel_not_found") {
		t.Errorf("PostMessage without a channel = %v, want channel_not_found", err)
	}
	if r := got(); len(r) != 0 {
		t.Fatalf("TokenRefused told %v before the token was refused", r)
	}

	fake.RefuseToken(token, "token_revoked")
	err := a.PostMessage(t.Context(), "C0FAKE", m)
	if err == nil || !strings.Contains(err.Error(), "token_revoked") {
		t.Errorf("PostMessage with a revoked token = %v, want token_revoked", err)
	}
	r := got()
	if len(r) != 1 || r[0].Code != "token_revoked" || r[0].Method != "chat.postMessage" {
		t.Fatalf("TokenRefused told %+v, want one token_revoked by chat.postMessage", r)
	}
	if posts := fake.Posts(); len(posts) != 3 || posts[2].Error != "token_revoked" || posts[0].Via != "form" {
		t.Errorf("chat.postMessage calls = %+v, want 3, the last refused", posts)
	}
}
