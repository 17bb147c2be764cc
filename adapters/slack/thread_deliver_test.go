package slack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
)

// TestThreadDeliveredOnce: a thread delivered through the ledger to the fake Slack, whose
// answer to the root's chat.postMessage is lost (the root was posted): a second replica
// finds the root in the channel's history by its metadata instead of posting it again, posts
// the replies in its thread. A root found that way is recorded as showing no revision (nobody
// knows what it was rendered from), so it is edited once to the current one; a new revision
// is one more chat.update.
func TestThreadDeliveredOnce(t *testing.T) {
	stores := chattest.Ledgers(t)
	f := newFakeSlack(t, nil)
	platforms := thread.Platforms{"slack": slack.New(slack.Options{Core: &chattest.RecordingCore{}, API: f.api(),
		SigningSecret: testSecret, Log: chattest.QuietLog}).Threads()}
	ctx := t.Context()
	key := ledger.Key{Source: "alert", Platform: "slack", Channel: channel, Subject: `{}:{alertname="KubePodCrashLooping"}`}
	render := func(e *ledger.Entry) thread.Thread {
		th := thread.Thread{Root: thread.Message{Key: ledger.RootKey, Render: func(context.Context) (chat.Message, error) {
			return chat.Message{Title: fmt.Sprintf("root, revision %d", e.Revision)}, nil
		}}}
		for _, r := range []string{"a", "b"} {
			th.Replies = append(th.Replies, thread.Message{Key: "alert-" + r, Render: func(context.Context) (chat.Message, error) {
				return chat.Message{Title: "diagnosis " + r}, nil
			}})
		}
		return th
	}
	one, two := stores("replica-1"), stores("replica-2")
	e, err := one.Update(ctx, key, func(e *ledger.Entry) error { e.Revision = 1; return nil })
	if err != nil {
		t.Fatal(err)
	}
	f.loseAnswers.Store(1)
	if _, err := thread.Deliver(ctx, one, platforms, e, render); err == nil {
		t.Fatal("Deliver with the root's answer lost returned no error")
	}
	for _, s := range []*ledger.Store{two, one, two} {
		e, err := s.Get(ctx, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := thread.Deliver(ctx, s, platforms, e, render); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := one.Update(ctx, key, func(e *ledger.Entry) error { e.Revision = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*ledger.Store{one, two} {
		e, _ := s.Get(ctx, e.Name())
		if _, err := thread.Deliver(ctx, s, platforms, e, render); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	posts, updates := append([]webMessage(nil), f.posts...), append([]webMessage(nil), f.updates...)
	f.mu.Unlock()
	if len(posts) != 3 || posts[0].ThreadTS != "" || posts[1].ThreadTS != posts[0].TS || posts[2].ThreadTS != posts[0].TS {
		t.Fatalf("posts = %+v, want the root once and its two replies in its thread", posts)
	}
	if len(updates) != 2 || updates[0].TS != posts[0].TS || !strings.Contains(updates[0].Text, "root, revision 1") ||
		!strings.Contains(updates[1].Text, "root, revision 2") {
		t.Errorf("updates = %+v, want the found root edited to revision 1, then to 2", updates)
	}
	for i, m := range posts {
		t.Logf("post %d: ts=%s thread=%s mark=%s %q", i, m.TS, m.ThreadTS, m.Mark, m.Text)
	}
}
