package slack_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goslack "github.com/slack-go/slack"

	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
)

// Users of the e2e workspace. Approvers: UALICE directly, members of SOPS (UBOB).
const (
	channel   = "C0OPS"
	alice     = "UALICE"   // requester and approver
	bob       = "UBOB"     // approver through user group SOPS
	mallory   = "UMALLORY" // not an approver
	opsGroup  = "SOPS"
	clusterID = chattest.ClusterName
)

// e2eEnv is a real control plane with a scenario loaded, the RemediationRequest CRD, fake
// Slack Web API and response_url endpoints, and one or more bot replicas serving HTTP.
type e2eEnv struct {
	*chattest.Env
	slack    *fakeSlack
	hooks    *hookRecorder
	replicas []*httptest.Server
	seq      atomic.Int32 // response_url paths
}

type e2eOptions struct {
	scenario string
	replicas int
	expiry   time.Duration
	now      func() time.Time
	// cached uses triage's informer-backed collector, as serve does.
	cached bool
	// authz, when set, turns per-user authorization on: each replica's bot checks people
	// against the cluster's RBAC with these options (the cluster, the Slack directory and
	// the log are added).
	authz *authz.Options
	// approvers are the Slack approvers by user ID besides alice (and group SOPS).
	approvers []string
	// log receives the bots' logs (nil: discarded).
	log *slog.Logger
}

func newE2E(t testing.TB, o e2eOptions) *e2eEnv {
	t.Helper()
	if o.replicas == 0 {
		o.replicas = 1
	}
	e := &e2eEnv{Env: chattest.Start(t, o.scenario, o.cached)}
	e.slack = newFakeSlack(t, map[string][]string{opsGroup: {bob}})
	e.hooks = newHookRecorder(t)
	for range o.replicas {
		// Each replica has its own bot, runner, Slack client and worker pool; they share the
		// cluster (and so the RemediationRequests) and the Slack workspace.
		api := e.slack.api()
		dir := slack.NewDirectory(api, time.Minute)
		log := o.log
		if log == nil {
			log = chattest.QuietLog
		}
		var az *authz.Authorizer
		if o.authz != nil {
			ao := *o.authz
			ao.Directories = map[string]authz.Directory{"slack": dir}
			ao.Profiles = map[string]authz.Profiles{"slack": dir}
			az = e.Authorizer(&ao, log)
		}
		b := bot.New(bot.Options{
			Clusters: []*bot.Cluster{e.BotCluster()},
			Store:    e.Store,
			Policy: approval.Policy{Approvers: map[string]approval.Approvers{"slack": {Users: append([]string{alice}, o.approvers...), Groups: []string{opsGroup}}},
				TwoPersonRule: true, Expiry: o.expiry},
			Directories: map[string]approval.Directory{"slack": dir},
			Authorizer:  az,
			Log:         log,
			Now:         o.now,
		})
		a := slack.New(slack.Options{Core: b, API: api, SigningSecret: testSecret, Log: chattest.QuietLog,
			Metrics: chat.NewMetrics(prometheus.NewRegistry())})
		e.replicas = append(e.replicas, chattest.Serve(t, a))
	}
	return e
}

