package discord_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/bot/digest"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/discordfake"
)

// Members of the e2e guild. Approvers: alice by user ID, holders of opsRole (bob).
var mallory = discordfake.Member{ID: "1600000000000000003", Name: "mallory", Roles: []string{"1700000000000000009"}}

const stuckPod = "seed-ipam-leaked/shop-7frd7stjbt-2kq8r"

// e2eEnv is a real control plane with a scenario loaded, the RemediationRequest CRD, a fake
// Discord REST API and bot replicas serving the interactions endpoint.
type e2eEnv struct {
	*chattest.Env
	fake     *discordfake.Fake
	sign     discordfake.Signer
	adapters []*discord.Adapter
	urls     []string
}

type e2eOptions struct {
	scenario string
	replicas int
	// cached uses triage's informer-backed collector, as serve does.
	cached bool
	// authz, when set, turns per-user authorization on: each replica's bot checks people
	// against the cluster's RBAC with these options (the cluster and the log are added).
	authz *authz.Options
	// approvers are the Discord approvers by user ID besides alice (and opsRole).
	approvers []string
	// log receives the bots' logs (nil: discarded).
	log *slog.Logger
}

func newE2E(t testing.TB, o e2eOptions) *e2eEnv {
	t.Helper()
	if o.replicas == 0 {
		o.replicas = 1
	}
	e := &e2eEnv{Env: chattest.Start(t, o.scenario, o.cached), fake: discordfake.New(t), sign: discordfake.NewSigner(t)}
	for range o.replicas {
		// Each replica has its own bot, runner, session and worker pool; they share the
		// cluster (and so the RemediationRequests) and the Discord application.
		log := o.log
		if log == nil {
			log = chattest.QuietLog
		}
		b := bot.New(bot.Options{
			Clusters: []*bot.Cluster{e.BotCluster()},
			Store:    e.Store,
			Policy: approval.Policy{Approvers: map[string]approval.Approvers{
				"discord": {Users: append([]string{alice.ID}, o.approvers...), Groups: []string{opsRole}},
				"slack":   {Users: []string{bob.ID}}, // bob's Discord ID as a Slack approver: never valid on Discord
			}, TwoPersonRule: true},
			Authorizer: e.Authorizer(o.authz, log),
			Log:        log,
		})
		a := discord.New(discord.Options{Core: b, Session: e.fake.Session(t), ApplicationID: discordfake.AppID, PublicKey: e.sign.Pub,
			Clusters: []string{chattest.ClusterName}, Log: chattest.QuietLog, Metrics: chat.NewMetrics(prometheus.NewRegistry())})
		e.adapters = append(e.adapters, a)
		e.urls = append(e.urls, chattest.Serve(t, a).URL+"/discord/interactions")
	}
	return e
}

// command sends a signed slash command to replica 0 and returns the interaction token and
// the initial response.
func (e *e2eEnv) command(t *testing.T, who discordfake.Member, data map[string]any) (string, *discordfake.InitialResponse, string) {
	t.Helper()
	token, body := discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand, data, who, nil)
	e.fake.Expect(token, discordfake.ChannelID)
	status, resp, raw := e.sign.Post(t, http.DefaultClient, e.urls[0], body)
	if status != http.StatusOK {
		t.Fatalf("command = %d %s", status, raw)
	}
	return token, resp, raw
}

// click sends a signed button click on msg to a replica.
func (e *e2eEnv) click(t *testing.T, replica int, who discordfake.Member, customID string, msg *discordgo.Message) (string, *discordfake.InitialResponse, string) {
	t.Helper()
	token, body := discordfake.InteractionJSON(t, discordgo.InteractionMessageComponent, discordfake.ClickData(customID), who, msg)
	e.fake.Expect(token, discordfake.ChannelID)
	status, resp, raw := e.sign.Post(t, http.DefaultClient, e.urls[replica], body)
	if status != http.StatusOK {
		t.Fatalf("click = %d %s", status, raw)
	}
	return token, resp, raw
}

// answer waits for the first REST call made with an interaction token (the edit of the
// deferred response, or a follow-up).
func (e *e2eEnv) answer(t *testing.T, token string) discordfake.Call {
	t.Helper()
	chattest.WaitFor(t, 60*time.Second, "the answer to "+token, func() bool { return len(e.fake.CallsFor(token)) > 0 })
	return e.fake.CallsFor(token)[0]
}

