package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// The RBAC proof installs the chart twice in every cluster: with remediation (rw) and
// without (ro), each with its own ServiceAccount, and runs every flow as each.
var (
	rwRelease = &chartRelease{name: "wp", namespace: "whypending", remediation: true}
	roRelease = &chartRelease{name: "wp-ro", namespace: "whypending-ro", remediation: false}
)

// rbacValues are the values both releases are rendered with: approvers (bob through a user
// group, so the bot reads group members), a digest schedule (so the bot elects a digest
// leader with a Lease) and per-user authorization of repairs (so the bot asks the API server
// with SubjectAccessReviews whether alice may plan and bob, in group sre through S0OPS, may
// approve; ipamRepairers grants them that).
const rbacValues = `config:
  channels: {digest: [C0OPS]}
  approvals:
    approvers: {users: [U0ALICE], groups: [S0OPS]}
  digest: {schedule: "0 9 * * *"}
  watch: {enabled: true, thresholds: {pending: 24h, imagePull: 24h, terminating: 24h, failedCreate: 24h, crashLoopRestarts: 1000}}  # watched, never posted: the alert test reads the channel
  authorization:
    mode: approvals
    slack:
      users: {U0ALICE: {user: alice@example.com}}
      groups: {S0OPS: [sre]}
alertmanager:
  enabled: true
  receivers: {team: [C0OPS]}
`

// ipamRepairers is what the people of the bot flow need in Kubernetes RBAC to plan and
// approve a release of leaked IPs (README, "Authorization"): the Calico writes of the
// repair, bound to alice and to group sre.
var ipamRepairers = []any{
	&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "calico-ipam-repairer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"crd.projectcalico.org"}, Resources: []string{"ipamblocks", "ipamhandles", "blockaffinities"}, Verbs: []string{"update", "delete"}},
		{APIGroups: []string{"crd.projectcalico.org"}, Resources: []string{"clusterinformations"}, Verbs: []string{"update"}},
	}},
	&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "calico-ipam-repairers"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "calico-ipam-repairer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice@example.com"},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "sre"}}},
}

// unusedGrants are (group, resource, verb) triples the chart grants although no flow below
// uses them, each with the reason. An entry that a flow does use fails the test, so the list
// only shrinks.
var unusedGrants = map[grant]string{}

// chartCodes are the primary codes the chart's ServiceAccounts get where they differ from the
// scenario's (an admin's). The chart grants no list on Secrets (that would let the bot read them
// all), so whether a Secret the kubelet reported missing exists now is not known to it: the
// answer stays secret-not-found and says only what the kubelet reported, and when. It asks
// first (a SelfSubjectAccessReview), so no refused read shows up here.
var chartCodes = map[string]triage.Code{"secret-created-since": triage.CodeSecretNotFound}

// auditPolicy records every request of a ServiceAccount, and the admin's flush marker.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: Metadata
  users: ["` + testenv.AdminUser + `"]
  resources: [{group: "", resources: ["configmaps"], resourceNames: ["audit-flush"]}]
