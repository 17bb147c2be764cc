package bot

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/proc"
)

// recoveringExecutor is a fakeExecutor that also implements Recoverer: it reports remaining
// items still to do and that it released the plan's lock.
type recoveringExecutor struct {
	fakeExecutor
	remaining int
	recovered atomic.Int32
	err       error
}

func (r *recoveringExecutor) Recover(_ context.Context, p actions.Plan) (actions.Recovery, error) {
	r.recovered.Add(1)
	return actions.Recovery{Planned: len(p.Items), Remaining: r.remaining, Unlocked: true}, r.err
}

// goneProcess returns the identity of a process on this host that has exited.
func goneProcess(t *testing.T) proc.Identity {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run true: %v", err)
	}
	self := proc.Self()
	return proc.Identity{Host: self.Host, PID: cmd.Process.Pid, Start: 1}
}

// runningPlan stores a plan approved by bob and claimed by process, whose last heartbeat was
// at beat.
func runningPlan(t *testing.T, s approval.Store, process proc.Identity, beat time.Time) *approval.Record {
	t.Helper()
	p := testPlan(actions.KindReleaseLeakedIPs, 4)
	p.CreatedAt, p.ExpiresAt = testT0, testT0.Add(15*time.Minute)
	a := &approval.Record{Plan: p, State: approval.StateRunning, RequestedBy: alice, DecidedBy: &bob, DecidedAt: testT0,
		MessageRef: "slack:C0OPS/1700000000.000100",
		Heartbeat:  &approval.Heartbeat{Process: process, Time: beat},
		History: []approval.AuditRecord{{Time: testT0, Event: approval.AuditRequested, Actor: alice.String()},
			{Time: testT0, Event: approval.AuditApproved, Actor: bob.String()}, {Time: testT0, Event: approval.AuditStarted}}}
	if err := s.Create(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRecoverInterrupted(t *testing.T) {
	otherHost := proc.Identity{Host: "whypending-7d9f-other", PID: 1, Start: 4242}
	self := proc.Identity{Host: "test-host", PID: 7, Start: 99}
	tests := []struct {
		name       string
		process    proc.Identity
		beatAge    time.Duration // how long before "now" the last heartbeat was
		unhealthy  bool          // the plan's cluster is unavailable
		noRecover  bool          // the executor cannot recover
		wantState  approval.State
		wantDetail string // substring of the interrupted audit record
	}{
		{name: "a run whose process on this host is gone is interrupted at once",
			process: goneProcess(t), beatAge: time.Second, wantState: approval.StateInterrupted,
			wantDetail: "is gone"},
		{name: "a run on another host with a fresh heartbeat is left alone",
			process: otherHost, beatAge: 20 * time.Second, wantState: approval.StateRunning},
		{name: "a run on another host whose heartbeat is stale is interrupted",
			process: otherHost, beatAge: 2 * time.Minute, wantState: approval.StateInterrupted,
			wantDetail: "no heartbeat from bot process 1 on whypending-7d9f-other since"},
		{name: "this process's own run is left alone, however old its heartbeat",
			process: self, beatAge: time.Hour, wantState: approval.StateRunning},
		{name: "a dead run on an unavailable cluster waits for the cluster",
			process: otherHost, beatAge: 2 * time.Minute, unhealthy: true, wantState: approval.StateRunning},
		{name: "a dead run whose executor cannot recover is interrupted with a note",
			process: otherHost, beatAge: 2 * time.Minute, noRecover: true, wantState: approval.StateInterrupted,
			wantDetail: "cannot check the datastore lock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := approval.NewMemoryStore()
			clk := &clock{t: testT0.Add(5 * time.Minute)}
			rec := &recoveringExecutor{remaining: 3}
			var exec approval.Executor = rec
			if tt.noRecover {
				exec = &fakeExecutor{}
			}
			health := func(string) error { return nil }
			if tt.unhealthy {
				health = func(string) error { return chat.ClusterUnavailable("prod", testT0, errors.New("connection refused")) }
			}
			ap := newPlans(approval.Options{Store: store, Policy: approval.Policy{Approvers: slackUsers([]string{"UBOB"})},
				Executors: map[string]approval.Executor{"prod": exec}, Now: clk.now, Log: quietLog,
				ClusterHealth: health, Process: self})
			a := runningPlan(t, store, tt.process, clk.now().Add(-tt.beatAge))

			marked, err := ap.RecoverInterrupted(t.Context())
			if err != nil {
				t.Fatalf("RecoverInterrupted: %v", err)
			}
			got, _ := store.Get(t.Context(), a.Plan.ID)
			if got.State != tt.wantState {
				t.Fatalf("state = %s, want %s", got.State, tt.wantState)
			}
			if tt.wantState == approval.StateRunning {
				if len(marked) != 0 || rec.recovered.Load() != 0 {
					t.Errorf("marked %d records, recovered %d times; want none", len(marked), rec.recovered.Load())
				}
				return
			}
			if len(marked) != 1 || marked[0].Plan.ID != a.Plan.ID {
				t.Fatalf("marked = %d records, want the plan", len(marked))
			}
			last := got.History[len(got.History)-1]
			if last.Event != approval.AuditInterrupted || !strings.Contains(last.Detail, tt.wantDetail) || !strings.HasSuffix(last.Detail, "not re-run") {
				t.Errorf("last audit record = %+v, want interrupted naming %q", last, tt.wantDetail)
			}
			if rec.executions() != 0 {
				t.Errorf("executions = %d, want 0 (nothing is re-run)", rec.executions())
			}
			m := ap.Message(got)
			if !strings.HasPrefix(m.Title, "Interrupted: ") || len(m.Buttons) != 1 || m.Buttons[0].Label != "Make a fresh plan" ||
				m.Buttons[0].Value != "release-leaked-ips;cluster=prod" {
				t.Errorf("message = %q with buttons %+v, want Interrupted and one re-plan button", m.Title, m.Buttons)
			}
			if tt.noRecover {
				return
			}
			want := &actions.Recovery{Planned: 4, Remaining: 3, Unlocked: true}
			if diff := cmp.Diff(want, got.Recovery); diff != "" {
				t.Errorf("recovery (-want +got):\n%s", diff)
			}
			text := strings.Join(m.Sections[1].Lines, "\n")
			for _, s := range []string{"1 of 4 planned items were done", "3 are still to do",
				"The datastore lock it held has been released.", "/ipam release-ips --cluster prod"} {
				if !strings.Contains(text, s) {
					t.Errorf("message lines lack %q:\n%s", s, text)
				}
			}
			again, err := ap.RecoverInterrupted(t.Context())
			if err != nil || len(again) != 0 {
				t.Errorf("second RecoverInterrupted = %d records, %v; want none", len(again), err)
			}
		})
	}
}

func (f *fakeExecutor) executions() int32 { return f.runs.Load() }

// slowExecutor runs until its context is cancelled or release is closed.
type slowExecutor struct {
	started chan struct{}
	release chan struct{}
}

func (s *slowExecutor) Execute(ctx context.Context, ap actions.Approved) (actions.Result, error) {
	close(s.started)
	select {
	case <-ctx.Done():
		return actions.Result{PlanID: ap.Plan.ID, Kind: ap.Plan.Kind, Planned: len(ap.Plan.Items), Done: 1}, ctx.Err()
	case <-s.release:
		return actions.Result{PlanID: ap.Plan.ID, Kind: ap.Plan.Kind, Planned: len(ap.Plan.Items), Done: len(ap.Plan.Items)}, nil
	}
}

// approveInBackground requests a plan on a, has bob approve it in a goroutine and waits until
// exec started; the click's outcome arrives on done.
func approveInBackground(t *testing.T, a *plans, exec *slowExecutor) (*approval.Record, <-chan chat.Outcome) {
	t.Helper()
	req, err := a.Request(t.Context(), testPlan(actions.KindReleaseLeakedIPs, 2), alice, "C1")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan chat.Outcome)
	go func() {
		done <- a.Decide(t.Context(), approval.Decision{PlanID: req.Plan.ID, Verdict: approval.VerdictApprove, Principal: bob}, nil)
	}()
	<-exec.started
	return req, done
}

