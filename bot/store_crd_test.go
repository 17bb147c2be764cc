package bot

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// startStoreCluster starts a control plane with the RemediationRequest CRD and the
// namespace ns.
func startStoreCluster(t *testing.T, ns string) *testenv.Cluster {
	t.Helper()
	c := testcluster.Start(t, testenv.Options{})
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(t.Context(), os.DirFS(filepath.Join(root, "charts", "whypending", "crds")), "."); err != nil {
		t.Fatalf("install CRDs: %v", err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCRDStore(t *testing.T) {
	c := startStoreCluster(t, "whypending")
	s := approval.NewCRDStore(c.Dynamic, "whypending")
	ctx := t.Context()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}

	plan := testPlan(actions.KindReleaseLeakedIPs, 3)
	plan.Items[0].SequenceNumber = 1764504000123456789
	plan.Items[0].Node, plan.Items[0].Owner, plan.Items[0].Block = "worker-2", "shop/web-1", "172.16.0.0/26"
	plan.CreatedAt = testT0
	plan.ExpiresAt = testT0.Add(15 * time.Minute)
	plan.RequestedBy = alice.String()
	plan.Basis = "ClusterInformation rv 42"
	a := &approval.Record{Plan: plan, State: approval.StatePending, RequestedBy: alice, Channel: "C0OPS",
		History: []approval.AuditRecord{{Time: testT0, Event: approval.AuditRequested, Actor: alice.String()}}}
	if err := s.Create(ctx, a); err != nil {
		t.Fatalf("Create: %v", err)
	}

	t.Run("a record reads back as it was written", func(t *testing.T) {
		got, err := s.Get(ctx, plan.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, got, cmpopts.IgnoreUnexported(approval.Record{})); diff != "" {
			t.Errorf("Get (-want +got):\n%s", diff)
		}
	})

	t.Run("pending records are listed", func(t *testing.T) {
		got, err := s.List(ctx, approval.StatePending)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Plan.ID != plan.ID {
			t.Errorf("List(Pending) = %d records, want only %s", len(got), plan.ID)
		}
	})

	t.Run("a stale update loses the compare-and-set", func(t *testing.T) {
		first, _ := s.Get(ctx, plan.ID)
		second, _ := s.Get(ctx, plan.ID)
		first.State, first.DecidedBy, first.DecidedAt = approval.StateRunning, &bob, testT0.Add(time.Minute)
		first.History = append(first.History, approval.AuditRecord{Time: testT0.Add(time.Minute), Event: approval.AuditApproved, Actor: bob.String()})
		if err := s.Update(ctx, first); err != nil {
			t.Fatalf("first Update: %v", err)
		}
		second.State = approval.StateDenied
		if err := s.Update(ctx, second); !errors.Is(err, approval.ErrConflict) {
			t.Errorf("stale Update error = %v, want ErrConflict", err)
		}
		got, _ := s.Get(ctx, plan.ID)
		if got.State != approval.StateRunning || got.DecidedBy == nil || got.DecidedBy.ID != bob.ID {
			t.Errorf("state, decided by = %s, %+v, want Running, bob", got.State, got.DecidedBy)
		}
		if pending, _ := s.List(ctx, approval.StatePending); len(pending) != 0 {
			t.Errorf("List(Pending) after approval = %d records, want 0", len(pending))
		}
	})

	t.Run("a result with skips survives the schema", func(t *testing.T) {
		cur, _ := s.Get(ctx, plan.ID)
		cur.State = approval.StateSucceeded
		cur.Result = &actions.Result{PlanID: plan.ID, Kind: plan.Kind, Planned: 3, Done: 2, NewSince: 1,
			Skipped:   []actions.Skip{{Target: "172.16.0.3", Reason: "now in use by Workload(shop/web-9)"}},
			Remaining: 1, Locked: true, StartedAt: testT0.Add(2 * time.Minute), FinishedAt: testT0.Add(3 * time.Minute)}
		if err := s.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get(ctx, plan.ID)
		if diff := cmp.Diff(cur.Result, got.Result); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
	})

	t.Run("labels and annotations others add survive the bot's updates", func(t *testing.T) {
		obj, err := c.Dynamic.Resource(approval.RemediationRequestGVR).Namespace("whypending").Get(ctx, plan.ID, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj.SetLabels(map[string]string{"team": "net", approval.LabelState: string(approval.StateSucceeded)})
		obj.SetAnnotations(map[string]string{"ticket": "INC-42"})
		if _, err := c.Dynamic.Resource(approval.RemediationRequestGVR).Namespace("whypending").Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		cur, _ := s.Get(ctx, plan.ID)
		cur.MessageRef = "slack:C0OPS/1764504000.000001"
		if err := s.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		obj, _ = c.Dynamic.Resource(approval.RemediationRequestGVR).Namespace("whypending").Get(ctx, plan.ID, metav1.GetOptions{})
		if obj.GetLabels()["team"] != "net" || obj.GetAnnotations()["ticket"] != "INC-42" || obj.GetLabels()[approval.LabelKind] != string(plan.Kind) {
			t.Errorf("labels %v annotations %v, want team=net, ticket=INC-42 and the bot's labels", obj.GetLabels(), obj.GetAnnotations())
		}
	})

	t.Run("kubectl get shows the audit columns", func(t *testing.T) {
		raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/apis/whypending.io/v1alpha1/namespaces/whypending/remediationrequests").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(raw, &table); err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, c := range table.ColumnDefinitions {
			if c.Priority == 0 {
				cols = append(cols, c.Name)
			}
		}
		if diff := cmp.Diff([]string{"Name", "Kind", "Cluster", "Requested By", "Decided By", "State", "Age"}, cols); diff != "" {
			t.Errorf("printer columns (-want +got):\n%s", diff)
		}
		if len(table.Rows) != 1 {
			t.Fatalf("rows = %d, want 1", len(table.Rows))
		}
		got := table.Rows[0].Cells[:6]
		want := []any{plan.ID, "release-leaked-ips", "prod", "alice", "bob", "Succeeded"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("row (-want +got):\n%s", diff)
		}
	})
	t.Run("no column is blank, even for a pending plan of a requester without a name", func(t *testing.T) {
		ap := newPlans(approval.Options{Store: s, Policy: approval.Policy{Approvers: slackUsers([]string{"UBOB"})},
			Executors: map[string]approval.Executor{"prod": &fakeExecutor{}}, Log: quietLog})
		req, err := ap.Request(ctx, testPlan(actions.KindReleaseEmptyBlocks, 1), chat.Principal{Platform: "slack", Team: "T1", ID: "U0NONAME"}, "C0OPS")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/apis/whypending.io/v1alpha1/namespaces/whypending/remediationrequests").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Param("includeObject", "None").DoRaw(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(raw, &table); err != nil {
			t.Fatal(err)
		}
		for _, row := range table.Rows {
			if row.Cells[0] != req.Plan.ID {
				continue
			}
			for i, cell := range row.Cells {
				if name := table.ColumnDefinitions[i].Name; name == "Requested As" || name == "Decided As" {
					continue // the Kubernetes identities of per-user authorization: none when it is off
				}
				if cell == nil || cell == "" {
					t.Errorf("column %s is blank: %v", table.ColumnDefinitions[i].Name, row.Cells)
				}
			}
			if row.Cells[3] != "U0NONAME" || row.Cells[4] != "-" {
				t.Errorf("Requested By, Decided By = %v, %v; want U0NONAME and -", row.Cells[3], row.Cells[4])
			}
			return
		}
		t.Errorf("no row for %s", req.Plan.ID)
	})
	t.Run("a refused click is recorded in the RemediationRequest's history", func(t *testing.T) {
		ap := newPlans(approval.Options{Store: s, Policy: approval.Policy{Approvers: slackUsers([]string{"UALICE", "UBOB"}), TwoPersonRule: true},
			Executors: map[string]approval.Executor{"prod": &fakeExecutor{}}, Log: quietLog})
		req, err := ap.Request(ctx, testPlan(actions.KindReleaseLeakedHandles, 2), alice, "C0OPS")
		if err != nil {
			t.Fatal(err)
		}
		ap.Decide(ctx, approval.Decision{PlanID: req.Plan.ID, Verdict: approval.VerdictApprove, Principal: alice}, nil)
		ap.Decide(ctx, approval.Decision{PlanID: req.Plan.ID, Verdict: approval.VerdictApprove, Principal: mallory}, nil)
		got, err := s.Get(ctx, req.Plan.ID)
		if err != nil {
			t.Fatal(err)
		}
		var refusals []string
		for _, r := range got.History {
			if r.Event == approval.AuditRefused {
				refusals = append(refusals, r.Actor+" "+r.Detail)
			}
		}
		want := []string{alice.String() + " approve refused: self-approval of a destructive plan (two-person rule)",
			mallory.String() + " approve refused: not an approver"}
		if diff := cmp.Diff(want, refusals); diff != "" || got.State != approval.StatePending {
			t.Errorf("state %s, refusals (-want +got):\n%s", got.State, diff)
		}
	})

	t.Run("a plan whose bot process died is stored as Interrupted with what it had done", func(t *testing.T) {
		a := runningPlan(t, s, goneProcess(t), time.Now().UTC().Truncate(time.Second))
		ap := newPlans(approval.Options{Store: s, Policy: approval.Policy{Approvers: slackUsers([]string{"UBOB"})},
			Executors: map[string]approval.Executor{"prod": &recoveringExecutor{remaining: 1}}, Log: quietLog})
		marked, err := ap.RecoverInterrupted(ctx)
		if err != nil || len(marked) != 1 {
			t.Fatalf("RecoverInterrupted = %d records, %v; want 1", len(marked), err)
		}
		got, err := s.Get(ctx, a.Plan.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != approval.StateInterrupted || got.Recovery == nil || got.Recovery.Remaining != 1 || !got.Recovery.Unlocked {
			t.Errorf("state %s, recovery %+v; want Interrupted, remaining 1, unlocked", got.State, got.Recovery)
		}
		if diff := cmp.Diff(a.Heartbeat, got.Heartbeat); diff != "" {
			t.Errorf("heartbeat (-want +got):\n%s", diff)
		}
		obj, _ := c.Dynamic.Resource(approval.RemediationRequestGVR).Namespace("whypending").Get(ctx, a.Plan.ID, metav1.GetOptions{})
		if obj.GetLabels()[approval.LabelState] != string(approval.StateInterrupted) {
			t.Errorf("state label = %q, want Interrupted (kubectl get rr -l %s=Interrupted)", obj.GetLabels()[approval.LabelState], approval.LabelState)
		}
	})

	t.Run("readiness and plans name a missing namespace", func(t *testing.T) {
		missing := approval.NewCRDStore(c.Dynamic, "nowhere")
		const want = `The approval store is not ready: namespace "nowhere" does not exist (create it, or set store.namespace).`
		var ue *chat.UnavailableError
		if err := missing.Ping(ctx); !errors.As(err, &ue) || ue.Text != want {
			t.Errorf("Ping = %v, want %q", err, want)
		}
		b := New(Options{Clusters: []*Cluster{{Name: "prod", Planner: onePlanPlanner{}, Executor: &fakeExecutor{}}},
			Store: missing, Policy: approval.Policy{Approvers: slackUsers([]string{"UBOB"})}, Log: quietLog})
		reply := b.Command(ctx, chat.Request{Principal: alice, Channel: "C1", Command: "ipam", Args: []string{"release-ips"}})
		if reply.Message.Title != want+" Nothing was done." || len(reply.Message.Sections) != 0 {
			t.Errorf("/ipam release-ips = %q %+v, want one line naming the namespace", reply.Message.Title, reply.Message.Sections)
		}
	})

	t.Run("readiness names a missing CRD", func(t *testing.T) {
		crds := c.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
		if err := crds.Delete(ctx, approval.RemediationRequestGVR.GroupResource().String(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		const want = "The approval store is not ready: the RemediationRequest CRD remediationrequests.whypending.io is not installed (apply charts/whypending/crds)."
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			var ue *chat.UnavailableError
			if err = s.Ping(ctx); errors.As(err, &ue) && ue.Text == want {
				return
			}
		}
		t.Errorf("Ping after deleting the CRD = %v, want %q", err, want)
	})
}

// onePlanPlanner plans one leaked IP.
type onePlanPlanner struct{}

func (onePlanPlanner) Plan(_ context.Context, kind actions.Kind, _ actions.PlanOptions) (actions.Plan, error) {
	return testPlan(kind, 1), nil
}
