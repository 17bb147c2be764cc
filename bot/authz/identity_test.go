package authz

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/whypending/whypending/chat"
)

// directory is Slack's usergroups.users.list as the mapping sees it: members per user group.
type directory map[string][]string

func (d directory) GroupMembers(_ context.Context, group string) ([]string, error) {
	if group == "S0BROKEN" {
		return nil, errors.New("no_such_subteam") // slack-go's SlackErrorResponse reads as its error code
	}
	return d[group], nil
}

// profiles is Slack's users.info as the mapping sees it: the verified email per user.
type profiles map[string]string

func (p profiles) VerifiedEmail(_ context.Context, id string) (string, error) { return p[id], nil }

func TestIdentify(t *testing.T) {
	a := New(Options{
		Mode: ModeAll,
		Mappings: map[string]Mapping{
			"slack": {
				Users:         map[string]Identity{"U0ALICE": {User: "alice", Groups: []string{"dev"}}, "U0OPS": {Groups: []string{"ops"}}},
				Groups:        map[string][]string{"S0SRE": {"sre", "oncall"}, "S0DEV": {"dev"}},
				VerifiedEmail: true, EmailDomains: []string{"example.com"},
			},
			"discord": {
				Users:  map[string]Identity{"1600000000000000001": {User: "dana"}},
				Groups: map[string][]string{"1700000000000000001": {"sre"}},
			},
		},
		Directories: map[string]Directory{"slack": directory{"S0SRE": {"U0BOB", "U0ALICE"}, "S0DEV": {"U0ALICE"}}},
		Profiles:    map[string]Profiles{"slack": profiles{"U0BOB": "bob@example.com", "U0EVE": "eve@evil.test", "U0ALICE": "alice@example.com"}},
	})
	tests := []struct {
		name string
		who  chat.Principal
		want Identity
		// unmapped is the refusal's text when nothing maps who.
		unmapped string
	}{
		{name: "the explicit table names the user; user groups add groups, each once",
			who:  chat.Principal{Platform: "slack", Team: "T1", ID: "U0ALICE"},
			want: Identity{User: "alice", Groups: []string{"dev", "oncall", "sre"}}},
		{name: "no table entry: the verified email is the user, the user group adds groups",
			who:  chat.Principal{Platform: "slack", Team: "T1", ID: "U0BOB"},
			want: Identity{User: "bob@example.com", Groups: []string{"oncall", "sre"}}},
		{name: "a table entry of groups only, and no verified email",
			who:  chat.Principal{Platform: "slack", Team: "T1", ID: "U0OPS"},
			want: Identity{Groups: []string{"ops"}}},
		{name: "a verified email outside the allowed domains maps nothing",
			who: chat.Principal{Platform: "slack", Team: "T1", ID: "U0EVE"},
			unmapped: "You are not mapped to a Kubernetes user or group, so whypending cannot check what RBAC allows you; nothing was done. " +
				"Missing: Slack user U0EVE is not in authorization.slack.users; you are in none of the Slack user groups in authorization.slack.groups; " +
				"the domain of your verified email is not in authorization.slack.emailDomains. Ask the bot's admins to map you (authorization in its config)."},
		{name: "no table entry, no user group, no verified email",
			who: chat.Principal{Platform: "slack", Team: "T1", ID: "U0MALLORY"},
			unmapped: "You are not mapped to a Kubernetes user or group, so whypending cannot check what RBAC allows you; nothing was done. " +
				"Missing: Slack user U0MALLORY is not in authorization.slack.users; you are in none of the Slack user groups in authorization.slack.groups; " +
				"your Slack profile has no verified email. Ask the bot's admins to map you (authorization in its config)."},
		{name: "a Discord role the interaction carries adds its groups",
			who:  chat.Principal{Platform: "discord", Team: "G1", ID: "1600000000000000009", Groups: []string{"1700000000000000001"}},
			want: Identity{Groups: []string{"sre"}}},
		{name: "a Discord user in the table",
			who:  chat.Principal{Platform: "discord", Team: "G1", ID: "1600000000000000001"},
			want: Identity{User: "dana"}},
		{name: "a Discord user without a mapped role",
			who: chat.Principal{Platform: "discord", Team: "G1", ID: "1600000000000000009", Groups: []string{"1700000000000000009"}},
			unmapped: "You are not mapped to a Kubernetes user or group, so whypending cannot check what RBAC allows you; nothing was done. " +
				"Missing: Discord user 1600000000000000009 is not in authorization.discord.users; you hold none of the roles in authorization.discord.roles. " +
				"Ask the bot's admins to map you (authorization in its config)."},
		{name: "a Discord direct message carries no roles",
			who: chat.Principal{Platform: "discord", ID: "1600000000000000009"},
			unmapped: "You are not mapped to a Kubernetes user or group, so whypending cannot check what RBAC allows you; nothing was done. " +
				"Missing: Discord user 1600000000000000009 is not in authorization.discord.users; Discord sends no roles in a direct message. " +
				"Ask the bot's admins to map you (authorization in its config)."},
		{name: "a platform with no mapping",
			who: chat.Principal{Platform: "console", ID: "alice"},
			unmapped: "You are not mapped to a Kubernetes user or group, so whypending cannot check what RBAC allows you; nothing was done. " +
				"Missing: the bot maps no console user to Kubernetes. Ask the bot's admins to map you (authorization in its config)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := a.identify(t.Context(), tt.who)
			var ref *Refusal
			switch {
			case tt.unmapped != "":
				if !errors.As(err, &ref) || ref.Reason != ReasonUnmapped {
					t.Fatalf("identify(%s) = %+v, %v; want an unmapped refusal", tt.who, got, err)
				}
				if ref.Text != tt.unmapped {
					t.Errorf("refusal text:\n got %q\nwant %q", ref.Text, tt.unmapped)
				}
			case err != nil:
				t.Fatalf("identify(%s): %v", tt.who, err)
			default:
				if d := cmp.Diff(tt.want, got); d != "" {
					t.Errorf("identify(%s) (-want +got):\n%s", tt.who, d)
				}
			}
		})
	}
}

