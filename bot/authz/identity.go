package authz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/whypending/whypending/chat"
)

// Identity is who a person is in Kubernetes: a user name and groups, as an authenticator
// would present them to RBAC. Either may be empty, not both.
type Identity struct {
	// User is the Kubernetes user name ("alice@example.com"); "" when only groups are mapped.
	User string `json:"user,omitempty"`
	// Groups are the Kubernetes groups, sorted, without duplicates.
	Groups []string `json:"groups,omitempty"`
}

// String describes the identity for messages and logs: "user alice@example.com, groups sre,
// dev", "groups sre".
func (id Identity) String() string {
	var parts []string
	if id.User != "" {
		parts = append(parts, "user "+id.User)
	}
	if len(id.Groups) > 0 {
		parts = append(parts, "groups "+strings.Join(id.Groups, ", "))
	}
	return strings.Join(parts, ", ")
}

func (id Identity) empty() bool { return id.User == "" && len(id.Groups) == 0 }

// key is the identity in cache keys.
func (id Identity) key() string { return id.User + "\x00" + strings.Join(id.Groups, "\x00") }

// Mapping is how one chat platform's people map to Kubernetes identities. A person's user is
// their Users entry's, else (Slack, VerifiedEmail) the verified email of their profile; their
// groups are their Users entry's plus those of every platform group (Slack user group,
// Discord role) they belong to that Groups maps.
type Mapping struct {
	// Users maps a platform user ID (Slack "U…"/"W…", a Discord user snowflake) to an identity.
	Users map[string]Identity
	// Groups maps a platform group ID (Slack user group "S…", a Discord role snowflake) to
	// Kubernetes groups every member gets.
	Groups map[string][]string
	// VerifiedEmail makes the verified email of a person's profile their Kubernetes user name
	// when Users does not name one (Slack: users.info, scopes users:read and
	// users:read.email). It needs a Profiles for the platform.
	VerifiedEmail bool
	// EmailDomains, when set, limits VerifiedEmail to emails in these domains
	// ("example.com").
	EmailDomains []string
}

// Directory answers group membership on one platform (the Slack adapter's Directory, with
// usergroups.users.list); a platform whose requests carry the groups (Discord member.roles,
// in chat.Principal.Groups) needs none.
type Directory interface {
	// GroupMembers returns the user IDs in the platform group.
	GroupMembers(ctx context.Context, group string) ([]string, error)
}

// Profiles reads people's profiles on one platform (the Slack adapter's Directory, with
// users.info).
type Profiles interface {
	// VerifiedEmail returns the email of the user's profile if the platform has verified it,
	// else "".
	VerifiedEmail(ctx context.Context, userID string) (string, error)
}

// configKeys names the config keys of a platform's mapping in the unmapped answer.
var configKeys = map[string]struct{ users, groups, groupNoun, memberOf string }{
	"slack":   {"authorization.slack.users", "authorization.slack.groups", "user groups", "you are in none of the Slack user groups in"},
	"discord": {"authorization.discord.users", "authorization.discord.roles", "roles", "you hold none of the roles in"},
}

