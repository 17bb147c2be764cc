package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/chat"
)

var (
	alice   = chat.Principal{Platform: "slack", Team: "T1", ID: "UALICE", Name: "alice"} // requester, approver
	bob     = chat.Principal{Platform: "slack", Team: "T1", ID: "UBOB", Name: "bob"}     // approver
	carol   = chat.Principal{Platform: "slack", Team: "T1", ID: "UCAROL", Name: "carol"} // member of group SOPS
	mallory = chat.Principal{Platform: "slack", Team: "T1", ID: "UMALLORY", Name: "mal"} // nobody
	// Discord principals carry their roles (member.roles) in Groups.
	discordOpsRole = "1180000000000000001"
	discordAlice   = chat.Principal{Platform: "discord", Team: "1170000000000000001", ID: "1160000000000000001", Name: "alice"} // requester, approver
	discordBob     = chat.Principal{Platform: "discord", Team: "1170000000000000001", ID: "1160000000000000002", Name: "bob", Groups: []string{discordOpsRole}}
	discordMallory = chat.Principal{Platform: "discord", Team: "1170000000000000001", ID: "1160000000000000003", Name: "mal", Groups: []string{"1180000000000000009"}}
	testT0         = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	quietLog       = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// fakeExecutor counts executions and returns a canned result.
type fakeExecutor struct {
	runs  atomic.Int32
	err   error
	delay time.Duration
}

func (f *fakeExecutor) Execute(_ context.Context, ap actions.Approved) (actions.Result, error) {
	f.runs.Add(1)
	time.Sleep(f.delay)
	r := actions.Result{PlanID: ap.Plan.ID, Kind: ap.Plan.Kind, Planned: len(ap.Plan.Items), Done: len(ap.Plan.Items)}
	return r, f.err
}

// fakeDirectory maps groups to members.
type fakeDirectory struct {
	groups map[string][]string
	err    error
}

func (d fakeDirectory) GroupMembers(_ context.Context, g string) ([]string, error) {
	return d.groups[g], d.err
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// slackUsers is a policy's approvers: these Slack user IDs only.
func slackUsers(ids []string) map[string]approval.Approvers {
	return map[string]approval.Approvers{"slack": {Users: ids}}
}

func testPlan(kind actions.Kind, n int) actions.Plan {
	p := actions.Plan{ID: actions.NewID(), Kind: kind, Cluster: "prod"}
	for i := range n {
		p.Items = append(p.Items, actions.Item{Target: fmt.Sprintf("172.16.0.%d", i+1), Handle: fmt.Sprintf("k8s-pod-network.%d", i)})
	}
	p.Total = n
	p.Fingerprint = actions.Fingerprint(p.Kind, p.Cluster, p.Items)
	return p
}

type approvalsFixture struct {
	ap    *plans
	store *approval.MemoryStore
	exec  *fakeExecutor
	clk   *clock
}

func newApprovalsFixture(t *testing.T, policy approval.Policy, dir approval.Directory) *approvalsFixture {
	t.Helper()
	f := &approvalsFixture{store: approval.NewMemoryStore(), exec: &fakeExecutor{}, clk: &clock{t: testT0}}
	f.ap = newPlans(approval.Options{
		Store: f.store, Policy: policy, Directories: map[string]approval.Directory{"slack": dir},
		Executors: map[string]approval.Executor{"prod": f.exec}, Now: f.clk.now, Log: quietLog,
	})
	return f
}

func events(a *approval.Record) []approval.AuditEvent {
	var out []approval.AuditEvent
	for _, r := range a.History {
		out = append(out, r.Event)
	}
	return out
}

func TestDecide(t *testing.T) {
	policy := approval.Policy{Approvers: map[string]approval.Approvers{
		"slack":   {Users: []string{"UALICE", "UBOB"}, Groups: []string{"SOPS"}},
		"discord": {Users: []string{discordAlice.ID}, Groups: []string{discordOpsRole}},
	}, TwoPersonRule: true, Expiry: 15 * time.Minute}
	dir := fakeDirectory{groups: map[string][]string{"SOPS": {"UCAROL"}}}
	tests := []struct {
		name       string
		policy     approval.Policy
		dir        approval.Directory
		kind       actions.Kind
		requester  chat.Principal
		clicker    chat.Principal
		verdict    approval.Verdict
		after      time.Duration // clock advance before the click
		wantState  approval.State
		wantRuns   int32
		wantEvents []approval.AuditEvent
		wantNotice string // substring of the notice; "" means no notice
		wantDetail string // detail of the approved audit record, when set
	}{
		{
			name: "an approver other than the requester approves: the plan runs once and succeeds",
			kind: actions.KindReleaseLeakedIPs, requester: alice, clicker: bob, verdict: approval.VerdictApprove,
			wantState: approval.StateSucceeded, wantRuns: 1,
			wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditApproved, approval.AuditStarted, approval.AuditFinished},
		},
		{
			name: "a member of an approver user group approves",
			kind: actions.KindReleaseLeakedIPs, requester: alice, clicker: carol, verdict: approval.VerdictApprove,
			wantState: approval.StateSucceeded, wantRuns: 1,
			wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditApproved, approval.AuditStarted, approval.AuditFinished},
		},
		{
			name: "a user who is not an approver is refused, the refusal is recorded and nothing runs",
			kind: actions.KindReleaseLeakedIPs, requester: alice, clicker: mallory, verdict: approval.VerdictApprove,
			wantState: approval.StatePending, wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditRefused}, wantNotice: "Only approvers",
		},
		{
			name: "the requester cannot approve their own destructive plan under the two-person rule, and the attempt is recorded",
			kind: actions.KindReleaseLeakedIPs, requester: alice, clicker: alice, verdict: approval.VerdictApprove,
			wantState: approval.StatePending, wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditRefused}, wantNotice: "two-person rule",
		},
		{
			name:   "the requester may approve their own plan when the two-person rule is off",
			policy: approval.Policy{Approvers: slackUsers([]string{"UALICE"})}, kind: actions.KindReleaseEmptyBlocks,
			requester: alice, clicker: alice, verdict: approval.VerdictApprove,
			wantState: approval.StateSucceeded, wantRuns: 1,
			wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditApproved, approval.AuditStarted, approval.AuditFinished},
		},
		{
			name: "the requester may approve their own unlock (not destructive) under the two-person rule",
			kind: actions.KindUnlockDatastore, requester: alice, clicker: alice, verdict: approval.VerdictApprove,
			wantState: approval.StateSucceeded, wantRuns: 1,
			wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditApproved, approval.AuditStarted, approval.AuditFinished},
		},
		{
			name: "an approval after the expiry expires the plan, is recorded as refused and nothing runs",
			kind: actions.KindReleaseLeakedIPs, requester: alice, clicker: bob, verdict: approval.VerdictApprove,
			after: 15 * time.Minute, wantState: approval.StateExpired,
			wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditExpired, approval.AuditRefused}, wantNotice: "expired",
		},
		{
			name: "an approver denies",
			kind: actions.KindReleaseLeakedIPs, requester: alice, clicker: bob, verdict: approval.VerdictDeny,
			wantState: approval.StateDenied, wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditDenied},
		},
		{
			name: "the requester withdraws their own plan",
			kind: actions.KindReleaseLeakedIPs, requester: mallory, clicker: mallory, verdict: approval.VerdictDeny,
			wantState: approval.StateDenied, wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditDenied},
		},
		{
			name: "a stranger cannot deny, and the attempt is recorded",
			kind: actions.KindReleaseLeakedIPs, requester: alice, clicker: mallory, verdict: approval.VerdictDeny,
			wantState: approval.StatePending, wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditRefused}, wantNotice: "Only approvers",
		},
		{
			name: "a Discord member with an approver role approves, and the audit says how",
			kind: actions.KindReleaseLeakedIPs, requester: discordAlice, clicker: discordBob, verdict: approval.VerdictApprove,
			wantState: approval.StateSucceeded, wantRuns: 1,
			wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditApproved, approval.AuditStarted, approval.AuditFinished},
			wantDetail: "approver by group " + discordOpsRole,
		},
		{
			name: "a Discord member without an approver role is refused",
			kind: actions.KindReleaseLeakedIPs, requester: discordAlice, clicker: discordMallory, verdict: approval.VerdictApprove,
			wantState: approval.StatePending, wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditRefused}, wantNotice: "Only approvers (users " + discordAlice.ID,
		},
		{
			name: "a Slack approver's ID cannot approve on Discord",
			kind: actions.KindReleaseLeakedIPs, requester: discordAlice, clicker: chat.Principal{Platform: "discord", ID: "UBOB"}, verdict: approval.VerdictApprove,
			wantState: approval.StatePending, wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditRefused}, wantNotice: "Only approvers",
		},
		{
			name: "a Discord approver's ID or role cannot approve on Slack",
			kind: actions.KindReleaseLeakedIPs, requester: alice, verdict: approval.VerdictApprove,
			clicker:   chat.Principal{Platform: "slack", ID: discordAlice.ID, Groups: []string{discordOpsRole}},
			wantState: approval.StatePending, wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditRefused}, wantNotice: "Only approvers",
		},
		{
			name: "a platform without approvers refuses everyone",
			kind: actions.KindReleaseLeakedIPs, requester: alice, clicker: chat.Principal{Platform: "console", ID: "UBOB"}, verdict: approval.VerdictApprove,
			wantState: approval.StatePending, wantEvents: []approval.AuditEvent{approval.AuditRequested, approval.AuditRefused}, wantNotice: "nobody on console",
		},
		{
			name: "a failing group lookup refuses without deciding",
			dir:  fakeDirectory{err: errors.New("usergroups.users.list: ratelimited")},
			kind: actions.KindReleaseLeakedIPs, requester: alice, clicker: carol, verdict: approval.VerdictApprove,
			wantState: approval.StatePending, wantEvents: []approval.AuditEvent{approval.AuditRequested}, wantNotice: "nothing was decided",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, d := policy, approval.Directory(dir)
			if tt.policy.Approvers != nil {
				p = tt.policy
			}
			if tt.dir != nil {
				d = tt.dir
			}
			f := newApprovalsFixture(t, p, d)
			ctx := t.Context()
			a, err := f.ap.Request(ctx, testPlan(tt.kind, 3), tt.requester, "C1")
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			f.clk.add(tt.after)
			var progressed []string
			out := f.ap.Decide(ctx, approval.Decision{PlanID: a.Plan.ID, Verdict: tt.verdict, Principal: tt.clicker}, func(_ context.Context, m chat.Message) { progressed = append(progressed, m.Title) })
			got, err := f.store.Get(ctx, a.Plan.ID)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.State != tt.wantState {
				t.Errorf("state = %s, want %s", got.State, tt.wantState)
			}
			if runs := f.exec.runs.Load(); runs != tt.wantRuns {
				t.Errorf("executions = %d, want %d", runs, tt.wantRuns)
			}
			if diff := cmp.Diff(tt.wantEvents, events(got)); diff != "" {
				t.Errorf("audit events (-want +got):\n%s", diff)
			}
			if tt.wantNotice == "" && out.Notice != "" {
				t.Errorf("notice = %q, want none", out.Notice)
			}
			if !strings.Contains(out.Notice, tt.wantNotice) {
				t.Errorf("notice = %q, want it to contain %q", out.Notice, tt.wantNotice)
			}
			refused := tt.wantState == approval.StatePending
			if refused && out.Update != nil {
				t.Errorf("refusal updated the plan message to %q, want it left alone", out.Update.Title)
			}
			if !refused && out.Update == nil {
				t.Errorf("decision did not update the plan message")
			}
			if tt.wantDetail != "" && (len(got.History) < 2 || got.History[1].Detail != tt.wantDetail) {
				t.Errorf("audit = %+v, want approved with detail %q", got.History, tt.wantDetail)
			}
			if tt.wantRuns > 0 && len(progressed) != 1 {
				t.Errorf("progress messages = %q, want one (running)", progressed)
			}
		})
	}
}

