package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// chartDir is the chart, relative to the repository root.
const chartDir = "charts/whypending"

// twoClusterValues is the chart's two-cluster values file (also linted by .ci/run).
const twoClusterValues = "charts/whypending/ci/two-clusters-values.yaml"

// helm runs the pinned helm (hack/helm, built on first use) from the repository root and
// returns its stdout; a failure returns stderr in the error.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // a cold helm build
	defer cancel()
	bin, err := testenv.Helm(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &helmError{args: args, stderr: strings.TrimSpace(stderr.String()), err: err}
	}
	return stdout.String(), nil
}

type helmError struct {
	args   []string
	stderr string
	err    error
}

func (e *helmError) Error() string {
	return "helm " + strings.Join(e.args, " ") + ": " + e.err.Error() + "\n" + e.stderr
}

// renderChart is `helm template RELEASE charts/whypending --namespace NS ARGS...` decoded into
// objects.
func renderChart(t *testing.T, release, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.DecodeObjects([]byte(out))
	if err != nil {
		t.Fatalf("decode helm template output: %v", err)
	}
	return objs
}

// findObject returns the rendered object of kind (and name, when not empty), or nil.
func findObject(objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

// convert decodes a rendered object into a typed API object.
func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatalf("no %T rendered", new(T))
	}
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v); err != nil {
		t.Fatalf("decode %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &v
}

// renderedConfig returns the bot config file the chart's ConfigMap holds.
func renderedConfig(t *testing.T, objs []*unstructured.Unstructured) []byte {
	t.Helper()
	cm := convert[corev1.ConfigMap](t, findObject(objs, "ConfigMap"))
	cfg, ok := cm.Data["config.yaml"]
	if !ok {
		t.Fatalf("ConfigMap %s has no config.yaml", cm.Name)
	}
	return []byte(cfg)
}

// startChartCluster starts a control plane and installs the CRDs in crdDirs (relative to the
// repository root).
func startChartCluster(t *testing.T, opts testenv.Options, crdDirs ...string) *testenv.Cluster {
	t.Helper()
	c := testcluster.Start(t, opts)
	for _, dir := range crdDirs {
		if err := c.InstallCRDs(t.Context(), os.DirFS(filepath.Join(repoRoot(t), dir)), "."); err != nil {
			t.Fatalf("install CRDs from %s: %v", dir, err)
		}
	}
	return c
}

func createNamespace(t *testing.T, c *testenv.Cluster, name string) {
	t.Helper()
	_, err := c.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestChartInstalls lints the chart and renders it with the default values and with the
// two-cluster values, applies the result to a real API server with a server-side dry run, and
// installs the two-cluster release for real with helm, reading its NOTES.
func TestChartInstalls(t *testing.T) {
	// The chart's RemediationRequest CRD and prometheus-operator's ServiceMonitor CRD.
	c := startChartCluster(t, testenv.Options{}, filepath.Join(chartDir, "crds"), filepath.Join("testdata", "monitoring-crds"))
	for _, tc := range []struct {
		name   string
		values []string
	}{
		{"default values", nil},
		{"two clusters", []string{"-f", twoClusterValues}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := helm(t, append([]string{"lint", "--strict", chartDir}, tc.values...)...); err != nil {
				t.Fatal(err)
			}
			ns := "wp-" + strings.ReplaceAll(tc.name, " ", "-")
			objs := renderChart(t, "whypending", ns, tc.values...)
			createNamespace(t, c, ns)
			if err := c.Apply(t.Context(), objs, true); err != nil {
				t.Fatalf("server-side dry run: %v", err)
			}
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
				if o.GetKind() == "Secret" {
					t.Errorf("the chart renders Secret %s; it must only reference existing Secrets", o.GetName())
				}
			}
			t.Logf("applied (dry run) %d objects: %s", len(objs), strings.Join(kinds, ", "))
		})
	}

	t.Run("helm install prints the set-up steps", func(t *testing.T) {
		kubeconfig := c.KubeconfigPath
		out, err := helm(t, "install", "wp", chartDir, "--kubeconfig", kubeconfig, "--namespace", "wp-install", "--create-namespace",
			"-f", twoClusterValues, "--set", "config.slack.mode=http")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"https://whypending.example.com/slack/commands",
			"https://whypending.example.com/slack/interactions",
			"https://whypending.example.com/discord/interactions",
			"kubectl -n wp-install create secret generic whypending-chat",
			"--from-literal=SLACK_SIGNING_SECRET=",
			"--from-literal=DISCORD_PUBLIC_KEY=",
			"slack-app-manifest.yaml",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("helm install output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "WARNING") {
			t.Errorf("NOTES warn although approvers are configured:\n%s", out)
		}
		dep, err := c.Client.AppsV1().Deployments("wp-install").Get(t.Context(), "wp-whypending", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the installed Deployment: %v", err)
		}
		if *dep.Spec.Replicas != 3 {
			t.Errorf("replicas = %d, want 3", *dep.Spec.Replicas)
		}
	})

	t.Run("a Discord-only install needs no Slack secret and says so", func(t *testing.T) {
		out, err := helm(t, "install", "wpd", chartDir, "--kubeconfig", c.KubeconfigPath, "--namespace", "wp-discord", "--create-namespace",
			"--set", "discord.enabled=true,discord.mode=gateway,config.slack=null",
			"--set-string", "discord.applicationID=123456789012345678,discord.approvers.roles[0]=234567890123456789,config.channels.digest[0]=345678901234567890")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Slack is off", "--from-literal=DISCORD_BOT_TOKEN=", "in Discord."} {
			if !strings.Contains(out, want) {
				t.Errorf("helm install output lacks %q:\n%s", want, out)
			}
		}
		for _, unwanted := range []string{"SLACK_BOT_TOKEN", "WARNING"} {
			if strings.Contains(out, unwanted) {
				t.Errorf("helm install output has %q:\n%s", unwanted, out)
			}
		}
		dep, err := c.Client.AppsV1().Deployments("wp-discord").Get(t.Context(), "wpd-whypending", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the installed Deployment: %v", err)
		}
		for _, env := range dep.Spec.Template.Spec.Containers[0].Env {
			if strings.HasPrefix(env.Name, "SLACK_") {
				t.Errorf("a Discord-only Deployment reads %s from the Secret", env.Name)
			}
		}
	})
}

