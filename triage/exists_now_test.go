package triage

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Builders for the tables below: what the pod reads, and what a live list of its namespace
// shows.

// readsSecretKey makes container app read key of Secret name into env DB_PASSWORD.
func readsSecretKey(name, key string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}})
	}
}

// readsConfigMapKey makes container app read key of ConfigMap name into env MODE.
func readsConfigMapKey(name, key string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "MODE", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}})
	}
}

// mountsConfigMap adds volume "config" of ConfigMap name, projecting items (none: every key).
func mountsConfigMap(name string, items ...string) podOpt {
	return func(p *corev1.Pod) {
		v := corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
		for _, k := range items {
			v.ConfigMap.Items = append(v.ConfigMap.Items, corev1.KeyToPath{Key: k, Path: k})
		}
		p.Spec.Volumes = append(p.Spec.Volumes, v)
	}
}

// mountsSecret adds volume "creds" of Secret name.
func mountsSecret(name string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}})
	}
}

// controlledBy makes a controller of kind (ReplicaSet, Job) named name own the pod.
func controlledBy(kind, name string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: name, Controller: ptr.To(true)}}
		if kind == "ReplicaSet" {
			p.Labels = map[string]string{"pod-template-hash": strings.TrimPrefix(name, "app-")}
		}
	}
}

// listed records that a live list of resource in the pod's namespace has objects, each
// created ago before clock0.
func listed(s *Snapshot, resource string, objects map[string]time.Duration) {
	if s.NamesInNamespace == nil {
		s.NamesInNamespace, s.CreatedInNamespace = map[string][]string{}, map[string]map[string]time.Time{}
	}
	names := []string{}
	created := map[string]time.Time{}
	for n, ago := range objects {
		names = append(names, n)
		created[n] = clock0.Add(-ago)
	}
	slices.Sort(names)
	s.NamesInNamespace[resource], s.CreatedInNamespace[resource] = names, created
}

