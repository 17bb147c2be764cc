package discord_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/discordfake"
)

// unitEnv is an adapter with a recording core, a fake Discord and the signed endpoint.
type unitEnv struct {
	core    *chattest.RecordingCore
	fake    *discordfake.Fake
	sign    discordfake.Signer
	url     string
	metrics *chat.Metrics
	adapter *discord.Adapter
}

func newUnitEnv(t *testing.T, core *chattest.RecordingCore, o discord.Options) *unitEnv {
	t.Helper()
	e := &unitEnv{core: core, fake: discordfake.New(t), sign: discordfake.NewSigner(t), metrics: chat.NewMetrics(prometheus.NewRegistry())}
	o.Core, o.Session, o.ApplicationID, o.PublicKey, o.Log, o.Metrics = core, e.fake.Session(t), discordfake.AppID, e.sign.Pub, chattest.QuietLog, e.metrics
	e.adapter = discord.New(o)
	e.url = chattest.Serve(t, e.adapter).URL + "/discord/interactions"
	return e
}

var (
	alice = discordfake.Member{ID: "1600000000000000001", Name: "alice", Roles: []string{"1700000000000000009"}}
	bob   = discordfake.Member{ID: "1600000000000000002", Name: "bob", Roles: []string{opsRole}}
)

const opsRole = "1700000000000000001"

func TestInteractionsEndpointVerifiesSignature(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name       string
		key        func(s discordfake.Signer) discordfake.Signer // the key the request is signed with
		age        time.Duration                                 // how old the timestamp is
		tamper     bool                                          // change the body after signing
		noHeaders  bool
		badHex     bool
		wantStatus int
		wantBody   string
	}{
		{name: "a PING signed with the application's key gets PONG", wantStatus: 200, wantBody: `{"type":1}`},
		{name: "a timestamp four minutes old is still accepted", age: 4 * time.Minute, wantStatus: 200, wantBody: `{"type":1}`},
		{name: "another key's signature is refused", key: func(discordfake.Signer) discordfake.Signer { return discordfake.NewSigner(t) }, wantStatus: 401, wantBody: "invalid signature"},
		{name: "a body changed after signing is refused", tamper: true, wantStatus: 401, wantBody: "invalid signature"},
		{name: "a signature that is not hex is refused", badHex: true, wantStatus: 401, wantBody: "invalid signature"},
		{name: "a timestamp older than five minutes is refused (replay)", age: 6 * time.Minute, wantStatus: 401, wantBody: "request timestamp outside the 5 minute window"},
		{name: "a timestamp six minutes in the future is refused", age: -6 * time.Minute, wantStatus: 401, wantBody: "request timestamp outside the 5 minute window"},
		{name: "a request without signature headers is refused", noHeaders: true, wantStatus: 401, wantBody: "missing X-Signature-Ed25519 or X-Signature-Timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core := &chattest.RecordingCore{}
			e := newUnitEnv(t, core, discord.Options{})
			s := e.sign
			if tt.key != nil {
				s = tt.key(s)
			}
			// A command, so that an accepted request would reach the core; the PING cases
			// send a PING.
			typ, data := discordgo.InteractionPing, any(nil)
			if tt.wantStatus != 200 {
				typ, data = discordgo.InteractionApplicationCommand, discordfake.CommandData("why-pending", "", "pod", "shop/web-7f9c")
			}
			token, body := discordfake.InteractionJSON(t, typ, data, alice, nil)
			e.fake.Expect(token, discordfake.ChannelID)
			req := s.Request(t, e.url, now.Add(-tt.age), body)
			if tt.tamper {
				req.Body = io.NopCloser(strings.NewReader(strings.Replace(string(body), "web-7f9c", "web-0000", 1)))
			}
			if tt.badHex {
				req.Header.Set("X-Signature-Ed25519", "zz"+req.Header.Get("X-Signature-Ed25519")[2:])
			}
			if tt.noHeaders {
				req.Header.Del("X-Signature-Ed25519")
				req.Header.Del("X-Signature-Timestamp")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(got), tt.wantBody) {
				t.Fatalf("POST /discord/interactions = %d %q, want %d containing %q", resp.StatusCode, got, tt.wantStatus, tt.wantBody)
			}
			if tt.wantStatus == 200 && resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", resp.Header.Get("Content-Type"))
			}
			if tt.wantStatus != 200 {
				time.Sleep(50 * time.Millisecond)
				if n := core.Commands.Load(); n != 0 {
					t.Errorf("core answered %d commands, want 0 (refused request)", n)
				}
				if calls := e.fake.Snapshot(""); len(calls) != 0 {
					t.Errorf("refused request caused %d REST calls, want 0", len(calls))
				}
			}
		})
	}
}

