package approval

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/whypending/whypending/chat"
)

// Directory answers group membership for approver checks on one platform. The Slack adapter
// implements it with usergroups.users.list (cached); platforms that send group membership
// with each request (Discord member.roles, in Principal.Groups) need none.
type Directory interface {
	// GroupMembers returns the user IDs in the platform group (Slack user group "S0123").
	GroupMembers(ctx context.Context, group string) ([]string, error)
}

// Approvers are who may approve plans on one platform.
type Approvers struct {
	// Users are the platform's user IDs (Slack "U…"/"W…", Discord user snowflakes).
	Users []string
	// Groups are the platform's group IDs (Slack user groups "S…", Discord role snowflakes).
	// A principal is a member when the request carried the ID (Principal.Groups) or the
	// platform's Directory lists the principal among the group's members.
	Groups []string
}

func (a Approvers) empty() bool { return len(a.Users) == 0 && len(a.Groups) == 0 }

// Policy says who may decide plans and for how long a plan waits.
type Policy struct {
	// Approvers are the approvers per platform (Principal.Platform: "slack", "discord",
	// "console"). A principal is checked against its own platform's list only, so an ID
	// from one platform can never approve on another.
	Approvers map[string]Approvers
	// TwoPersonRule, when true, forbids the requester from approving their own destructive
	// plan (actions.Kind.Destructive); they may still deny (withdraw) it.
	TwoPersonRule bool
	// Expiry is how long a plan waits for a decision; 0 means actions.DefaultExpiry.
	Expiry time.Duration
}

func (p Policy) expiry() time.Duration {
	if p.Expiry <= 0 {
		return 15 * time.Minute
	}
	return p.Expiry
}

// isApprover reports whether who is a configured approver of its platform, directly, through
// a group the request carried, or through a group the platform's directory (dirs, by
// platform) lists who in; via says which ("user", "group S0614TZR7") for the audit. A
// directory error is returned, not treated as "no".
func (p Policy) isApprover(ctx context.Context, dirs map[string]Directory, who chat.Principal) (ok bool, via string, err error) {
	ap := p.Approvers[who.Platform]
	if who.ID == "" || ap.empty() {
		return false, "", nil
	}
	if slices.Contains(ap.Users, who.ID) {
		return true, "user", nil
	}
	for _, g := range ap.Groups {
		if slices.Contains(who.Groups, g) {
			return true, "group " + g, nil
		}
	}
	dir := dirs[who.Platform]
	if dir == nil {
		return false, "", nil
	}
	for _, g := range ap.Groups {
		members, err := dir.GroupMembers(ctx, g)
		if err != nil {
			return false, "", fmt.Errorf("list members of group %s: %w", g, err)
		}
		if slices.Contains(members, who.ID) {
			return true, "group " + g, nil
		}
	}
	return false, "", nil
}

// approverList describes platform's approvers for a refusal message, e.g.
// "users U1, U2; members of S1".
func (p Policy) approverList(platform string) string {
	ap := p.Approvers[platform]
	var parts []string
	if len(ap.Users) > 0 {
		parts = append(parts, "users "+strings.Join(ap.Users, ", "))
	}
	if len(ap.Groups) > 0 {
		parts = append(parts, "members of "+strings.Join(ap.Groups, ", "))
	}
	if len(parts) == 0 {
		return "nobody on " + platform + " (no approvers configured for it)"
	}
	return strings.Join(parts, "; ")
}
