package thread

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/proc"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/ledger"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// stores starts a real API server with the chart's CRDs and returns replica i's ledger store
// in a namespace of the test's own.
func stores(t *testing.T) func(i int) *ledger.Store {
	t.Helper()
	c := testcluster.Start(t, testenv.Options{})
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(t.Context(), os.DirFS(filepath.Join(root, "charts", "whypending", "crds")), "."); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wp"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	notes, err := ledger.NewClient(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return func(i int) *ledger.Store {
		return ledger.New(notes, "wp", ledger.Options{Self: proc.Identity{Host: fmt.Sprintf("whypending-%d", i), PID: 1, Start: 1}})
	}
}

// board is a recording chat platform: every post (by mark) and edit, in order.
type board struct {
	mu    sync.Mutex
	posts []post
	edits []post
	n     atomic.Int64
	// loseAnswer makes the next Post make the message and return an error.
	loseAnswer atomic.Bool
	slow       time.Duration
}

type post struct {
	ref          ledger.Ref
	thread, mark string
	m            chat.Message
}

func (b *board) Post(ctx context.Context, channel, thread, mark string, m chat.Message) (ledger.Ref, error) {
	time.Sleep(b.slow)
	id := fmt.Sprintf("m%d", b.n.Add(1))
	ref := ledger.Ref{Channel: channel, ID: id}
	if thread == "" {
		ref.Thread = id
	}
	b.mu.Lock()
	b.posts = append(b.posts, post{ref: ref, thread: thread, mark: mark, m: m})
	b.mu.Unlock()
	if b.loseAnswer.CompareAndSwap(true, false) {
		return ledger.Ref{}, errors.New("context deadline exceeded")
	}
	return ref, nil
}

func (b *board) Find(ctx context.Context, channel, thread, mark string, since time.Time) (ledger.Ref, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.posts {
		if p.mark == mark && p.thread == thread {
			return p.ref, true, nil
		}
	}
	return ledger.Ref{}, false, nil
}

func (b *board) Edit(ctx context.Context, ref ledger.Ref, mark string, m chat.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.edits = append(b.edits, post{ref: ref, mark: mark, m: m})
	return nil
}

func (b *board) titles() (posts, edits []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.posts {
		posts = append(posts, p.m.Title)
	}
	for _, p := range b.edits {
		edits = append(edits, p.m.Title)
	}
	return posts, edits
}

// state is what the test feature keeps in the entry: the replies it wants.
type state struct {
	Replies []string `json:"replies"`
}

// render is the test feature: the root says the revision it was rendered from, and each reply
// its name; renders counts the calls of reply renders (the expensive part, a diagnosis).
func render(renders *atomic.Int64) Render {
	return func(e *ledger.Entry) Thread {
		var s state
		_ = e.DataInto(&s)
		th := Thread{Root: Message{Key: ledger.RootKey, Render: func(context.Context) (chat.Message, error) {
			return chat.Message{Title: fmt.Sprintf("root r%d", e.Revision)}, nil
		}}}
		for _, r := range s.Replies {
			th.Replies = append(th.Replies, Message{Key: "reply/" + r, Render: func(context.Context) (chat.Message, error) {
				renders.Add(1)
				return chat.Message{Title: r}, nil
			}})
		}
		return th
	}
}

var key = ledger.Key{Source: "alert", Platform: "slack", Channel: "C1", Subject: "{}:{alertname=\"X\"}"}