// TestCommandIsDeferredThenEdited holds the core: the deferred response comes back at once,
// the answer is edited into it once the core answers, and options become the bot's words.
func TestCommandIsDeferredThenEdited(t *testing.T) {
	core := &chattest.RecordingCore{Block: make(chan struct{})}
	e := newUnitEnv(t, core, discord.Options{})
	token, body := discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand,
		discordfake.CommandData("ipam", "release-blocks", "cluster", "prod-eu", "node", "worker-2"), alice, nil)
	e.fake.Expect(token, discordfake.ChannelID)
	start := time.Now()
	status, resp, raw := e.sign.Post(t, http.DefaultClient, e.url, body)
	ack := time.Since(start)
	if status != 200 || resp.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || resp.Data.Flags != 0 {
		t.Fatalf("response = %d %s, want 200 with a public deferred response (type 5)", status, raw)
	}
	if !strings.Contains(raw, `"allowed_mentions":{"parse":[]`) {
		t.Errorf("deferred response %s lacks allowed_mentions {parse: []}", raw)
	}
	if ack > 3*time.Second {
		t.Errorf("ack took %s, beyond Discord's 3 s", ack)
	}
	if n := len(e.fake.CallsFor(token)); n != 0 {
		t.Fatalf("%d REST calls before the core answered, want 0", n)
	}
	close(core.Block)
	chattest.WaitFor(t, 10*time.Second, "the edited response", func() bool { return len(e.fake.CallsFor(token)) > 0 })
	edit := e.fake.CallsFor(token)[0]
	if edit.Method != http.MethodPatch || edit.Path != "/api/v9/webhooks/"+discordfake.AppID+"/"+token+"/messages/@original" {
		t.Fatalf("first call = %s %s, want PATCH …/webhooks/%s/<token>/messages/@original", edit.Method, edit.Path, discordfake.AppID)
	}
	if got, want := discordfake.MessageText(edit.Message), "answer to /ipam release-blocks --cluster prod-eu --node worker-2"; !strings.Contains(got, want) {
		t.Errorf("edited answer = %q, want it to contain %q", got, want)
	}
	discordfake.NoMentionsSent(t, edit)
	req, _ := core.Last()
	want := chat.Request{Principal: chat.Principal{Platform: "discord", Team: discordfake.GuildID, ID: alice.ID, Name: "Alice", Groups: alice.Roles},
		Channel: discordfake.ChannelID, Command: "ipam", Args: []string{"release-blocks", "--cluster", "prod-eu", "--node", "worker-2"}}
	if diff := cmp.Diff(want, req); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestHelpIsEphemeral(t *testing.T) {
	e := newUnitEnv(t, &chattest.RecordingCore{}, discord.Options{})
	token, body := discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand, discordfake.CommandData("whypending", "help"), alice, nil)
	e.fake.Expect(token, discordfake.ChannelID)
	_, resp, raw := e.sign.Post(t, http.DefaultClient, e.url, body)
	if resp == nil || resp.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || resp.Data.Flags != discordgo.MessageFlagsEphemeral {
		t.Fatalf("response = %s, want an ephemeral deferred response", raw)
	}
	chattest.WaitFor(t, 10*time.Second, "the edited help", func() bool { return len(e.fake.CallsFor(token)) > 0 })
}

