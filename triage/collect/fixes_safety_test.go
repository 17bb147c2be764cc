package collect

import (
	"strings"
	"testing"

	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// TestWorkloadGroupedFixKeepsTheReadyReplica is the tester's report on the workload-grouped
// scenario (Deployment checkout: 1 of 5 pods Running and Ready, 4 Pending on Insufficient cpu):
// the fix lowered the request to 666m and then said to delete checkout-6f7b9c5d4-2lq8v, the
// only Ready replica, which takes the service down. The Deployment's rollout replaces it by
// itself: the fix says so, says it is the only Ready replica and what deleting it costs, and
// pastes no kubectl delete.
// Judged offline (the scenario's objects plus the scheduler's event, which the real scheduler
// writes); TestWhyPendingWorkloads asks the same through the CLI and the real scheduler.
func TestWorkloadGroupedFixKeepsTheReadyReplica(t *testing.T) {
	sc, err := testenv.LoadScenarioDir("../../testdata/scenarios/workload-grouped")
	if err != nil {
		t.Fatal(err)
	}
	s := offlineSnapshot(t, sc)
	s.Events = append(s.Events, triage.Event{Type: "Warning", Reason: "FailedScheduling", Count: 4, Source: "default-scheduler",
		Message: "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.", LastSeen: s.Now})
	p := triage.Evaluate(s).Primary()
	if p.Code != triage.CodeInsufficientCPU {
		t.Fatalf("primary = %s, want insufficient-cpu: %s", p.Code, p.Summary)
	}
	fix := strings.Join(p.Fix, "\n")
	for _, want := range []string{
		"kubectl set resources deployment/checkout -n workload-grouped --requests=cpu=666m",
		"They fit once the rollout has replaced the running replica checkout-6f7b9c5d4-2lq8v. Nothing needs deleting now: the Deployment controller removes old replicas by itself, only while enough replicas stay Ready.",
		"checkout-6f7b9c5d4-2lq8v is the only Ready replica of checkout: deleting it now takes checkout down. If new pods stay Pending beside it, delete it only once other replicas are Ready",
	} {
		if !strings.Contains(fix, want) {
			t.Errorf("fixes lack %q:\n%s", want, fix)
		}
	}
	if strings.Contains(fix, "kubectl delete pod") {
		t.Errorf("fixes paste a kubectl delete pod:\n%s", fix)
	}
	t.Logf("fixes:\n%s", fix)
}