// TestChartValues checks what the chart renders from its values: the pod's security and
// probes, secrets by reference, the PodDisruptionBudget, the Ingress paths, and that every
// rendered config is one the bot accepts.
func TestChartValues(t *testing.T) {
	t.Run("the pod runs as non-root with a read-only root filesystem and no capabilities", func(t *testing.T) {
		objs := renderChart(t, "wp", "ops")
		dep := convert[appsv1.Deployment](t, findObject(objs, "Deployment"))
		pod := dep.Spec.Template.Spec
		if pod.ServiceAccountName != "wp-whypending" || findObject(objs, "ServiceAccount").GetName() != "wp-whypending" {
			t.Errorf("serviceAccountName = %q, want the chart's ServiceAccount wp-whypending", pod.ServiceAccountName)
		}
		if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
			t.Errorf("pod securityContext = %+v, want runAsNonRoot", psc)
		}
		ctr := pod.Containers[0]
		sc := ctr.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container securityContext = %+v, want read-only root, no privilege escalation, drop ALL", sc)
		}
		if p := ctr.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("livenessProbe = %+v, want GET /healthz", p)
		}
		if p := ctr.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
			t.Errorf("readinessProbe = %+v, want GET /readyz", p)
		}
		for _, e := range ctr.Env {
			if strings.HasPrefix(e.Name, "SLACK_") || strings.HasPrefix(e.Name, "DISCORD_") {
				if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "whypending-slack" {
					t.Errorf("env %s is not a reference to Secret whypending-slack: %+v", e.Name, e)
				}
			}
		}
		if len(ctr.EnvFrom) > 0 {
			t.Errorf("envFrom = %+v: import only the keys the config needs", ctr.EnvFrom)
		}
		if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
			t.Errorf("automountServiceAccountToken = %v, want true (the default config reads the cluster it runs in)", pod.AutomountServiceAccountToken)
		}
	})

	t.Run("a PodDisruptionBudget exists only with more than one replica", func(t *testing.T) {
		if findObject(renderChart(t, "wp", "ops"), "PodDisruptionBudget") == nil {
			t.Error("replicas=2 (default): no PodDisruptionBudget")
		}
		if pdb := findObject(renderChart(t, "wp", "ops", "--set", "replicas=1"), "PodDisruptionBudget"); pdb != nil {
			t.Error("replicas=1: a PodDisruptionBudget would block every node drain")
		}
	})

	t.Run("the Ingress exposes only the chat endpoints", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"--set", "ingress.enabled=true"}, []string{"/slack/commands", "/slack/interactions"}},
			{[]string{"-f", twoClusterValues}, []string{"/slack/commands", "/slack/interactions", "/discord/interactions"}},
			{[]string{"-f", twoClusterValues, "--set", "config.slack.mode=socket,discord.mode=gateway"}, nil},
		} {
			objs, err := helm(t, append([]string{"template", "wp", chartDir}, tc.args...)...)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), "no chat endpoint to expose") {
					t.Errorf("%v: err = %v, want a failure naming the missing endpoint", tc.args, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			decoded, _ := testenv.DecodeObjects([]byte(objs))
			ing := convert[networkingv1.Ingress](t, findObject(decoded, "Ingress"))
			var paths []string
			for _, p := range ing.Spec.Rules[0].HTTP.Paths {
				paths = append(paths, p.Path)
			}
			if !slices.Equal(paths, tc.want) {
				t.Errorf("%v: ingress paths = %v, want %v", tc.args, paths, tc.want)
			}
		}
	})

	t.Run("only a cluster read from inside needs RBAC and a token", func(t *testing.T) {
		objs := renderChart(t, "wp", "ops", "--set", "config.clusters[0].name=remote,config.clusters[0].inCluster=false,config.clusters[0].kubeconfig=/etc/whypending/kubeconfigs/remote",
			"--set", "kubeconfigSecret=kc")
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			if o := findObject(objs, kind); o != nil {
				t.Errorf("a bot that reads no in-cluster API got %s %s", kind, o.GetName())
			}
		}
		pod := convert[appsv1.Deployment](t, findObject(objs, "Deployment")).Spec.Template.Spec
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("automountServiceAccountToken = %v, want false", pod.AutomountServiceAccountToken)
		}
	})

	t.Run("the Role lives in the store namespace", func(t *testing.T) {
		objs := renderChart(t, "wp", "ops", "--set", "config.store.namespace=audit,config.digest.schedule=0 9 * * *,config.channels.digest[0]=C0OPS")
		role := convert[rbacv1.Role](t, findObject(objs, "Role"))
		if role.Namespace != "audit" {
			t.Errorf("Role namespace = %q, want audit", role.Namespace)
		}
		var resources []string
		for _, r := range role.Rules {
			resources = append(resources, r.Resources...)
		}
		if !slices.Equal(resources, []string{"remediationrequests", "leases"}) {
			t.Errorf("Role resources = %v, want remediationrequests and leases", resources)
		}
		if findObject(objs, "ClusterRole") == nil {
			t.Error("no ClusterRole")
		}
	})

	t.Run("a wrong value fails with the key's name", func(t *testing.T) {
		for _, tc := range []struct {
			set  string
			want string
		}{
			{"replicas=two", "/replicas"},
			{"config.approvals.approvers.users[0]=bob", "/config/approvals/approvers/users/0"},
			{"config.slack.botToken=xoxb-1", "/config/slack/botToken"},
			{"config.clustrs[0].name=a", "'clustrs' not allowed"},
			{"config.approvals.expiry=2d", "/config/approvals/expiry"},
			{"remediation=yes", "/remediation"},
			{"discord.enabled=true", "/discord/applicationID"},
			{"config.store.backend=memory", "set replicas: 1"},
		} {
			_, err := helm(t, "template", "wp", chartDir, "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %s: err = %v, want it to name %q", tc.set, err, tc.want)
			}
			var he *helmError
			if errors.As(err, &he) && strings.Contains(he.stderr, "xoxb-1") {
				t.Errorf("--set %s: helm echoes the secret: %s", tc.set, he.stderr)
			}
		}
	})

	t.Run("the rendered config is one the bot accepts", func(t *testing.T) {
		cfg, err := ParseConfig(renderedConfig(t, renderChart(t, "wp", "ops")))
		// The default values name no approver; NOTES says so, and that is the only gap.
		if err == nil || err.Error() != "approvals.approvers: name at least one user, group or role; otherwise nobody can approve a repair" {
			t.Errorf("default values: ParseConfig = %v, %v; want only the missing approvers", cfg, err)
		}
		cfg, err = ParseConfig(renderedConfig(t, renderChart(t, "wp", "ops", "--set", "config.approvals.approvers.users[0]=U024BE7LH")))
		if err != nil {
			t.Fatalf("default values with an approver: %v", err)
		}
		if cfg.Store.Namespace != "ops" || !cfg.Clusters[0].InCluster {
			t.Errorf("config = %+v, want the store in the release namespace and the in-cluster cluster", cfg)
		}
	})

	t.Run("the two-cluster config is one the bot accepts", func(t *testing.T) {
		raw := renderedConfig(t, renderChart(t, "wp", "ops", "-f", twoClusterValues))
		var tree map[string]any
		if err := yaml.Unmarshal(raw, &tree); err != nil {
			t.Fatal(err)
		}
		without, err := yaml.Marshal(tree)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseConfig(without)
		if err != nil {
			t.Fatalf("ParseConfig: %v\n%s", err, raw)
		}
		if len(cfg.Clusters) != 2 || cfg.Clusters[1].Kubeconfig != "/etc/whypending/kubeconfigs/prod-eu" {
			t.Errorf("clusters = %+v", cfg.Clusters)
		}
	})
}