// TestDeliver: the root and the replies are posted once and in order, across repeated and
// concurrent deliveries by four replicas, each reply rendered once; a change is one edit,
// rendered from the new revision, plus the new reply.
func TestDeliver(t *testing.T) {
	store := stores(t)
	b := &board{slow: 50 * time.Millisecond}
	var renders atomic.Int64
	p := Platforms{"slack": b}
	update := func(fn func(e *ledger.Entry, s *state)) *ledger.Entry {
		e, err := store(0).Update(t.Context(), key, func(e *ledger.Entry) error {
			var s state
			if err := e.DataInto(&s); err != nil {
				return err
			}
			fn(e, &s)
			return e.SetData(s)
		})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	deliverAll := func() {
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				for attempt := 0; ; attempt++ {
					e, err := store(i).Get(t.Context(), key.Name())
					if err != nil {
						t.Error(err)
						return
					}
					_, err = Deliver(t.Context(), store(i), p, e, render(&renders))
					if err == nil {
						return
					}
					if !errors.Is(err, ledger.ErrBusy) || attempt > 100 {
						t.Errorf("replica %d: Deliver: %v", i, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		wg.Wait()
	}

	update(func(e *ledger.Entry, s *state) { s.Replies = []string{"a", "b"} })
	deliverAll()
	deliverAll()
	posts, edits := b.titles()
	if fmt.Sprint(posts) != "[root r0 a b]" || len(edits) != 0 {
		t.Fatalf("after the first deliveries: posts %q, edits %q; want [root r0 a b] and no edit", posts, edits)
	}
	b.mu.Lock()
	for _, p := range b.posts[1:] {
		if p.thread != b.posts[0].ref.Thread {
			t.Errorf("reply %q went to thread %q, want the root's %q", p.m.Title, p.thread, b.posts[0].ref.Thread)
		}
	}
	b.mu.Unlock()

	e := update(func(e *ledger.Entry, s *state) { e.Revision++; s.Replies = append(s.Replies, "c") })
	deliverAll()
	posts, edits = b.titles()
	if fmt.Sprint(posts) != "[root r0 a b c]" || fmt.Sprint(edits) != "[root r1]" {
		t.Errorf("after a change: posts %q, edits %q; want one more reply and one edit to r1", posts, edits)
	}
	if n := renders.Load(); n != 3 {
		t.Errorf("reply renders = %d, want 3 (each reply once, by the replica that posted it)", n)
	}
	got, err := store(0).Get(t.Context(), e.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !Done(got, render(&renders)(got)) {
		t.Errorf("Done = false after delivery; messages %+v", got.Messages)
	}
}

// TestDeliverAfterALostAnswer: the platform made the root but its answer was lost; the next
// delivery (another replica) finds it by its mark instead of posting it again.
func TestDeliverAfterALostAnswer(t *testing.T) {
	store := stores(t)
	b := &board{}
	b.loseAnswer.Store(true)
	var renders atomic.Int64
	e, err := store(0).Update(t.Context(), key, func(e *ledger.Entry) error { return e.SetData(state{Replies: []string{"a"}}) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Deliver(t.Context(), store(0), Platforms{"slack": b}, e, render(&renders)); err == nil {
		t.Fatal("Deliver succeeded, want the lost answer's error")
	}
	if e, err = store(1).Get(t.Context(), e.Name()); err != nil {
		t.Fatal(err)
	}
	if _, err := Deliver(t.Context(), store(1), Platforms{"slack": b}, e, render(&renders)); err != nil {
		t.Fatal(err)
	}
	if posts, _ := b.titles(); fmt.Sprint(posts) != "[root r0 a]" {
		t.Errorf("posts = %q, want the root once and its reply", posts)
	}
}

// TestDeliverWithoutThePlatform: an entry whose platform is not connected is an error, and
// nothing is claimed.
func TestDeliverWithoutThePlatform(t *testing.T) {
	store := stores(t)
	e, err := store(0).Update(t.Context(), key, func(e *ledger.Entry) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var renders atomic.Int64
	if _, err := Deliver(t.Context(), store(0), Platforms{}, e, render(&renders)); err == nil {
		t.Fatal("Deliver without the platform succeeded")
	}
	if e, err = store(0).Get(t.Context(), e.Name()); err != nil || len(e.Claims) != 0 {
		t.Errorf("claims = %+v, %v; want none", e.Claims, err)
	}
}

// TestDeliverClearsPending: the last message's record also clears the pending mark (no write
// of its own), both for a new thread and for a change (an edit and a new reply), and a
// delivery with nothing left to post leaves the mark to its caller.
func TestDeliverClearsPending(t *testing.T) {
	store := stores(t)
	b := &board{}
	var renders atomic.Int64
	p := Platforms{"slack": b}
	write := func(fn func(e *ledger.Entry, s *state)) *ledger.Entry {
		t.Helper()
		e, err := store(0).Update(t.Context(), key, func(e *ledger.Entry) error {
			var s state
			if err := e.DataInto(&s); err != nil {
				return err
			}
			fn(e, &s)
			e.Revision++
			e.Pending = true
			return e.SetData(s)
		})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	check := func(what string, e *ledger.Entry) {
		t.Helper()
		cur, err := Deliver(t.Context(), store(0), p, e, render(&renders))
		if err != nil {
			t.Fatal(err)
		}
		live, err := store(1).Get(t.Context(), e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if cur.Pending || live.Pending || !Done(live, render(&renders)(live)) {
			t.Errorf("%s: returned pending %v, stored pending %v, done %v; want the mark cleared by the last record", what, cur.Pending, live.Pending, Done(live, render(&renders)(live)))
		}
	}
	check("a new thread", write(func(e *ledger.Entry, s *state) { s.Replies = []string{"a", "b"} }))
	check("a change", write(func(e *ledger.Entry, s *state) { s.Replies = append(s.Replies, "c") }))
	check("an edit alone", write(func(e *ledger.Entry, s *state) {}))
	// Everything posted already: Deliver writes nothing, the entry stays pending for its caller.
	e := write(func(e *ledger.Entry, s *state) {})
	e, err := store(0).Update(t.Context(), key, func(e *ledger.Entry) error {
		m := e.Messages[ledger.RootKey]
		m.Shows = e.Revision
		e.Messages[ledger.RootKey] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := Deliver(t.Context(), store(0), p, e, render(&renders))
	if err != nil || !cur.Pending {
		t.Errorf("nothing to post: pending %v, err %v; want the entry back as it was, pending", cur.Pending, err)
	}
	if posts, edits := b.titles(); len(posts) != 4 || len(edits) != 2 {
		t.Errorf("posts %v, edits %v; want root, a, b, c and two edits", posts, edits)
	}
}
