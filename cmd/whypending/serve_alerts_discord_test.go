package main

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/whypending/whypending/internal/discordfake"
)

// discordThread is one alert group in the fake Discord channel: the root, the replies in the
// thread started on it, and the PATCHes of the root.
type discordThread struct {
	root    *discordgo.Message
	replies []*discordgo.Message
	edits   []discordfake.Call
}

// last is what the root shows now: its last edit, or the post.
func (th discordThread) last() string {
	if len(th.edits) == 0 {
		return discordfake.MessageText(th.root)
	}
	return discordfake.MessageText(th.edits[len(th.edits)-1].Message)
}

func discordThreads(f *discordfake.Fake) []discordThread {
	var out []discordThread
	for _, m := range f.Thread(discordfake.ChannelID) {
		out = append(out, discordThread{root: m, replies: f.Thread(m.ID), edits: f.ChannelEdits(m.ID)})
	}
	return out
}

// startServeDiscord runs serve with config plus a discord section (HTTP interactions, the REST
// API on fake, the bot token and public key from the environment).
func startServeDiscord(t *testing.T, config string, fake *discordfake.Fake, sign discordfake.Signer) *served {
	t.Helper()
	t.Setenv("DISCORD_BOT_TOKEN", discordfake.BotToken)
	t.Setenv("DISCORD_PUBLIC_KEY", hex.EncodeToString(sign.Pub))
	s := &served{logs: &syncBuffer{}}
	s.run(t, config+fmt.Sprintf("discord:\n  applicationID: %q\n  guilds: [%q]\n  apiURL: %s/\n",
		discordfake.AppID, discordfake.GuildID, fake.URL()), discordfake.BotToken)
	return s
}