// TestReportedObjectNowExists is the trust rule of referenced-object-now-exists: a kubelet's
// "not found" is as old as its last try, so an object a live list shows is never said not to
// exist, nor created again; an object whose kind could not be listed is only said to have been
// reported missing; and when the reported one exists, what the pod still lacks (another
// object, a ConfigMap key) is the answer.
func TestReportedObjectNowExists(t *testing.T) {
	configErr := func(msg string) podOpt { return pending("CreateContainerConfigError", msg) }
	failed := func(msg string, ago time.Duration) Event {
		return ev(corev1.EventTypeWarning, "Failed", "app", "Error: "+msg, 12, ago)
	}
	mountFailed := func(msg string, ago time.Duration) Event {
		return warning("FailedMount", `MountVolume.SetUp failed for volume "config" : `+msg, 5, ago)
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		evs  []Event
		// setup fills what the collector read of the namespace.
		setup     func(s *Snapshot)
		rule      func(*Snapshot) []Finding
		want      Code
		uncertain bool
		// says are facts the summary must state; never are claims it must not make.
		says, never []string
		// fields are evidence fields the finding must cite.
		fields []string
		// fix and notFix: substrings one fix line must have, and no fix line may have.
		fix, notFix []string
		// deletes: a "kubectl delete pod" line is offered (a change, so never read-only).
		deletes bool
	}{
		{
			name:  "a Secret created after the kubelet's last report exists now: wait, never create it again",
			pod:   testPod(readsSecretKey("db", "password"), configErr(`secret "db" not found`)),
			evs:   []Event{failed(`secret "db" not found`, time.Minute)},
			setup: func(s *Snapshot) { listed(s, "secrets", map[string]time.Duration{"db": 30 * time.Second}) },
			rule:  containerConfigRules, want: CodeReferencedObjectNowExists,
			says:   []string{"reported Secret db not found", "last 60s ago", "exists in namespace shop now", "created 30s ago, after that report", "within 10 to 15 seconds", "was not checked: whypending does not read Secret data"},
			never:  []string{"does not exist"},
			fields: []string{"metadata.creationTimestamp", "spec.containers[app].env[DB_PASSWORD]"},
			fix:    []string{"kubectl get pod app -n shop -w", "-o go-template='{{range $k, $v := .data}}{{println $k}}{{end}}'", "deleting it would lose it"},
			notFix: []string{"kubectl create secret", "jsonpath='{.data}'"},
		},
		{
			name:  "a Secret a live list does not have does not exist",
			pod:   testPod(readsSecretKey("db-creds", "password"), configErr(`secret "db-creds" not found`)),
			evs:   []Event{failed(`secret "db-creds" not found`, time.Minute)},
			setup: func(s *Snapshot) { listed(s, "secrets", map[string]time.Duration{"db-creds-v2": time.Hour}) },
			rule:  containerConfigRules, want: CodeSecretNotFound,
			says: []string{"Secret db-creds does not exist in namespace shop", "Did you mean Secret db-creds-v2?"},
			fix:  []string{"kubectl create secret generic db-creds -n shop"},
		},
		{
			name: "Secrets that could not be listed: only what the kubelet reported, and when",
			pod:  testPod(readsSecretKey("db", "password"), configErr(`secret "db" not found`)),
			evs:  []Event{failed(`secret "db" not found`, time.Minute)},
			rule: containerConfigRules, want: CodeSecretNotFound,
			says:  []string{"The kubelet on node-1 reported Secret db not found in namespace shop", "last 60s ago", "Whether it exists now was not checked"},
			never: []string{"does not exist", "exists in namespace shop now"},
			fix:   []string{"kubectl get secret db -n shop   # if it is there now, do not create it"},
		},
		{
			name:  "reported missing after it was created: the kubelet's view lags, so no promise",
			pod:   testPod(readsSecretKey("db", "password"), configErr(`secret "db" not found`)),
			evs:   []Event{failed(`secret "db" not found`, 10*time.Second)},
			setup: func(s *Snapshot) { listed(s, "secrets", map[string]time.Duration{"db": 5 * time.Minute}) },
			rule:  containerConfigRules, want: CodeReferencedObjectNowExists, uncertain: true,
			says:  []string{"created 5m ago, 4m50s before that report", "still did not find it after it was created"},
			never: []string{"next try should find it", "does not exist"},
			fix:   []string{"kubectl get node node-1", "On node-1: journalctl -u kubelet"},
		},
		{
			name:  "created minutes ago and the container still waits: the kubelet never picked it up, so no promise",
			pod:   testPod(readsSecretKey("db", "password"), configErr(`secret "db" not found`)),
			evs:   []Event{failed(`secret "db" not found`, 5*time.Minute)},
			setup: func(s *Snapshot) { listed(s, "secrets", map[string]time.Duration{"db": 3 * time.Minute}) },
			rule:  containerConfigRules, want: CodeReferencedObjectNowExists, uncertain: true,
			says:  []string{"created 3m ago, after that report", `container "app" still waits with that error 3m after the creation`},
			never: []string{"next try should find it"},
			fix:   []string{"On node-1: journalctl -u kubelet"},
		},
		{
			name:  "a pod of a Deployment: deleting it retries at once, in a block of its own",
			pod:   testPod(readsSecretKey("db", "password"), configErr(`secret "db" not found`), controlledBy("ReplicaSet", "app-7d9f8b6c4")),
			evs:   []Event{failed(`secret "db" not found`, time.Minute)},
			setup: func(s *Snapshot) { listed(s, "secrets", map[string]time.Duration{"db": 30 * time.Second}) },
			rule:  containerConfigRules, want: CodeReferencedObjectNowExists,
			fix:     []string{"kubectl delete pod app -n shop   # only to retry at once: its ReplicaSet app-7d9f8b6c4 creates a new pod"},
			notFix:  []string{"lose it"},
			deletes: true,
		},
		{
			name:  "a pod of a controller not known to recreate pods (an Argo Workflow): no delete, which may fail its run",
			pod:   testPod(readsSecretKey("db", "password"), configErr(`secret "db" not found`), controlledBy("Workflow", "nightly-etl")),
			evs:   []Event{failed(`secret "db" not found`, time.Minute)},
			setup: func(s *Snapshot) { listed(s, "secrets", map[string]time.Duration{"db": 30 * time.Second}) },
			rule:  containerConfigRules, want: CodeReferencedObjectNowExists,
			fix:    []string{"the pod's controller is Workflow nightly-etl, and whether it replaces a deleted pod or fails its run is up to it"},
			notFix: []string{"kubectl delete pod"},
		},
		{
			name:  "a pod of a Job: deleting it counts against the backoffLimit, and the fix says so",
			pod:   testPod(readsSecretKey("db", "password"), configErr(`secret "db" not found`), controlledBy("Job", "migrate")),
			evs:   []Event{failed(`secret "db" not found`, time.Minute)},
			setup: func(s *Snapshot) { listed(s, "secrets", map[string]time.Duration{"db": 30 * time.Second}) },
			rule:  containerConfigRules, want: CodeReferencedObjectNowExists,
			fix:     []string{"counts the deleted one as a failed attempt against its backoffLimit"},
			deletes: true,
		},
		{
			name: "a ConfigMap that exists now with the keys the pod reads",
			pod:  testPod(readsConfigMapKey("app", "mode"), configErr(`configmap "app" not found`)),
			evs:  []Event{failed(`configmap "app" not found`, time.Minute)},
			setup: func(s *Snapshot) {
				listed(s, "configmaps", map[string]time.Duration{"app": 20 * time.Second})
				s.ConfigMapKeys = map[string][]string{"app": {"mode", "port"}}
			},
			rule: containerConfigRules, want: CodeReferencedObjectNowExists,
			says:   []string{"It has the key the pod reads (mode)"},
			fields: []string{"data"},
			notFix: []string{"kubectl create configmap"},
		},
		{
			name: "a ConfigMap that exists now without a key the pod reads: configmap-key-not-found",
			pod:  testPod(readsConfigMapKey("app", "mode"), configErr(`configmap "app" not found`)),
			evs:  []Event{failed(`configmap "app" not found`, time.Minute)},
			setup: func(s *Snapshot) {
				listed(s, "configmaps", map[string]time.Duration{"app": 20 * time.Second})
				s.ConfigMapKeys = map[string][]string{"app": {"port"}}
			},
			rule: containerConfigRules, want: CodeConfigMapKeyNotFound,
			says:   []string{"exists in namespace shop now", `has no key "mode"`, "which the pod reads (env MODE)"},
			fields: []string{"spec.containers[app].env[MODE]", "data"},
			fix:    []string{"kubectl get configmap app -n shop -o go-template="},
			notFix: []string{"kubectl create configmap"},
		},
		{
			name:  "the reported Secret could not be listed, and a ConfigMap the pod also needs is missing: both named",
			pod:   testPod(readsSecretKey("db", "password"), readsConfigMapKey("app", "mode"), configErr(`secret "db" not found`)),
			evs:   []Event{failed(`secret "db" not found`, time.Minute)},
			setup: func(s *Snapshot) { listed(s, "configmaps", map[string]time.Duration{}) },
			rule:  containerConfigRules, want: CodeSecretNotFound,
			says: []string{"Whether it exists now was not checked", "ConfigMap app, which the pod also needs (env MODE), does not exist in namespace shop, so the pod cannot start until both exist"},
		},
		{
			name: "an immutable ConfigMap without a key the pod reads: no edit, which the API server refuses",
			pod:  testPod(readsConfigMapKey("app", "mode"), configErr(`configmap "app" not found`)),
			evs:  []Event{failed(`configmap "app" not found`, time.Minute)},
			setup: func(s *Snapshot) {
				listed(s, "configmaps", map[string]time.Duration{"app": 20 * time.Second})
				s.ConfigMapKeys = map[string][]string{"app": {"port"}}
				s.ImmutableConfigMaps = map[string]bool{"app": true}
			},
			rule: containerConfigRules, want: CodeConfigMapKeyNotFound,
			fix:    []string{"ConfigMap app is immutable (immutable: true)", "Create a ConfigMap under a new name"},
			notFix: []string{"kubectl edit configmap", "kubectl create configmap"},
		},
		{
			name: "the kubelet's missing key in an immutable ConfigMap: no edit",
			pod:  testPod(readsConfigMapKey("app", "mode"), configErr(`couldn't find key mode in ConfigMap shop/app`)),
			evs:  []Event{failed(`couldn't find key mode in ConfigMap shop/app`, time.Minute)},
			setup: func(s *Snapshot) {
				s.ConfigMapKeys = map[string][]string{"app": {"port"}}
				s.ImmutableConfigMaps = map[string]bool{"app": true}
			},
			rule: containerConfigRules, want: CodeConfigMapKeyNotFound,
			fix:    []string{"ConfigMap app is immutable (immutable: true)"},
			notFix: []string{"Add key mode"},
		},
		{
			name:  "a ConfigMap that exists now whose keys could not be read",
			pod:   testPod(readsConfigMapKey("app", "mode"), configErr(`configmap "app" not found`)),
			evs:   []Event{failed(`configmap "app" not found`, time.Minute)},
			setup: func(s *Snapshot) { listed(s, "configmaps", map[string]time.Duration{"app": 20 * time.Second}) },
			rule:  containerConfigRules, want: CodeReferencedObjectNowExists,
			says: []string{"was not checked: its keys could not be read"},
		},
		{
			name: "the reported Secret exists now, but another object the pod needs does not: that one is the answer",
			pod:  testPod(readsSecretKey("db", "password"), readsConfigMapKey("app", "mode"), configErr(`secret "db" not found`)),
			evs:  []Event{failed(`secret "db" not found`, time.Minute)},
			setup: func(s *Snapshot) {
				listed(s, "secrets", map[string]time.Duration{"db": 30 * time.Second})
				listed(s, "configmaps", map[string]time.Duration{"other": time.Hour})
			},
			rule: containerConfigRules, want: CodeConfigMapNotFound,
			says:   []string{"Secret db exists in namespace shop now", "ConfigMap app, which the pod also needs (env MODE), does not exist"},
			fields: []string{"spec.containers[app].env[MODE]"},
			fix:    []string{"Create ConfigMap app"},
			notFix: []string{"kubectl create secret"},
		},
		{
			name: "an optional reference that is missing blocks nothing",
			pod:  testPod(readsSecretKey("db", "password"), readsConfigMapKey("app", "mode"), configErr(`secret "db" not found`), func(p *corev1.Pod) { p.Spec.Containers[0].Env[1].ValueFrom.ConfigMapKeyRef.Optional = ptr.To(true) }),
			evs:  []Event{failed(`secret "db" not found`, time.Minute)},
			setup: func(s *Snapshot) {
				listed(s, "secrets", map[string]time.Duration{"db": 30 * time.Second})
				listed(s, "configmaps", nil)
			},
			rule: containerConfigRules, want: CodeReferencedObjectNowExists,
		},
		{
			name: "a running container's missing reference is not the next failure: it read its env when it started",
			pod: testPod(readsSecretKey("db", "password"), configErr(`secret "db" not found`), func(p *corev1.Pod) {
				st := status(p, "side")
				st.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
				p.Spec.Containers[1].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}}
			}),
			evs: []Event{failed(`secret "db" not found`, time.Minute)},
			setup: func(s *Snapshot) {
				listed(s, "secrets", map[string]time.Duration{"db": 30 * time.Second})
				listed(s, "configmaps", nil)
			},
			rule: containerConfigRules, want: CodeReferencedObjectNowExists,
		},
		{
			name: "a ConfigMap key the kubelet did not find is there now",
			pod:  testPod(readsConfigMapKey("app", "mode"), configErr(`couldn't find key mode in ConfigMap shop/app`)),
			evs:  []Event{failed(`couldn't find key mode in ConfigMap shop/app`, time.Minute)},
			setup: func(s *Snapshot) {
				s.ConfigMapKeys = map[string][]string{"app": {"mode"}}
			},
			rule: containerConfigRules, want: CodeReferencedObjectNowExists,
			says:  []string{`reported no key "mode" in ConfigMap app`, `ConfigMap app has key "mode" now`},
			never: []string{"after that report"},
		},
		{
			name: "a ConfigMap key still missing in a live read",
			pod:  testPod(readsConfigMapKey("app", "mode"), configErr(`couldn't find key mode in ConfigMap shop/app`)),
			evs:  []Event{failed(`couldn't find key mode in ConfigMap shop/app`, time.Minute)},
			setup: func(s *Snapshot) {
				s.ConfigMapKeys = map[string][]string{"app": {"port"}}
			},
			rule: containerConfigRules, want: CodeConfigMapKeyNotFound,
			says:   []string{`ConfigMap app has no key "mode"`},
			fields: []string{"data"},
		},
		{
			name: "a Secret key: never read, so the kubelet's report and the command that lists key names",
			pod:  testPod(readsSecretKey("db", "password"), configErr(`couldn't find key password in Secret shop/db`)),
			evs:  []Event{failed(`couldn't find key password in Secret shop/db`, time.Minute)},
			rule: containerConfigRules, want: CodeSecretKeyNotFound,
			says:   []string{`reported that Secret db has no key "password"`, "not checked: whypending does not read Secret data"},
			fix:    []string{"kubectl get secret db -n shop -o go-template='{{range $k, $v := .data}}{{println $k}}{{end}}'"},
			notFix: []string{"jsonpath='{.data}'"},
		},
		{
			name:  "a volume's ConfigMap that exists now: the volume manager's back-off",
			pod:   testPod(pending("ContainerCreating", ""), mountsConfigMap("app-config")),
			evs:   []Event{mountFailed(`configmap "app-config" not found`, 2*time.Minute)},
			setup: func(s *Snapshot) { listed(s, "configmaps", map[string]time.Duration{"app-config": time.Minute}) },
			rule:  volumeRules, want: CodeReferencedObjectNowExists,
			says:   []string{`when it tried to mount volume "config"`, "FailedMount, 5 times, last 2m ago", "created 60s ago, after that report", "at most about 2 minutes between tries"},
			never:  []string{"does not exist"},
			fields: []string{"metadata.creationTimestamp", "spec.volumes[config]"},
			notFix: []string{"Create ConfigMap"},
		},
		{
			name: "a volume's ConfigMap that exists now without an item's key: configmap-key-not-found",
			pod:  testPod(pending("ContainerCreating", ""), mountsConfigMap("app-config", "app.yaml")),
			evs:  []Event{mountFailed(`configmap "app-config" not found`, 2*time.Minute)},
			setup: func(s *Snapshot) {
				listed(s, "configmaps", map[string]time.Duration{"app-config": time.Minute})
				s.ConfigMapKeys = map[string][]string{"app-config": {"application.yaml"}}
			},
			rule: volumeRules, want: CodeConfigMapKeyNotFound,
			says:   []string{`has no key "app.yaml"`, `which the pod reads (volume "config")`},
			fields: []string{"spec.volumes[config].items[app.yaml]"},
		},
		{
			name: "the kubelet's own word for a volume item's missing key: configmap-key-not-found, naming the ConfigMap",
			pod:  testPod(pending("ContainerCreating", ""), mountsConfigMap("app-config", "app.yaml")),
			evs:  []Event{mountFailed(`configmap references non-existent config key: app.yaml`, time.Minute)},
			setup: func(s *Snapshot) {
				s.ConfigMapKeys = map[string][]string{"app-config": {"application.yaml"}}
			},
			rule: volumeRules, want: CodeConfigMapKeyNotFound,
			says:   []string{`Volume "config" takes key "app.yaml" of ConfigMap app-config`, "It still lacks it: its keys are application.yaml"},
			fields: []string{"spec.volumes[config]", "data"},
			fix:    []string{"kubectl get configmap app-config -n shop -o go-template=", "Add key app.yaml to ConfigMap app-config"},
			notFix: []string{"volumeattachments", "kubectl get pvc"},
		},
		{
			name: "the same, an immutable ConfigMap: no edit",
			pod:  testPod(pending("ContainerCreating", ""), mountsConfigMap("app-config", "app.yaml")),
			evs:  []Event{mountFailed(`configmap references non-existent config key: app.yaml`, time.Minute)},
			setup: func(s *Snapshot) {
				s.ConfigMapKeys = map[string][]string{"app-config": {"application.yaml"}}
				s.ImmutableConfigMaps = map[string]bool{"app-config": true}
			},
			rule: volumeRules, want: CodeConfigMapKeyNotFound,
			fix:    []string{"ConfigMap app-config is immutable (immutable: true)"},
			notFix: []string{"Add key app.yaml"},
		},
		{
			name: "the same, and the ConfigMap has the key now: referenced-object-now-exists",
			pod:  testPod(pending("ContainerCreating", ""), mountsConfigMap("app-config", "app.yaml")),
			evs:  []Event{mountFailed(`configmap references non-existent config key: app.yaml`, time.Minute)},
			setup: func(s *Snapshot) {
				s.ConfigMapKeys = map[string][]string{"app-config": {"app.yaml"}}
			},
			rule: volumeRules, want: CodeReferencedObjectNowExists,
			says: []string{`has key "app.yaml" now`},
		},
		{
			name: "a Secret volume item's missing key: secret-key-not-found, its keys never read",
			pod: testPod(pending("ContainerCreating", ""), func(p *corev1.Pod) {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "web-tls", Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}}}}})
			}),
			evs:  []Event{warning("FailedMount", `MountVolume.SetUp failed for volume "tls" : secret references non-existent secret key: tls.crt`, 5, time.Minute)},
			rule: volumeRules, want: CodeSecretKeyNotFound,
			says:   []string{`Volume "tls" takes key "tls.crt" of Secret web-tls`, "was not checked: whypending does not read Secret data"},
			fix:    []string{"kubectl get secret web-tls -n shop -o go-template="},
			notFix: []string{"volumeattachments"},
		},
		{
			name: "two objects reported missing, one created since: the one still missing is the answer",
			pod:  testPod(pending("ContainerCreating", ""), mountsConfigMap("app-config"), mountsSecret("tls")),
			evs: []Event{
				warning("FailedMount", `MountVolume.SetUp failed for volume "creds" : secret "tls" not found`, 5, time.Minute),
				mountFailed(`configmap "app-config" not found`, 2*time.Minute),
			},
			setup: func(s *Snapshot) {
				listed(s, "secrets", map[string]time.Duration{"tls": 30 * time.Second})
				listed(s, "configmaps", map[string]time.Duration{"other": time.Hour})
			},
			rule: volumeRules, want: CodeConfigMapNotFound,
			says: []string{"ConfigMap app-config, which does not exist in namespace shop"},
		},
		{
			name: "a volume's Secret whose kind could not be listed: what the kubelet reported",
			pod:  testPod(pending("ContainerCreating", ""), mountsSecret("tls")),
			evs:  []Event{warning("FailedMount", `MountVolume.SetUp failed for volume "creds" : secret "tls" not found`, 5, time.Minute)},
			rule: volumeRules, want: CodeSecretNotFound,
			says:  []string{"reported Secret tls not found", `volume "creds" mounts it`, "Whether it exists now was not checked"},
			never: []string{"does not exist"},
			fix:   []string{"kubectl get secret tls -n shop"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(tt.pod, tt.evs...)
			if tt.setup != nil {
				tt.setup(s)
			}
			got := checkCodes(t, tt.rule, s, tt.want)[0]
			t.Logf("%s: %s\n%s", got.Code, got.Summary, strings.Join(got.Fix, "\n"))
			if got.Uncertain != tt.uncertain {
				t.Errorf("Uncertain = %t, want %t", got.Uncertain, tt.uncertain)
			}
			for _, want := range tt.says {
				if !strings.Contains(got.Summary, want) {
					t.Errorf("summary lacks %q", want)
				}
			}
			for _, not := range tt.never {
				if strings.Contains(got.Summary, not) {
					t.Errorf("summary says %q", not)
				}
			}
			for _, field := range tt.fields {
				if !hasField(got, field) {
					t.Errorf("evidence %v lacks field %s", got.Evidence, field)
				}
			}
			for _, want := range tt.fix {
				if !slicesContain(got.Fix, want) {
					t.Errorf("fix lacks %q", want)
				}
			}
			for _, not := range tt.notFix {
				if slicesContain(got.Fix, not) {
					t.Errorf("fix has %q", not)
				}
			}
			deletes := false
			for _, l := range got.Fix {
				if strings.HasPrefix(l, "kubectl delete pod") {
					deletes = true
					if ParseFixStep(l).ReadOnly() {
						t.Errorf("%q reads as read-only", l)
					}
				}
			}
			if deletes != tt.deletes {
				t.Errorf("fix deletes the pod = %t, want %t", deletes, tt.deletes)
			}
			for _, l := range got.Fix {
				if strings.Contains(l, "go-template") && !ParseFixStep(l).ReadOnly() {
					t.Errorf("%q does not read as read-only", l)
				}
			}
		})
	}
}