// TestDirectMessageRefusals: in a DM there is no discordfake.Member, so no roles. Repair buttons and
// repair commands are refused at once; Approve and Deny (with or without the confirmation)
// go to the bot as refused clicks, so the refusal is recorded in the plan's history.
func TestDirectMessageRefusals(t *testing.T) {
	core := &chattest.RecordingCore{}
	e := newUnitEnv(t, core, discord.Options{})
	dm := discordfake.Member{ID: bob.ID, Name: "bob", DM: true}
	cases := []struct {
		name    string
		typ     discordgo.InteractionType
		data    map[string]any
		refused string // the refusal the bot gets; "" for one answered at once
	}{
		{"a repair button", discordgo.InteractionMessageComponent, discordfake.ClickData("plan:|release-leaked-ips;cluster=prod"), ""},
		{"/ipam release-ips", discordgo.InteractionApplicationCommand, discordfake.CommandData("ipam", "release-ips"), ""},
		{"Approve", discordgo.InteractionMessageComponent, discordfake.ClickData("?approve|rr-abcdefghijklm"), chat.ActionApprove},
		{"the confirmed Approve", discordgo.InteractionMessageComponent, discordfake.ClickData("!approve|rr-abcdefghijklm|1400000000000000001"), chat.ActionApprove},
		{"Deny", discordgo.InteractionMessageComponent, discordfake.ClickData("deny|rr-abcdefghijklm"), chat.ActionDeny},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clicks := core.Clicks.Load()
			token, body := discordfake.InteractionJSON(t, c.typ, c.data, dm, nil)
			e.fake.Expect(token, discordfake.ChannelID)
			_, resp, raw := e.sign.Post(t, http.DefaultClient, e.url, body)
			if c.refused == "" {
				if resp == nil || resp.Type != discordgo.InteractionResponseChannelMessageWithSource || resp.Data.Flags != discordgo.MessageFlagsEphemeral ||
					!strings.Contains(raw, "in a direct message nothing was done") {
					t.Fatalf("response = %s, want an ephemeral refusal", raw)
				}
				return
			}
			if resp == nil || resp.Type != discordgo.InteractionResponseDeferredMessageUpdate {
				t.Fatalf("response = %s, want a deferred update", raw)
			}
			chattest.WaitFor(t, 10*time.Second, "the refused click", func() bool { return core.Clicks.Load() == clicks+1 })
			_, click := core.Last()
			if click.ActionID != c.refused || !strings.Contains(click.Refusal, "not in a direct message") || click.Principal.Team != "" {
				t.Errorf("click = %+v, want %s refused for being in a DM", click, c.refused)
			}
			chattest.WaitFor(t, 10*time.Second, "the notice", func() bool { return len(e.fake.CallsFor(token)) > 0 })
			if n := e.fake.CallsFor(token)[0]; n.Route != "followup" || !strings.Contains(string(n.Body), `"flags":64`) {
				t.Errorf("notice = %s %s, want an ephemeral follow-up", n.Route, n.Body)
			}
		})
	}
	if n := core.Commands.Load(); n != 0 {
		t.Errorf("the bot saw %d commands from a DM, want none", n)
	}
	// Diagnosing works in a DM: it needs no approval.
	token, body := discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand, discordfake.CommandData("why-pending", "", "pod", "shop/web"), dm, nil)
	e.fake.Expect(token, discordfake.ChannelID)
	if _, resp, raw := e.sign.Post(t, http.DefaultClient, e.url, body); resp == nil || resp.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource {
		t.Fatalf("/why-pending in a DM = %s, want deferred", raw)
	}
	chattest.WaitFor(t, 10*time.Second, "the DM answer", func() bool { return core.Commands.Load() == 1 })
	last, _ := core.Last()
	if p := last.Principal; p.Team != "" || p.ID != bob.ID || len(p.Groups) != 0 {
		t.Errorf("DM principal = %+v, want bob without guild or roles", p)
	}
}

