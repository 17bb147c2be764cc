package console_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/approval"
)

// fakeRepairs plans three leaked IPs and "releases" them.
type fakeRepairs struct{ runs int }

func (f *fakeRepairs) Plan(_ context.Context, kind actions.Kind, _ actions.PlanOptions) (actions.Plan, error) {
	p := actions.Plan{ID: actions.NewID(), Kind: kind, Cluster: "demo", Total: 3}
	for i := range 3 {
		p.Items = append(p.Items, actions.Item{Target: fmt.Sprintf("172.16.0.%d", 130+i), Node: "worker-2", Owner: "shop/gone-" + fmt.Sprint(i)})
	}
	p.Fingerprint = actions.Fingerprint(p.Kind, p.Cluster, p.Items)
	return p, nil
}

func (f *fakeRepairs) Execute(_ context.Context, ap actions.Approved) (actions.Result, error) {
	f.runs++
	now := time.Now()
	return actions.Result{PlanID: ap.Plan.ID, Kind: ap.Plan.Kind, Planned: 3, Done: 3, StartedAt: now, FinishedAt: now}, nil
}

func TestSessionShowsAndApprovesAPlan(t *testing.T) {
	repairs := &fakeRepairs{}
	b := bot.New(bot.Options{
		Clusters: []*bot.Cluster{{Name: "demo", Planner: repairs, Executor: repairs}},
		Policy:   approval.Policy{Approvers: map[string]approval.Approvers{"console": {Users: []string{"alice", "bob"}}}, TwoPersonRule: true},
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	script := strings.Join([]string{
		"/ipam release-ips", // alice asks
		"/click 1",          // Approve asks for confirmation first
		"/click 1 confirm",  // alice cannot approve her own plan
		"/as bob",
		"/click 1 confirm", // bob approves
		"/click 1 confirm", // a second click does nothing
	}, "\n")
	var out bytes.Buffer
	s := console.NewSession(b, "alice")
	if err := console.Run(t.Context(), strings.NewReader(script), &out, "", s.Handle, nil); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	wantInOrder := []string{
		"Approval needed: release 3 leaked IPs on demo",
		"[1] Approve",
		"press a button with /click N",
		"Approve this plan?",
		"Type /click 1 confirm to approve",
		"another approver must approve it (two-person rule)",
		"you are now bob",
		"Running: release 3 leaked IPs on demo",
		"Done: released 3 of 3 leaked IPs on demo",
	}
	pos := 0
	for _, w := range wantInOrder {
		i := strings.Index(text[pos:], w)
		if i < 0 {
			t.Fatalf("console output lacks %q after position %d:\n%s", w, pos, text)
		}
		pos += i + len(w)
	}
	if repairs.runs != 1 {
		t.Errorf("executions = %d, want 1", repairs.runs)
	}
}
