package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	slackgo "github.com/slack-go/slack"
	"sigs.k8s.io/yaml"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/chat"
)

// slackScopes maps each Slack Web API method the bot calls to the bot scope it needs. A method
// the bot starts calling must be added here (and its scope to slack-app-manifest.yaml): the RBAC
// proof (rbac_test.go) fails on a call it cannot map.
var slackScopes = map[string]string{
	"chat.postMessage":      "chat:write",
	"chat.update":           "chat:write",
	"usergroups.users.list": "usergroups:read",
	"conversations.history": "channels:history",
	"conversations.replies": "channels:history",
}

// threadReadScopes are the scopes of the reads a thread's Find makes after a post whose
// answer was lost (conversations.history and conversations.replies with include_all_metadata;
// adapters/slack TestThreads records them): channels:history for public channels and
// groups:history for private ones. A serve run without such a loss never calls them, so they
// are required here rather than from the recorded calls.
var threadReadScopes = []string{"channels:history", "groups:history"}

// readSlackManifest decodes slack-app-manifest.yaml strictly into slack-go's manifest type, so a
// key Slack's format does not have is an error.
func readSlackManifest(t *testing.T) *slackgo.Manifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "slack-app-manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m slackgo.Manifest
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatalf("slack-app-manifest.yaml is not a Slack app manifest: %v", err)
	}
	return &m
}

// TestSlackAppManifest checks slack-app-manifest.yaml against the code: one slash command per
// command the bot registers, with its usage; URLs on the routes the Slack adapter serves; and
// HTTP mode by default with Socket Mode one switch away.
func TestSlackAppManifest(t *testing.T) {
	m := readSlackManifest(t)
	if m.Metadata.MajorVersion != 1 {
		t.Errorf("_metadata.major_version = %d, want 1", m.Metadata.MajorVersion)
	}
	// Lengths Slack's manifest schema v1 allows (slackapi/manifest-schema,
	// schemas/manifest.schema.1.0.0.json); create-from-manifest refuses others.
	inRange := func(what, s string, lo, hi int) {
		if n := utf8.RuneCountInString(s); n < lo || n > hi {
			t.Errorf("%s is %d characters, want %d to %d", what, n, lo, hi)
		}
	}
	inRange("display_information.name", m.Display.Name, 1, 35)
	inRange("display_information.description", m.Display.Description, 1, 140)
	inRange("display_information.long_description", m.Display.LongDescription, 175, 4000)
	inRange("features.bot_user.display_name", m.Features.BotUser.DisplayName, 1, 80)
	if !regexp.MustCompile(`^#[0-9a-fA-F]{3}([0-9a-fA-F]{3})?$`).MatchString(m.Display.BackgroundColor) {
		t.Errorf("background_color = %q, want #rgb or #rrggbb", m.Display.BackgroundColor)
	}

	b := bot.New(bot.Options{})
	var want, got []string
	usage := map[string]string{}
	for _, c := range b.Commands() {
		want = append(want, "/"+c.Name)
		usage["/"+c.Name] = c.Usage
	}
	server := bot.NewServer(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	slack.New(slack.Options{Core: b, API: slackgo.New("xoxb-unused"), SigningSecret: "unused",
		Log: slog.New(slog.DiscardHandler), Metrics: chat.NewMetrics(prometheus.NewRegistry())}).Mount(server)
	// serves says whether the adapter serves POST path: an unsigned request is refused with 401
	// by a served route and 404 by the mux otherwise.
	serves := func(path string) bool {
		rec := httptest.NewRecorder()
		server.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader("")))
		_, _ = io.Copy(io.Discard, rec.Body)
		return rec.Code == http.StatusUnauthorized
	}
	for _, sc := range m.Features.SlashCommands {
		got = append(got, sc.Command)
		inRange(sc.Command+" command", sc.Command, 2, 32)
		inRange(sc.Command+" description", sc.Description, 1, 2000)
		inRange(sc.Command+" usage_hint", sc.UsageHint, 1, 1000)
		if sc.UsageHint != usage[sc.Command] {
			t.Errorf("%s usage_hint = %q, want the bot's usage %q", sc.Command, sc.UsageHint, usage[sc.Command])
		}
		if u, err := url.Parse(sc.Url); err != nil || u.Scheme != "https" || !serves(u.Path) || u.Path != "/slack/commands" {
			t.Errorf("%s url = %q, want https://…/slack/commands (a route the adapter serves)", sc.Command, sc.Url)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("slash commands = %v, want the bot's commands %v", got, want)
	}

	in := m.Settings.Interactivity
	if in == nil || !in.IsEnabled {
		t.Fatal("interactivity is off: Approve and Deny buttons would do nothing")
	}
	if u, err := url.Parse(in.RequestUrl); err != nil || u.Scheme != "https" || !serves(u.Path) || u.Path != "/slack/interactions" {
		t.Errorf("interactivity request_url = %q, want https://…/slack/interactions (a route the adapter serves)", in.RequestUrl)
	}
	if m.Settings.SocketModeEnabled {
		t.Error("socket_mode_enabled is true: the manifest's default is HTTP mode, the chart's default")
	}
	if m.Settings.EventSubscriptions != nil {
		t.Error("event_subscriptions: the bot handles no Events API events")
	}
	if len(m.OAuthConfig.Scopes.User) > 0 {
		t.Errorf("user scopes %v: the bot acts only as its bot user", m.OAuthConfig.Scopes.User)
	}
	// The bot scopes are compared with the Web API calls the bot really makes in
	// TestChartRBAC (it runs the bot against a fake Slack); here only their shape.
	if !slices.Contains(m.OAuthConfig.Scopes.Bot, "commands") {
		t.Errorf("bot scopes %v lack commands (slash commands)", m.OAuthConfig.Scopes.Bot)
	}
}

// checkSlackScopes compares the manifest's bot scopes with the scopes the Web API methods the
// bot called need (plus commands, for its slash commands).
func checkSlackScopes(t *testing.T, called []string) {
	t.Helper()
	need := append([]string{"commands"}, threadReadScopes...)
	for _, method := range called {
		scope, ok := slackScopes[method]
		if !ok {
			t.Errorf("the bot called Slack method %s: add its scope to slackScopes and slack-app-manifest.yaml", method)
			continue
		}
		if !slices.Contains(need, scope) {
			need = append(need, scope)
		}
	}
	have := slices.Clone(readSlackManifest(t).OAuthConfig.Scopes.Bot)
	slices.Sort(need)
	slices.Sort(have)
	if !slices.Equal(have, need) {
		t.Errorf("manifest bot scopes = %v, want exactly %v (what the bot called: %v)", have, need, called)
	}
}