- level: None
`

// chartRelease is one install of the chart.
type chartRelease struct {
	name, namespace string
	remediation     bool
	objs            []*unstructured.Unstructured // helm template output
}

func (r *chartRelease) serviceAccount() string { return r.name + "-whypending" }

// user is the API server's user name for the release's ServiceAccount.
func (r *chartRelease) user() string {
	return "system:serviceaccount:" + r.namespace + ":" + r.serviceAccount()
}

// grant is one permission: a (group, resource, verb) triple, namespaced when it comes from a
// Role.
type grant struct {
	group, resource, verb string
	namespace             string // "" for a ClusterRole rule
}

// grants lists the release's ClusterRole and Role rules as triples.
func (r *chartRelease) grants(t *testing.T) []grant {
	t.Helper()
	var out []grant
	for _, o := range r.objs {
		var rules []rbacv1.PolicyRule
		ns := ""
		switch o.GetKind() {
		case "ClusterRole":
			rules = convert[rbacv1.ClusterRole](t, o).Rules
		case "Role":
			rules, ns = convert[rbacv1.Role](t, o).Rules, o.GetNamespace()
		default:
			continue
		}
		for _, rule := range rules {
			if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
				t.Errorf("%s %s: resourceNames/nonResourceURLs are not covered by the proof", o.GetKind(), o.GetName())
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						if g == "*" || res == "*" || v == "*" {
							t.Errorf("%s %s grants a wildcard (%q, %q, %q)", o.GetKind(), o.GetName(), g, res, v)
						}
						out = append(out, grant{group: g, resource: res, verb: v, namespace: ns})
					}
				}
			}
		}
	}
	return out
}

// access is one request a ServiceAccount made, from the API server's audit log.
type access struct {
	user                  string
	group, resource, verb string
	namespace             string
	allowed               bool
}

// accessLog gathers accesses across clusters.
type accessLog struct {
	mu sync.Mutex
	m  map[access]int
}

func (l *accessLog) add(as []access) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[access]int{}
	}
	for _, a := range as {
		l.m[a]++
	}
}

func (l *accessLog) of(user string) []access {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []access
	for a := range l.m {
		if a.user == user {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return fmt.Sprint(out[i]) < fmt.Sprint(out[j])
	})
	return out
}

// rbacCluster is a cluster with one scenario loaded and both releases installed.
type rbacCluster struct {
	c          *testenv.Cluster
	scenario   *testenv.Scenario
	auditPath  string
	kubeconfig map[*chartRelease]string // the release's ServiceAccount (a minted token)
}

// TestChartRBAC proves the chart's RBAC is exactly what the code uses. On real control planes
// it installs the chart's rendered objects, mints a token for each release's ServiceAccount
// (TokenRequest) and, as that ServiceAccount, runs why-pending on every seed scenario (and the
// volume cases), ipam check / show / release-ips / release-blocks / lock / unlock, the digest,
// and the bot (serve with the chart's config) planning a repair that is approved and executed
// with the kubernetes store. With remediation every flow succeeds; without, the writes are
// refused with a one-line message and nothing changes. The API server's audit log then shows
// which (group, resource, verb) triples the flows used: a grant no flow used fails the test
// (unusedGrants lists the exceptions), and so does any refusal of the remediation release or
// any refused read of the read-only one.
func TestChartRBAC(t *testing.T) {
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	policyFile := filepath.Join(t.TempDir(), "audit-policy.yaml")
	writeFile(t, valuesFile, rbacValues)
	writeFile(t, policyFile, auditPolicy)
	for _, r := range []*chartRelease{rwRelease, roRelease} {
		r.objs = renderChart(t, r.name, r.namespace, "-f", valuesFile, fmt.Sprintf("--set=remediation=%t", r.remediation))
	}
	// The chart's environment variables, as its Secret would provide them (serve reads them).
	t.Setenv("SLACK_SIGNING_SECRET", "rbac-test-signing-secret")
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-rbac-test")
	t.Setenv("WHYPENDING_ALERTMANAGER_TOKEN", amToken)

	root := repoRoot(t)
	all, err := testenv.ScenarioDirs(filepath.Join(root, "testdata", "scenarios"))
	if err != nil {
		t.Fatal(err)
	}
	// Of the workload scenarios, two cover every workload read: the bare name of
	// workload-grouped gets each workload kind and its --all lists them, the quotas, the limit
	// ranges and the namespace; workload-sa lists ServiceAccount names and gets a Job.
	var dirs []string
	for _, d := range all {
		if b := filepath.Base(d); !strings.HasPrefix(b, "workload-") || b == "workload-grouped" || b == "workload-sa" {
			dirs = append(dirs, d)
		}
	}
	// The seed scenarios have no volumes: cases add a pending claim (StorageClasses), a bound
	// one, CSI attach limits (CSINodes), a missing ConfigMap (names in the namespace) and a CSI
	// driver that is not registered (every namespace's DaemonSets, one DaemonSet's events, its
	// Namespace, the node's CSINode by name).
	for _, c := range []string{"case-22", "case-51", "case-58", "case-45", "case-85"} {
		dirs = append(dirs, filepath.Join(root, "testdata", "cases", c))
	}
	var log accessLog
	t.Run("flows", func(t *testing.T) {
		for _, dir := range dirs {
			t.Run(filepath.Base(dir), func(t *testing.T) {
				t.Parallel()
				bots := filepath.Base(dir) == "seed-ipam-leaked"
				e := startRBACCluster(t, dir, policyFile, bots)
				for _, r := range []*chartRelease{rwRelease, roRelease} {
					e.whyPending(t, r)
					if filepath.Base(dir) == "workload-grouped" {
						e.sweep(t, r)
					}
				}
				switch filepath.Base(dir) {
				case "seed-ipam-leaked":
					e.ipamFlows(t)
				case "seed-block-limit":
					e.blockFlows(t)
				}
				log.add(e.accesses(t))
			})
		}
	})
	if t.Failed() {
		return
	}

	rwGrants := map[grant]bool{}
	for _, g := range rwRelease.grants(t) {
		rwGrants[grant{group: g.group, resource: g.resource, verb: g.verb}] = true
	}
	for _, r := range []*chartRelease{rwRelease, roRelease} {
		used := log.of(r.user())
		if len(used) == 0 {
			t.Fatalf("%s made no request: is the audit log written?", r.user())
		}
		var lines []string
		for _, a := range used {
			lines = append(lines, fmt.Sprintf("%-7s %-22s %-28s ns=%-14s allowed=%t", a.verb, a.group, a.resource, a.namespace, a.allowed))
		}
		t.Logf("%s used:\n  %s", r.user(), strings.Join(lines, "\n  "))

		for _, g := range r.grants(t) {
			key := grant{group: g.group, resource: g.resource, verb: g.verb}
			usedIt := slices.ContainsFunc(used, func(a access) bool {
				return a.allowed && a.group == g.group && a.resource == g.resource && a.verb == g.verb &&
					(g.namespace == "" || a.namespace == g.namespace)
			})
			_, excepted := unusedGrants[key]
			switch {
			case usedIt && excepted:
				t.Errorf("%s: %s %s/%s is used now: remove it from unusedGrants", r.name, g.verb, g.group, g.resource)
			case !usedIt && !excepted:
				t.Errorf("%s: the chart grants %s on %q %s (namespace %q) but no flow used it", r.name, g.verb, g.group, g.resource, g.namespace)
			}
		}
		for _, a := range used {
			if a.allowed {
				continue
			}
			if r.remediation {
				t.Errorf("%s: the API server refused %s %q %s in %q: the chart lacks a permission the code uses", r.name, a.verb, a.group, a.resource, a.namespace)
			} else if !rwGrants[grant{group: a.group, resource: a.resource, verb: a.verb}] {
				t.Errorf("%s: the API server refused %s %q %s, which remediation would not grant either: a read the read-only chart lacks", r.name, a.verb, a.group, a.resource)
			}
		}
	}
}

// startRBACCluster starts a control plane writing an audit log, loads the scenario in dir,
// installs both releases' rendered objects, and writes a kubeconfig with a minted token for
// each release's ServiceAccount. For bots (serve runs there) it also installs the
// RemediationRequest CRD and turns WatchList off, as on API servers without it, so the bots'
// informers list and then watch (with it, they only watch).
func startRBACCluster(t *testing.T, dir, policyFile string, bots bool) *rbacCluster {
	t.Helper()
	sc, err := testenv.LoadScenarioDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &rbacCluster{scenario: sc, auditPath: filepath.Join(t.TempDir(), "audit.log"), kubeconfig: map[*chartRelease]string{}}
	opts := testenv.Options{
		Scheduler:     !sc.Expected.SchedulerMustBeStopped,
		APIServerArgs: []string{"--audit-policy-file=" + policyFile, "--audit-log-path=" + e.auditPath},
	}
	var crds []string
	if bots {
		opts.APIServerArgs = append(opts.APIServerArgs, "--feature-gates=WatchList=false")
		crds = append(crds, filepath.Join(chartDir, "crds"))
	}
	e.c = startChartCluster(t, opts, crds...)
	testcluster.Load(t, e.c, dir)
	ctx := t.Context()
	for _, r := range []*chartRelease{rwRelease, roRelease} {
		createNamespace(t, e.c, r.namespace)
		if err := e.c.Apply(ctx, r.objs, false); err != nil {
			t.Fatalf("install release %s: %v", r.name, err)
		}
		tr, err := e.c.Client.CoreV1().ServiceAccounts(r.namespace).CreateToken(ctx, r.serviceAccount(),
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest for %s: %v", r.user(), err)
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: e.c.Config.Host, CertificateAuthorityData: e.c.Config.CAData}
		cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
		cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "sa", Namespace: "default"}
		cfg.CurrentContext = "test"
		path := filepath.Join(t.TempDir(), r.name+".kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		e.kubeconfig[r] = path
	}
	if exp := sc.Expected; exp.NeedsScheduler && !exp.SchedulerMustBeStopped {
		ns, name, _ := strings.Cut(exp.Pod, "/")
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := e.c.WaitForScheduler(wctx, ns, name); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// cli runs `whypending ARGS --kubeconfig <r's ServiceAccount>`.
func (e *rbacCluster) cli(t *testing.T, r *chartRelease, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(t, append(args, "--kubeconfig", e.kubeconfig[r])...)
}