// TestConfirmationThenClick: a button with a confirmation answers with an ephemeral "are
// you sure?" (no bot call); its go-ahead carries the original message and reaches the bot;
// Cancel closes it.
func TestConfirmationThenClick(t *testing.T) {
	core := &chattest.RecordingCore{}
	e := newUnitEnv(t, core, discord.Options{})
	plan := &discordgo.Message{ID: "1400000000000000777", ChannelID: discordfake.ChannelID,
		Embeds: []*discordgo.MessageEmbed{{Title: "Approval needed: release 181 leaked IPs on test"}},
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Approve", Style: discordgo.PrimaryButton, CustomID: "?approve|rr-abcdefghijklm"},
			discordgo.Button{Label: "Deny", Style: discordgo.DangerButton, CustomID: "deny|rr-abcdefghijklm"},
		}}}}
	token, body := discordfake.InteractionJSON(t, discordgo.InteractionMessageComponent, discordfake.ClickData("?approve|rr-abcdefghijklm"), bob, plan)
	e.fake.Expect(token, discordfake.ChannelID)
	_, resp, raw := e.sign.Post(t, http.DefaultClient, e.url, body)
	if resp == nil || resp.Type != discordgo.InteractionResponseChannelMessageWithSource || resp.Data.Flags != discordgo.MessageFlagsEphemeral {
		t.Fatalf("response = %s, want an ephemeral confirmation", raw)
	}
	if !strings.Contains(raw, "Approve: are you sure?") || !strings.Contains(raw, "release 181 leaked IPs on test") ||
		!strings.Contains(raw, `"custom_id":"!approve|rr-abcdefghijklm|1400000000000000777"`) || !strings.Contains(raw, `"custom_id":"cancel"`) {
		t.Fatalf("confirmation = %s, want the plan's title, a go-ahead naming message 1400000000000000777, and Cancel", raw)
	}
	if n := core.Clicks.Load(); n != 0 {
		t.Fatalf("the bot saw %d clicks before the go-ahead", n)
	}

	token, body = discordfake.InteractionJSON(t, discordgo.InteractionMessageComponent, discordfake.ClickData("cancel"), bob, nil)
	_, resp, raw = e.sign.Post(t, http.DefaultClient, e.url, body)
	if resp == nil || resp.Type != discordgo.InteractionResponseUpdateMessage || !strings.Contains(raw, "Cancelled; nothing was changed.") || !strings.Contains(raw, `"components":[]`) {
		t.Fatalf("cancel = %s, want the confirmation replaced, without buttons", raw)
	}

	token, body = discordfake.InteractionJSON(t, discordgo.InteractionMessageComponent, discordfake.ClickData("!approve|rr-abcdefghijklm|1400000000000000777"), bob, nil)
	e.fake.Expect(token, discordfake.ChannelID)
	_, resp, raw = e.sign.Post(t, http.DefaultClient, e.url, body)
	if resp == nil || resp.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Fatalf("go-ahead = %s, want a deferred update (type 6)", raw)
	}
	chattest.WaitFor(t, 10*time.Second, "the click", func() bool { return core.Clicks.Load() == 1 })
	_, click := core.Last()
	want := chat.Click{Principal: chat.Principal{Platform: "discord", Team: discordfake.GuildID, ID: bob.ID, Name: "Bob", Groups: bob.Roles},
		Channel: discordfake.ChannelID, ActionID: chat.ActionApprove, Value: "rr-abcdefghijklm"}
	if diff := cmp.Diff(want, click); diff != "" {
		t.Errorf("click (-want +got):\n%s", diff)
	}
	// The notice replaces the confirmation, which was the go-ahead's message.
	chattest.WaitFor(t, 10*time.Second, "the notice", func() bool { return len(e.fake.CallsFor(token)) > 0 })
	if c := e.fake.CallsFor(token)[0]; !strings.HasSuffix(c.Path, "/messages/@original") || !strings.Contains(discordfake.MessageText(c.Message), "clicked") {
		t.Errorf("notice = %s %s %q, want the confirmation edited to the notice", c.Method, c.Path, discordfake.MessageText(c.Message))
	}
}

// TestFollowUpWaitsOutRateLimit: a 429 with retry_after on the edit is waited out and
// retried; the metrics count it.
func TestFollowUpWaitsOutRateLimit(t *testing.T) {
	e := newUnitEnv(t, &chattest.RecordingCore{}, discord.Options{})
	e.fake.RateLimit("webhook-edit", 1)
	token, body := discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand, discordfake.CommandData("why-pending", "", "pod", "shop/web"), alice, nil)
	e.fake.Expect(token, discordfake.ChannelID)
	sent := time.Now()
	e.sign.Post(t, http.DefaultClient, e.url, body)
	chattest.WaitFor(t, 10*time.Second, "the edit after the rate limit", func() bool { return len(e.fake.CallsFor(token)) > 0 })
	if waited := e.fake.CallsFor(token)[0].At.Sub(sent); waited < 250*time.Millisecond {
		t.Errorf("edit came %s after the command, want at least retry_after (250ms)", waited)
	}
	if n := testutil.ToFloat64(e.metrics.Deliveries.WithLabelValues("discord", "rate-limited")); n != 1 {
		t.Errorf("rate-limited deliveries = %v, want 1", n)
	}
}