func TestDecideFailureIsRecorded(t *testing.T) {
	f := newApprovalsFixture(t, approval.Policy{Approvers: slackUsers([]string{"UBOB"}), TwoPersonRule: true}, nil)
	f.exec.err = fmt.Errorf("lock: %w", actions.ErrDatastoreLocked)
	ctx := t.Context()
	a, err := f.ap.Request(ctx, testPlan(actions.KindReleaseLeakedIPs, 2), alice, "C1")
	if err != nil {
		t.Fatal(err)
	}
	out := f.ap.Decide(ctx, approval.Decision{PlanID: a.Plan.ID, Verdict: approval.VerdictApprove, Principal: bob}, nil)
	got, _ := f.store.Get(ctx, a.Plan.ID)
	if got.State != approval.StateFailed || got.FailureCode != "datastore-locked" {
		t.Errorf("state, failure code = %s, %q, want Failed, datastore-locked", got.State, got.FailureCode)
	}
	last := got.History[len(got.History)-1]
	if last.Event != approval.AuditFailed || !strings.Contains(last.Detail, "locked") {
		t.Errorf("last audit record = %+v, want failed with the error", last)
	}
	if out.Update == nil || !strings.HasPrefix(out.Update.Title, "Failed:") {
		t.Errorf("updated message = %+v, want a Failed title", out.Update)
	}
}

