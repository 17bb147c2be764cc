package bot

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Directory answers group membership for approver checks. The Slack adapter implements it
// with usergroups.users.list (cached); the console has no groups.
type Directory interface {
	// GroupMembers returns the user IDs in the platform group (Slack user group "S0123").
	GroupMembers(ctx context.Context, group string) ([]string, error)
}

// Policy says who may decide plans and for how long a plan waits.
type Policy struct {
	// Users are platform user IDs allowed to approve (Slack "U…"/"W…").
	Users []string
	// Groups are platform group IDs whose members may approve (Slack user groups "S…").
	Groups []string
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

// isApprover reports whether who is a configured approver, directly or through a group. A
// directory error is returned, not treated as "no".
func (p Policy) isApprover(ctx context.Context, dir Directory, who Principal) (bool, error) {
	if slices.Contains(p.Users, who.ID) {
		return true, nil
	}
	if dir == nil {
		return false, nil
	}
	for _, g := range p.Groups {
		members, err := dir.GroupMembers(ctx, g)
		if err != nil {
			return false, fmt.Errorf("list members of group %s: %w", g, err)
		}
		if slices.Contains(members, who.ID) {
			return true, nil
		}
	}
	return false, nil
}

// approverList describes the approvers for a refusal message, e.g. "users U1, U2; groups S1".
func (p Policy) approverList() string {
	s := ""
	if len(p.Users) > 0 {
		s = "users " + joinComma(p.Users)
	}
	if len(p.Groups) > 0 {
		if s != "" {
			s += "; "
		}
		s += "members of user groups " + joinComma(p.Groups)
	}
	if s == "" {
		return "nobody (no approvers configured)"
	}
	return s
}

func joinComma(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}
