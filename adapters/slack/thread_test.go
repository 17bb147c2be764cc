package slack_test

import (
	"testing"
	"time"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
)

// TestThreads: a root is a chat.postMessage with metadata carrying its mark, a reply one with
// thread_ts, an edit a chat.update of the root; after a post whose answer was lost, Find
// reads the message back from the channel's history (or the thread's replies) by its mark,
// and does not find a mark nobody posted.
func TestThreads(t *testing.T) {
	f := newFakeSlack(t, nil)
	a := slack.New(slack.Options{Core: &chattest.RecordingCore{}, API: f.api(), SigningSecret: testSecret, Log: chattest.QuietLog})
	th := a.Threads()
	ctx := t.Context()
	since := time.Now().Add(-time.Minute)

	root, err := th.Post(ctx, channel, "", "alert-1/root", chat.Message{Title: "KubePodCrashLooping firing"})
	if err != nil {
		t.Fatal(err)
	}
	if root.Thread != root.ID || root.Channel != channel {
		t.Fatalf("root ref = %+v, want its ts as the thread", root)
	}
	reply, err := th.Post(ctx, channel, root.Thread, "alert-1/alert/a", chat.Message{Title: "diagnosis"})
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Edit(ctx, root, "alert-1/root", chat.Message{Title: "KubePodCrashLooping resolved"}); err != nil {
		t.Fatal(err)
	}
	f.loseAnswers.Store(1)
	if _, err := th.Post(ctx, channel, root.Thread, "alert-1/alert/b", chat.Message{Title: "lost"}); err == nil {
		t.Fatal("a post whose answer was lost returned no error")
	}

	f.mu.Lock()
	posts, updates := append([]webMessage(nil), f.posts...), append([]webMessage(nil), f.updates...)
	f.mu.Unlock()
	if len(posts) != 3 || posts[0].ThreadTS != "" || posts[1].ThreadTS != root.ID || posts[0].Mark != "alert-1/root" || posts[1].Mark != "alert-1/alert/a" {
		t.Fatalf("posts = %+v, want a root and two replies in its thread, each with its mark", posts)
	}
	if len(updates) != 1 || updates[0].TS != root.ID || updates[0].Mark != "alert-1/root" || updates[0].Text == posts[0].Text {
		t.Fatalf("updates = %+v, want one chat.update of the root keeping its mark", updates)
	}

	for _, c := range []struct {
		thread, mark, want string
		found              bool
	}{
		{"", "alert-1/root", root.ID, true},
		{root.Thread, "alert-1/alert/a", reply.ID, true},
		{root.Thread, "alert-1/alert/b", posts[2].TS, true}, // made, though its answer was lost
		{root.Thread, "alert-1/alert/c", "", false},
		{"", "alert-1/alert/a", "", false}, // a reply is not in the channel's history
	} {
		ref, found, err := th.Find(ctx, channel, c.thread, c.mark, since)
		if err != nil {
			t.Fatal(err)
		}
		if found != c.found || ref.ID != c.want {
			t.Errorf("Find(%q, %q) = %+v %v, want %q %v", c.thread, c.mark, ref, found, c.want, c.found)
		}
	}
	f.mu.Lock()
	reads := f.reads
	f.mu.Unlock()
	if len(reads) == 0 {
		t.Error("Find read nothing back")
	}
}
