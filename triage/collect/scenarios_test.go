package collect

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/calico"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// TestMain stops the shared etcd and removes the control planes' temp dirs after the package's
// tests (see testenv.Main). It is the triage package's only TestMain.
func TestMain(m *testing.M) { testcluster.Main(m) }

// TestScenarios loads every scenario folder under testdata/scenarios and testdata/cases into
// its own fresh control plane (node names collide across folders), lets the real kube-scheduler
// judge the pod when the folder needs it, runs Diagnose with the direct Collector and checks
// expected.yaml: the primary code (or one of also_ok), the context codes and, for Pending codes,
// that the node verdict table agrees with the scheduler's own "0/N nodes are available" line;
// that every fix entry is a command or prose without one run into it (checkFixSteps); and that
// every fix looks before it acts (checkFixOrder).
// Subtests are named after the folder: go test ./triage -run 'TestScenarios/seed-frontend-cpu'.
func TestScenarios(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := testenv.ScenarioDirs(filepath.Join(root, "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no scenario folders under testdata")
	}
	t.Cleanup(func() {
		// After every scenario (subtests run in parallel, cleanups after them): the figure of
		// the dry-run check (fixes_dryrun_test.go).
		d := &dryRunTally
		d.mu.Lock()
		defer d.mu.Unlock()
		t.Logf("dry-run: %d kubectl write fixes accepted by the API server with --dry-run=server over %d scenarios; %d kubectl edit targets exist; %d writes name an object the scenario does not model", d.checked, d.runs, d.edits, d.notModelled)
		if d.runs == len(dirs) && d.checked == 0 {
			t.Error("the dry-run check ran no kubectl write over every scenario")
		}
	})
	for _, dir := range dirs {
		sc, err := testenv.LoadScenarioDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, dir, sc)
		})
	}
}

