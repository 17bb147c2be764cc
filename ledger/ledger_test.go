package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/whypending/whypending/internal/proc"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

func TestMain(m *testing.M) {
	testcluster.Main(m)
}

var (
	shared *testenv.Cluster
	// sharedClient is a Notification client of shared.
	sharedClient *Client
	sharedErr    error
	sharedOnce   sync.Once
)

// start returns the package's real API server, with the chart's CRDs, and a namespace of the
// test's own, whose name it returns.
func start(t testing.TB) (*Client, string) {
	t.Helper()
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if shared, sharedErr = testenv.Start(ctx, testenv.Options{}); sharedErr != nil {
			return
		}
		root, err := testenv.RepoRoot()
		if err != nil {
			sharedErr = err
			return
		}
		if sharedErr = shared.InstallCRDs(ctx, os.DirFS(filepath.Join(root, "charts", "whypending", "crds")), "."); sharedErr != nil {
			return
		}
		sharedClient, sharedErr = NewClient(shared.Config)
	})
	if sharedErr != nil {
		t.Fatalf("control plane: %v", sharedErr)
	}
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", "=", "-").Replace(t.Name()))
	if _, err := shared.Client.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		// A benchmark's function runs once per round, in the same namespace.
		if _, bench := t.(*testing.B); !bench || !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return sharedClient, ns
}

// replica is the identity of bot replica i: another host, so its claims are never known gone.
func replica(i int) proc.Identity {
	return proc.Identity{Host: fmt.Sprintf("whypending-%d", i), PID: 1, Start: 100}
}

// deadHere is a process on this host that has exited.
func deadHere() proc.Identity {
	host, _ := os.Hostname()
	return proc.Identity{Host: host, PID: 1 << 22, Start: 7}
}

// board is a recording chat platform: every message Post made, by key.
type board struct {
	mu    sync.Mutex
	posts map[string][]Ref
	n     atomic.Int64
	// failAfterPost makes Post return an error after making the message (a timeout after the
	// platform wrote it), that many times.
	failAfterPost atomic.Int64
	// slow delays each Post.
	slow time.Duration
}

func newBoard() *board { return &board{posts: map[string][]Ref{}} }

func (b *board) poster() Poster { return boardPoster{b: b} }

// posterFor is a poster whose keys are scoped to one entry, as a real thread's are.
func (b *board) posterFor(entry string) Poster { return boardPoster{b: b, scope: entry + "/"} }

type boardPoster struct {
	b     *board
	scope string
}

func (p boardPoster) Post(ctx context.Context, key string) (Ref, error) {
	if p.b.slow > 0 {
		select {
		case <-time.After(p.b.slow):
		case <-ctx.Done():
			return Ref{}, ctx.Err()
		}
	}
	ref := Ref{Channel: "C1", ID: fmt.Sprintf("1700000000.%06d", p.b.n.Add(1))}
	p.b.mu.Lock()
	p.b.posts[p.scope+key] = append(p.b.posts[p.scope+key], ref)
	p.b.mu.Unlock()
	if p.b.failAfterPost.Add(-1) >= 0 {
		return Ref{}, errors.New("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
	}
	return ref, nil
}

func (p boardPoster) Find(ctx context.Context, key string, since time.Time) (Ref, bool, error) {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if refs := p.b.posts[p.scope+key]; len(refs) > 0 {
		return refs[0], true, nil
	}
	return Ref{}, false, nil
}

func (b *board) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.posts[key])
}

var testKey = Key{Source: "alert", Platform: "slack", Channel: "C1", Subject: `{}/{namespace="shop"}:{alertname="KubePodCrashLooping"}`}

type items struct {
	Items []string `json:"items"`
}