func TestDecideConcurrentClicksRunOnce(t *testing.T) {
	f := newApprovalsFixture(t, approval.Policy{Approvers: slackUsers([]string{"UBOB", "UCAROL"}), TwoPersonRule: true}, nil)
	f.exec.delay = 20 * time.Millisecond
	ctx := t.Context()
	a, err := f.ap.Request(ctx, testPlan(actions.KindReleaseLeakedIPs, 5), alice, "C1")
	if err != nil {
		t.Fatal(err)
	}
	const clicks = 16
	outs := make([]chat.Outcome, clicks)
	var wg sync.WaitGroup
	for i := range clicks {
		who := bob
		if i%2 == 1 {
			who = carol
		}
		wg.Go(func() {
			outs[i] = f.ap.Decide(ctx, approval.Decision{PlanID: a.Plan.ID, Verdict: approval.VerdictApprove, Principal: who}, nil)
		})
	}
	wg.Wait()
	if runs := f.exec.runs.Load(); runs != 1 {
		t.Errorf("executions = %d, want 1", runs)
	}
	var updates, already int
	for _, o := range outs {
		if o.Update != nil {
			updates++
		}
		if strings.Contains(o.Notice, "already approved") {
			already++
		}
	}
	if updates != 1 || already != clicks-1 {
		t.Errorf("updates, already-approved notices = %d, %d, want 1, %d", updates, already, clicks-1)
	}
}