func TestHeartbeat(t *testing.T) {
	policy := approval.Policy{Approvers: slackUsers([]string{"UBOB"}), TwoPersonRule: true}
	replica := func(store approval.Store, exec approval.Executor, host string, stale time.Duration, now func() time.Time) *plans {
		return newPlans(approval.Options{Store: store, Policy: policy, Executors: map[string]approval.Executor{"prod": exec},
			Log: quietLog, HeartbeatInterval: 20 * time.Millisecond, StaleAfter: stale,
			Process: proc.Identity{Host: host, PID: 1, Start: 1}, Now: now})
	}

	t.Run("a running plan's heartbeat is renewed, so another replica leaves it alone", func(t *testing.T) {
		store := approval.NewMemoryStore()
		exec := &slowExecutor{started: make(chan struct{}), release: make(chan struct{})}
		a := replica(store, exec, "replica-a", time.Minute, nil)
		b := replica(store, &recoveringExecutor{}, "replica-b", 200*time.Millisecond, nil)
		req, done := approveInBackground(t, a, exec)
		first, _ := store.Get(t.Context(), req.Plan.ID)
		time.Sleep(500 * time.Millisecond) // longer than b's StaleAfter
		if marked, err := b.RecoverInterrupted(t.Context()); err != nil || len(marked) != 0 {
			t.Errorf("replica b marked %d plans, %v; want none (the heartbeat is fresh)", len(marked), err)
		}
		cur, _ := store.Get(t.Context(), req.Plan.ID)
		if !cur.Heartbeat.Time.After(first.Heartbeat.Time) {
			t.Errorf("heartbeat %s not renewed since %s", cur.Heartbeat.Time, first.Heartbeat.Time)
		}
		close(exec.release)
		out := <-done
		got, _ := store.Get(t.Context(), req.Plan.ID)
		if got.State != approval.StateSucceeded || out.Update == nil {
			t.Errorf("state = %s, want Succeeded with an updated message", got.State)
		}
	})

	t.Run("a run another replica marked Interrupted stops, and the record keeps the state and what the run did", func(t *testing.T) {
		store := approval.NewMemoryStore()
		exec := &slowExecutor{started: make(chan struct{}), release: make(chan struct{})}
		a := replica(store, exec, "replica-a", time.Minute, nil)
		// Replica b's clock is far ahead: it sees replica a's heartbeat as stale.
		// A heartbeat renewed between b's read and its write makes b back off (the process
		// is alive after all), so b tries until it wins.
		b := replica(store, &recoveringExecutor{remaining: 1}, "replica-b", time.Minute, func() time.Time { return time.Now().Add(time.Hour) })
		req, done := approveInBackground(t, a, exec)
		deadline := time.Now().Add(5 * time.Second)
		for {
			marked, err := b.RecoverInterrupted(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(marked) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("replica b never marked the plan Interrupted")
			}
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("replica a's execution did not stop after its plan was marked Interrupted")
		}
		got, _ := store.Get(t.Context(), req.Plan.ID)
		last := got.History[len(got.History)-1]
		if got.State != approval.StateInterrupted || last.Event != approval.AuditFailed || !strings.Contains(last.Detail, "after the plan was marked Interrupted") {
			t.Errorf("state %s, last record %+v; want Interrupted and the run's own report", got.State, last)
		}
		if got.Result == nil || got.Result.Done != 1 {
			t.Errorf("result = %+v, want what the stopped run did (done 1)", got.Result)
		}
	})
}