// button finds the button of msg whose custom ID starts with prefix.
func button(t *testing.T, msg *discordgo.Message, prefix string) *discordgo.Button {
	t.Helper()
	for _, b := range discordfake.ButtonsOf(msg) {
		if strings.HasPrefix(b.CustomID, prefix) {
			return b
		}
	}
	t.Fatalf("message %q has no button %s…", discordfake.MessageText(msg), prefix)
	return nil
}

// confirm presses a button with a confirmation and returns the go-ahead's custom ID from the
// ephemeral "are you sure?".
func (e *e2eEnv) confirm(t *testing.T, who discordfake.Member, customID string, msg *discordgo.Message) string {
	t.Helper()
	_, resp, raw := e.click(t, 0, who, customID, msg)
	if resp.Type != discordgo.InteractionResponseChannelMessageWithSource || resp.Data.Flags != discordgo.MessageFlagsEphemeral {
		t.Fatalf("confirmation = %s, want an ephemeral message", raw)
	}
	var body struct {
		Data struct {
			Components []struct {
				Components []struct {
					CustomID string `json:"custom_id"`
				} `json:"components"`
			} `json:"components"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(raw), &body); err != nil || len(body.Data.Components) == 0 {
		t.Fatalf("confirmation %s: %v", raw, err)
	}
	return body.Data.Components[0].Components[0].CustomID
}

// TestE2EWhyPendingAndReleaseLeakedIPs is the main path on the seed-ipam-leaked
// scenario, over the signed interactions endpoint of two bot replicas: /why-pending is
// deferred and edited; the digest is posted to a Discord channel with its button; /ipam
// release-ips plans; refusals change nothing; a member with an approver role approves (twice
// at once, on both replicas: it runs once); the repair runs on the real control plane, the
// plan message is edited, the RemediationRequest records platform and guild, and a check
// shows 0 leaked. The gateway handler is then fed the same payloads.
func TestE2EWhyPendingAndReleaseLeakedIPs(t *testing.T) {
	e := newE2E(t, e2eOptions{scenario: "seed-ipam-leaked", replicas: 2, cached: true})

	t.Run("200 concurrent signed /why-pending are acknowledged well within 3 s and answered once", func(t *testing.T) {
		acks, followUps := burst(t, e, chattest.BenchClient(concurrentInteractions), e.Pods(t, "seed-ipam-leaked"), concurrentInteractions)
		t.Logf("%d concurrent interactions: ack p50 %s p99 %s max %s; follow-up p50 %s p99 %s max %s",
			concurrentInteractions, chattest.Percentile(acks, 0.50), chattest.Percentile(acks, 0.99), acks[len(acks)-1],
			chattest.Percentile(followUps, 0.50), chattest.Percentile(followUps, 0.99), followUps[len(followUps)-1])
		// The 100 ms target is the benchmark's; the test guards Discord's hard 3 s limit with
		// a margin for a loaded CI machine.
		if p99 := chattest.Percentile(acks, 0.99); p99 > 2*time.Second {
			t.Errorf("ack p99 = %s, want well under Discord's 3 s (target 100 ms)", p99)
		}
	})

	t.Run("/why-pending is deferred, then the answer is edited in", func(t *testing.T) {
		token, resp, raw := e.command(t, alice, discordfake.CommandData("why-pending", "", "pod", stuckPod))
		if resp.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || resp.Data.Flags != 0 {
			t.Fatalf("response = %s, want a public deferred response", raw)
		}
		got := e.answer(t, token)
		if got.Path != "/api/v9/webhooks/"+discordfake.AppID+"/"+token+"/messages/@original" {
			t.Fatalf("answer went to %s %s, want the edit of the deferred response", got.Method, got.Path)
		}
		text := discordfake.MessageText(got.Message)
		for _, want := range []string{"seed\\-ipam\\-leaked/shop\\-7frd7stjbt\\-2kq8r is ContainerCreating: calico-ipam-exhausted",
			"calico-ipam-exhausted", "[Release 181 leaked IPs]", "cluster test"} {
			if !strings.Contains(strings.ReplaceAll(text, `\-`, "-"), strings.ReplaceAll(want, `\-`, "-")) {
				t.Errorf("answer lacks %q:\n%s", want, text)
			}
		}
		if got.Message.Embeds[0].Color != 0xED4245 && got.Message.Embeds[0].Color != 0xE67E22 {
			t.Errorf("colour = %#x, want the severity's (red or orange)", got.Message.Embeds[0].Color)
		}
		discordfake.NoMentionsSent(t, got)
	})

	t.Run("a mention in the pod name is escaped and pings nobody", func(t *testing.T) {
		token, _, _ := e.command(t, alice, discordfake.CommandData("why-pending", "", "pod", "@everyone<@&"+opsRole+">"))
		got := e.answer(t, token)
		text := discordfake.MessageText(got.Message)
		if !strings.Contains(text, `\@everyone\<\@&`+opsRole+`\>`) || strings.Contains(strings.ReplaceAll(text, `\<\@&`, ""), "<@&") {
			t.Errorf("answer = %q, want the mention shown escaped", text)
		}
		discordfake.NoMentionsSent(t, got)
	})

	t.Run("the digest is posted to a Discord channel with its button, which plans", func(t *testing.T) {
		d := &digest.Job{Clusters: []digest.Cluster{{Name: chattest.ClusterName, IPAM: e.Calico}}, Channels: []string{discordfake.ChannelID},
			Poster: chat.Platforms{discord.Platform: e.adapters[0]}, Render: bot.RenderDigest}
		if err := d.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		sends := e.fake.Snapshot("channel-send")
		if len(sends) == 0 || sends[0].Path != "/api/v9/channels/"+discordfake.ChannelID+"/messages" || sends[0].Auth != "Bot "+discordfake.BotToken {
			t.Fatalf("digest posts = %+v, want POST /channels/%s/messages with the bot token", sends, discordfake.ChannelID)
		}
		digest := sends[0].Message
		if text := discordfake.MessageText(digest); !strings.Contains(text, "IPAM digest for test: 181 leaked IPs") {
			t.Errorf("digest = %q", text)
		}
		discordfake.NoMentionsSent(t, sends[0])
		release := button(t, digest, "plan:|release-leaked-ips")
		token, resp, raw := e.click(t, 0, bob, release.CustomID, digest)
		if resp.Type != discordgo.InteractionResponseDeferredMessageUpdate {
			t.Fatalf("click = %s, want a deferred update", raw)
		}
		post := e.answer(t, token)
		if post.Route != "followup" || !strings.Contains(discordfake.MessageText(post.Message), "Approval needed: release 181 leaked IPs on test") {
			t.Fatalf("plan from the digest = %s %q, want a follow-up with the plan", post.Route, discordfake.MessageText(post.Message))
		}
		planID := strings.TrimPrefix(button(t, post.Message, "?approve|").CustomID, "?approve|")
		if rec := e.Record(t, planID); rec.RequestedBy.Platform != "discord" || rec.RequestedBy.Team != discordfake.GuildID || rec.RequestedBy.ID != bob.ID {
			t.Errorf("requested by %+v, want bob in the guild", rec.RequestedBy)
		}
		// Its requester withdraws it.
		token, _, _ = e.click(t, 0, bob, "deny|"+planID, post.Message)
		if got := e.answer(t, token); !strings.Contains(discordfake.MessageText(got.Message), "Denied:") {
			t.Errorf("after deny: %q", discordfake.MessageText(got.Message))
		}
		if rec := e.Record(t, planID); rec.State != approval.StateDenied {
			t.Errorf("state = %s, want Denied", rec.State)
		}
	})

	token, _, _ := e.command(t, alice, discordfake.CommandData("ipam", "release-ips"))
	planEdit := e.answer(t, token)
	plan := planEdit.Message
	if !strings.Contains(discordfake.MessageText(plan), "Approval needed: release 181 leaked IPs on test") {
		t.Fatalf("plan message:\n%s", discordfake.MessageText(plan))
	}
	approve := button(t, plan, "?approve|")
	planID := strings.TrimPrefix(approve.CustomID, "?approve|")
	chattest.WaitFor(t, 10*time.Second, "the plan message reference", func() bool { return e.Record(t, planID).MessageRef != "" })
	rec := e.Record(t, planID)
	if rec.State != approval.StatePending || !strings.HasPrefix(rec.MessageRef, "discord:"+discordfake.ChannelID+"/"+plan.ID) || len(rec.Plan.Items) != 181 {
		t.Fatalf("RemediationRequest = %s ref %q items %d, want Pending, discord:%s/%s, 181", rec.State, rec.MessageRef, len(rec.Plan.Items), discordfake.ChannelID, plan.ID)
	}
	// The plan's continuation messages (a 181-IP plan takes two), edited with it (issue 22).
	_, more, _ := strings.Cut(strings.TrimPrefix(rec.MessageRef, "discord:"+discordfake.ChannelID+"/"+plan.ID), ",")
	continuations := strings.FieldsFunc(more, func(r rune) bool { return r == ',' })
	goAhead := "!approve|" + planID + "|" + plan.ID

	refusals := []struct {
		name   string
		who    discordfake.Member
		notice string
	}{
		{"a member without an approver role is refused", mallory, "Only approvers (users " + alice.ID + "; members of " + opsRole + ")"},
		{"the requester cannot approve their own plan", alice, "two-person rule"},
		{"a Slack approver's ID does not approve on Discord", discordfake.Member{ID: bob.ID, Name: "bob", Roles: nil}, "Only approvers"},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			if got := e.confirm(t, r.who, approve.CustomID, plan); got != goAhead {
				t.Fatalf("go-ahead = %q, want %q", got, goAhead)
			}
			token, resp, raw := e.click(t, 0, r.who, goAhead, nil)
			if resp.Type != discordgo.InteractionResponseDeferredMessageUpdate {
				t.Fatalf("go-ahead = %s, want a deferred update", raw)
			}
			got := e.answer(t, token)
			if !strings.HasSuffix(got.Path, "/messages/@original") || !strings.Contains(discordfake.MessageText(got.Message), r.notice) {
				t.Errorf("reply = %s %q, want the confirmation replaced by %q", got.Path, discordfake.MessageText(got.Message), r.notice)
			}
			if rec := e.Record(t, planID); rec.State != approval.StatePending {
				t.Errorf("state = %s, want Pending", rec.State)
			}
			if edits := e.fake.ChannelEdits(plan.ID); len(edits) != 0 {
				t.Errorf("plan message edited %d times by a refusal, want 0", len(edits))
			}
		})
	}

	t.Run("nobody can approve in a DM", func(t *testing.T) {
		token, _, _ := e.click(t, 0, discordfake.Member{ID: bob.ID, Name: "bob", DM: true}, goAhead, nil)
		if got := e.answer(t, token); got.Route != "followup" || !strings.Contains(discordfake.MessageText(got.Message), "not in a direct message. Nothing was changed.") {
			t.Errorf("DM approval answered %s %q, want an ephemeral refusal", got.Route, discordfake.MessageText(got.Message))
		}
		rec := e.Record(t, planID)
		last := rec.History[len(rec.History)-1]
		if rec.State != approval.StatePending || last.Event != approval.AuditRefused || last.Actor != "discord:/"+bob.ID || !strings.Contains(last.Detail, "not in a direct message") {
			t.Errorf("record = %s, last audit %+v; want Pending with the DM refusal recorded", rec.State, last)
		}
	})

	for _, bad := range []struct {
		name string
		req  func(t *testing.T, body []byte) *http.Request
	}{
		{"an approval signed with another key is refused", func(t *testing.T, body []byte) *http.Request {
			return discordfake.NewSigner(t).Request(t, e.urls[0], time.Now(), body)
		}},
		{"a replayed approval with a stale timestamp is refused", func(t *testing.T, body []byte) *http.Request {
			return e.sign.Request(t, e.urls[0], time.Now().Add(-6*time.Minute), body)
		}},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, body := discordfake.InteractionJSON(t, discordgo.InteractionMessageComponent, discordfake.ClickData(goAhead), bob, nil)
			resp, err := http.DefaultClient.Do(bad.req(t, body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status = %d, want 401", resp.StatusCode)
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	if rec := e.Record(t, planID); rec.State != approval.StatePending || e.Leaked(t) != 181 {
		t.Fatalf("after the refusals: state %s, %d leaked; want Pending and 181", rec.State, e.Leaked(t))
	}

	t.Run("an approver by role double-clicks on two replicas: it runs once, the plan message is edited", func(t *testing.T) {
		if got := e.confirm(t, bob, approve.CustomID, plan); got != goAhead {
			t.Fatalf("go-ahead = %q, want %q", got, goAhead)
		}
		var wg sync.WaitGroup
		tokens := make([]string, 2)
		for i := range tokens {
			wg.Go(func() { tokens[i], _, _ = e.click(t, i, bob, goAhead, nil) })
		}
		wg.Wait()
		chattest.WaitFor(t, 120*time.Second, "the final plan message", func() bool {
			edits := e.fake.ChannelEdits(plan.ID)
			return len(edits) > 0 && strings.Contains(discordfake.MessageText(edits[len(edits)-1].Message), "Done:")
		})
		edits := e.fake.ChannelEdits(plan.ID)
		if len(edits) != 2 || !strings.Contains(discordfake.MessageText(edits[0].Message), "Running:") {
			t.Errorf("plan message edits = %d, want 2: running, then done", len(edits))
		}
		final := edits[len(edits)-1]
		if final.Auth != "Bot "+discordfake.BotToken || final.Path != "/api/v9/channels/"+discordfake.ChannelID+"/messages/"+plan.ID {
			t.Errorf("final edit = %s with %q, want the plan message with the bot token", final.Path, final.Auth)
		}
		discordfake.NoMentionsSent(t, final)
		text := discordfake.MessageText(final.Message)
		for _, want := range []string{"Done: released 181 of 181 leaked IPs on test", "Approved by", "Bob", "0 leaked IPs remain"} {
			if !strings.Contains(text, want) {
				t.Errorf("final message lacks %q:\n%s", want, text)
			}
		}
		if len(discordfake.ButtonsOf(final.Message)) != 0 {
			t.Errorf("final message still has buttons")
		}
		for _, id := range continuations {
			// The continuations are edited after the first message: wait for their edit.
			chattest.WaitFor(t, 30*time.Second, "the continuation's edit", func() bool {
				edits := e.fake.ChannelEdits(id)
				return len(edits) > 0 && strings.Contains(discordfake.MessageText(edits[len(edits)-1].Message), "Done: released 181 of 181")
			})
			edits := e.fake.ChannelEdits(id)
			if len(edits) == 0 || !strings.Contains(discordfake.MessageText(edits[len(edits)-1].Message), "Done: released 181 of 181") ||
				strings.Contains(discordfake.MessageText(edits[len(edits)-1].Message), "Approval needed") {
				t.Errorf("continuation %s of the plan after the decision: %d edits, last %q", id, len(edits), func() string {
					if len(edits) == 0 {
						return ""
					}
					return discordfake.MessageText(edits[len(edits)-1].Message)
				}())
			}
		}
		// One go-ahead closes its confirmation with the outcome, the other says it already ran.
		var notices []string
		for _, tok := range tokens {
			chattest.WaitFor(t, 10*time.Second, "both confirmations closed", func() bool { return len(e.fake.CallsFor(tok)) > 0 })
			notices = append(notices, discordfake.MessageText(e.fake.CallsFor(tok)[0].Message))
		}
		joined := strings.Join(notices, "\n")
		if !strings.Contains(joined, "already approved by Bob") || !strings.Contains(joined, "Done: released 181") {
			t.Errorf("confirmations = %q, want one outcome and one already approved", notices)
		}
		if n := e.Runs.Load(); n != 1 {
			t.Errorf("executions = %d, want 1", n)
		}
		rec := e.Record(t, planID)
		wantActor := "discord:" + discordfake.GuildID + "/" + bob.ID
		if rec.State != approval.StateSucceeded || rec.DecidedBy == nil || rec.DecidedBy.String() != wantActor || rec.Result == nil || rec.Result.Done != 181 {
			t.Errorf("RemediationRequest = %s by %+v result %+v, want Succeeded by %s with 181 done", rec.State, rec.DecidedBy, rec.Result, wantActor)
		}
		// The four refused clicks before (no role, the requester, a Slack ID, a DM) are on
		// record too.
		if got := strings.Join(chattest.AuditEvents(rec), ","); got != "requested,refused,refused,refused,refused,approved,started,finished" {
			t.Errorf("audit = %s", got)
		}
		if r := rec.History[5]; r.Actor != wantActor || r.Detail != "approver by group "+opsRole {
			t.Errorf("approved record = %+v, want actor %s by group %s", r, wantActor, opsRole)
		}
		if n := e.Leaked(t); n != 0 {
			t.Errorf("leaked IPs after release = %d, want 0", n)
		}
		if s, _ := e.Calico.LockStatus(t.Context()); !s.Ready {
			t.Errorf("datastore left locked")
		}
	})

	t.Run("/ipam check shows 0 leaked", func(t *testing.T) {
		token, _, _ := e.command(t, mallory, discordfake.CommandData("ipam", "check"))
		if got := discordfake.MessageText(e.answer(t, token).Message); !strings.Contains(got, "no problems found") {
			t.Errorf("check answer:\n%s\nwant no problems found", got)
		}
	})

	t.Run("the gateway handler answers the same payloads", func(t *testing.T) {
		gw := e.fake.Session(t)
		feed := func(data map[string]any, typ discordgo.InteractionType, msg *discordgo.Message) string {
			token, body := discordfake.InteractionJSON(t, typ, data, bob, msg)
			e.fake.Expect(token, discordfake.ChannelID)
			var i discordgo.Interaction
			if err := json.Unmarshal(body, &i); err != nil {
				t.Fatal(err)
			}
			e.adapters[0].HandleGatewayInteraction(t.Context(), gw, &discordgo.InteractionCreate{Interaction: &i})
			return token
		}
		callback := func(token string) map[string]any {
			calls := e.fake.CallsFor(token)
			if len(calls) == 0 || calls[0].Route != "callback" {
				t.Fatalf("first call for %s = %+v, want the interaction callback", token, calls)
			}
			var resp map[string]any
			_ = json.Unmarshal(calls[0].Body, &resp)
			return resp
		}
		// Both replicas are on the gateway and both receive the command: the one whose
		// response Discord accepts answers, the other leaves it.
		token, body := discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand, discordfake.CommandData("why-pending", "", "pod", stuckPod), bob, nil)
		e.fake.Expect(token, discordfake.ChannelID)
		var wg sync.WaitGroup
		for _, a := range e.adapters {
			var i discordgo.Interaction
			if err := json.Unmarshal(body, &i); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { a.HandleGatewayInteraction(t.Context(), gw, &discordgo.InteractionCreate{Interaction: &i}) })
		}
		wg.Wait()
		if r := callback(token); r["type"] != float64(5) {
			t.Errorf("callback = %v, want a deferred response (type 5)", r)
		}
		chattest.WaitFor(t, 60*time.Second, "the gateway answer", func() bool { return len(e.fake.CallsFor(token)) > 2 })
		time.Sleep(200 * time.Millisecond) // room for a second answer, which must not come
		var got []string
		var answer *discordgo.Message
		for _, c := range e.fake.CallsFor(token) {
			got = append(got, fmt.Sprintf("%s %d", c.Route, c.Status))
			if c.Route == "webhook-edit" {
				answer = c.Message
			}
		}
		// The refused second callback and the answer race each other: compare without order.
		sort.Strings(got)
		if strings.Join(got, ", ") != "callback 204, callback 400, webhook-edit 200" || !strings.Contains(discordfake.MessageText(answer), "calico-ipam-exhausted") {
			t.Errorf("gateway calls = %v, want one accepted response, one refused, and one answer with the diagnosis", got)
		}
		token = feed(discordfake.ClickData(approve.CustomID), discordgo.InteractionMessageComponent, plan)
		if r := callback(token); r["type"] != float64(4) || !strings.Contains(string(e.fake.CallsFor(token)[0].Body), goAhead) {
			t.Errorf("callback = %s, want the ephemeral confirmation", e.fake.CallsFor(token)[0].Body)
		}
		token = feed(discordfake.ClickData(goAhead), discordgo.InteractionMessageComponent, nil)
		if r := callback(token); r["type"] != float64(6) {
			t.Errorf("callback = %v, want a deferred update (type 6)", r)
		}
		chattest.WaitFor(t, 10*time.Second, "the gateway notice", func() bool { return len(e.fake.CallsFor(token)) > 1 })
		if got := discordfake.MessageText(e.fake.CallsFor(token)[1].Message); !strings.Contains(got, "already approved") {
			t.Errorf("gateway notice = %q, want already approved", got)
		}
		if n := e.Runs.Load(); n != 1 {
			t.Errorf("executions = %d, want still 1", n)
		}
	})
}