// mustCLI runs the command and fails the test unless it exits 0.
func (e *rbacCluster) mustCLI(t *testing.T, r *chartRelease, args ...string) string {
	t.Helper()
	code, out, errOut := e.cli(t, r, args...)
	if code != 0 {
		t.Fatalf("%s: whypending %s: exit %d\n%s%s", r.name, strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// refused runs a write the read-only release must not make and checks the refusal: exit 1
// and one line naming the refused permission, no stack trace.
func (e *rbacCluster) refused(t *testing.T, args ...string) {
	t.Helper()
	code, out, errOut := e.cli(t, roRelease, args...)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "error: ") ||
		!strings.Contains(lines[0], "forbidden: User \""+roRelease.user()+"\" cannot") {
		t.Errorf("read-only whypending %s: exit %d, stderr %q; want exit 1 and one line naming the refused permission", strings.Join(args, " "), code, errOut)
	}
	if strings.Contains(out+errOut, "goroutine ") || strings.Contains(out+errOut, "panic") {
		t.Errorf("read-only whypending %s printed a stack trace:\n%s%s", strings.Join(args, " "), out, errOut)
	}
	t.Logf("read-only whypending %s: %s", strings.Join(args, " "), lines[0])
}

// whyPending diagnoses the scenario's pod as r's ServiceAccount: the answer must be the one
// the scenario expects, so no read the diagnosis needs was refused and silently skipped.
func (e *rbacCluster) whyPending(t *testing.T, r *chartRelease) {
	t.Helper()
	exp := e.scenario.Expected
	args := []string{"why-pending", exp.Pod, "-o", "json"}
	if exp.Target != "" {
		args = []string{"why-pending", "-n", exp.Namespace, exp.Target, "-o", "json"}
	}
	out := e.mustCLI(t, r, args...)
	// A pod's Diagnosis and a workload's WorkloadDiagnosis both lead with findings[0].code.
	var d struct {
		Findings []triage.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Findings) == 0 {
		t.Fatalf("decode %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	want := exp.Code
	if c, ok := chartCodes[e.scenario.Name]; ok {
		want = string(c)
	}
	if got := string(d.Findings[0].Code); got != want && !slices.Contains(exp.AlsoOK, got) {
		t.Errorf("%s: %s = %s, want %s (also ok %v)", r.name, strings.Join(args, " "), got, want, exp.AlsoOK)
	}
}

// sweep runs why-pending --all in the scenario's namespace as r's ServiceAccount: every
// workload kind, the quotas and limit ranges are listed, and the sweep finds the scenario's
// cause.
func (e *rbacCluster) sweep(t *testing.T, r *chartRelease) {
	t.Helper()
	exp := e.scenario.Expected
	out := e.mustCLI(t, r, "why-pending", "-n", exp.Namespace, "--all", "-o", "json")
	var d triage.NamespaceDiagnosis
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("decode why-pending --all: %v", err)
	}
	if len(d.Causes) == 0 || string(d.Causes[0].Code) != exp.Code {
		t.Errorf("%s: why-pending --all -n %s causes = %+v, want %s first", r.name, exp.Namespace, d.Causes, exp.Code)
	}
}

// ipamFlows runs, on seed-ipam-leaked: the read-only release's check, show and digest and its
// refused writes; lock and unlock; the bot of each release planning a release that bob
// approves; and the CLI releasing the rest, including a handle that is decremented rather than
// deleted.
func (e *rbacCluster) ipamFlows(t *testing.T) {
	ctx := t.Context()
	admin := calicoClient(t, e.c)
	before, err := admin.Check(ctx, calico.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leakedOn := map[string][]calico.Allocation{}
	for _, a := range before.LeakedIPs {
		leakedOn[a.Node] = append(leakedOn[a.Node], a)
	}
	if len(leakedOn["worker-1"]) == 0 || len(leakedOn["worker-2"]) == 0 {
		t.Fatalf("leaked IPs per node: worker-1 %d, worker-2 %d; want some on both", len(leakedOn["worker-1"]), len(leakedOn["worker-2"]))
	}
	// A handle that counts one address more than its block holds (Calico's handle skew):
	// releasing its address decrements the handle (an update) instead of deleting it.
	skew := leakedOn["worker-2"][0]
	handles := e.c.Dynamic.Resource(schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipamhandles"})
	h, err := handles.Get(ctx, calico.HandleName(skew.Handle), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(h.Object, "spec", "block", skew.Block)
	if err := unstructured.SetNestedField(h.Object, n+1, "spec", "block", skew.Block); err != nil {
		t.Fatal(err)
	}
	if _, err := handles.Update(ctx, h, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("read-only: check, show and digest answer; writes are refused", func(t *testing.T) {
		if out := e.mustCLI(t, roRelease, "ipam", "check"); !strings.Contains(out, fmt.Sprintf("found %d problems", before.Problems)) {
			t.Errorf("ipam check:\n%s", out)
		}
		e.mustCLI(t, roRelease, "ipam", "show", "--show-blocks")
		if out := e.mustCLI(t, roRelease, "digest"); !strings.Contains(out, "leaked") {
			t.Errorf("digest:\n%s", out)
		}
		e.refused(t, "ipam", "release-ips", "--yes")
		e.refused(t, "ipam", "release-ips", "--lock", "--yes")
		e.refused(t, "ipam", "lock", "--owner", "rbac-test")
		e.mustCLI(t, rwRelease, "ipam", "lock", "--owner", "rbac-test")
		e.refused(t, "ipam", "unlock", "--owner", "rbac-test")
		if out := e.mustCLI(t, rwRelease, "ipam", "unlock", "--owner", "rbac-test"); !strings.Contains(out, "Unlocked the Calico datastore.") {
			t.Errorf("unlock:\n%s", out)
		}
		after, err := admin.Check(ctx, calico.CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(after.LeakedIPs) != len(before.LeakedIPs) {
			t.Errorf("leaked IPs %d after the refused writes, want %d: something was released", len(after.LeakedIPs), len(before.LeakedIPs))
		}
	})

	t.Run("the bots plan; bob approves; the read-only bot's repair fails, the other's runs", func(t *testing.T) {
		slack := newFakeSlack(t, map[string][]string{"S0OPS": {"U0BOB"}})
		if _, err := e.c.Client.RbacV1().ClusterRoles().Create(ctx, ipamRepairers[0].(*rbacv1.ClusterRole), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Client.RbacV1().ClusterRoleBindings().Create(ctx, ipamRepairers[1].(*rbacv1.ClusterRoleBinding), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, tc := range []struct {
			r     *chartRelease
			node  string
			state approval.State
			title string
		}{
			{roRelease, "worker-2", approval.StateFailed, "Failed: "},
			{rwRelease, "worker-1", approval.StateSucceeded, "Done: "},
		} {
			client := e.serve(t, tc.r, slack)
			// An Alertmanager notification: its Notification is created, claimed and
			// recorded (get, create, update; the worker lists pending ones at start).
			roots := len(slack.alertRoots())
			hook := fmt.Appendf(nil, `{"version":"4","groupKey":"{}:{alertname=\"KubePodCrashLooping\"}","status":"firing","receiver":"team",
"alerts":[{"status":"firing","labels":{"alertname":"KubePodCrashLooping","namespace":%q,"pod":%q},"startsAt":"2026-12-01T00:00:00Z","fingerprint":"f1"}]}`,
				strings.Split(e.scenario.Expected.Pod, "/")[0], strings.Split(e.scenario.Expected.Pod, "/")[1])
			if code, text := postAlert(t, client.base+"/alertmanager", amToken, hook); code != http.StatusOK {
				t.Fatalf("%s: alert = %d %s", tc.r.name, code, text)
			}
			waitUntil(t, 60*time.Second, "the alert's thread", func() bool {
				rs := slack.alertRoots()
				return len(rs) == roots+1 && len(slack.threadReplies(rs[len(rs)-1])) == 1
			})
			// Per-user authorization: carol is mapped to nobody, so her plan is refused to
			// her alone, saying so; nothing is stored.
			path := client.command(t, "U0CAROL", "/ipam", "release-ips --node "+tc.node)
			if a := slack.answer(t, path); !strings.Contains(blocksJSON(t, a.Blocks), "You are not mapped to a Kubernetes user or group") || a.ResponseType == "in_channel" {
				t.Errorf("%s: carol's /ipam release-ips answer = %+v, want an ephemeral refusal", tc.r.name, a)
			}
			path = client.command(t, "U0ALICE", "/why-pending", e.scenario.Expected.Pod)
			if a := slack.answer(t, path); !strings.Contains(a.Text, e.scenario.Expected.Pod) {
				t.Errorf("%s: /why-pending answer = %q", tc.r.name, a.Text)
			}
			path = client.command(t, "U0ALICE", "/ipam", "check")
			if a := slack.answer(t, path); !strings.Contains(a.Text, "leaked") {
				t.Errorf("%s: /ipam check answer = %q", tc.r.name, a.Text)
			}
			client.command(t, "U0ALICE", "/ipam", "release-ips --node "+tc.node)
			msg, approve := slack.plan(t, seen)
			client.click(t, "U0BOB", msg.TS, approve)
			rr := e.c.Dynamic.Resource(approval.RemediationRequestGVR).Namespace(tc.r.namespace)
			var state string
			waitUntil(t, 90*time.Second, "the plan to finish", func() bool {
				o, err := rr.Get(ctx, approve.Value, metav1.GetOptions{})
				if err != nil {
					return false
				}
				state, _, _ = unstructured.NestedString(o.Object, "status", "state")
				return state == string(approval.StateSucceeded) || state == string(approval.StateFailed)
			})
			if state != string(tc.state) {
				t.Errorf("%s: RemediationRequest %s state = %s, want %s", tc.r.name, approve.Value, state, tc.state)
			}
			waitUntil(t, 30*time.Second, "the plan message update", func() bool { return strings.Contains(slack.lastUpdate(msg.TS), tc.title) })
		}
		checkSlackScopes(t, slack.called())
		after, err := admin.Check(ctx, calico.CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range after.LeakedIPs {
			if a.Node == "worker-1" {
				t.Errorf("leaked %s on worker-1 is left after the approved plan", a.IP)
			}
		}
		if got, want := len(after.LeakedIPs), len(leakedOn["worker-2"]); got != want {
			t.Errorf("leaked IPs = %d, want worker-2's %d (the read-only bot's plan failed)", got, want)
		}
	})

	t.Run("the CLI releases the rest under the lock", func(t *testing.T) {
		out := e.mustCLI(t, rwRelease, "ipam", "release-ips", "--lock", "--yes")
		if want := fmt.Sprintf("Released %d IPs (kept 0)", len(leakedOn["worker-2"])); !strings.Contains(out, want) || !strings.Contains(out, "1 decremented") {
			t.Errorf("release-ips: want %q and one decremented handle:\n%s", want, out)
		}
		// The decremented handle still counts the address no block held: the check reports
		// it (and nothing else), reading it by name; the grace period keeps a release from
		// deleting a young handle.
		for _, r := range []*chartRelease{rwRelease, roRelease} {
			if out := e.mustCLI(t, r, "ipam", "check"); !strings.Contains(out, "Found 0 IPs that are allocated in IPAM but not actually in use.") ||
				!strings.Contains(out, "Found 1 handles with no matching IPs") || !strings.Contains(out, "found 1 problems") {
				t.Errorf("%s: check after release: want no leaked IP and only the skewed handle:\n%s", r.name, out)
			}
		}
		if out := e.mustCLI(t, rwRelease, "digest"); out == "" {
			t.Error("digest printed nothing")
		}
		if s, err := admin.LockStatus(ctx); err != nil || !s.Ready {
			t.Errorf("lock status %+v, %v: want unlocked", s, err)
		}
	})
}

// blockFlows runs, on seed-block-limit, release-blocks refused for the read-only release and
// done for the other.
func (e *rbacCluster) blockFlows(t *testing.T) {
	e.refused(t, "ipam", "release-blocks", "--all-empty", "--yes")
	out := e.mustCLI(t, rwRelease, "ipam", "release-blocks", "--all-empty", "--yes", "--lock")
	if !strings.Contains(out, "Released 1 block (kept 0)") {
		t.Errorf("release-blocks:\n%s", out)
	}
}

// serve runs `whypending serve` with release r's rendered config, connected as r's
// ServiceAccount (instead of the in-cluster config) and to the fake Slack, until the test
// ends; /healthz and /readyz must answer 200.
func (e *rbacCluster) serve(t *testing.T, r *chartRelease, slack *fakeSlack) *slackClient {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(renderedConfig(t, r.objs), &cfg); err != nil {
		t.Fatal(err)
	}
	clusters := cfg["clusters"].([]any)
	local := clusters[0].(map[string]any)
	delete(local, "inCluster")
	local["kubeconfig"] = e.kubeconfig[r]
	cfg["listen"] = "127.0.0.1:0"
	cfg["slack"].(map[string]any)["apiURL"] = strings.TrimSuffix(slack.apiURL(), "/") + "/"
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, string(raw))

	logs := &syncBuffer{}
	listening := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, path, logs, listening) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: serve: %v\n%s", r.name, err, logs.String())
		}
	})
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		done <- err
		t.Fatalf("%s: serve stopped: %v\n%s", r.name, err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: serve did not start listening\n%s", r.name, logs.String())
	}
	base := "http://" + addr
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := httpGet(base + p)
		if err != nil || resp != 200 {
			t.Fatalf("%s: GET %s = %d, %v\n%s", r.name, p, resp, err, logs.String())
		}
	}
	return &slackClient{base: base, secret: os.Getenv("SLACK_SIGNING_SECRET"), channel: "C0OPS", slack: slack}
}

// accesses reads the cluster's audit log: every resource request of the releases'
// ServiceAccounts, after an admin marker request shows the log has caught up.
func (e *rbacCluster) accesses(t *testing.T) []access {
	t.Helper()
	_, _ = e.c.Client.CoreV1().ConfigMaps("kube-system").Get(t.Context(), "audit-flush", metav1.GetOptions{})
	var out []access
	waitUntil(t, 30*time.Second, "the audit log to record the flush marker", func() bool {
		var flushed bool
		out, flushed = readAudit(t, e.auditPath)
		return flushed
	})
	return out
}

// auditEvent is the part of an audit.k8s.io/v1 Event the proof reads.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// readAudit parses the audit log at path; flushed reports whether the admin's marker request
// is in it.
func readAudit(t *testing.T, path string) (out []access, flushed bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log %s: %v", path, err)
		}
		if ev.User.Username == testenv.AdminUser {
			flushed = true
			continue
		}
		if ev.ObjectRef == nil {
			continue // non-resource URLs (/readyz, /version, /apis): every user may read them
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		decision := ev.Annotations["authorization.k8s.io/decision"]
		if decision == "" {
			continue // not yet authorized (a watch's ResponseStarted carries it; this stage does not)
		}
		out = append(out, access{user: ev.User.Username, group: ev.ObjectRef.APIGroup, resource: res,
			verb: ev.Verb, namespace: ev.ObjectRef.Namespace, allowed: decision == "allow"})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out, flushed
}

// TestChartAuthorizationGrant renders the chart with authorization.mode off, approvals and
// all: off (the default) grants nothing for it, and any other mode adds exactly create on
// subjectaccessreviews.authorization.k8s.io, cluster-wide, and nothing else (TestChartRBAC,
// which runs mode approvals, proves the bot uses it).
func TestChartAuthorizationGrant(t *testing.T) {
	sar := grant{group: "authorization.k8s.io", resource: "subjectaccessreviews", verb: "create"}
	grantsOf := func(args ...string) map[grant]bool {
		r := &chartRelease{name: "wp", namespace: "whypending", remediation: true}
		r.objs = renderChart(t, r.name, r.namespace, args...)
		out := map[grant]bool{}
		for _, g := range r.grants(t) {
			out[g] = true
		}
		return out
	}
	off := grantsOf()
	if off[sar] {
		t.Errorf("the default values (authorization off) grant %v", sar)
	}
	if !maps.Equal(off, grantsOf("--set=config.authorization.mode=off")) {
		t.Error("mode off grants differ from the defaults")
	}
	// What a person is checked for before a repair (actions.Runner.Access, from the repair
	// registry) is what the bot's own ServiceAccount writes with: the chart grants all of it.
	t.Setenv("CALICO_API_GROUP", "crd.projectcalico.org/v1")
	ipam, err := calico.NewClient(t.Context(), &rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range actions.Kinds {
		perms, err := (&actions.Runner{IPAM: ipam, LockPolicy: actions.LockAlways}).Access(kind)
		if err != nil || len(perms) == 0 {
			t.Fatalf("Access(%s) = %v, %v", kind, perms, err)
		}
		for _, p := range perms {
			if g := (grant{group: p.Group, resource: p.Resource, verb: p.Verb}); p.Namespace != "" || !off[g] {
				t.Errorf("%s checks a person for %+v, which the chart does not grant the bot (remediation: true)", kind, p)
			}
		}
	}
	for _, mode := range []string{"approvals", "all"} {
		on := grantsOf("--set=config.authorization.mode="+mode, "--set=config.authorization.slack.users.U0ALICE.user=alice@example.com")
		var added, removed []grant
		for g := range on {
			if !off[g] {
				added = append(added, g)
			}
		}
		for g := range off {
			if !on[g] {
				removed = append(removed, g)
			}
		}
		if len(added) != 1 || added[0] != sar || len(removed) != 0 {
			t.Errorf("mode %s: added %v, removed %v; want only %v added", mode, added, removed, sar)
		}
	}
}

// blocksJSON is Block Kit blocks as JSON, for assertions on their text.
func blocksJSON(t *testing.T, b any) string {
	t.Helper()
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