// TestChartSchemaCoversConfig keeps values.schema.json's config section in step with
// Config: every key the bot reads is described (so a wrong one fails at helm install),
// and the schema describes no key the bot would reject.
func TestChartSchemaCoversConfig(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := yaml.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	defs, _ := schema["definitions"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	// Rendered from the top-level discord and alertmanager values, not set under config.
	compareSchema(t, "config", props["config"], reflect.TypeOf(Config{}), defs,
		map[string]bool{"config.discord": true, "config.approvals.approvers.discord": true, "config.alertmanager": true})
}

// compareSchema compares the object schema s at path with the JSON fields of Go type typ,
// following $ref into defs; skip lists paths rendered from other values.
func compareSchema(t *testing.T, path string, s any, typ reflect.Type, defs map[string]any, skip map[string]bool) {
	t.Helper()
	m, _ := s.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		m, _ = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
		if items, ok := m["items"]; ok {
			m, _ = items.(map[string]any)
		}
	}
	if typ.Kind() != reflect.Struct || typ == reflect.TypeOf(Duration{}) {
		return
	}
	props, ok := m["properties"].(map[string]any)
	if !ok {
		t.Errorf("schema %s: no properties, want the fields of %s", path, typ)
		return
	}
	if m["additionalProperties"] != false {
		t.Errorf("schema %s: additionalProperties is not false, so a misspelt key would pass", path)
	}
	fields := configKeys(typ)
	for name, f := range fields {
		p := path + "." + name
		if skip[p] {
			continue
		}
		sub, ok := props[name]
		if !ok {
			t.Errorf("schema lacks %s (Config reads it)", p)
			continue
		}
		compareSchema(t, p, sub, f.Type, defs, skip)
	}
	for name := range props {
		if _, ok := fields[name]; !ok {
			t.Errorf("schema has %s, which the bot rejects as an unknown key", path+"."+name)
		}
	}
}

// configKeys returns the JSON field names of struct type typ.
func configKeys(typ reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out[name] = f
		}
	}
	return out
}
