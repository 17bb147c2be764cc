package collect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// TestWorkloadsWithRealControllers runs the workload answers against Kubernetes' own
// controllers: one cluster with kube-scheduler and a kube-controller-manager running only the
// workload controllers (testenv.Options.ControllerManager, which also turns the ServiceAccount
// and PodSecurity admission plugins on). Each subtest works in its own namespace and creates
// ordinary Deployments; the Deployment → ReplicaSet → Pod chain, the FailedCreate events and
// the quota status are the controllers' own. No kubelet runs, so the test plays one for the
// pods the scheduler binds (Running and Ready).
func TestWorkloadsWithRealControllers(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{Scheduler: true, ControllerManager: true})
	ctx := t.Context()
	for i := range 3 {
		testcluster.ReadyNode(t, c.Client, fmt.Sprintf("node-%d", i+1), "2", "110")
	}
	direct := New(c.Client)
	cachedCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	cached, err := NewCached(cachedCtx, c.Client)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("deploy/NAME with Pending pods gives the grouped answer, and the bare name resolves", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, c, "grouped", nil)
		// 1500m pods on 2-CPU nodes: three fit (one per node), the other two stay Pending.
		testcluster.Deployment(t, c.Client, ns, "checkout", 5, "1500m", nil)
		pods := waitPods(t, c, ns, "checkout", 5)
		for _, p := range pods {
			if err := c.WaitForScheduler(ctx, ns, p.Name); err != nil {
				t.Fatal(err)
			}
		}
		playKubelet(t, c.Client, ns)
		for name, col := range map[string]*Collector{"direct": direct, "cached": cached} {
			a := answerEventually(t, col, triage.Target{Namespace: ns, Kind: triage.KindDeployment, Name: "checkout"}, func(a *triage.Answer) bool {
				return a.Workload != nil && len(a.Workload.Groups) == 2 && a.Workload.Ready == 3
			})
			wd := a.Workload
			labels := []string{wd.Groups[0].Label, wd.Groups[1].Label}
			if want := []string{"2 of 5 pods Pending: insufficient-cpu", "3 Running and Ready"}; !slices.Equal(labels, want) {
				t.Errorf("%s: groups = %q, want %q", name, labels, want)
			}
			if p := wd.Primary(); p.Code != triage.CodeInsufficientCPU {
				t.Errorf("%s: primary = %s, want insufficient-cpu: %s", name, p.Code, wd.Summary)
			}
			if d := wd.Groups[0].Diagnosis; d == nil || len(d.Primary().Nodes) != 3 {
				t.Errorf("%s: the Pending group's representative has no full diagnosis with the node table", name)
			}
		}
		a, err := Answer(ctx, direct, triage.Target{Namespace: ns, Name: "checkout"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Workload == nil || a.Workload.Workload.Kind != triage.KindDeployment || len(a.Notes) == 0 {
			t.Errorf("bare name checkout: workload answer %v, notes %q, want Deployment checkout with a note", a.Workload != nil, a.Notes)
		}
	})

	t.Run("a ResourceQuota refuses pods: resource-quota-exceeded from the controller's FailedCreate", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, c, "quota", nil)
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: ns},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.cpu": resource.MustParse("1")}}}
		if _, err := c.Client.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitQuotaStatus(t, c.Client, ns, "compute")
		testcluster.Deployment(t, c.Client, ns, "checkout", 3, "400m", nil)
		wd := workloadEventually(t, direct, ns, "checkout", triage.CodeResourceQuotaExceeded)
		if !slices.ContainsFunc(wd.Primary().Evidence, func(e triage.Evidence) bool {
			return e.Reason == "FailedCreate" && strings.HasPrefix(e.Object, "ReplicaSet "+ns+"/checkout-")
		}) {
			t.Errorf("evidence %+v lacks the ReplicaSet's FailedCreate event", wd.Primary().Evidence)
		}
		if !slices.ContainsFunc(wd.Primary().Evidence, func(e triage.Evidence) bool { return e.Object == "ResourceQuota "+ns+"/compute" }) {
			t.Errorf("evidence %+v lacks the quota's status", wd.Primary().Evidence)
		}
	})

	t.Run("a namespace enforcing Pod Security restricted refuses the pods: pod-security-violation", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, c, "psa", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
		testcluster.Deployment(t, c.Client, ns, "web", 2, "100m", nil)
		wd := workloadEventually(t, cached, ns, "web", triage.CodePodSecurityViolation)
		if fix := wd.Primary().Fix; !slices.ContainsFunc(fix, func(f string) bool { return strings.Contains(f, "securityContext.runAsNonRoot=true") }) {
			t.Errorf("fix = %q, want the fields Pod Security asks for", fix)
		}
	})

	t.Run("a Deployment pointing at a missing ServiceAccount: service-account-not-found", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, c, "sa", nil)
		testcluster.Deployment(t, c.Client, ns, "backup", 1, "100m", func(s *corev1.PodSpec) { s.ServiceAccountName = "backup-runner" })
		wd := workloadEventually(t, direct, ns, "backup", triage.CodeServiceAccountNotFound)
		sweep, err := Sweep(ctx, cached, ns)
		if err != nil {
			t.Fatal(err)
		}
		if len(sweep.Causes) != 1 || sweep.Causes[0].Code != triage.CodeServiceAccountNotFound || sweep.Causes[0].Items[0].Name != "backup" {
			t.Errorf("sweep of %s = %+v, want the Deployment under service-account-not-found", ns, sweep.Causes)
		}
		_ = wd
	})

	t.Run("a ServiceAccount created after the refusal: never service-account-not-found, and the fix touches the ReplicaSet", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, c, "sa-created", nil)
		testcluster.Deployment(t, c.Client, ns, "worker", 1, "100m", func(s *corev1.PodSpec) { s.ServiceAccountName = "worker-runner" })
		workloadEventually(t, direct, ns, "worker", triage.CodeServiceAccountNotFound)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "worker-runner", Namespace: ns}}
		if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The controller retries on its own back-off: whatever it has done by now, the answer
		// must not say the ServiceAccount does not exist.
		for name, col := range map[string]*Collector{"direct": direct, "cached": cached} {
			a, err := Answer(ctx, col, triage.Target{Namespace: ns, Kind: triage.KindDeployment, Name: "worker"})
			if err != nil {
				t.Fatal(err)
			}
			p := a.Workload.Primary()
			t.Logf("%s: %s: %s\n%s", name, p.Code, p.Summary, strings.Join(p.Fix, "\n"))
			if p.Code == triage.CodeServiceAccountNotFound {
				t.Errorf("%s: primary = service-account-not-found after the ServiceAccount was created: %s", name, p.Summary)
			}
			if p.Code == triage.CodeReferencedObjectNowExists && !slices.ContainsFunc(p.Fix, func(f string) bool { return strings.HasPrefix(f, "kubectl annotate rs/worker-") }) {
				t.Errorf("%s: fix = %q, want the ReplicaSet touched to retry at once", name, p.Fix)
			}
		}
		waitPods(t, c, ns, "worker", 1)
	})
}

