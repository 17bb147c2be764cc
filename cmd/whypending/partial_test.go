package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// restrictedKubeconfig writes a kubeconfig for a ServiceAccount named user in namespace that
// may do only what rules allow there (a Role and a RoleBinding; nothing cluster-wide), with a
// token minted by TokenRequest: a real restricted user of the real API server.
func restrictedKubeconfig(t *testing.T, c *testenv.Cluster, namespace, user string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := t.Context()
	cs := c.Client
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: user}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: user, Namespace: namespace}},
	}
	if _, err := cs.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, user,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", user, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	// RBAC caches settle quickly, but the first request may race the binding.
	time.Sleep(200 * time.Millisecond)
	return path
}

// TestWhyPendingWithOnlyGetPods asks about a Pending pod as a user who may only get pods: the
// events, nodes and pods of other namespaces are refused. The answer still names the cause from
// the pod's own PodScheduled condition (the scheduler writes its message there too), lists each
// refused read in its evidence and in JSON, says which permissions give the full answer, and
// exits exitPartial, not 0.
func TestWhyPendingWithOnlyGetPods(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{Scheduler: true})
	s := testcluster.Load(t, c, "seed-frontend-cpu")
	ns, name, _ := strings.Cut(s.Expected.Pod, "/")
	if err := c.WaitForScheduler(t.Context(), ns, name); err != nil {
		t.Fatal(err)
	}
	kubeconfig := restrictedKubeconfig(t, c, ns, "pod-reader", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	})

	t.Run("json", func(t *testing.T) {
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "-n", ns, name, "-o", "json")
		t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		if code != exitPartial {
			t.Errorf("exit code = %d, want %d (a partial answer)", code, exitPartial)
		}
		var d triage.Diagnosis
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("decode -o json: %v\n%s", err, out)
		}
		if got, want := d.Primary().Code, triage.CodeInsufficientCPU; got != want {
			t.Errorf("findings[0].code = %q, want %q (from the PodScheduled condition)", got, want)
		}
		if !d.Partial {
			t.Errorf("partial = false, want true")
		}
		refused := map[string]bool{}
		for _, r := range d.Refused {
			refused[r.Verb+" "+r.Resource] = true
		}
		for _, want := range []string{"list events", "list nodes", "list pods"} {
			if !refused[want] {
				t.Errorf("refused = %+v, want %q among them", d.Refused, want)
			}
		}
		var evidence []string
		for _, e := range d.Primary().Evidence {
			evidence = append(evidence, e.Field+": "+e.Message)
		}
		all := strings.Join(evidence, "\n")
		for _, want := range []string{"status.conditions[PodScheduled]: 0/3 nodes are available: 3 Insufficient cpu", "events: forbidden", "nodes: forbidden", "pods: forbidden"} {
			if !strings.Contains(all, want) {
				t.Errorf("primary evidence = %q, want %q (the condition's message and each refused read)", evidence, want)
			}
		}
		if fix := strings.Join(d.Primary().Fix, "\n"); !strings.Contains(fix, "kubectl auth can-i list nodes") || !strings.Contains(fix, "kubectl create clusterrole") {
			t.Errorf("fix = %q, want the can-i check of each refused read and a grant", d.Primary().Fix)
		}
	})

	t.Run("text", func(t *testing.T) {
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "-n", ns, name)
		if code != exitPartial {
			t.Errorf("exit code = %d, want %d", code, exitPartial)
		}
		first := strings.SplitN(out, "\n", 2)[0]
		if !strings.Contains(first, string(triage.CodeInsufficientCPU)) {
			t.Errorf("first line = %q, want the code from the condition", first)
		}
		for _, want := range []string{"events: forbidden", "nodes: forbidden", "kubectl auth can-i",
			"kubectl create clusterrolebinding whypending-read --clusterrole=whypending-read --serviceaccount=" + ns + ":pod-reader"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		// No table to speak of, and no raw API error pasted into the cause (one line per
		// refused read is the evidence).
		cause := strings.SplitN(strings.SplitN(out, "\nCause\n", 2)[1], "\n\n", 2)[0]
		for _, bad := range []string{"node table shows no node", "is forbidden: User"} {
			if strings.Contains(cause, bad) {
				t.Errorf("the cause contains %q:\n%s", bad, cause)
			}
		}
	})
}