// TestUpdateFromManyReplicas: eight replicas create and change one entry at once; there is one
// object and no change is lost.
func TestUpdateFromManyReplicas(t *testing.T) {
	client, ns := start(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := New(client, ns, Options{Self: replica(i)})
			_, err := s.Update(t.Context(), testKey, func(e *Entry) error {
				var d items
				if err := e.DataInto(&d); err != nil {
					return err
				}
				d.Items = append(d.Items, fmt.Sprint(i))
				e.Pending = true
				return e.SetData(d)
			})
			if err != nil {
				t.Errorf("replica %d: Update: %v", i, err)
			}
		}()
	}
	wg.Wait()
	list, err := New(client, ns, Options{}).List(t.Context(), "alert", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("List = %d entries, want 1", len(list))
	}
	var d items
	if err := list[0].DataInto(&d); err != nil {
		t.Fatal(err)
	}
	sort.Strings(d.Items)
	if got, want := fmt.Sprint(d.Items), "[0 1 2 3 4 5 6 7]"; got != want {
		t.Errorf("items = %s, want %s (a lost update)", got, want)
	}
	if list[0].Key != testKey || list[0].Name() != testKey.Name() {
		t.Errorf("entry key = %+v name %s, want %+v %s", list[0].Key, list[0].Name(), testKey, testKey.Name())
	}
}