// command posts a signed slash command to replica 0 and returns the HTTP status, the ack
// text and the response_url path its answers go to.
func (e *e2eEnv) command(t *testing.T, user, command, text string) (int, string, string) {
	t.Helper()
	path := fmt.Sprintf("/commands/%d", e.seq.Add(1))
	body := commandBody(command, text, user, strings.ToLower(user[1:]), channel, e.hooks.url(path))
	resp, err := http.DefaultClient.Do(signedRequest(t, e.replicas[0].URL+"/slack/commands", testSecret, time.Now(), body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ack struct{ Text string }
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &ack)
	return resp.StatusCode, ack.Text, path
}

// click posts a signed block_actions payload for the plan message at ts to a replica and
// returns the status and the response_url path.
func (e *e2eEnv) click(t *testing.T, replica int, user, actionID, value, ts string) (int, string) {
	t.Helper()
	path := fmt.Sprintf("/clicks/%d", e.seq.Add(1))
	body := clickBody(t, user, strings.ToLower(user[1:]), channel, ts, actionID, value, e.hooks.url(path))
	resp, err := http.DefaultClient.Do(signedRequest(t, e.replicas[replica].URL+"/slack/interactions", testSecret, time.Now(), body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, path
}

// answer waits for the first post to a response_url path.
func (e *e2eEnv) answer(t *testing.T, path string) hookPost {
	t.Helper()
	chattest.WaitFor(t, 60*time.Second, "an answer on "+path, func() bool { return len(e.hooks.get(path)) > 0 })
	return e.hooks.get(path)[0]
}

// planPost waits for the n-th chat.postMessage and returns it with its Approve button's value.
func (e *e2eEnv) planPost(t *testing.T, n int) (webMessage, string) {
	t.Helper()
	chattest.WaitFor(t, 60*time.Second, "the plan message", func() bool { posts, _ := e.slack.snapshot(); return len(posts) >= n })
	posts, _ := e.slack.snapshot()
	m := posts[n-1]
	for _, b := range m.Blocks.BlockSet {
		if ab, ok := b.(*goslack.ActionBlock); ok {
			for _, el := range ab.Elements.ElementSet {
				if btn, ok := el.(*goslack.ButtonBlockElement); ok && btn.ActionID == chat.ActionApprove {
					if btn.Confirm == nil {
						t.Errorf("Approve button has no confirm dialog")
					}
					return m, btn.Value
				}
			}
		}
	}
	t.Fatalf("plan message %q has no Approve button", m.Text)
	return m, ""
}

// updatesOf returns the chat.update calls for the message at ts.
func (e *e2eEnv) updatesOf(ts string) []webMessage {
	_, updates := e.slack.snapshot()
	var out []webMessage
	for _, u := range updates {
		if u.TS == ts {
			out = append(out, u)
		}
	}
	return out
}

// blocksText flattens Block Kit blocks to their text, for assertions on what users see.
func blocksText(bs goslack.Blocks) string {
	var parts []string
	for _, b := range bs.BlockSet {
		switch b := b.(type) {
		case *goslack.HeaderBlock:
			parts = append(parts, b.Text.Text)
		case *goslack.SectionBlock:
			if b.Text != nil {
				parts = append(parts, b.Text.Text)
			}
			for _, f := range b.Fields {
				parts = append(parts, f.Text)
			}
		case *goslack.ContextBlock:
			for _, el := range b.ContextElements.Elements {
				if tx, ok := el.(*goslack.TextBlockObject); ok {
					parts = append(parts, tx.Text)
				}
			}
		case *goslack.ActionBlock:
			for _, el := range b.Elements.ElementSet {
				if btn, ok := el.(*goslack.ButtonBlockElement); ok {
					parts = append(parts, "["+btn.Text.Text+"]")
				}
			}
		}
	}
	return strings.Join(parts, "\n")
}

// TestE2EWhyPendingAndReleaseLeakedIPs is the main path on the seed-ipam-leaked
// scenario: /why-pending answers on response_url; /ipam release-ips posts a plan with
// buttons; refusals change nothing; an allowed second user approves; the IPs are released,
// the message is updated, the RemediationRequest says Succeeded and a check shows 0 leaked.
func TestE2EWhyPendingAndReleaseLeakedIPs(t *testing.T) {
	e := newE2E(t, e2eOptions{scenario: "seed-ipam-leaked"})

	t.Run("/why-pending answers on response_url", func(t *testing.T) {
		status, ack, path := e.command(t, alice, "/why-pending", "seed-ipam-leaked/shop-7frd7stjbt-2kq8r")
		if status != 200 || ack != "Working on it…" {
			t.Fatalf("ack = %d %q, want 200 Working on it…", status, ack)
		}
		got := e.answer(t, path)
		text := blocksText(got.Blocks)
		if got.ResponseType != "in_channel" || !strings.Contains(text, "calico-ipam-exhausted") {
			t.Errorf("answer (%s):\n%s\nwant an in-channel diagnosis with code calico-ipam-exhausted", got.ResponseType, text)
		}
	})

	t.Run("unknown command gets a clear reply", func(t *testing.T) {
		_, _, path := e.command(t, alice, "/frobnicate", "now")
		if got := e.answer(t, path); !strings.Contains(got.Text, "Unknown command /frobnicate") || got.ResponseType != "ephemeral" {
			t.Errorf("answer = %q (%s), want an ephemeral Unknown command /frobnicate", got.Text, got.ResponseType)
		}
	})

	t.Run("/ipam blocks shows the full pool", func(t *testing.T) {
		_, _, path := e.command(t, mallory, "/ipam", "blocks")
		text := blocksText(e.answer(t, path).Blocks)
		for _, want := range []string{"Calico IPAM blocks on test: 4 blocks, 256 of 256 addresses in use", "172.16.0.192/26", "worker-2"} {
			if !strings.Contains(text, want) {
				t.Errorf("blocks answer lacks %q:\n%s", want, text)
			}
		}
	})

	t.Run("the Release button on the answer posts a plan, which its requester can withdraw", func(t *testing.T) {
		_, _, path := e.command(t, bob, "/why-pending", "seed-ipam-leaked/shop-7frd7stjbt-2kq8r")
		answer := e.answer(t, path)
		var release *goslack.ButtonBlockElement
		for _, b := range answer.Blocks.BlockSet {
			if ab, ok := b.(*goslack.ActionBlock); ok {
				for _, el := range ab.Elements.ElementSet {
					if btn, ok := el.(*goslack.ButtonBlockElement); ok && slack.ParseActionID(btn.ActionID) == "plan:release-leaked-ips" {
						release = btn
					}
				}
			}
		}
		if release == nil || release.Text.Text != "Release 181 leaked IPs" || !strings.Contains(release.Value, "cluster="+clusterID) {
			t.Fatalf("answer has no Release 181 leaked IPs button for cluster %s:\n%s", clusterID, blocksText(answer.Blocks))
		}
		e.click(t, 0, bob, release.ActionID, release.Value, "1764500000.000001")
		plan, planID := e.planPost(t, 1)
		if rec := e.Record(t, planID); rec.RequestedBy.ID != bob || len(rec.Plan.Items) != 181 {
			t.Fatalf("plan requested by %s with %d items, want bob with 181", rec.RequestedBy.ID, len(rec.Plan.Items))
		}
		e.click(t, 0, bob, chat.ActionDeny, planID, plan.TS)
		chattest.WaitFor(t, 10*time.Second, "the denied plan message", func() bool { return len(e.updatesOf(plan.TS)) == 1 })
		if u := e.updatesOf(plan.TS)[0]; !strings.Contains(u.Text, "Denied:") {
			t.Errorf("update = %q, want Denied", u.Text)
		}
		if rec := e.Record(t, planID); rec.State != approval.StateDenied || strings.Join(chattest.AuditEvents(rec), ",") != "requested,denied" {
			t.Errorf("record = %s %v, want Denied with requested,denied", rec.State, chattest.AuditEvents(rec))
		}
	})

	_, ack, cmdPath := e.command(t, alice, "/ipam", "release-ips")
	if ack != "Working on it…" {
		t.Fatalf("ack = %q", ack)
	}
	plan, planID := e.planPost(t, 2)
	if plan.Channel != channel || !strings.Contains(blocksText(plan.Blocks), "Approval needed: release 181 leaked IPs on test") {
		t.Fatalf("plan message in %s:\n%s", plan.Channel, blocksText(plan.Blocks))
	}
	if n := len(e.hooks.get(cmdPath)); n != 0 {
		t.Errorf("release-ips also answered on response_url %d times, want the plan in the channel only", n)
	}
	chattest.WaitFor(t, 10*time.Second, "the plan message reference", func() bool { return e.Record(t, planID).MessageRef != "" })
	if rec := e.Record(t, planID); rec.State != approval.StatePending || rec.MessageRef != "slack:"+channel+"/"+plan.TS || len(rec.Plan.Items) != 181 {
		t.Fatalf("RemediationRequest = %s ref %q items %d, want Pending, slack:%s/%s, 181", rec.State, rec.MessageRef, len(rec.Plan.Items), channel, plan.TS)
	}

	refusals := []struct {
		name   string
		user   string
		notice string
	}{
		{"a user who is not an approver is refused", mallory, "Only approvers"},
		{"the requester cannot approve their own plan", alice, "two-person rule"},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			status, path := e.click(t, 0, r.user, chat.ActionApprove, planID, plan.TS)
			if status != 200 {
				t.Fatalf("click = %d, want 200", status)
			}
			got := e.answer(t, path)
			if !strings.Contains(got.Text, r.notice) || got.ResponseType != "ephemeral" || got.ReplaceOriginal {
				t.Errorf("reply = %q (%s, replace %v), want an ephemeral notice containing %q", got.Text, got.ResponseType, got.ReplaceOriginal, r.notice)
			}
			if rec := e.Record(t, planID); rec.State != approval.StatePending {
				t.Errorf("state = %s, want Pending", rec.State)
			}
			if updates := e.updatesOf(plan.TS); len(updates) != 0 {
				t.Errorf("plan message updated %d times by a refusal, want 0", len(updates))
			}
			if n := e.Leaked(t); n != 181 {
				t.Errorf("leaked IPs = %d, want 181 (nothing changed)", n)
			}
		})
	}

	t.Run("a badly signed approval is refused", func(t *testing.T) {
		body := clickBody(t, bob, "bob", channel, plan.TS, chat.ActionApprove, planID, e.hooks.url("/forged"))
		resp, err := http.DefaultClient.Do(signedRequest(t, e.replicas[0].URL+"/slack/interactions", "guessed-secret", time.Now(), body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("forged click = %d, want 401", resp.StatusCode)
		}
		if rec := e.Record(t, planID); rec.State != approval.StatePending {
			t.Errorf("state = %s, want Pending", rec.State)
		}
	})

	t.Run("an approver in the user group approves and the IPs are released", func(t *testing.T) {
		status, _ := e.click(t, 0, bob, chat.ActionApprove, planID, plan.TS)
		if status != 200 {
			t.Fatalf("click = %d, want 200", status)
		}
		chattest.WaitFor(t, 120*time.Second, "the final plan message", func() bool {
			updates := e.updatesOf(plan.TS)
			return len(updates) > 0 && strings.Contains(updates[len(updates)-1].Text, "Done:")
		})
		updates := e.updatesOf(plan.TS)
		if len(updates) != 2 || !strings.Contains(updates[0].Text, "Running:") {
			t.Errorf("updates = %d (first %q), want 2: running, then done", len(updates), updates[0].Text)
		}
		final := updates[len(updates)-1]
		text := blocksText(final.Blocks)
		if final.Channel != channel || final.TS != plan.TS {
			t.Errorf("chat.update at %s/%s, want the plan message %s/%s", final.Channel, final.TS, channel, plan.TS)
		}
		for _, want := range []string{"Done: released 181 of 181 leaked IPs on test", "Approved by", "bob", "0 leaked IPs remain", "Nothing changed between approval and execution"} {
			if !strings.Contains(text, want) {
				t.Errorf("final message lacks %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, "[Approve]") {
			t.Errorf("final message still has the Approve button")
		}
		rec := e.Record(t, planID)
		if rec.State != approval.StateSucceeded || rec.DecidedBy == nil || rec.DecidedBy.ID != bob || rec.Result == nil || rec.Result.Done != 181 {
			t.Errorf("RemediationRequest = %s by %+v result %+v, want Succeeded by bob with 181 done", rec.State, rec.DecidedBy, rec.Result)
		}
		// The two refused clicks before (a non-approver's, and alice's own) are on record too.
		if got, want := strings.Join(chattest.AuditEvents(rec), ","), "requested,refused,refused,approved,started,finished"; got != want {
			t.Errorf("audit = %s, want %s", got, want)
		}
		if n := e.Leaked(t); n != 0 {
			t.Errorf("leaked IPs after release = %d, want 0", n)
		}
		if s, _ := e.Calico.LockStatus(t.Context()); !s.Ready {
			t.Errorf("datastore left locked")
		}
	})

	t.Run("/ipam check shows 0 leaked", func(t *testing.T) {
		_, _, path := e.command(t, mallory, "/ipam", "check")
		if got := e.answer(t, path); !strings.Contains(blocksText(got.Blocks), "no problems found") {
			t.Errorf("check answer:\n%s\nwant no problems found", blocksText(got.Blocks))
		}
	})

	t.Run("approving again runs nothing", func(t *testing.T) {
		_, path := e.click(t, 0, bob, chat.ActionApprove, planID, plan.TS)
		if got := e.answer(t, path); !strings.Contains(got.Text, "already approved by bob") {
			t.Errorf("reply = %q, want already approved", got.Text)
		}
		if n := e.Runs.Load(); n != 1 {
			t.Errorf("executions = %d, want 1", n)
		}
		if updates := e.updatesOf(plan.TS); len(updates) != 2 {
			t.Errorf("plan message updates = %d, want still 2", len(updates))
		}
	})
}

// TestE2EConcurrentApprovalsRunOnce sends the same Approve click twice to each of two bot
// replicas at once: exactly one execution, one final update, and the others told it was
// already approved.
func TestE2EConcurrentApprovalsRunOnce(t *testing.T) {
	e := newE2E(t, e2eOptions{scenario: "seed-ipam-leaked", replicas: 2})
	e.command(t, alice, "/ipam", "release-ips")
	plan, planID := e.planPost(t, 1)

	var wg sync.WaitGroup
	paths := make([]string, 4)
	for i := range paths {
		wg.Go(func() { _, paths[i] = e.click(t, i%2, bob, chat.ActionApprove, planID, plan.TS) })
	}
	wg.Wait()
	chattest.WaitFor(t, 120*time.Second, "the final record", func() bool { return e.Record(t, planID).State == approval.StateSucceeded })
	// Every click but the winner gets an "already approved" notice on its response_url.
	already := 0
	chattest.WaitFor(t, 10*time.Second, "three already-approved notices", func() bool {
		already = 0
		for _, p := range paths {
			for _, h := range e.hooks.get(p) {
				if strings.Contains(h.Text, "already approved") {
					already++
				}
			}
		}
		return already == 3
	})
	if n := e.Runs.Load(); n != 1 {
		t.Errorf("executions across replicas = %d, want 1", n)
	}
	// The winner's final chat.update comes after the record says Succeeded.
	countDone := func() int {
		_, updates := e.slack.snapshot()
		n := 0
		for _, u := range updates {
			if strings.Contains(u.Text, "Done:") {
				n++
			}
		}
		return n
	}
	chattest.WaitFor(t, 10*time.Second, "the final plan message", func() bool { return countDone() > 0 })
	time.Sleep(100 * time.Millisecond) // room for a second final update, which must not come
	done := countDone()
	if done != 1 || already != 3 {
		t.Errorf("final updates, already-approved notices = %d, %d, want 1, 3", done, already)
	}
	if got, want := strings.Join(chattest.AuditEvents(e.Record(t, planID)), ","), "requested,approved,started,finished"; got != want {
		t.Errorf("audit = %s, want %s", got, want)
	}
}

// TestE2EExpiredPlan approves after the expiry: the plan message says Expired, the record is
// Expired and nothing is released.
func TestE2EExpiredPlan(t *testing.T) {
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := newE2E(t, e2eOptions{scenario: "seed-ipam-leaked", expiry: 15 * time.Minute, now: now})
	e.command(t, alice, "/ipam", "release-ips")
	plan, planID := e.planPost(t, 1)
	offset.Store(int64(16 * time.Minute))
	_, path := e.click(t, 0, bob, chat.ActionApprove, planID, plan.TS)
	if got := e.answer(t, path); !strings.Contains(got.Text, "expired") {
		t.Errorf("reply = %q, want the plan expired", got.Text)
	}
	chattest.WaitFor(t, 10*time.Second, "the expired plan message", func() bool {
		_, updates := e.slack.snapshot()
		return len(updates) == 1 && strings.Contains(updates[0].Text, "Expired:")
	})
	if rec := e.Record(t, planID); rec.State != approval.StateExpired || strings.Join(chattest.AuditEvents(rec), ",") != "requested,expired,refused" {
		t.Errorf("record = %s %v, want Expired with requested,expired,refused (bob's late approval)", rec.State, chattest.AuditEvents(rec))
	}
	if n := e.Runs.Load(); n != 0 {
		t.Errorf("executions = %d, want 0", n)
	}
	if n := e.Leaked(t); n != 181 {
		t.Errorf("leaked IPs = %d, want 181 (nothing changed)", n)
	}
}