// runScenario loads one folder into a fresh cluster and checks its diagnosis.
func runScenario(t *testing.T, dir string, sc *testenv.Scenario) {
	exp := sc.Expected
	c := testcluster.Start(t, testenv.Options{Scheduler: !exp.SchedulerMustBeStopped})
	testcluster.Load(t, c, dir)
	ns, name, ok := strings.Cut(exp.Pod, "/")
	if !ok && exp.Target == "" {
		t.Fatalf("expected.yaml pod = %q, want namespace/name", exp.Pod)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if exp.NeedsScheduler && !exp.SchedulerMustBeStopped {
		if err := c.WaitForScheduler(ctx, ns, name); err != nil {
			t.Fatalf("%v\nkube-scheduler log tail:\n%s", err, c.LogTail("kube-scheduler", 20))
		}
	}
	// Nothing changes the cluster from here on: both backends see the same state.
	if err := c.StopScheduler(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	direct := New(c.Client).WithCalico(c.Config)
	direct.now = func() time.Time { return now }
	if exp.Target != "" {
		target, a := checkTarget(t, ctx, direct, sc)
		cached := newCachedCollector(t, ctx, c.Config)
		cached.now = direct.now
		if warm, err := Answer(ctx, cached, target); err != nil {
			t.Errorf("Answer(%s) with the cached collector: %v", exp.Target, err)
		} else if diff := cmp.Diff(a, warm, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("the cached collector (lean pod cache) answers %s differently (-direct +cached):\n%s", exp.Target, diff)
		}
		checkAnswerEach(t, ctx, cached, target, a)
		checkFixSteps(t, sc.Name, answerFindings(a))
		checkFixOrder(t, sc.Name, answerFindings(a))
		checkFixesDryRun(t, c, sc, answerFindings(a))
		return
	}
	d, err := Diagnose(ctx, direct, ns, name)
	if err != nil {
		t.Fatalf("Diagnose(%s) error: %v", exp.Pod, err)
	}
	logDiagnosis(t, d)
	if len(d.Refused) > 0 {
		// An admin on a healthy control plane reads everything: a read noted as failed here
		// would make every such answer partial (exit 3).
		t.Errorf("Diagnose(%s) as admin is partial: %v", exp.Pod, d.Refused)
	}
	cached := newCachedCollector(t, ctx, c.Config)
	cached.now = direct.now
	if warm, err := Diagnose(ctx, cached, ns, name); err != nil {
		t.Errorf("Diagnose(%s) with the cached collector: %v", exp.Pod, err)
	} else if diff := cmp.Diff(d, warm); diff != "" {
		t.Errorf("the cached collector (lean pod cache, IPAM cache) diagnoses %s differently (-direct +cached):\n%s", exp.Pod, diff)
	}
	checkAnswerEach(t, ctx, cached, triage.Target{Kind: triage.KindPod, Namespace: ns, Name: name}, &triage.Answer{Pod: d})
	checkSweepAgrees(t, ctx, cached, d)
	var codes []triage.Code
	for _, f := range d.Findings {
		codes = append(codes, f.Code)
	}
	want := append([]string{exp.Code}, exp.AlsoOK...)
	if got := d.Primary().Code; !slices.Contains(want, string(got)) {
		t.Errorf("Diagnose(%s).Findings[0].Code = %s, want %s (findings %v)\nsummary: %s", exp.Pod, got, strings.Join(want, " or "), codes, d.Summary)
	}
	if p := d.Primary(); len(p.Evidence) == 0 {
		t.Errorf("Diagnose(%s).Findings[0] (%s) names no evidence", exp.Pod, p.Code)
	}
	for _, ctxCode := range exp.Context {
		if !slices.Contains(codes, triage.Code(ctxCode)) {
			t.Errorf("Diagnose(%s) findings = %v, want context code %s among them", exp.Pod, codes, ctxCode)
		}
	}
	if exp.ExpectSchedulerMessage != "" {
		msg, ok := triage.LatestSchedulerMessage(d.Events)
		if !ok || !strings.Contains(msg.Event.Message, exp.ExpectSchedulerMessage) {
			t.Errorf("latest FailedScheduling message = %q, want it to contain %q (the scenario no longer reproduces)", msg.Event.Message, exp.ExpectSchedulerMessage)
		}
	}
	if triage.Code(exp.Code).Pending() {
		checkVerdictsAgree(t, d)
	}
	checkFixSteps(t, sc.Name, d.Findings)
	checkFixOrder(t, sc.Name, d.Findings)
	checkFixesDryRun(t, c, sc, d.Findings)
}

// checkTarget asks about the scenario's Target the way the CLI does (collect.Answer) and
// checks the answer's primary code, that it names evidence and a fix, and, for a workload, that
// every stuck group holds a full diagnosis of one of its pods whose code is the group's.
func checkTarget(t *testing.T, ctx context.Context, c *Collector, sc *testenv.Scenario) (triage.Target, *triage.Answer) {
	t.Helper()
	exp := sc.Expected
	target, err := triage.ParseTarget(exp.Target, exp.Namespace, false)
	if err != nil {
		t.Fatalf("expected.yaml target %q: %v", exp.Target, err)
	}
	a, err := Answer(ctx, c, target)
	if err != nil {
		t.Fatalf("Answer(%s) error: %v", exp.Target, err)
	}
	if a.Workload == nil {
		t.Fatalf("Answer(%s) is not a workload answer (pod %v)", exp.Target, a.Pod != nil)
	}
	wd := a.Workload
	logWorkload(t, wd)
	want := append([]string{exp.Code}, exp.AlsoOK...)
	p := wd.Primary()
	if !slices.Contains(want, string(p.Code)) {
		t.Errorf("Answer(%s).Findings[0].Code = %s, want %s\nsummary: %s", exp.Target, p.Code, strings.Join(want, " or "), wd.Summary)
	}
	if len(p.Evidence) == 0 {
		t.Errorf("Answer(%s).Findings[0] (%s) names no evidence", exp.Target, p.Code)
	}
	if len(p.Fix) == 0 {
		t.Errorf("Answer(%s).Findings[0] (%s) has no fix", exp.Target, p.Code)
	}
	for _, g := range wd.Groups {
		if g.Diagnosis == nil {
			t.Errorf("group %q has no representative diagnosis", g.Label)
			continue
		}
		if got := g.Diagnosis.Primary().Code; got != g.Code {
			t.Errorf("group %q: representative %s has code %s, want the group's %s", g.Label, g.Diagnosis.Pod, got, g.Code)
		}
	}
	for _, ctxCode := range exp.Context {
		if !slices.ContainsFunc(wd.Findings, func(f triage.Finding) bool { return string(f.Code) == ctxCode }) {
			t.Errorf("Answer(%s) findings lack context code %s", exp.Target, ctxCode)
		}
	}
	return target, a
}

// logWorkload writes a workload answer to the test log with -v.
func logWorkload(t *testing.T, wd *triage.WorkloadDiagnosis) {
	t.Helper()
	if !testing.Verbose() {
		return
	}
	t.Logf("%s: %s", wd.Workload, wd.Summary)
	logFindings(t, wd.Findings)
	for _, g := range wd.Groups {
		t.Logf("group %s (representative %s): %s", g.Label, g.Pods[0].Name, g.Diagnosis.Summary)
	}
}

// newCachedCollector starts the bot's backend on cfg's cluster, as serve wires it: the lean
// pod cache over a protobuf client and, when Calico is installed, the IPAM cache sharing its
// pods and nodes. The informers stop with the test.
func newCachedCollector(t *testing.T, ctx context.Context, cfg *rest.Config) *Collector {
	t.Helper()
	ictx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pb := rest.CopyConfig(cfg)
	pb.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(pb)
	if err != nil {
		t.Fatal(err)
	}
	col, err := NewCached(ictx, client)
	if err != nil {
		t.Fatalf("NewCached: %v", err)
	}
	cl, err := calico.NewClient(ctx, cfg)
	if errors.Is(err, calico.ErrCalicoNotInstalled) {
		return col.WithCalico(cfg) // records the same error as the direct collector
	}
	if err != nil {
		t.Fatal(err)
	}
	ipam := calico.NewCache(ictx, cl, col.AddressUsers())
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if err := ipam.WaitForSync(sctx); err != nil {
		t.Fatal(err)
	}
	return col.WithIPAM(ipam)
}

// checkVerdictsAgree checks the node table of d against the scheduler's latest FailedScheduling
// message: one row per node the scheduler counted, no row that fits when the scheduler found
// none, and for every reason the scheduler counted on k nodes, at least k rows carrying a
// reason of that code.
func checkVerdictsAgree(t *testing.T, d *triage.Diagnosis) {
	t.Helper()
	msg, ok := triage.LatestSchedulerMessage(d.Events)
	if !ok {
		return // no scheduler verdict to agree with (scheduler-not-running, gated)
	}
	var table []triage.NodeVerdict
	for _, f := range d.Findings {
		if f.Nodes != nil {
			table = f.Nodes
			break
		}
	}
	if msg.Total > 0 && len(table) != msg.Total {
		t.Errorf("node table has %d rows, the scheduler counted %d nodes (%q)", len(table), msg.Total, msg.Event.Message)
	}
	if msg.PodLevel != nil {
		return // a PreFilter verdict says nothing per node
	}
	for _, nv := range table {
		if nv.Fits {
			t.Errorf("node table says %s fits, the scheduler says %q", nv.Node, msg.Event.Message)
		}
	}
	want := map[triage.Code]int{}
	got := map[triage.Code]int{}
	for code, n := range msg.Counts() {
		want[code] = n
		rows := 0
		for _, nv := range table {
			if slices.ContainsFunc(nv.Reasons, func(r triage.NodeReason) bool { return r.Code == code }) {
				rows++
			}
		}
		got[code] = min(rows, n)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node table rows per scheduler reason (capped at the scheduler's count) mismatch (-scheduler +table):\n%s\nscheduler: %s", diff, msg.Event.Message)
	}
}

// logDiagnosis writes d's findings, evidence, fixes, actions and node table to the test log
// when the tests run with -v, so a scenario's whole answer can be read.
func logDiagnosis(t *testing.T, d *triage.Diagnosis) {
	t.Helper()
	if !testing.Verbose() {
		return
	}
	t.Logf("uncertain=%t summary: %s", d.Uncertain, d.Summary)
	logFindings(t, d.Findings)
}

// logFindings writes findings with their evidence, fixes, actions and node rows to the log.
func logFindings(t *testing.T, findings []triage.Finding) {
	t.Helper()
	for _, f := range findings {
		t.Logf("%s [%s] uncertain=%t %s", f.Code, f.Severity, f.Uncertain, f.Summary)
		for _, e := range f.Evidence {
			t.Logf("    %s %s %s: %s (x%d)", e.Object, e.Field, e.Reason, e.Message, e.Count)
		}
		for _, x := range f.Fix {
			t.Logf("    $ %s", x)
		}
		for _, a := range f.Actions {
			t.Logf("    [%s] %s %v", a.Kind, a.Label, a.Args)
		}
		for _, nv := range f.Nodes {
			for _, r := range nv.Reasons {
				t.Logf("    node %s fits=%t: [%s sched=%t] %s", nv.Node, nv.Fits, r.Code, r.FromScheduler, r.Message)
			}
		}
	}
}

// checkAnswerEach asks AnswerEach (the watch's entry point) the same question twice at once,
// sharing the cluster-wide reads and node tables: both answers must be the direct answer.
func checkAnswerEach(t *testing.T, ctx context.Context, cached *Collector, target triage.Target, want *triage.Answer) {
	t.Helper()
	answers, errs := AnswerEach(ctx, cached, []triage.Target{target, target})
	for i := range answers {
		if errs[i] != nil {
			t.Errorf("AnswerEach(%s)[%d]: %v", target, i, errs[i])
		} else if diff := cmp.Diff(want, answers[i], cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("AnswerEach answers %s (question %d of 2) differently (-direct +AnswerEach):\n%s", target, i, diff)
		}
	}
}

// sweepReads are the codes a namespace sweep (why-pending --all) decides from the same reads
// as the pod's own question: whether the objects the kubelet reported missing exist now, and
// their keys. A sweep that answers differently says "not found" of an object that exists.
var sweepReads = []triage.Code{triage.CodeReferencedObjectNowExists, triage.CodeSecretNotFound,
	triage.CodeConfigMapNotFound, triage.CodeSecretKeyNotFound, triage.CodeConfigMapKeyNotFound}

// checkSweepAgrees sweeps the pod's namespace (Answer for --all) when the pod's own diagnosis d
// has one of sweepReads, and checks the sweep lists the pod under the same code.
func checkSweepAgrees(t *testing.T, ctx context.Context, c *Collector, d *triage.Diagnosis) {
	t.Helper()
	want := d.Primary().Code
	if !slices.Contains(sweepReads, want) {
		return
	}
	a, err := Answer(ctx, c, triage.Target{Namespace: d.Pod.Namespace, All: true})
	if err != nil || a.Namespace == nil {
		t.Fatalf("sweep of %s: %v (answer %+v)", d.Pod.Namespace, err, a)
	}
	for _, cause := range a.Namespace.Causes {
		for _, it := range cause.Items {
			if slices.Contains(it.Pods, d.Pod.Name) {
				if cause.Code != want {
					t.Errorf("the sweep of %s lists pod %s under %s, its own question says %s", d.Pod.Namespace, d.Pod.Name, cause.Code, want)
				}
				return
			}
		}
	}
	t.Errorf("the sweep of %s does not list pod %s (its own question says %s): %+v", d.Pod.Namespace, d.Pod.Name, want, a.Namespace.Causes)
}