// TestServeAnswersAlertmanagerOnDiscord is TestServeAnswersAlertmanager on Discord: the real
// Alertmanager against two serve replicas whose receiver maps to a Discord channel. Each group
// gets one root message with its diagnoses as replies in a Discord thread started on it (the
// right codes); a joining alert a PATCH of the root plus one reply; the resolve a PATCH to
// Resolved; redeliveries (three rounds of every body) and repeat_interval re-sends make no
// message twice; a signed Silence 1h click by an approver, sent to both replicas, makes one
// silence in Alertmanager and the root says so; every message goes with allowed_mentions
// {parse: []}, so a mention in an alert's annotations pings nobody.
func TestServeAnswersAlertmanagerOnDiscord(t *testing.T) {
	e := startAlertsE2E(t)
	lb, front, am, crash, pending := e.lb, e.front, e.am, e.crash, e.pending
	const opsRole = "1700000000000000001"
	approver := discordfake.Member{ID: "1600000000000000001", Name: "alice", Roles: []string{opsRole}}
	stranger := discordfake.Member{ID: "1600000000000000003", Name: "mallory", Roles: []string{"1700000000000000009"}}
	config := e.config(fmt.Sprintf("approvals:\n  approvers:\n    discord: {roles: [%q]}\n", opsRole),
		fmt.Sprintf("{team: [%q]}", discordfake.ChannelID))
	fake, sign := discordfake.New(t), discordfake.NewSigner(t)
	r1, r2 := startServeDiscord(t, config, fake, sign), startServeDiscord(t, config, fake, sign)
	lb.set(r1.base, r2.base)

	crash.Annotations = map[string]string{"summary": "Pod is crash looping. @everyone <@&" + opsRole + ">"}
	am.Fire(t, crash, pending)

	waitUntil(t, 90*time.Second, "two group roots with their diagnoses in their threads", func() bool {
		ths := discordThreads(fake)
		return len(ths) == 2 && len(ths[0].replies) == 1 && len(ths[1].replies) == 1
	})
	byName := func() (crashTh, pendingTh discordThread) {
		for _, th := range discordThreads(fake) {
			if strings.Contains(discordfake.MessageText(th.root), "KubePodCrashLooping") {
				crashTh = th
			} else {
				pendingTh = th
			}
		}
		return
	}
	crashTh, pendingTh := byName()
	if text := discordfake.MessageText(crashTh.replies[0]); !strings.Contains(text, "container-exits-immediately") {
		t.Errorf("crash-looping pod's reply = %s, want code container-exits-immediately", text)
	}
	if text := discordfake.MessageText(pendingTh.replies[0]); !strings.Contains(text, "insufficient-cpu") {
		t.Errorf("Pending Deployment's reply = %s, want code insufficient-cpu", text)
	}

	// Alertmanager's retries: every body so far, three times, to both replicas.
	for range 3 {
		lb.redeliver(t, front.URL+"/alertmanager")
	}

	// A second crash-looping container joins: one PATCH of the root, one reply.
	joined := e.joined(crash)
	am.Fire(t, joined)
	waitUntil(t, 60*time.Second, "the joining alert's reply and the root's edit", func() bool {
		th, _ := byName()
		return len(th.replies) == 2 && strings.Contains(th.last(), "(2 alerts)")
	})
	if th, _ := byName(); !strings.Contains(discordfake.MessageText(th.replies[1]), "Joined, for an object diagnosed above: KubePodCrashLooping seed-crash-app/pod/crash-app (container sidecar)") {
		t.Errorf("join reply = %s, want one line naming the joining container's alert, no second diagnosis of the pod", discordfake.MessageText(th.replies[1]))
	}

	// Resolve both: the root is edited to Resolved, with one reply saying so.
	e.resolve(t, &crash, &joined)
	waitUntil(t, 60*time.Second, "the group resolved", func() bool {
		th, _ := byName()
		return len(th.replies) == 3 && strings.Contains(th.last(), "Resolved: KubePodCrashLooping (fired for")
	})
	if th, _ := byName(); !strings.Contains(discordfake.MessageText(th.replies[2]), "All resolved: the group fired for") {
		t.Errorf("resolve reply = %s", discordfake.MessageText(th.replies[2]))
	}

	// repeat_interval (4s) re-sends of the still-firing group, and three more rounds of every
	// body: nothing new.
	time.Sleep(9 * time.Second)
	for range 3 {
		lb.redeliver(t, front.URL+"/alertmanager")
	}
	time.Sleep(3 * time.Second)
	crashTh, pendingTh = byName()
	if len(crashTh.replies) != 3 || len(pendingTh.replies) != 1 || len(discordThreads(fake)) != 2 {
		t.Errorf("after re-sends: %d and %d replies in %d threads, want 3 and 1 in 2", len(crashTh.replies), len(pendingTh.replies), len(discordThreads(fake)))
	}
	made, again := 0, 0 // messages a send made; sends answered with the message their nonce made
	for _, c := range fake.Snapshot("channel-send") {
		if c.Message != nil {
			made++
		} else {
			again++
		}
	}
	if made != 2+3+1 {
		t.Errorf("%d messages made, want 6 (2 roots, 4 replies)", made)
	}
	t.Logf("%d messages made; %d more sends were answered with the message their nonce had made", made, again)
	refs := map[string]int{}
	for _, th := range discordThreads(fake) {
		for _, m := range append([]*discordgo.Message{th.root}, th.replies...) {
			refs[m.Embeds[len(m.Embeds)-1].Footer.Text[:len("ref 3f9a1c2b4d5e")]]++
		}
	}
	for ref, n := range refs {
		if n != 1 {
			t.Errorf("message %s posted %d times", ref, n)
		}
	}
	lb.mu.Lock()
	for i, code := range lb.statuses {
		if code != http.StatusOK {
			t.Errorf("delivery %d answered %d", i, code)
		}
	}
	lb.mu.Unlock()

	// Silence 1h from the Deployment group's root, a signed interaction with the root as
	// Discord sends it: a member without the approver role is refused; the approver's click,
	// delivered to both replicas, makes one silence in Alertmanager, and the root says so.
	click := func(r *served, who discordfake.Member, label string) string {
		t.Helper()
		_, th := byName()
		msg := fake.Thread(discordfake.ChannelID)[0]
		for _, m := range fake.Thread(discordfake.ChannelID) {
			if m.ID == th.root.ID {
				msg = m
			}
		}
		var customID string
		for _, b := range discordfake.ButtonsOf(msg) {
			if b.Label == label {
				customID = b.CustomID
			}
		}
		if customID == "" {
			t.Fatalf("root %s has no %s button: %s", msg.ID, label, discordfake.MessageText(msg))
		}
		token, body := discordfake.InteractionJSON(t, discordgo.InteractionMessageComponent, discordfake.ClickData(customID), who, msg)
		fake.Expect(token, discordfake.ChannelID)
		if status, _, raw := sign.Post(t, http.DefaultClient, r.base+"/discord/interactions", body); status != http.StatusOK {
			t.Fatalf("click %s = %d %s", label, status, raw)
		}
		return token
	}
	refused := click(r1, stranger, "Silence 1h")
	waitUntil(t, 30*time.Second, "the non-approver's click answered", func() bool {
		for _, c := range fake.CallsFor(refused) {
			if c.Message != nil && strings.Contains(discordfake.MessageText(c.Message), "only approvers may silence") {
				return true
			}
		}
		return false
	})
	click(r1, approver, "Silence 1h")
	click(r2, approver, "Silence 1h")
	silences := oneSilence(t, am, approver.ID, discordfake.ChannelID)
	waitUntil(t, 30*time.Second, "the root edited to show the silence", func() bool {
		_, th := byName()
		return strings.Contains(th.last(), "Silenced in Alertmanager until") && strings.Contains(th.last(), silences[0].ID)
	})
	// The root names the person, with the ID that stays true when a display name does not.
	if _, th := byName(); !strings.Contains(th.last(), "by Alice ("+approver.ID+") on discord") {
		t.Errorf("silenced root = %s, want it to say it was silenced by Alice (%s) on discord", th.last(), approver.ID)
	}
	if _, th := byName(); !strings.Contains(th.last(), "[Unsilence]") || strings.Contains(th.last(), "[Silence 1h]") {
		t.Errorf("silenced root = %s, want Unsilence in place of the Silence buttons", th.last())
	}
	if d := silences[0].EndsAt.Sub(silences[0].StartsAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("silence lasts %s, want the 1h clicked", d)
	}

	// No message may mention anyone, whatever an alert's text holds.
	for _, route := range []string{"channel-send", "channel-edit", "followup", "webhook-edit"} {
		for _, c := range fake.Snapshot(route) {
			discordfake.NoMentionsSent(t, c)
		}
	}

	for _, th := range discordThreads(fake) {
		t.Logf("root %s:\n%s", th.root.ID, indent(discordfake.MessageText(th.root)))
		for _, r := range th.replies {
			t.Logf("  reply in thread %s:\n%s", th.root.ID, indent(discordfake.MessageText(r)))
		}
		for _, e := range th.edits {
			t.Logf("  PATCH of the root:\n%s", indent(discordfake.MessageText(e.Message)))
		}
	}
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }
