package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
)

func TestParseConfigValid(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := `
clusters:
- name: prod-eu
  kubeconfig: ` + kc + `
  context: prod
- name: local
  inCluster: true
slack:
  mode: socket
  botToken: {file: /run/secrets/slack/bot-token}
channels:
  allowed: [C0123ABCD]
  digest: [C0123ABCD]
approvals:
  approvers:
    users: [U024BE7LH]
    groups: [S0614TZR7]
  expiry: 10m
  twoPersonRule: false
digest:
  schedule: "0 9 * * 1-5"
  timezone: Europe/Berlin
`
	c, err := ParseConfig([]byte(data))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	got := struct {
		Listen, Mode, StoreCluster, StoreBackend, Lock string
		Expiry                                         time.Duration
		TwoPerson                                      bool
		BotToken, SigningSecret                        Secret
	}{c.Listen, c.Slack.Mode, c.Store.Cluster, c.Store.Backend, c.Lock.Policy, c.Approvals.Expiry.Duration,
		c.Policy().TwoPersonRule, c.Slack.BotToken, c.Slack.SigningSecret}
	want := got
	want.Listen, want.Mode, want.StoreCluster, want.StoreBackend, want.Lock = ":8080", "socket", "prod-eu", "kubernetes", "always"
	want.Expiry, want.TwoPerson = 10*time.Minute, false
	want.BotToken = Secret{File: "/run/secrets/slack/bot-token"}
	want.SigningSecret = Secret{Env: "SLACK_SIGNING_SECRET"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Secret{})); diff != "" {
		t.Errorf("parsed config (-want +got):\n%s", diff)
	}
}

func TestParseConfigProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // one line per problem, in order
	}{
		{
			name: "empty file lacks clusters and approvers",
			yaml: ``,
			want: []string{
				"clusters: at least one cluster is required",
				"approvals.approvers: name at least one user, group or role; otherwise nobody can approve a repair",
			},
		},
		{
			name: "unknown keys are reported with their paths",
			yaml: "clusters:\n- name: a\n  kubeconfg: x\nslak: {}\napprovals: {approvers: {users: [U1A]}}\n",
			want: []string{"clusters[0].kubeconfg: unknown key", "slak: unknown key"},
		},
		{
			name: "a secret written inline is refused without echoing it",
			yaml: "clusters: [{name: a}]\nslack: {botToken: xoxb-123-secret}\napprovals: {approvers: {users: [U1A]}}\n",
			want: []string{"slack.botToken: secrets must not be written in the config file; use {env: NAME} or {file: PATH}"},
		},
		{
			name: "every invalid value gets its own line",
			yaml: `
listen: nonsense
pprofListen: localhost
clusters:
- name: Prod_EU
- name: b
  inCluster: true
  context: x
- name: b
slack: {mode: rtm, signingSecret: {env: A, file: /b}}
channels: {allowed: [general]}
approvals:
  approvers: {users: [alice], groups: [ops]}
  expiry: 48h
lock: {policy: sometimes}
digest: {schedule: "every day"}
store: {backend: etcd}
`,
			want: []string{
				`listen: "nonsense" is not host:port (e.g. ":8080")`,
				`pprofListen: "localhost" is not host:port (e.g. "127.0.0.1:6060")`,
				`clusters[0].name: "Prod_EU" must be a DNS label (lower-case letters, digits, '-')`,
				"clusters[1].inCluster: cannot be combined with kubeconfig or context",
				`clusters[2].name: "b" is used by another cluster`,
				`slack.mode: "rtm": want http or socket`,
				"slack.signingSecret: give env or file, not both",
				`channels.allowed[0]: "general" is not a Slack channel ID (C…, G… or D…) or a Discord channel ID (a snowflake, 17 to 20 digits)`,
				`approvals.approvers.users[0]: "alice" is not a Slack user ID (U… or W…); user names are not accepted`,
				`approvals.approvers.groups[0]: "ops" is not a Slack user group ID (S…)`,
				"approvals.expiry: 48h0m0s is outside 1m..24h",
				`lock.policy: "sometimes": want always or never`,
				`digest.schedule: "every day" is not a 5-field cron expression: expected exactly 5 fields, found 2: [every day]`,
				"channels.digest: required when digest.schedule is set",
				`store.backend: "etcd": want kubernetes or memory`,
			},
		},
		{
			name: "discord: every invalid value gets its own line",
			yaml: `
clusters: [{name: a}]
discord:
  mode: websocket
  botToken: literal-discord-token
  applicationID: my-app
  guilds: ["123"]
  apiURL: discord.com
channels: {allowed: [C0123ABCD], digest: ["1180000000000000001"]}
approvals:
  approvers:
    users: [U1A]
    discord: {users: [alice], roles: ["@ops"]}
`,
			want: []string{
				"discord.botToken: secrets must not be written in the config file; use {env: NAME} or {file: PATH}",
				`discord.mode: "websocket": want http or gateway`,
				`discord.applicationID: "my-app" is not a Discord ID (a snowflake, 17 to 20 digits)`,
				`discord.guilds[0]: "123" is not a Discord guild ID (a snowflake, 17 to 20 digits)`,
				`discord.apiURL: "discord.com": want an http(s) URL ending with "/", e.g. "https://discord.com/"`,
				`channels.allowed[0]: "C0123ABCD" is a slack channel, but the config has no slack section`,
				"approvals.approvers.users: the config has no slack section, so these approvers could never approve",
				`approvals.approvers.discord.users[0]: "alice" is not a Discord user ID (a snowflake, 17 to 20 digits); user names are not accepted`,
				`approvals.approvers.discord.roles[0]: "@ops" is not a Discord role ID (a snowflake, 17 to 20 digits); role names are not accepted`,
			},
		},
		{
			name: "alertmanager: every invalid value gets its own line",
			yaml: `
clusters: [{name: a}]
approvals: {approvers: {users: [U1A]}}
store: {backend: memory}
alertmanager:
  token: am-literal-token
  receivers: {team: [general, "1180000000000000001"], empty: []}
  clusterLabel: "cluster-name"
  remindEvery: soon
  url: alertmanager:9093
  authorization: {env: A, file: /b}
  silencers: everyone
`,
			want: []string{
				"alertmanager.remindEvery: \"soon\" is not a duration (e.g. \"15m\")",
				"alertmanager.token: secrets must not be written in the config file; use {env: NAME} or {file: PATH}",
				"alertmanager.receivers.empty: no channels",
				`alertmanager.receivers.team[0]: "general" is not a Slack channel ID (C…, G… or D…) or a Discord channel ID (a snowflake, 17 to 20 digits)`,
				`alertmanager.receivers.team[1]: "1180000000000000001" is a discord channel, but the config has no discord section`,
				`alertmanager.clusterLabel: "cluster-name" is not a Prometheus label name`,
				`alertmanager.url: "alertmanager:9093": want Alertmanager's http(s) base URL, e.g. http://alertmanager.monitoring:9093`,
				"alertmanager.authorization: give env or file, not both",
				`alertmanager.silencers: "everyone": want approvers or channel`,
				"alertmanager: needs store.backend kubernetes: the alert threads are kept in Notification objects so that nothing is posted twice",
			},
		},
		{
			name: "alertmanager: the token and receivers are required",
			yaml: "clusters: [{name: a}]\napprovals: {approvers: {users: [U1A]}}\nalertmanager: {}\n",
			want: []string{
				"alertmanager.token: required: the bearer token Alertmanager sends, {env: NAME} or {file: PATH}",
				"alertmanager.receivers: required: Alertmanager receiver name -> channel IDs",
			},
		},
		{
			name: "a discord section needs the application ID",
			yaml: "clusters: [{name: a}]\ndiscord: {}\napprovals: {approvers: {discord: {roles: [\"1180000000000000001\"]}}}\n",
			want: []string{"discord.applicationID: required (the Application ID on the application's General Information page)"},
		},
		{
			name: "authorization: every invalid value gets its own line",
			yaml: `
clusters: [{name: a}]
approvals: {approvers: {users: [U1A]}}
authorization:
  mode: everything
  cacheTTL: 1h
  slack:
    users: {alice: {user: alice@example.com}, U1B: {}}
    groups: {ops: [sre], S1C: []}
    emailDomains: ["not a domain"]
  discord:
    roles: {"1180000000000000001": [sre]}
`,
			want: []string{
				`authorization.mode: "everything": want off, approvals or all`,
				"authorization.cacheTTL: 1h0m0s is outside 1s..10m",
				"authorization.slack.users.U1B: name a Kubernetes user or at least one group",
				`authorization.slack.users: key "alice" is not a Slack user ID (U… or W…)`,
				"authorization.slack.groups.S1C: list the Kubernetes groups its members get (none may be empty)",
				`authorization.slack.groups: key "ops" is not a Slack user group ID (S…)`,
				"authorization.slack.emailDomains: applies only with authorization.slack.verifiedEmail: true",
				`authorization.slack.emailDomains[0]: "not a domain" is not a domain name`,
				"authorization.discord: the config has no discord section, so nobody here is ever mapped",
			},
		},
		{
			name: "authorization: a mode that checks needs somebody mapped",
			yaml: "clusters: [{name: a}]\napprovals: {approvers: {users: [U1A]}}\nauthorization: {mode: approvals}\n",
			want: []string{"authorization: mode approvals checks every person, but nobody is mapped to Kubernetes: map users, groups or roles (or verifiedEmail), or everyone is refused"},
		},
		{
			name: "authorization.mode: a YAML boolean other than off is refused, saying what was written",
			yaml: "clusters: [{name: a}]\napprovals: {approvers: {users: [U1A]}}\nauthorization: {mode: on}\n",
			want: []string{`authorization.mode: on unquoted is the YAML boolean true, not a mode; write one of "off", "approvals" or "all", quoted`},
		},
		{
			name: "authorization.mode: no is ambiguous, not off",
			yaml: "clusters: [{name: a}]\napprovals: {approvers: {users: [U1A]}}\nauthorization: {mode: no}\n",
			want: []string{`authorization.mode: no unquoted is the YAML boolean false, not a mode; write one of "off", "approvals" or "all", quoted`},
		},
		{
			name: "authorization.mode: empty is refused",
			yaml: "clusters: [{name: a}]\napprovals: {approvers: {users: [U1A]}}\nauthorization:\n  mode:\n",
			want: []string{`authorization.mode: is empty (YAML null); write one of "off", "approvals" or "all", quoted`},
		},
		{
			name: "values of the wrong type are reported once each, with their path and what YAML read",
			yaml: `
clusters: [{name: a}]
approvals: {approvers: {users: [U1A]}}
slack: {}
authorization:
  mode: all
  cacheTTL: 0s
  slack:
    users: {U1A: {user: "  "}, U1B: {user: [b]}}
    verifiedEmail: maybe
`,
			want: []string{
				"authorization.slack.users.U1B.user: want a string, got a list",
				`authorization.slack.verifiedEmail: want true or false, got "maybe"`,
			},
		},
		{
			name: "authorization: a blank user and a 0s TTL",
			yaml: "clusters: [{name: a}]\napprovals: {approvers: {users: [U1A]}}\nslack: {}\nauthorization: {mode: all, cacheTTL: 0s, slack: {users: {U1A: {user: \"  \"}}}}\n",
			want: []string{
				"authorization.cacheTTL: 0s is outside 1s..10m",
				`authorization.slack.users.U1A.user: "  " has blank space around or in place of a name (RBAC compares user names exactly)`,
			},
		},
		{
			name: "a malformed duration names its key",
			yaml: "clusters: [{name: a}]\napprovals: {approvers: {users: [U1A]}, expiry: soon}\n",
			want: []string{`approvals.expiry: "soon" is not a duration (e.g. "15m")`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("ParseConfig = nil error, want %d problems", len(tt.want))
			}
			got := strings.Split(err.Error(), "\n")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if strings.Contains(err.Error(), "xoxb-123-secret") {
				t.Errorf("error %q echoes the secret", err)
			}
		})
	}
}

