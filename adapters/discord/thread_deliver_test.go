package discord_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/discordfake"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
)

// TestThreadDeliveredOnce: a thread delivered through the ledger to the fake Discord, whose
// answer to the first reply is lost (the reply was made, in the thread started on the root):
// a second replica's Find reads the thread back, sees the reply by its footer ref and records
// it instead of posting it again; a new revision is one PATCH of the root.
func TestThreadDeliveredOnce(t *testing.T) {
	stores := chattest.Ledgers(t)
	f := discordfake.New(t)
	platforms := thread.Platforms{"discord": discord.New(discord.Options{Core: &chattest.RecordingCore{}, Session: f.Session(t),
		ApplicationID: discordfake.AppID, PublicKey: discordfake.NewSigner(t).Pub, Log: chattest.QuietLog, Metrics: chat.NewMetrics(prometheus.NewRegistry())}).Threads()}
	ctx := t.Context()
	key := ledger.Key{Source: "alert", Platform: "discord", Channel: discordfake.ChannelID, Subject: `{}:{alertname="KubePodCrashLooping"}`}
	render := func(e *ledger.Entry) thread.Thread {
		th := thread.Thread{Root: thread.Message{Key: ledger.RootKey, Render: func(context.Context) (chat.Message, error) {
			return chat.Message{Title: fmt.Sprintf("root, revision %d", e.Revision)}, nil
		}}}
		for _, r := range []string{"a", "b"}[:min(2, 2*int(e.Revision-1))] { // replies from revision 2
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
	deliver := func(s *ledger.Store) error {
		e, err := s.Get(ctx, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		_, err = thread.Deliver(ctx, s, platforms, e, render)
		return err
	}
	if err := deliver(one); err != nil { // the root alone
		t.Fatal(err)
	}
	if _, err := one.Update(ctx, key, func(e *ledger.Entry) error { e.Revision = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	f.LoseAnswers.Store(1)
	if err := deliver(one); err == nil {
		t.Fatal("Deliver with the first reply's answer lost returned no error")
	}
	for _, s := range []*ledger.Store{two, one, two} {
		if err := deliver(s); err != nil {
			t.Fatal(err)
		}
	}
	top := f.Thread(discordfake.ChannelID)
	if len(top) != 1 || top[0].Embeds[0].Title != "root, revision 2" {
		t.Fatalf("channel = %v, want the root once, edited to revision 2", titles(top))
	}
	if replies := f.Thread(top[0].ID); len(replies) != 2 || replies[0].Embeds[0].Title != "diagnosis a" || replies[1].Embeds[0].Title != "diagnosis b" {
		t.Errorf("thread = %v, want each reply once, in order", titles(replies))
	}
}
