package discord_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/discordfake"
)

// TestThreads: a root is a channel message with a nonce and enforce_nonce; the first reply
// starts a Discord thread on it and goes there; an edit is a PATCH of the root; a post whose
// answer was lost is found by Find, and a retry with the same nonce makes no second message; Find tells a
// message that was made (by its footer ref) from one that was not.
func TestThreads(t *testing.T) {
	f := discordfake.New(t)
	a := discord.New(discord.Options{Core: &chattest.RecordingCore{}, Session: f.Session(t), ApplicationID: discordfake.AppID,
		PublicKey: discordfake.NewSigner(t).Pub, Log: chattest.QuietLog, Metrics: chat.NewMetrics(prometheus.NewRegistry())})
	th := a.Threads()
	ctx := t.Context()
	since := time.Now().Add(-time.Minute)

	root, err := th.Post(ctx, discordfake.ChannelID, "", "alert-1/root", chat.Message{Title: "KubePodCrashLooping firing"})
	if err != nil {
		t.Fatal(err)
	}
	if root.Thread != root.ID {
		t.Fatalf("root ref = %+v, want its ID as the thread", root)
	}
	reply, err := th.Post(ctx, discordfake.ChannelID, root.Thread, "alert-1/alert/a", chat.Message{Title: "diagnosis"})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Channel != root.ID {
		t.Fatalf("reply ref = %+v, want it in the thread %s", reply, root.ID)
	}
	if _, err := th.Post(ctx, discordfake.ChannelID, root.Thread, "alert-1/alert/b", chat.Message{Title: "second"}); err != nil {
		t.Fatal(err)
	}
	if err := th.Edit(ctx, root, "alert-1/root", chat.Message{Title: "KubePodCrashLooping resolved"}); err != nil {
		t.Fatal(err)
	}
	f.LoseAnswers.Store(1)
	if _, err := th.Post(ctx, discordfake.ChannelID, root.Thread, "alert-1/alert/c", chat.Message{Title: "lost once"}); err == nil {
		t.Fatal("a post whose answer was lost returned no error")
	}
	lost, found, err := th.Find(ctx, discordfake.ChannelID, root.Thread, "alert-1/alert/c", since)
	if err != nil || !found {
		t.Fatalf("Find after a lost answer = %v %v, want the message that was made", found, err)
	}
	again, err := th.Post(ctx, discordfake.ChannelID, root.Thread, "alert-1/alert/c", chat.Message{Title: "lost once"})
	if err != nil || again.ID != lost.ID {
		t.Fatalf("retry with the nonce = %+v %v, want the message made before (%s)", again, err, lost.ID)
	}

	top, inThread := f.Thread(discordfake.ChannelID), f.Thread(root.ID)
	if len(top) != 1 || top[0].Embeds[0].Title != "KubePodCrashLooping resolved" {
		t.Fatalf("channel = %d messages (%v), want the root, edited", len(top), titles(top))
	}
	if len(inThread) != 3 || inThread[2].ID != again.ID {
		t.Fatalf("thread = %v, want 3 replies, the lost answer's message made once", titles(inThread))
	}
	for _, m := range append(top, inThread...) {
		if !strings.HasPrefix(m.Embeds[0].Footer.Text, "ref ") {
			t.Errorf("message %s footer = %q, want its ref first", m.ID, m.Embeds[0].Footer.Text)
		}
	}

	for _, c := range []struct {
		thread, mark, want string
		found              bool
	}{
		{"", "alert-1/root", root.ID, true},
		{root.Thread, "alert-1/alert/a", reply.ID, true},
		{root.Thread, "alert-1/alert/d", "", false},
		{"", "alert-1/alert/a", "", false},
		{top[0].ID + "9", "alert-1/alert/a", "", false}, // no such thread: nothing was posted there
	} {
		ref, found, err := th.Find(ctx, discordfake.ChannelID, c.thread, c.mark, since)
		if err != nil {
			t.Fatalf("Find(%q, %q): %v", c.thread, c.mark, err)
		}
		if found != c.found || ref.ID != c.want {
			t.Errorf("Find(%q, %q) = %+v %v, want %q %v", c.thread, c.mark, ref, found, c.want, c.found)
		}
	}
}

func titles(ms []*discordgo.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Embeds[0].Title)
	}
	return out
}