func TestDecideTwoReplicasRunOnce(t *testing.T) {
	store := approval.NewMemoryStore()
	clk := &clock{t: testT0}
	policy := approval.Policy{Approvers: slackUsers([]string{"UBOB"}), TwoPersonRule: true}
	execs := []*fakeExecutor{{delay: 20 * time.Millisecond}, {delay: 20 * time.Millisecond}}
	replicas := make([]*plans, 2)
	for i := range replicas {
		replicas[i] = newPlans(approval.Options{Store: store, Policy: policy,
			Executors: map[string]approval.Executor{"prod": execs[i]}, Now: clk.now, Log: quietLog})
	}
	ctx := t.Context()
	a, err := replicas[0].Request(ctx, testPlan(actions.KindReleaseLeakedIPs, 5), alice, "C1")
	if err != nil {
		t.Fatal(err)
	}
	// The same click (same user, same plan) reaches both replicas at once.
	var wg sync.WaitGroup
	for _, r := range replicas {
		wg.Go(func() {
			r.Decide(ctx, approval.Decision{PlanID: a.Plan.ID, Verdict: approval.VerdictApprove, Principal: bob}, nil)
		})
	}
	wg.Wait()
	if total := execs[0].runs.Load() + execs[1].runs.Load(); total != 1 {
		t.Errorf("executions across replicas = %d, want 1", total)
	}
	got, _ := store.Get(ctx, a.Plan.ID)
	if diff := cmp.Diff([]approval.AuditEvent{approval.AuditRequested, approval.AuditApproved, approval.AuditStarted, approval.AuditFinished}, events(got)); diff != "" {
		t.Errorf("audit events (-want +got):\n%s", diff)
	}
}

func TestExpireDue(t *testing.T) {
	f := newApprovalsFixture(t, approval.Policy{Approvers: slackUsers([]string{"UBOB"}), Expiry: 10 * time.Minute}, nil)
	ctx := t.Context()
	old, _ := f.ap.Request(ctx, testPlan(actions.KindReleaseLeakedIPs, 1), alice, "C1")
	f.clk.add(6 * time.Minute)
	fresh, _ := f.ap.Request(ctx, testPlan(actions.KindReleaseLeakedIPs, 1), alice, "C1")
	f.clk.add(5 * time.Minute)
	expired, err := f.ap.ExpireDue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range expired {
		ids = append(ids, a.Plan.ID)
	}
	if diff := cmp.Diff([]string{old.Plan.ID}, ids); diff != "" {
		t.Errorf("expired plans (-want +got):\n%s", diff)
	}
	got, _ := f.store.Get(ctx, fresh.Plan.ID)
	if got.State != approval.StatePending {
		t.Errorf("fresh plan state = %s, want Pending", got.State)
	}
}