func TestBusyQueueSaysSo(t *testing.T) {
	core := &chattest.RecordingCore{Block: make(chan struct{})}
	defer close(core.Block)
	e := newUnitEnv(t, core, discord.Options{Workers: 1, QueueSize: 1})
	for i, want := range []string{"", "", "whypending is busy right now"} {
		token, body := discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand, discordfake.CommandData("why-pending", "", "pod", "shop/web"), alice, nil)
		e.fake.Expect(token, discordfake.ChannelID)
		_, resp, raw := e.sign.Post(t, http.DefaultClient, e.url, body)
		if want == "" {
			if resp == nil || resp.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource {
				t.Fatalf("command %d = %s, want deferred", i, raw)
			}
			time.Sleep(50 * time.Millisecond) // let the worker take it
			continue
		}
		if resp == nil || resp.Data.Flags != discordgo.MessageFlagsEphemeral || !strings.Contains(raw, want) {
			t.Fatalf("command %d = %s, want an ephemeral %q", i, raw, want)
		}
	}
}

func TestRegisterCommandsIsIdempotent(t *testing.T) {
	for _, guilds := range [][]string{nil, {discordfake.GuildID, "1200000000000000002"}} {
		e := newUnitEnv(t, &chattest.RecordingCore{}, discord.Options{Guilds: guilds, Clusters: []string{"prod-eu", "staging"}})
		if err := e.adapter.Register(t.Context()); err != nil {
			t.Fatal(err)
		}
		first := e.fake.Snapshot("commands")
		stored := snapshotCommands(e.fake)
		if err := e.adapter.Register(t.Context()); err != nil {
			t.Fatal(err)
		}
		second := e.fake.Snapshot("commands")[len(first):]
		want := []string{"/api/v9/applications/" + discordfake.AppID + "/commands"}
		if guilds != nil {
			want = []string{"/api/v9/applications/" + discordfake.AppID + "/guilds/" + discordfake.GuildID + "/commands",
				"/api/v9/applications/" + discordfake.AppID + "/guilds/1200000000000000002/commands"}
		}
		var paths []string
		for i, c := range first {
			paths = append(paths, c.Path)
			if c.Method != http.MethodPut || c.Auth != "Bot "+discordfake.BotToken {
				t.Errorf("call %d = %s with auth %q, want PUT with the bot token", i, c.Method, c.Auth)
			}
			if string(second[i].Body) != string(c.Body) {
				t.Errorf("second registration sent a different body to %s", c.Path)
			}
		}
		if diff := cmp.Diff(want, paths); diff != "" {
			t.Errorf("registration paths (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(stored, snapshotCommands(e.fake)); diff != "" {
			t.Errorf("registering again changed the commands (-before +after):\n%s", diff)
		}
		for key, cmds := range e.fake.Commands() {
			var names []string
			for _, c := range cmds {
				names = append(names, c.Name)
			}
			if diff := cmp.Diff([]string{"why-pending", "ipam", "whypending"}, names); diff != "" {
				t.Errorf("commands in %s (-want +got):\n%s", key, diff)
			}
			if ch := cmds[0].Options[1].Choices; len(ch) != 2 || ch[0].Value != "prod-eu" {
				t.Errorf("cluster choices in %s = %v, want prod-eu and staging", key, ch)
			}
		}
	}
}

// snapshotCommands is the fake's registered commands as JSON, by key.
func snapshotCommands(f *discordfake.Fake) map[string]string {
	out := map[string]string{}
	for k, cmds := range f.Commands() {
		b, _ := json.Marshal(cmds)
		out[k] = string(b)
	}
	return out
}

// longCore answers every command with a plan-sized table: more than one Discord message.
type longCore struct{ chattest.RecordingCore }

func (c *longCore) Command(context.Context, chat.Request) chat.Reply {
	tb := &chat.Table{Columns: []string{"IP", "Node", "Allocated to", "Handle"}}
	for i := range 40 {
		tb.Rows = append(tb.Rows, []string{fmt.Sprintf("172.16.0.%d", i), "ip-10-0-12-34.eu-west-1.compute.internal",
			fmt.Sprintf("shop/web-7f9c-%d", i), fmt.Sprintf("k8s-pod-network.%064d", i)})
	}
	return chat.Reply{Public: true, Message: chat.Message{Title: "Calico IPAM on prod: 40 leaked IPs", Severity: "warning",
		Sections: []chat.Section{{Heading: "Leaked IPs", Table: tb}}}}
}

// TestLongAnswerContinuesInFollowUps: the first page is edited into the deferred response,
// the rest are follow-up messages, each within Discord's limits and without mentions.
func TestLongAnswerContinuesInFollowUps(t *testing.T) {
	f := discordfake.New(t)
	s := discordfake.NewSigner(t)
	a := discord.New(discord.Options{Core: &longCore{}, Session: f.Session(t), ApplicationID: discordfake.AppID, PublicKey: s.Pub, Log: chattest.QuietLog})
	url := chattest.Serve(t, a).URL + "/discord/interactions"
	token, body := discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand, discordfake.CommandData("ipam", "check"), alice, nil)
	f.Expect(token, discordfake.ChannelID)
	s.Post(t, http.DefaultClient, url, body)
	chattest.WaitFor(t, 10*time.Second, "the answer and its follow-ups", func() bool { return len(f.CallsFor(token)) >= 2 })
	time.Sleep(50 * time.Millisecond)
	calls := f.CallsFor(token)
	rows := 0
	for i, c := range calls {
		wantRoute, wantPath := "followup", "/api/v9/webhooks/"+discordfake.AppID+"/"+token
		if i == 0 {
			wantRoute, wantPath = "webhook-edit", "/api/v9/webhooks/"+discordfake.AppID+"/"+token+"/messages/@original"
		}
		if c.Route != wantRoute || c.Path != wantPath {
			t.Errorf("call %d = %s %s, want %s", i, c.Method, c.Path, wantPath)
		}
		discordfake.NoMentionsSent(t, c)
		e := c.Message.Embeds[0]
		n := len(e.Title) + len(e.Description)
		for _, fl := range e.Fields {
			n += len(fl.Name) + len(fl.Value)
			rows += strings.Count(fl.Value, "\n172.16.0.")
		}
		if n > 6000 || len(e.Fields) > 25 {
			t.Errorf("message %d has %d characters in %d fields, beyond Discord's limits", i, n, len(e.Fields))
		}
	}
	if rows != 40 {
		t.Errorf("rows shown across %d messages = %d, want all 40", len(calls), rows)
	}
}