// TestServiceAccountNowExists: a controller's FailedCreate about a ServiceAccount that a live
// list shows now is referenced-object-now-exists; an unread list claims only the report.
func TestServiceAccountNowExists(t *testing.T) {
	msg := `pods "checkout-7d9f8b6c4-" is forbidden: error looking up service account shop/checkout-runner: serviceaccount "checkout-runner" not found`
	tests := []struct {
		name      string
		names     []string
		created   time.Duration // before clock0
		lastSeen  time.Duration
		want      Code
		uncertain bool
		says      []string
		never     []string
		fix       []string
		notFix    []string
	}{
		{"created since the report: wait, or touch the ReplicaSet", []string{"checkout-runner", "default"}, 30 * time.Second, time.Minute,
			CodeReferencedObjectNowExists, false,
			[]string{"reported their ServiceAccount checkout-runner not found (FailedCreate, 5 times, last 60s ago)", "created 30s ago, after that report", "about 16 minutes"},
			[]string{"does not exist"},
			[]string{"kubectl get rs/checkout-7d9f8b6c4 -n shop -w", "kubectl annotate rs/checkout-7d9f8b6c4 -n shop whypending.io/retry="},
			[]string{"kubectl create serviceaccount"}},
		{"reported after it was created: no promise", []string{"checkout-runner"}, 10 * time.Minute, time.Minute,
			CodeReferencedObjectNowExists, true,
			[]string{"still reported it not found after it was created"}, []string{"next try should"}, []string{"kubectl describe rs/checkout-7d9f8b6c4"}, nil},
		{"a list without it: it does not exist", []string{"default"}, 0, time.Minute,
			CodeServiceAccountNotFound, false,
			[]string{"their ServiceAccount checkout-runner does not exist in namespace shop"}, nil, []string{"kubectl create serviceaccount -n shop checkout-runner"}, nil},
		{"a lookup that failed says nothing about whether it exists", []string{"default"}, 0, time.Minute,
			CodeUnknown, true,
			[]string{"could not look up their ServiceAccount checkout-runner"}, []string{"does not exist"}, []string{"kubectl get serviceaccount checkout-runner -n shop"}, []string{"kubectl create serviceaccount"}},
		{"no list: only the report", nil, 0, time.Minute,
			CodeServiceAccountNotFound, false,
			[]string{"reported their ServiceAccount checkout-runner not found in namespace shop (FailedCreate, 5 times, last 60s ago)", "Whether it exists now was not checked"},
			[]string{"does not exist"}, []string{"kubectl get serviceaccount checkout-runner -n shop   # if it is there now"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := deploymentWS(2)
			ws.ServiceAccountNames = tt.names
			if tt.names != nil {
				ws.ServiceAccountCreated = map[string]time.Time{}
				for _, n := range tt.names {
					ws.ServiceAccountCreated[n] = clock0.Add(-tt.created)
				}
			}
			m := msg
			if tt.want == CodeUnknown {
				m = strings.Replace(msg, `serviceaccount "checkout-runner" not found`, "Timeout: request did not complete within requested timeout", 1)
			}
			ws.Events[types.UID("uid-rs")] = []Event{failedCreate(m, 5, tt.lastSeen)}
			p := EvaluateWorkload(ws).Primary()
			t.Logf("%s: %s\n%s", p.Code, p.Summary, strings.Join(p.Fix, "\n"))
			if p.Code != tt.want || p.Uncertain != tt.uncertain {
				t.Errorf("primary = %s (uncertain %t), want %s (uncertain %t)", p.Code, p.Uncertain, tt.want, tt.uncertain)
			}
			for _, want := range tt.says {
				if !strings.Contains(p.Summary, want) {
					t.Errorf("summary lacks %q", want)
				}
			}
			for _, not := range tt.never {
				if strings.Contains(p.Summary, not) {
					t.Errorf("summary says %q", not)
				}
			}
			for _, want := range tt.fix {
				if !slicesContain(p.Fix, want) {
					t.Errorf("fix lacks %q", want)
				}
			}
			for _, not := range tt.notFix {
				if slicesContain(p.Fix, not) {
					t.Errorf("fix has %q", not)
				}
			}
		})
	}
}