func TestMemoryStoreCompareAndSet(t *testing.T) {
	s := approval.NewMemoryStore()
	ctx := t.Context()
	a := &approval.Record{Plan: testPlan(actions.KindReleaseLeakedIPs, 1), State: approval.StatePending}
	if err := s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	first, _ := s.Get(ctx, a.Plan.ID)
	second, _ := s.Get(ctx, a.Plan.ID)
	first.State = approval.StateRunning
	if err := s.Update(ctx, first); err != nil {
		t.Fatalf("first Update: %v", err)
	}
	second.State = approval.StateDenied
	if err := s.Update(ctx, second); !errors.Is(err, approval.ErrConflict) {
		t.Errorf("stale Update error = %v, want ErrConflict", err)
	}
	got, _ := s.Get(ctx, a.Plan.ID)
	if got.State != approval.StateRunning {
		t.Errorf("state = %s, want Running", got.State)
	}
	if _, err := s.Get(ctx, "rr-missing"); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrNotFound", err)
	}
}

func TestRunSweeperNotifiesOnce(t *testing.T) {
	f := newApprovalsFixture(t, approval.Policy{Approvers: slackUsers([]string{"UBOB"}), Expiry: time.Minute}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a, _ := f.ap.Request(ctx, testPlan(actions.KindReleaseLeakedIPs, 1), alice, "C1")
	f.clk.add(2 * time.Minute)
	notified := make(chan string, 10)
	go f.ap.RunSweeper(ctx, 5*time.Millisecond, func(_ context.Context, a *approval.Record, m chat.Message) {
		notified <- a.Plan.ID + " " + m.Title
	})
	select {
	case got := <-notified:
		if want := a.Plan.ID + " Expired: release 1 leaked IP on prod"; got != want {
			t.Errorf("notified %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no expiry notification")
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(notified); n != 0 {
		t.Errorf("further notifications = %d, want 0 (a plan expires once)", n)
	}
}

func TestRefusalsAreAudited(t *testing.T) {
	policy := approval.Policy{Approvers: slackUsers([]string{"UALICE", "UBOB"}), TwoPersonRule: true, Expiry: 15 * time.Minute}
	tests := []struct {
		name       string
		clicker    chat.Principal
		verdict    approval.Verdict
		expireBy   time.Duration // clock advance after an earlier expiry sweep
		wantDetail string
	}{
		{name: "self-approval under the two-person rule", clicker: alice, verdict: approval.VerdictApprove,
			wantDetail: "approve refused: self-approval of a destructive plan (two-person rule)"},
		{name: "approval by someone who is not an approver", clicker: mallory, verdict: approval.VerdictApprove,
			wantDetail: "approve refused: not an approver"},
		{name: "denial by someone who is neither approver nor requester", clicker: mallory, verdict: approval.VerdictDeny,
			wantDetail: "deny refused: not an approver or the requester"},
		{name: "approval of a plan that already expired", clicker: bob, verdict: approval.VerdictApprove, expireBy: 16 * time.Minute,
			wantDetail: "approve refused: the plan expired at 2026-11-30T12:15:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs syncLog
			f := newApprovalsFixture(t, policy, nil)
			f.ap = newPlans(approval.Options{Store: f.store, Policy: policy, Executors: map[string]approval.Executor{"prod": f.exec},
				Now: f.clk.now, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
			ctx := t.Context()
			a, err := f.ap.Request(ctx, testPlan(actions.KindReleaseLeakedIPs, 3), alice, "C1")
			if err != nil {
				t.Fatal(err)
			}
			if tt.expireBy > 0 {
				f.clk.add(tt.expireBy)
				if _, err := f.ap.ExpireDue(ctx); err != nil {
					t.Fatal(err)
				}
			}
			f.clk.add(time.Second)
			out := f.ap.Decide(ctx, approval.Decision{PlanID: a.Plan.ID, Verdict: tt.verdict, Principal: tt.clicker}, nil)
			if out.Notice == "" || out.Update != nil || f.exec.runs.Load() != 0 {
				t.Fatalf("outcome = %+v after %d runs, want a refusal notice and nothing run", out, f.exec.runs.Load())
			}
			got, _ := f.store.Get(ctx, a.Plan.ID)
			last := got.History[len(got.History)-1]
			want := approval.AuditRecord{Time: f.clk.now(), Event: approval.AuditRefused, Actor: tt.clicker.String(), Detail: tt.wantDetail}
			if diff := cmp.Diff(want, last); diff != "" {
				t.Errorf("last history record (-want +got):\n%s", diff)
			}
			line := logs.find(t, "approval refused")
			for k, v := range map[string]any{"level": "WARN", "audit": true, "plan": a.Plan.ID, "actor": tt.clicker.String(),
				"detail": tt.wantDetail, "at": f.clk.now().Format(time.RFC3339Nano)} {
				if line[k] != v {
					t.Errorf("log %s = %v, want %v", k, line[k], v)
				}
			}
		})
	}

	t.Run("a plan keeps at most 20 refusals; later ones are only logged", func(t *testing.T) {
		var logs syncLog
		f := newApprovalsFixture(t, policy, nil)
		f.ap = newPlans(approval.Options{Store: f.store, Policy: policy, Executors: map[string]approval.Executor{"prod": f.exec},
			Now: f.clk.now, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
		a, err := f.ap.Request(t.Context(), testPlan(actions.KindReleaseLeakedIPs, 3), alice, "C1")
		if err != nil {
			t.Fatal(err)
		}
		for range 25 {
			f.ap.Decide(t.Context(), approval.Decision{PlanID: a.Plan.ID, Verdict: approval.VerdictApprove, Principal: mallory}, nil)
		}
		got, _ := f.store.Get(t.Context(), a.Plan.ID)
		refused := 0
		for _, r := range got.History {
			if r.Event == approval.AuditRefused {
				refused++
			}
		}
		if refused != approval.MaxRefusals || got.State != approval.StatePending {
			t.Errorf("refusal records = %d, state %s; want %d, Pending", refused, got.State, approval.MaxRefusals)
		}
		if n := strings.Count(logs.String(), `"msg":"approval refused"`); n != 25 {
			t.Errorf("refusals logged = %d, want 25", n)
		}
	})
}

// syncLog is a goroutine-safe JSON log sink.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// find returns the last JSON log line whose msg is msg.
func (l *syncLog) find(t *testing.T, msg string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			found = m
		}
	}
	if found == nil {
		t.Fatalf("no log line %q in:\n%s", msg, l.String())
	}
	return found
}

// TestDecideRefusedByTheAdapter: a click the adapter refuses (a Discord DM) decides nothing,
// whoever clicks, and the refusal is recorded with its reason.
func TestDecideRefusedByTheAdapter(t *testing.T) {
	f := newApprovalsFixture(t, approval.Policy{Approvers: map[string]approval.Approvers{"discord": {Users: []string{discordBob.ID}}}, TwoPersonRule: true}, nil)
	ctx := t.Context()
	a, err := f.ap.Request(ctx, testPlan(actions.KindReleaseLeakedIPs, 3), discordAlice, "C1")
	if err != nil {
		t.Fatal(err)
	}
	dm := chat.Principal{Platform: "discord", ID: discordBob.ID, Name: "bob"} // an approver, but in a DM
	out := f.ap.Decide(ctx, approval.Decision{PlanID: a.Plan.ID, Verdict: approval.VerdictApprove, Principal: dm, Refusal: "Not in a direct message."}, nil)
	if out.Notice != "Not in a direct message. Nothing was changed." || out.Update != nil {
		t.Errorf("outcome = %+v, want the refusal as a notice and no update", out)
	}
	got, _ := f.store.Get(ctx, a.Plan.ID)
	last := got.History[len(got.History)-1]
	if got.State != approval.StatePending || f.exec.runs.Load() != 0 || last.Event != approval.AuditRefused || last.Detail != "approve refused: Not in a direct message." {
		t.Errorf("record = %s, runs %d, last audit %+v; want Pending, 0, the refusal", got.State, f.exec.runs.Load(), last)
	}
}
