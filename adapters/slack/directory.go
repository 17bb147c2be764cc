package slack

import (
	"context"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// Directory resolves Slack user groups for approver checks with usergroups.users.list
// (scope usergroups:read), caching each group's members for a TTL. It implements
// approval.Directory (directory_test.go checks that).
type Directory struct {
	api *slack.Client
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	cache map[string]groupEntry
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
	return &Directory{api: api, ttl: ttl, now: time.Now, cache: map[string]groupEntry{}}
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
	members, err := d.api.GetUserGroupMembersContext(ctx, group)
	if wait, limited := retryAfter(err); limited {
		t := time.NewTimer(min(wait, 5*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		members, err = d.api.GetUserGroupMembersContext(ctx, group)
	}
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.cache[group] = groupEntry{members: members, at: d.now()}
	d.mu.Unlock()
	return members, nil
}