// TestNeedsForReportedObjects: which names and ConfigMap keys the Collector reads when the
// kubelet reported a ConfigMap or Secret missing.
func TestNeedsForReportedObjects(t *testing.T) {
	t.Run("a missing Secret lists the ConfigMaps the pod needs too", func(t *testing.T) {
		s := testSnapshot(testPod(readsSecretKey("db", "password"), readsConfigMapKey("app", "mode"), pending("CreateContainerConfigError", `secret "db" not found`)))
		if got, want := NeedsNames(s), []string{"configmaps", "secrets"}; !slices.Equal(got, want) {
			t.Errorf("NeedsNames() = %v, want %v", got, want)
		}
	})
	t.Run("a reported ConfigMap that exists now has its keys read", func(t *testing.T) {
		s := testSnapshot(testPod(readsConfigMapKey("app", "mode"), pending("CreateContainerConfigError", `configmap "app" not found`)))
		if got := NeedsConfigMapKeys(s); got != nil {
			t.Errorf("NeedsConfigMapKeys() before the names = %v, want none", got)
		}
		listed(s, "configmaps", map[string]time.Duration{"app": time.Second})
		if got, want := NeedsConfigMapKeys(s), []string{"app"}; !slices.Equal(got, want) {
			t.Errorf("NeedsConfigMapKeys() = %v, want %v", got, want)
		}
	})
	t.Run("a ConfigMap the kubelet found without a key has its keys read", func(t *testing.T) {
		s := testSnapshot(testPod(readsConfigMapKey("app", "mode"), pending("CreateContainerConfigError", `couldn't find key mode in ConfigMap shop/app`)))
		if got, want := NeedsConfigMapKeys(s), []string{"app"}; !slices.Equal(got, want) {
			t.Errorf("NeedsConfigMapKeys() = %v, want %v", got, want)
		}
	})
	t.Run("a ConfigMap the pod reads no key of is not read", func(t *testing.T) {
		s := testSnapshot(testPod(mountsConfigMap("app-config"), pending("ContainerCreating", "")),
			warning("FailedMount", `MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`, 5, time.Minute))
		listed(s, "configmaps", map[string]time.Duration{"app-config": time.Second})
		if got := NeedsConfigMapKeys(s); got != nil {
			t.Errorf("NeedsConfigMapKeys() = %v, want none", got)
		}
	})
}
