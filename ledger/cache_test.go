package ledger

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// countingClient is a Notification client of the shared cluster that counts its writes and its
// reads of single Notifications (not the informer's list and watch).
func countingClient(t *testing.T) (*Client, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	cfg := rest.CopyConfig(shared.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("watch") == "" && !(r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/notifications")) {
				n.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, &n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitSynced waits until s's followed copy has synced.
func waitSynced(t testing.TB, s *Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.syncedCopy() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the informer did not sync")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// add is a monotone Update function: it appends v to the entry's data unless it is there.
func add(v string) func(e *Entry) error {
	return func(e *Entry) error {
		var got items
		if err := e.DataInto(&got); err != nil {
			return err
		}
		for _, g := range got.Items {
			if g == v {
				return ErrUnchanged
			}
		}
		got.Items = append(got.Items, v)
		return e.SetData(got)
	}
}

func data(t *testing.T, s *Store, k Key) []string {
	t.Helper()
	e, err := s.Get(t.Context(), k.Name())
	if err != nil {
		t.Fatal(err)
	}
	var got items
	if err := e.DataInto(&got); err != nil {
		t.Fatal(err)
	}
	return got.Items
}

// TestUpdateCached: a new entry costs one request (the create), a redelivery the followed
// copy already holds costs none, and a copy that is behind (its informer stopped, while
// another replica wrote) falls back to a live read, so nothing another replica wrote is lost.
func TestUpdateCached(t *testing.T) {
	_, ns := start(t)
	client, requests := countingClient(t)
	s := New(client, ns, Options{Self: replica(1)})
	other := New(sharedClient, ns, Options{Self: replica(2)})
	followCtx, stopFollowing := context.WithCancel(t.Context())
	defer stopFollowing()
	s.Follow(followCtx, "alertmanager")
	k := Key{Source: "alertmanager", Platform: "slack", Channel: "C1", Subject: "group-1"}
	ctx := t.Context()

	deadline := time.Now().Add(30 * time.Second)
	waitSynced(t, s)
	before := requests.Load()
	if _, err := s.UpdateCached(ctx, k, add("a")); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n != 1 {
		t.Errorf("a new entry took %d requests, want 1 (the create)", n)
	}
	// Once the informer has the entry, a redelivery of "a" sends nothing.
	for {
		if _, found, _ := s.copyOf(k.Name()); found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the informer never saw the entry")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before = requests.Load()
	if _, err := s.UpdateCached(ctx, k, add("a")); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("a redelivery the copy holds took %d requests, want 0", n)
	}

	// The copy falls behind: the informer stops and another replica writes "b".
	stopFollowing()
	time.Sleep(100 * time.Millisecond)
	if _, err := other.Update(ctx, k, add("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateCached(ctx, k, add("c")); err != nil {
		t.Fatal(err)
	}
	if got := data(t, s, k); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("after a write on a stale copy the entry holds %v, want [a b c]", got)
	}
	// An entry the stale copy never saw: the create finds it exists and reads it live.
	k2 := Key{Source: "alertmanager", Platform: "slack", Channel: "C1", Subject: "group-2"}
	if _, err := other.Update(ctx, k2, add("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateCached(ctx, k2, add("y")); err != nil {
		t.Fatal(err)
	}
	if got := data(t, s, k2); len(got) != 2 || got[0] != "x" || got[1] != "y" {
		t.Errorf("an entry created behind the copy's back holds %v, want [x y]", got)
	}
	// Unchanged on a new entry is ErrNotFound, as Update says it.
	k3 := Key{Source: "alertmanager", Platform: "slack", Channel: "C1", Subject: "group-3"}
	if _, err := s.UpdateCached(ctx, k3, func(*Entry) error { return ErrUnchanged }); !errors.Is(err, ErrNotFound) {
		t.Errorf("unchanged new entry: err = %v, want ErrNotFound", err)
	}
}

// TestSendRequests: a post with no other writer costs three requests (read, claim, record:
// the record starts from the entry the claim wrote), and an edit as many.
func TestSendRequests(t *testing.T) {
	_, ns := start(t)
	client, requests := countingClient(t)
	s := New(client, ns, Options{Self: replica(1)})
	ctx := t.Context()
	e, err := s.Update(ctx, testKey, func(e *Entry) error { e.Revision = 1; return nil })
	if err != nil {
		t.Fatal(err)
	}
	b := newBoard()
	before := requests.Load()
	if _, err := s.SendRevision(ctx, e.Name(), "root", 1, b.poster()); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n != 3 {
		t.Errorf("a post took %d requests, want 3 (read, claim, record)", n)
	}
	if _, err := s.Update(ctx, testKey, func(e *Entry) error { e.Revision = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	before = requests.Load()
	if err := s.Edit(ctx, e.Name(), "root", func(context.Context, *Entry, Ref) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n != 3 {
		t.Errorf("an edit took %d requests, want 3 (read, claim, record)", n)
	}
	got, err := s.Get(ctx, e.Name())
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Messages["root"]; m.Shows != 2 || len(got.Claims) != 0 || b.count("root") != 1 {
		t.Errorf("after the post and the edit: message %+v, claims %v, %d posts; want showing 2, no claim, one post", m, got.Claims, b.count("root"))
	}
}

// TestUpdateFromCopy: a change from a current copy costs one request; an fn that finds
// nothing to change on a copy that is behind is asked again on a live read, so a change the
// copy did not show yet is not skipped (fn here is not monotone: it sets, not adds).
func TestUpdateFromCopy(t *testing.T) {
	_, ns := start(t)
	client, requests := countingClient(t)
	s := New(client, ns, Options{Self: replica(1)})
	other := New(sharedClient, ns, Options{Self: replica(2)})
	followCtx, stopFollowing := context.WithCancel(t.Context())
	defer stopFollowing()
	s.Follow(followCtx, "watch", "rollup")
	ctx := t.Context()
	k := Key{Source: "watch", Platform: "slack", Channel: "C1", Subject: "deploy-a"}
	set := func(v string) func(e *Entry) error {
		return func(e *Entry) error {
			if e.State == v {
				return ErrUnchanged
			}
			e.State = v
			return nil
		}
	}
	waitCopy := func(state string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if e, ok := s.Copy(k.Name()); ok && e.State == state {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the copy never showed state %q", state)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitSynced(t, s)
	before := requests.Load()
	if _, err := s.UpdateFromCopy(ctx, k, set("stuck")); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n != 1 {
		t.Errorf("a new entry took %d requests, want 1 (the create)", n)
	}
	waitCopy("stuck")
	before = requests.Load()
	if _, err := s.UpdateFromCopy(ctx, k, set("recovered")); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n != 1 {
		t.Errorf("a change from a current copy took %d requests, want 1 (the update)", n)
	}
	if e, err := s.GetCached(ctx, k.Name()); err != nil || e.State == "" {
		t.Errorf("GetCached = %v, %v", e, err)
	}
	// The copy falls behind: it still says recovered while the entry is stuck again.
	waitCopy("recovered")
	stopFollowing()
	time.Sleep(100 * time.Millisecond)
	if _, err := other.Update(ctx, k, set("stuck")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateFromCopy(ctx, k, set("recovered")); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Get(ctx, k.Name()); err != nil || e.State != "recovered" {
		t.Errorf("after a change whose copy said there was nothing to change: %v, %v; want recovered", e, err)
	}
	// A stopped Follow leaves no copy: GetCached and Copy read the API server or nothing.
	if _, ok := s.Copy(k.Name()); ok {
		t.Error("Copy answered from a stopped informer")
	}
	if _, err := s.GetCached(ctx, "no-such-entry"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetCached of a missing entry = %v, want ErrNotFound", err)
	}
}

// TestSendFromRequests: a post and an edit that start from the entry the caller has cost two
// requests each (claim, record), and a caller's entry that is behind (another replica posted
// meanwhile) costs a read, never a second post.
func TestSendFromRequests(t *testing.T) {
	_, ns := start(t)
	client, requests := countingClient(t)
	s := New(client, ns, Options{Self: replica(1)})
	other := New(sharedClient, ns, Options{Self: replica(2)})
	ctx := t.Context()
	e, err := s.Update(ctx, testKey, func(e *Entry) error { e.Revision = 1; return nil })
	if err != nil {
		t.Fatal(err)
	}
	b := newBoard()
	before := requests.Load()
	_, cur, err := s.SendFrom(ctx, e, "root", 1, b.poster(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n != 2 {
		t.Errorf("a post from the caller's entry took %d requests, want 2 (claim, record)", n)
	}
	cur, err = s.UpdateFrom(ctx, cur, func(e *Entry) error { e.Revision = 2; return nil })
	if err != nil {
		t.Fatal(err)
	}
	before = requests.Load()
	if _, err := s.EditFrom(ctx, cur, "root", func(context.Context, *Entry, Ref) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load() - before; n != 2 {
		t.Errorf("an edit from the caller's entry took %d requests, want 2 (claim, record)", n)
	}
	// e is behind now: another replica posts "r1"; a send from e reads and posts nothing.
	if _, err := other.SendRevision(ctx, e.Name(), "r1", 0, b.poster()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SendFrom(ctx, e, "r1", 0, b.poster(), nil); err != nil {
		t.Fatal(err)
	}
	if n := b.count("r1"); n != 1 {
		t.Errorf("r1 posted %d times from a stale entry, want 1", n)
	}
}