// TestIdentifyDirectoryError: a user group whose members cannot be read leaves the mapping
// undecided: an error, not "unmapped" and not "no groups".
func TestIdentifyDirectoryError(t *testing.T) {
	a := New(Options{Mode: ModeApprovals,
		Mappings:    map[string]Mapping{"slack": {Groups: map[string][]string{"S0BROKEN": {"sre"}}}},
		Directories: map[string]Directory{"slack": directory{}}})
	_, err := a.identify(t.Context(), chat.Principal{Platform: "slack", ID: "U0BOB"})
	var ref *Refusal
	if err == nil || errors.As(err, &ref) {
		t.Fatalf("identify = %v, want an error that is no refusal", err)
	}
}

func TestModeChecks(t *testing.T) {
	for _, tt := range []struct {
		mode           Mode
		reads, changes bool
	}{{ModeOff, false, false}, {ModeApprovals, false, true}, {ModeAll, true, true}, {"", false, false}} {
		if got := tt.mode.Checks(Reads); got != tt.reads {
			t.Errorf("%q.Checks(Reads) = %v, want %v", tt.mode, got, tt.reads)
		}
		if got := tt.mode.Checks(Changes); got != tt.changes {
			t.Errorf("%q.Checks(Changes) = %v, want %v", tt.mode, got, tt.changes)
		}
	}
	var off *Authorizer
	if id, err := off.Allow(t.Context(), Request{Scope: Changes}); id != nil || err != nil {
		t.Errorf("nil Authorizer: Allow = %v, %v; want nil, nil", id, err)
	}
	if New(Options{Mode: ModeOff}) != nil {
		t.Error("New(ModeOff) is not nil")
	}
}

// TestIdentifySkipsABrokenGroup checks that one mapped group whose members cannot be read (a
// stale Slack user group: no_such_subteam) is skipped, logged once and counted: people are
// still mapped from the users table and from the other groups. Only someone nothing else
// maps gets an error (the mapping is undecided), never a refusal saying they are unmapped.
func TestIdentifySkipsABrokenGroup(t *testing.T) {
	var logs strings.Builder
	reg := prometheus.NewRegistry()
	a := New(Options{Mode: ModeApprovals, Metrics: NewMetrics(reg), Log: slog.New(slog.NewJSONHandler(&logs, nil)),
		Mappings: map[string]Mapping{"slack": {
			Users:  map[string]Identity{"U0ALICE": {User: "alice@example.com"}},
			Groups: map[string][]string{"S0BROKEN": {"broken"}, "S0SRE": {"sre"}},
		}},
		Directories: map[string]Directory{"slack": directory{"S0SRE": {"U0BOB"}}}})
	for range 2 {
		id, err := a.identify(t.Context(), chat.Principal{Platform: "slack", ID: "U0ALICE"})
		if err != nil || id.User != "alice@example.com" || len(id.Groups) != 0 {
			t.Errorf("alice = %+v, %v; want alice@example.com from the users table", id, err)
		}
		id, err = a.identify(t.Context(), chat.Principal{Platform: "slack", ID: "U0BOB"})
		if err != nil || strings.Join(id.Groups, ",") != "sre" {
			t.Errorf("bob = %+v, %v; want group sre from S0SRE", id, err)
		}
	}
	_, err := a.identify(t.Context(), chat.Principal{Platform: "slack", ID: "U0CAROL"})
	var ref *Refusal
	if err == nil || errors.As(err, &ref) {
		t.Errorf("carol (maybe in the broken group) = %v, want an error that is no refusal", err)
	}
	if n := strings.Count(logs.String(), `"group":"S0BROKEN"`); n != 1 {
		t.Errorf("the broken group is logged %d times, want once:\n%s", n, logs.String())
	}
	if got := testutil.ToFloat64(a.metrics.groupErrors.WithLabelValues("slack")); got != 5 {
		t.Errorf("group lookup errors = %v, want 5 (one per lookup)", got)
	}
}