// newNamespace creates a namespace named for the test with labels and waits for its default
// ServiceAccount (the admission plugin refuses pods until the controller has made it).
func newNamespace(t *testing.T, c *testenv.Cluster, name string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := c.Client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServiceAccount(t.Context(), name, "default"); err != nil {
		t.Fatal(err)
	}
	return name
}

// waitPods waits until the Deployment's ReplicaSet has created n pods (label app=name).
func waitPods(t *testing.T, c *testenv.Cluster, ns, name string, n int) []corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := c.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: labels.Set{"app": name}.String()})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) >= n {
			return list.Items
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pods of %s/%s, want %d\nkube-controller-manager log:\n%s", len(list.Items), ns, name, n, c.LogTail("kube-controller-manager", 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// playKubelet marks every bound pod of ns Running with its containers ready, as a kubelet
// would once they start.
func playKubelet(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	list, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	for _, p := range list.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		testcluster.MarkRunning(&p, now)
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(t.Context(), &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitQuotaStatus waits until the resource quota controller has filled in the quota's status
// (quota admission refuses nothing before it).
func waitQuotaStatus(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Status.Hard) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ResourceQuota %s/%s has no status after a minute", ns, name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// answerEventually asks col about target until done accepts the answer (the controllers and
// the informers catch up within seconds), failing after a minute with the last answer.
func answerEventually(t *testing.T, col *Collector, target triage.Target, done func(*triage.Answer) bool) *triage.Answer {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		a, err := Answer(t.Context(), col, target)
		if err != nil {
			t.Fatal(err)
		}
		if done(a) {
			return a
		}
		if time.Now().After(deadline) {
			summary := ""
			if a.Workload != nil {
				summary = a.Workload.Summary
			}
			t.Fatalf("answer for %s never settled; last: %s", target, summary)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// workloadEventually waits until the Deployment's answer has primary code want.
func workloadEventually(t *testing.T, col *Collector, ns, name string, want triage.Code) *triage.WorkloadDiagnosis {
	t.Helper()
	a := answerEventually(t, col, triage.Target{Namespace: ns, Kind: triage.KindDeployment, Name: name}, func(a *triage.Answer) bool {
		return a.Workload != nil && a.Workload.Primary().Code == want
	})
	logWorkload(t, a.Workload)
	return a.Workload
}