// planCore answers every command with a plan as long as longCore's: Render splits it over
// several messages.
type planCore struct {
	longCore
	mu   sync.Mutex
	refs []string
}

// Attach records the plan message reference.
func (c *planCore) Attach(_ context.Context, _, ref string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs = append(c.refs, ref)
	return nil
}

// Attached returns the references Attach got.
func (c *planCore) Attached() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.refs...)
}

func (c *planCore) Command(ctx context.Context, req chat.Request) chat.Reply {
	r := c.longCore.Command(ctx, req)
	r.PlanID = "rr-split"
	r.Message.Title = "Approval needed: release 40 leaked IPs on prod"
	return r
}

// TestSplitPlanIsEditedWhole is issue 22 item 10's last point: a plan posted in several
// messages is attached with all of them, and when it is decided every continuation is
// edited too; it used to keep "Approval needed … (continued)" after the repair was done.
func TestSplitPlanIsEditedWhole(t *testing.T) {
	f := discordfake.New(t)
	s := discordfake.NewSigner(t)
	core := &planCore{}
	a := discord.New(discord.Options{Core: core, Session: f.Session(t), ApplicationID: discordfake.AppID, PublicKey: s.Pub, Log: chattest.QuietLog})
	url := chattest.Serve(t, a).URL + "/discord/interactions"
	token, body := discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand, discordfake.CommandData("ipam", "release-ips"), alice, nil)
	f.Expect(token, discordfake.ChannelID)
	s.Post(t, http.DefaultClient, url, body)
	var ref string
	chattest.WaitFor(t, 10*time.Second, "the plan to be attached", func() bool {
		refs := core.Attached()
		if len(refs) == 0 {
			return false
		}
		ref = refs[0]
		return true
	})
	calls := f.CallsFor(token)
	if len(calls) < 2 {
		t.Fatalf("the plan took %d messages, want several", len(calls))
	}
	ids := strings.Split(strings.TrimPrefix(ref, "discord:"+discordfake.ChannelID+"/"), ",")
	if len(ids) != len(calls) {
		t.Fatalf("attached %q for %d messages, want every message's ID", ref, len(calls))
	}
	done := chat.Message{Title: "Done: released 40 of 40 leaked IPs on prod", Severity: "ok"}
	if err := a.UpdateMessage(t.Context(), ref, done); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		edits := f.ChannelEdits(id)
		if len(edits) != 1 {
			t.Fatalf("message %d (%s) edited %d times, want once", i, id, len(edits))
		}
		text := discordfake.MessageText(edits[0].Message)
		if !strings.Contains(text, "Done: released 40 of 40 leaked IPs on prod") || strings.Contains(text, "Approval needed") {
			t.Errorf("message %d after the decision = %q", i, text)
		}
	}
}
