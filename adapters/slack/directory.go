package slack

import (
	"context"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// Directory resolves Slack user groups for approver checks and per-user authorization with
// usergroups.users.list (scope usergroups:read), and verified emails with users.info (scopes
// users:read and users:read.email, only when the verified-email rule is on), caching each
// answer for a TTL. It implements approval.Directory, authz.Directory and authz.Profiles
// (directory_test.go checks that).
type Directory struct {
	api *slack.Client
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	cache  map[string]groupEntry
	emails map[string]emailEntry
}

type emailEntry struct {
	email string
	at    time.Time
}

type groupEntry struct {
	members []string
	at      time.Time
}

// NewDirectory returns a Directory using api, caching members for ttl (0: one minute).
func NewDirectory(api *slack.Client, ttl time.Duration) *Directory {
	if ttl <= 0 {
		ttl = time.Minute
	}
	return &Directory{api: api, ttl: ttl, now: time.Now, cache: map[string]groupEntry{}, emails: map[string]emailEntry{}}
}

// GroupMembers returns the user IDs in the user group, from the cache when fresh. A 429 is
// waited out once (Retry-After, capped at 5 s) before giving up.
func (d *Directory) GroupMembers(ctx context.Context, group string) ([]string, error) {
	d.mu.Lock()
	e, ok := d.cache[group]
	d.mu.Unlock()
	if ok && d.now().Sub(e.at) < d.ttl {
		return e.members, nil
	}
	members, err := retryOnce(ctx, func() ([]string, error) { return d.api.GetUserGroupMembersContext(ctx, group) })
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.cache[group] = groupEntry{members: members, at: d.now()}
	d.mu.Unlock()
	return members, nil
}

// VerifiedEmail returns the email of the user's Slack profile when Slack has confirmed it
// (users.info: user.is_email_confirmed and user.profile.email), else "", from the cache when
// fresh. A deleted user or a bot has none.
func (d *Directory) VerifiedEmail(ctx context.Context, userID string) (string, error) {
	d.mu.Lock()
	e, ok := d.emails[userID]
	d.mu.Unlock()
	if ok && d.now().Sub(e.at) < d.ttl {
		return e.email, nil
	}
	u, err := retryOnce(ctx, func() (*slack.User, error) { return d.api.GetUserInfoContext(ctx, userID) })
	if err != nil {
		return "", err
	}
	email := ""
	if u.IsEmailConfirmed && !u.Deleted && !u.IsBot {
		email = u.Profile.Email
	}
	d.mu.Lock()
	d.emails[userID] = emailEntry{email: email, at: d.now()}
	d.mu.Unlock()
	return email, nil
}

// retryOnce calls f, and once more after waiting out a 429 (Retry-After, capped at 5 s).
func retryOnce[T any](ctx context.Context, f func() (T, error)) (T, error) {
	v, err := f()
	if wait, limited := retryAfter(err); limited {
		t := time.NewTimer(min(wait, 5*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			var zero T
			return zero, ctx.Err()
		case <-t.C:
		}
		v, err = f()
	}
	return v, err
}