func TestParseConfigDiscord(t *testing.T) {
	// IDs written without quotes keep every digit (a float64 would round them).
	data := `
clusters: [{name: prod}]
slack: {}
discord:
  applicationID: 1180000000000000001
  guilds: [1170000000000000001, "1170000000000000002"]
channels:
  allowed: [C0123ABCD, 1190000000000000001]
  digest: [1190000000000000009]
approvals:
  approvers:
    users: [U024BE7LH, W012A3CDE]
    discord: {users: [1160000000000000001], roles: [1150000000000000001]}
`
	c, err := ParseConfig([]byte(data))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if !c.SlackEnabled() || !c.DiscordEnabled() {
		t.Errorf("slack, discord enabled = %v, %v, want both", c.SlackEnabled(), c.DiscordEnabled())
	}
	got := struct {
		Mode, AppID string
		Guilds      []string
		BotToken    Secret
		PublicKey   Secret
		Allowed     map[string][]string
		Policy      map[string]approval.Approvers
	}{c.Discord.Mode, c.Discord.ApplicationID, c.Discord.Guilds, c.Discord.BotToken, c.Discord.PublicKey, c.AllowedChannels(), c.Policy().Approvers}
	want := got
	want.Mode, want.AppID = "http", "1180000000000000001"
	want.Guilds = []string{"1170000000000000001", "1170000000000000002"}
	want.BotToken, want.PublicKey = Secret{Env: "DISCORD_BOT_TOKEN"}, Secret{Env: "DISCORD_PUBLIC_KEY"}
	want.Allowed = map[string][]string{"slack": {"C0123ABCD"}, "discord": {"1190000000000000001"}}
	want.Policy = map[string]approval.Approvers{
		"slack":   {Users: []string{"U024BE7LH", "W012A3CDE"}},
		"discord": {Users: []string{"1160000000000000001"}, Groups: []string{"1150000000000000001"}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Secret{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("parsed config (-want +got):\n%s", diff)
	}

	// Without a slack section the bot serves Discord only; with neither, Slack (old configs).
	only, err := ParseConfig([]byte("clusters: [{name: a}]\ndiscord: {applicationID: \"1180000000000000001\"}\napprovals: {approvers: {discord: {roles: [\"1150000000000000001\"]}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := ParseConfig([]byte("clusters: [{name: a}]\napprovals: {approvers: {users: [U1A]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if only.SlackEnabled() || !only.DiscordEnabled() || !old.SlackEnabled() || old.DiscordEnabled() {
		t.Errorf("discord-only config: slack %v discord %v; old config: slack %v discord %v; want false true true false",
			only.SlackEnabled(), only.DiscordEnabled(), old.SlackEnabled(), old.DiscordEnabled())
	}
}

func TestResolveDiscord(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DISCORD_BOT_TOKEN": "Bot discord-token", "DISCORD_PUBLIC_KEY": hex.EncodeToString(pub), "SHORT_KEY": "abcd"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	c := &Config{Discord: DiscordConfig{Mode: "http", BotToken: Secret{Env: "DISCORD_BOT_TOKEN"}, PublicKey: Secret{Env: "DISCORD_PUBLIC_KEY"}}}
	got, err := c.ResolveDiscord(getenv, os.ReadFile)
	if err != nil {
		t.Fatalf("ResolveDiscord: %v", err)
	}
	if got.BotToken != "discord-token" || !pub.Equal(got.PublicKey) {
		t.Errorf("ResolveDiscord = token %q key %x, want discord-token (Bot prefix dropped) and %x", got.BotToken, got.PublicKey, pub)
	}
	if s := fmt.Sprint(got); s != "[redacted]" {
		t.Errorf("fmt shows %q, want [redacted]", s)
	}
	c.Discord.PublicKey = Secret{Env: "SHORT_KEY"}
	if _, err := c.ResolveDiscord(getenv, os.ReadFile); err == nil || !strings.Contains(err.Error(), "discord.publicKey: not an Ed25519 public key in hex (the application's Public Key): want 64 hex characters, got 4") {
		t.Errorf("short key: error = %v", err)
	}
	c.Discord.Mode = "gateway"
	if got, err := c.ResolveDiscord(getenv, os.ReadFile); err != nil || got.PublicKey != nil {
		t.Errorf("gateway mode: key %x, err %v; want no key read", got.PublicKey, err)
	}
}

func TestResolveSlack(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("xoxb-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLACK_SIGNING_SECRET": "s3cret"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name    string
		slack   SlackConfig
		want    SlackSecrets
		wantErr string
	}{
		{
			name:  "http mode reads the signing secret from env and the token from a file",
			slack: SlackConfig{Mode: "http", SigningSecret: Secret{Env: "SLACK_SIGNING_SECRET"}, BotToken: Secret{File: tokenFile}},
			want:  SlackSecrets{SigningSecret: "s3cret", BotToken: "xoxb-from-file"},
		},
		{
			name:    "a missing variable names the key and the variable",
			slack:   SlackConfig{Mode: "socket", BotToken: Secret{File: tokenFile}, AppToken: Secret{Env: "SLACK_APP_TOKEN"}},
			wantErr: "slack.appToken: environment variable SLACK_APP_TOKEN is empty or unset",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Slack: tt.slack}
			got, err := c.ResolveSlack(getenv, os.ReadFile)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ResolveSlack error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveSlack: %v", err)
			}
			if got != tt.want {
				t.Errorf("ResolveSlack = %+v, want %+v", []string{got.SigningSecret, got.BotToken}, []string{tt.want.SigningSecret, tt.want.BotToken})
			}
			if s := got.String(); s != "[redacted]" {
				t.Errorf("String() = %q, want [redacted]", s)
			}
		})
	}
}

func TestExampleConfigParses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config.example.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		t.Fatal("config.example.yaml is missing")
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
	if len(c.Clusters) == 0 {
		t.Errorf("example has no clusters")
	}
	if !c.SlackEnabled() || !c.DiscordEnabled() {
		t.Errorf("example serves slack %v, discord %v; want it to document both", c.SlackEnabled(), c.DiscordEnabled())
	}
}

// TestAuthorizationConfig reads the authorization section into authz options: off by
// default (a bare YAML off too), the TTL's default, and the mappings per platform.
func TestAuthorizationConfig(t *testing.T) {
	base := "clusters: [{name: a}]\napprovals: {approvers: {users: [U1A]}}\n"
	cfg, err := ParseConfig([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.AuthorizationOptions(); o.Mode != authz.ModeOff || o.TTL != authz.DefaultTTL || authz.New(o) != nil {
		t.Errorf("default: mode %q TTL %s; want off (no authorizer) and %s", o.Mode, o.TTL, authz.DefaultTTL)
	}
	cfg, err = ParseConfig([]byte(base + "authorization: {mode: off}\n"))
	if err != nil || cfg.AuthorizationOptions().Mode != authz.ModeOff {
		t.Errorf("bare off: %v, %+v; want mode off", err, cfg)
	}
	cfg, err = ParseConfig([]byte(base + `slack: {}
discord: {applicationID: "1100000000000000001"}
authorization:
  mode: all
  cacheTTL: 10s
  slack:
    users: {U1A: {user: alice@example.com, groups: [sre, dev, sre]}}
    groups: {S1OPS: [sre]}
    verifiedEmail: true
    emailDomains: [example.com]
  discord:
    users: {"1160000000000000001": {groups: [dev]}}
    roles: {"1150000000000000001": [sre]}
`))
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.AuthorizationOptions()
	want := map[string]authz.Mapping{
		"slack": {Users: map[string]authz.Identity{"U1A": {User: "alice@example.com", Groups: []string{"dev", "sre"}}},
			Groups: map[string][]string{"S1OPS": {"sre"}}, VerifiedEmail: true, EmailDomains: []string{"example.com"}},
		"discord": {Users: map[string]authz.Identity{"1160000000000000001": {Groups: []string{"dev"}}},
			Groups: map[string][]string{"1150000000000000001": {"sre"}}},
	}
	if o.Mode != authz.ModeAll || o.TTL != 10*time.Second {
		t.Errorf("mode %q TTL %s, want all and 10s", o.Mode, o.TTL)
	}
	if diff := cmp.Diff(want, o.Mappings); diff != "" {
		t.Errorf("mappings (-want +got):\n%s", diff)
	}
}