// identify maps who to a Kubernetes identity with the platform's mapping. A person nothing
// maps is a *Refusal naming what is missing; a failed directory or profile lookup is an
// error (the mapping could not be decided).
func (a *Authorizer) identify(ctx context.Context, who chat.Principal) (Identity, error) {
	m := a.mappings[who.Platform]
	id := Identity{User: m.Users[who.ID].User}
	groups := map[string]bool{}
	for _, g := range m.Users[who.ID].Groups {
		groups[g] = true
	}
	emailWhy := ""
	if id.User == "" && m.VerifiedEmail && who.ID != "" {
		p := a.profiles[who.Platform]
		if p == nil {
			return Identity{}, fmt.Errorf("map %s: the verified-email rule is on but the bot has no profile lookup for %s", who, who.Platform)
		}
		email, err := p.VerifiedEmail(ctx, who.ID)
		if err != nil {
			return Identity{}, fmt.Errorf("map %s: read the %s profile: %w", who, who.Platform, err)
		}
		switch {
		case email == "":
			emailWhy = "your " + platformName(who.Platform) + " profile has no verified email"
		case !inDomains(email, m.EmailDomains):
			emailWhy = "the domain of your verified email is not in authorization." + who.Platform + ".emailDomains"
		default:
			id.User = email
		}
	}
	dir := a.directories[who.Platform]
	var groupErrs []error
	for _, g := range slices.Sorted(maps.Keys(m.Groups)) {
		member := slices.Contains(who.Groups, g)
		if !member && dir != nil && who.ID != "" {
			members, err := dir.GroupMembers(ctx, g)
			if err != nil {
				// A stale or broken group (deleted, no_such_subteam) must not break the
				// mapping of everyone else: skip it. Groups only add rights, so skipping
				// one never widens anything.
				err = fmt.Errorf("map %s: list members of %s group %s: %w", who, who.Platform, g, err)
				a.groupFailed(ctx, who.Platform, g, err)
				groupErrs = append(groupErrs, err)
				continue
			}
			member = slices.Contains(members, who.ID)
		}
		if member {
			for _, kg := range m.Groups[g] {
				groups[kg] = true
			}
		}
	}
	id.Groups = slices.Sorted(maps.Keys(groups))
	if id.empty() && len(groupErrs) > 0 {
		// Maybe in a group that could not be read: the mapping is undecided, not empty.
		return Identity{}, errors.Join(groupErrs...)
	}
	if id.empty() {
		return Identity{}, &Refusal{Reason: ReasonUnmapped, Principal: who, Text: unmappedText(who, m, emailWhy)}
	}
	return id, nil
}

// groupFailed counts a failed group lookup and logs it, once per group and error.
func (a *Authorizer) groupFailed(ctx context.Context, platform, group string, err error) {
	a.metrics.groupFailed(platform)
	if _, logged := a.brokenGroups.LoadOrStore(platform+"/"+group+": "+errors.Unwrap(err).Error(), true); !logged {
		a.log.WarnContext(ctx, "authorization: skipping a mapped group whose members cannot be read",
			slog.String("platform", platform), slog.String("group", group), slog.Any("err", errors.Unwrap(err)))
	}
}

// unmappedText tells a person nothing maps what is missing.
func unmappedText(who chat.Principal, m Mapping, emailWhy string) string {
	keys, ok := configKeys[who.Platform]
	var missing []string
	if !ok {
		missing = append(missing, "the bot maps no "+platformName(who.Platform)+" user to Kubernetes")
	} else {
		missing = append(missing, fmt.Sprintf("%s user %s is not in %s", platformName(who.Platform), who.ID, keys.users))
		switch {
		case len(m.Groups) == 0:
			missing = append(missing, keys.groups+" maps no "+keys.groupNoun)
		case who.Platform == "discord" && who.Team == "":
			missing = append(missing, "Discord sends no roles in a direct message")
		default:
			missing = append(missing, keys.memberOf+" "+keys.groups)
		}
		if emailWhy != "" {
			missing = append(missing, emailWhy)
		}
	}
	return "You are not mapped to a Kubernetes user or group, so whypending cannot check what RBAC allows you; nothing was done. " +
		"Missing: " + strings.Join(missing, "; ") + ". Ask the bot's admins to map you (authorization in its config)."
}

func platformName(p string) string {
	switch p {
	case "slack":
		return "Slack"
	case "discord":
		return "Discord"
	}
	return p
}

// inDomains reports whether email is in one of domains (any, when there are none).
func inDomains(email string, domains []string) bool {
	if len(domains) == 0 {
		return true
	}
	_, domain, ok := strings.Cut(email, "@")
	return ok && slices.ContainsFunc(domains, func(d string) bool { return strings.EqualFold(d, domain) })
}