// TestWhyPendingBareNameWithOnlyGetPods asks about a bare name that is a Deployment, not a
// pod, as a user who may only get pods: the workload lookups are refused. The answer must not
// say that no workload has that name: it is partial (exitPartial), lists each refused
// workload read with its kubectl auth can-i check and a grant with its binding, and says the
// workload may exist.
func TestWhyPendingBareNameWithOnlyGetPods(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	const ns = "workload-grouped"
	ctx := t.Context()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "checkout"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "checkout"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/checkout:1"}}},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := restrictedKubeconfig(t, c, ns, "pod-getter", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	})

	t.Run("text", func(t *testing.T) {
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "checkout")
		t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		if code != exitPartial {
			t.Errorf("exit code = %d, want %d (a partial answer: the workload reads were refused)", code, exitPartial)
		}
		if strings.Contains(out, "either") || strings.Contains(out, "No Deployment") {
			t.Errorf("output says no workload has the name, though its reads were refused:\n%s", out)
		}
		for _, want := range []string{"deployments.apps: forbidden", "kubectl auth can-i get deployments.apps -n workload-grouped", "may exist",
			"kubectl create rolebinding whypending-read -n workload-grouped --clusterrole=whypending-read --serviceaccount=workload-grouped:pod-getter"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("deploy/NAME", func(t *testing.T) {
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "-n", ns, "deploy/checkout")
		t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		if code != exitPartial {
			t.Errorf("exit code = %d, want %d (a partial answer: the Deployment's read was refused)", code, exitPartial)
		}
		for _, want := range []string{"deployments.apps", "forbidden", "kubectl auth can-i get deployments.apps -n workload-grouped",
			"kubectl create rolebinding whypending-read -n workload-grouped --clusterrole=whypending-read --serviceaccount=workload-grouped:pod-getter"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "checkout", "-o", "json")
		if code != exitPartial {
			t.Errorf("exit code = %d, want %d", code, exitPartial)
		}
		var d triage.Diagnosis
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("decode -o json: %v\n%s", err, out)
		}
		if !d.Partial || !d.Primary().Uncertain {
			t.Errorf("partial = %v, primary uncertain = %v, want both true", d.Partial, d.Primary().Uncertain)
		}
		refused := map[string]bool{}
		for _, r := range d.Refused {
			refused[r.Verb+" "+r.Resource+" "+r.Namespace] = true
		}
		for _, want := range []string{"get deployments.apps " + ns, "get statefulsets.apps " + ns, "get cronjobs.batch " + ns} {
			if !refused[want] {
				t.Errorf("refused = %+v, want %q among them", d.Refused, want)
			}
		}
	})
}

// TestWhyPendingAllWithLimitedRights sweeps a namespace as users with limited rights. One who
// may list pods but no workload gets a partial sweep (exitPartial) from the pods, listing the
// refused workload reads, and never "namespace is empty"; one who may only get pods, so that
// nothing of the sweep can be read, gets one clear line naming the missing permission.
func TestWhyPendingAllWithLimitedRights(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	const ns = "sweep-limited"
	ctx := t.Context()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1"}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("list pods only", func(t *testing.T) {
		kubeconfig := restrictedKubeconfig(t, c, ns, "pod-lister", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		})
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "--all", "-o", "json")
		t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		if code != exitPartial {
			t.Errorf("exit code = %d, want %d (a partial sweep)", code, exitPartial)
		}
		var d triage.NamespaceDiagnosis
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("decode -o json: %v\n%s", err, out)
		}
		if !d.Partial || d.Empty || d.Pods != 1 {
			t.Errorf("partial = %v, empty = %v, pods = %d, want partial, not empty, 1 pod read", d.Partial, d.Empty, d.Pods)
		}
		refused := map[string]bool{}
		for _, r := range d.Refused {
			refused[r.Verb+" "+r.Resource] = true
		}
		for _, want := range []string{"list deployments.apps", "list cronjobs.batch"} {
			if !refused[want] {
				t.Errorf("refused = %+v, want %q among them", d.Refused, want)
			}
		}
		if strings.Contains(d.Summary, "Nothing is stuck") {
			t.Errorf("summary = %q, want it to say it rests on what could be read", d.Summary)
		}
	})
	t.Run("get pods only", func(t *testing.T) {
		kubeconfig := restrictedKubeconfig(t, c, ns, "pod-getter", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		})
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "--all")
		t.Logf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		if code != 1 {
			t.Errorf("exit code = %d, want 1 (nothing could be read)", code)
		}
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "kubectl auth can-i list pods -n "+ns) {
			t.Errorf("stderr = %q, want one line naming the missing permission (list pods)", errOut)
		}
	})
}