// TestSendOnceFromManyReplicas: eight replicas send the same root message at once; the
// platform gets one post and every replica that answers gets its reference.
func TestSendOnceFromManyReplicas(t *testing.T) {
	client, ns := start(t)
	b := newBoard()
	b.slow = 300 * time.Millisecond
	if _, err := New(client, ns, Options{}).Update(t.Context(), testKey, func(e *Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var busy atomic.Int64
	refs := make([]Ref, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := New(client, ns, Options{Self: replica(i)})
			ref, err := s.Send(t.Context(), testKey.Name(), RootKey, b.poster())
			switch {
			case errors.Is(err, ErrBusy):
				busy.Add(1)
			case err != nil:
				t.Errorf("replica %d: Send: %v", i, err)
			default:
				refs[i] = ref
			}
		}()
	}
	wg.Wait()
	if n := b.count(RootKey); n != 1 {
		t.Fatalf("posts = %d, want 1", n)
	}
	want := b.posts[RootKey][0]
	for i, r := range refs {
		if r != (Ref{}) && r != want {
			t.Errorf("replica %d got ref %+v, want %+v", i, r, want)
		}
	}
	// Every replica asking again now gets the recorded message, and nothing is posted.
	for i := 0; i < 8; i++ {
		ref, err := New(client, ns, Options{Self: replica(i)}).Send(t.Context(), testKey.Name(), RootKey, b.poster())
		if err != nil || ref != want {
			t.Errorf("replica %d again: Send = %+v, %v; want %+v", i, ref, err, want)
		}
	}
	if n := b.count(RootKey); n != 1 {
		t.Errorf("posts after asking again = %d, want 1", n)
	}
	t.Logf("%d of 8 replicas found the post in flight (ErrBusy)", busy.Load())
}

// TestSendWithinOneProcess: concurrent Sends of one process (a webhook and the resync, say)
// post once.
func TestSendWithinOneProcess(t *testing.T) {
	client, ns := start(t)
	b := newBoard()
	b.slow = 200 * time.Millisecond
	s := New(client, ns, Options{})
	if _, err := s.Update(t.Context(), testKey, func(e *Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Send(t.Context(), testKey.Name(), "reply/a", b.poster()); err != nil {
				t.Errorf("Send: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := b.count("reply/a"); n != 1 {
		t.Errorf("posts = %d, want 1", n)
	}
}

// TestSendAfterACrash: a replica claimed the message and died. If it had posted, the next
// Send records that post (Find); if it had not, the next Send posts. Either way: one post.
func TestSendAfterACrash(t *testing.T) {
	client, ns := start(t)
	for _, posted := range []bool{true, false} {
		t.Run(fmt.Sprintf("posted=%v", posted), func(t *testing.T) {
			b := newBoard()
			key := Key{Source: "watch", Platform: "discord", Channel: "1190000000000000001", Subject: fmt.Sprintf("prod/Deployment/shop/web-%v", posted)}
			dead := New(client, ns, Options{Self: deadHere()})
			e, err := dead.Update(t.Context(), key, func(e *Entry) error { e.Pending = true; return nil })
			if err != nil {
				t.Fatal(err)
			}
			// The dead process's claim, as it was written just before it posted.
			if _, err := dead.write(t.Context(), dead.claimed(e, RootKey), false); err != nil {
				t.Fatal(err)
			}
			if posted {
				if _, err := b.poster().Post(t.Context(), RootKey); err != nil {
					t.Fatal(err)
				}
			}
			s := New(client, ns, Options{})
			ref, err := s.Send(t.Context(), key.Name(), RootKey, b.poster())
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if n := b.count(RootKey); n != 1 {
				t.Errorf("posts = %d, want 1", n)
			}
			got, err := s.Get(t.Context(), key.Name())
			if err != nil {
				t.Fatal(err)
			}
			if got.Messages[RootKey].Ref != ref || len(got.Claims) != 0 {
				t.Errorf("entry messages %+v claims %+v; want root %+v and no claims", got.Messages, got.Claims, ref)
			}
		})
	}
}

// TestSendWhenThePostTimesOut: the platform makes the message but the answer is lost; the
// retry finds it instead of posting again.
func TestSendWhenThePostTimesOut(t *testing.T) {
	client, ns := start(t)
	b := newBoard()
	b.failAfterPost.Store(1)
	s := New(client, ns, Options{})
	if _, err := s.Update(t.Context(), testKey, func(e *Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(t.Context(), testKey.Name(), RootKey, b.poster()); err == nil {
		t.Fatal("Send succeeded, want the post's error")
	}
	e, err := s.Get(t.Context(), testKey.Name())
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := e.Claims[RootKey]; !ok || !c.Failed {
		t.Fatalf("claims after a failed post = %+v, want the root claim marked failed", e.Claims)
	}
	// Another replica tries next.
	ref, err := New(client, ns, Options{Self: replica(2)}).Send(t.Context(), testKey.Name(), RootKey, b.poster())
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n := b.count(RootKey); n != 1 || ref != b.posts[RootKey][0] {
		t.Errorf("posts = %d (ref %+v), want 1, recorded", n, ref)
	}
}

// TestSendLiveClaim: a live replica's fresh claim keeps others off; once it is older than the
// claim TTL, the message is taken over (after Find).
func TestSendLiveClaim(t *testing.T) {
	client, ns := start(t)
	b := newBoard()
	now := time.Now()
	clock := func() time.Time { return now }
	other := New(client, ns, Options{Self: replica(1), Now: clock})
	e, err := other.Update(t.Context(), testKey, func(e *Entry) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.write(t.Context(), other.claimed(e, RootKey), false); err != nil {
		t.Fatal(err)
	}
	s := New(client, ns, Options{Self: replica(2), Now: clock})
	if _, err := s.Send(t.Context(), testKey.Name(), RootKey, b.poster()); !errors.Is(err, ErrBusy) {
		t.Fatalf("Send with a live claim = %v, want ErrBusy", err)
	}
	now = now.Add(DefaultClaimTTL + time.Second)
	if _, err := s.Send(t.Context(), testKey.Name(), RootKey, b.poster()); err != nil {
		t.Fatalf("Send after the TTL: %v", err)
	}
	if n := b.count(RootKey); n != 1 {
		t.Errorf("posts = %d, want 1", n)
	}
}

// TestEdit: a message is edited once per revision, from the entry of that revision, and two
// replicas editing at once leave the newest text.
func TestEdit(t *testing.T) {
	client, ns := start(t)
	b := newBoard()
	s := New(client, ns, Options{})
	if _, err := s.Update(t.Context(), testKey, func(e *Entry) error { e.Summary = "v0"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(t.Context(), testKey.Name(), RootKey, b.poster()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var shown []string
	edit := func(ctx context.Context, e *Entry, ref Ref) error {
		mu.Lock()
		shown = append(shown, e.Summary)
		mu.Unlock()
		return nil
	}
	if err := s.Edit(t.Context(), testKey.Name(), RootKey, edit); err != nil {
		t.Fatal(err)
	}
	if len(shown) != 0 {
		t.Fatalf("edits at revision 0 = %v, want none (the post shows it)", shown)
	}
	for rev := 1; rev <= 3; rev++ {
		if _, err := s.Update(t.Context(), testKey, func(e *Entry) error {
			e.Revision++
			e.Summary = fmt.Sprintf("v%d", e.Revision)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := New(client, ns, Options{Self: replica(i)}).Edit(t.Context(), testKey.Name(), RootKey, edit)
				if err != nil && !errors.Is(err, ErrBusy) {
					t.Errorf("Edit: %v", err)
				}
			}()
		}
		wg.Wait()
		if err := s.Edit(t.Context(), testKey.Name(), RootKey, edit); err != nil && !errors.Is(err, ErrBusy) {
			t.Fatal(err)
		}
	}
	if got, want := fmt.Sprint(shown), "[v1 v2 v3]"; got != want {
		t.Errorf("edits = %s, want %s", got, want)
	}
}

// TestUnknownFieldsSurvive: labels, annotations and fields a newer bot wrote are kept.
func TestUnknownFieldsSurvive(t *testing.T) {
	client, ns := start(t)
	s := New(client, ns, Options{})
	if _, err := s.Update(t.Context(), testKey, func(e *Entry) error { e.State = "firing"; return nil }); err != nil {
		t.Fatal(err)
	}
	res := shared.Dynamic.Resource(GVR).Namespace(ns)
	obj, err := res.Get(t.Context(), testKey.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.SetAnnotations(map[string]string{"team": "shop"})
	labels := obj.GetLabels()
	labels["owner"] = "sre"
	obj.SetLabels(labels)
	if err := unstructured.SetNestedField(obj.Object, map[string]any{"newer": "field"}, "status", "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(t.Context(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(t.Context(), testKey, func(e *Entry) error { e.State = "resolved"; return nil }); err != nil {
		t.Fatal(err)
	}
	obj, err = res.Get(t.Context(), testKey.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newer, _, _ := unstructured.NestedString(obj.Object, "status", "data", "newer")
	state, _, _ := unstructured.NestedString(obj.Object, "status", "state")
	if obj.GetAnnotations()["team"] != "shop" || obj.GetLabels()["owner"] != "sre" || newer != "field" || state != "resolved" {
		t.Errorf("after Update: annotations %v labels %v data.newer %q state %q", obj.GetAnnotations(), obj.GetLabels(), newer, state)
	}
}

// TestWorkerFinishesWhatWasLeft: two replicas' workers run over entries left pending (a crash
// after the webhook's write); each thread is posted once and the entries end not pending.
func TestWorkerFinishesWhatWasLeft(t *testing.T) {
	client, ns := start(t)
	b := newBoard()
	var keys []Key
	for i := 0; i < 5; i++ {
		k := Key{Source: "alert", Platform: "slack", Channel: "C1", Subject: fmt.Sprintf("group-%d", i)}
		keys = append(keys, k)
		if _, err := New(client, ns, Options{}).Update(t.Context(), k, func(e *Entry) error { e.Pending = true; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		s := New(client, ns, Options{Self: replica(i)})
		w := &Worker{Store: s, Source: "alert", Resync: 200 * time.Millisecond, Reconcile: func(ctx context.Context, e *Entry) error {
			if _, err := s.Send(ctx, e.Name(), RootKey, b.posterFor(e.Name())); err != nil {
				return err
			}
			_, err := s.Update(ctx, e.Key, func(e *Entry) error {
				if !e.Pending {
					return ErrUnchanged
				}
				e.Pending = false
				return nil
			})
			return err
		}}
		wg.Add(1)
		go func() { defer wg.Done(); w.Run(ctx) }()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := New(client, ns, Options{}).List(t.Context(), "alert", true)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries still pending after 30 s", len(left))
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	for _, k := range keys {
		if n := b.count(k.Name() + "/" + RootKey); n != 1 {
			t.Errorf("%s: root posts = %d, want 1", k.Subject, n)
		}
	}
}

// TestSendRevision: a root posted from revision 2 is not edited to revision 2 again, and is
// edited once when the entry moves on.
func TestSendRevision(t *testing.T) {
	client, ns := start(t)
	b := newBoard()
	s := New(client, ns, Options{})
	e, err := s.Update(t.Context(), testKey, func(e *Entry) error { e.Revision = 2; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendRevision(t.Context(), e.Name(), RootKey, e.Revision, b.poster()); err != nil {
		t.Fatal(err)
	}
	edits := 0
	edit := func(ctx context.Context, e *Entry, ref Ref) error { edits++; return nil }
	if err := s.Edit(t.Context(), e.Name(), RootKey, edit); err != nil {
		t.Fatal(err)
	}
	if edits != 0 {
		t.Fatalf("edits of a root posted at the current revision = %d, want 0", edits)
	}
	if _, err := s.Update(t.Context(), testKey, func(e *Entry) error { e.Revision++; return nil }); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Edit(t.Context(), e.Name(), RootKey, edit); err != nil {
			t.Fatal(err)
		}
	}
	if edits != 1 {
		t.Errorf("edits after one new revision = %d, want 1", edits)
	}
}

// TestConnect: a store given Connect instead of a client asks it on every call, so it
// follows the store cluster's current connection and returns its error while it is down.
func TestConnect(t *testing.T) {
	client, ns := start(t)
	var down atomic.Bool
	s := New(nil, ns, Options{Connect: func() (*Client, error) {
		if down.Load() {
			return nil, errors.New("cluster prod is unavailable")
		}
		return client, nil
	}})
	e, err := s.Update(t.Context(), testKey, func(e *Entry) error { e.Revision = 1; return nil })
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	if _, err := s.Get(t.Context(), e.Name()); err == nil || !strings.Contains(err.Error(), "cluster prod is unavailable") {
		t.Errorf("Get while down = %v, want the connection's error", err)
	}
	if _, err := s.Update(t.Context(), testKey, func(e *Entry) error { e.Revision++; return nil }); err == nil {
		t.Error("Update while down succeeded")
	}
	down.Store(false)
	if got, err := s.Get(t.Context(), e.Name()); err != nil || got.Revision != 1 {
		t.Errorf("Get after the outage = %v, %v; want revision 1", got, err)
	}
}

// TestStopMidEditReleasesTheClaim: a replica stopped while its edit is under way (its context
// cancelled, as serve's is on SIGTERM) still releases its claim, so another replica edits the
// message at once instead of waiting out ClaimTTL; a post cut short the same way leaves its
// claim marked failed, so the next replica asks Find and goes on.
func TestStopMidEditReleasesTheClaim(t *testing.T) {
	client, ns := start(t)
	b := newBoard()
	one := New(client, ns, Options{Self: replica(1)})
	two := New(client, ns, Options{Self: replica(2)})
	if _, err := one.Update(t.Context(), testKey, func(e *Entry) error { e.Revision = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := one.Send(t.Context(), testKey.Name(), RootKey, b.poster()); err != nil {
		t.Fatal(err)
	}
	if _, err := one.Update(t.Context(), testKey, func(e *Entry) error { e.Revision = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	err := one.Edit(ctx, testKey.Name(), RootKey, func(ctx context.Context, e *Entry, ref Ref) error {
		stop() // the replica is told to stop while the platform call is under way
		return ctx.Err()
	})
	if err == nil {
		t.Fatal("an edit cut short returned no error")
	}
	edited := false
	if err := two.Edit(t.Context(), testKey.Name(), RootKey, func(ctx context.Context, e *Entry, ref Ref) error {
		edited = true
		return nil
	}); err != nil || !edited {
		t.Fatalf("the other replica's edit: %v (edited %v), want it done at once", err, edited)
	}

	ctx, stop = context.WithCancel(t.Context())
	cut := boardPoster{b: b, scope: "cut/"}
	if _, err := one.Send(ctx, testKey.Name(), "reply-1", postFunc(func(ctx context.Context, key string) (Ref, error) {
		stop()
		return Ref{}, ctx.Err()
	}, cut)); err == nil {
		t.Fatal("a post cut short returned no error")
	}
	if _, err := two.Send(t.Context(), testKey.Name(), "reply-1", b.poster()); err != nil {
		t.Fatalf("the other replica's post after a post cut short: %v, want it made at once", err)
	}
}

// postFuncPoster is a Poster whose Post is post and whose Find is the embedded Poster's.
type postFuncPoster struct {
	post func(ctx context.Context, key string) (Ref, error)
	Poster
}

func postFunc(post func(ctx context.Context, key string) (Ref, error), p Poster) Poster {
	return postFuncPoster{post: post, Poster: p}
}

func (p postFuncPoster) Post(ctx context.Context, key string) (Ref, error) { return p.post(ctx, key) }
