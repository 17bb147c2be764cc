package triage

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestAdmissionRefusalsFixWhatWasRefused checks the admission answers that depend on more than
// the message: what an SCC rejects, parts a sidecar injector added, a system daemon that needs
// what Pod Security forbids, a webhook that refuses its own backend, a ServiceAccount that
// exists only elsewhere, and fixes that use the values the answer knows.
func TestAdmissionRefusalsFixWhatWasRefused(t *testing.T) {
	withTemplate := func(ws *WorkloadSnapshot, containers ...corev1.Container) *WorkloadSnapshot {
		ws.Deployment.Spec.Template.Spec.Containers = containers
		ws.Deployment.Spec.Template.Labels = map[string]string{"app": "checkout"}
		return ws
	}
	tests := []struct {
		name    string
		ws      func() *WorkloadSnapshot
		msg     string
		want    Code
		says    string
		fix     string
		notInFx string
	}{
		{"an SCC names the field and the SCC",
			func() *WorkloadSnapshot { return withTemplate(deploymentWS(2), corev1.Container{Name: "app"}) },
			`pods "checkout-7d9f8b6c4-" is forbidden: unable to validate against any security context constraint: [provider "anyuid": Forbidden: not usable by user or serviceaccount, provider restricted-v2: .containers[0].runAsUser: Invalid value: 0: must be in the ranges: [1000680000, 1000689999], provider "privileged": Forbidden: not usable by user or serviceaccount]`,
			CodeOpenShiftSCCDenied, `restricted-v2 rejects runAsUser=0 on container "app" (must be in the ranges: [1000680000, 1000689999])`,
			"oc adm policy add-scc-to-user anyuid -z default -n shop", ""},
		{"a sidecar the template lacks is the injector's",
			func() *WorkloadSnapshot { return withTemplate(deploymentWS(2), corev1.Container{Name: "app"}) },
			`pods "checkout-7d9f8b6c4-" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "istio-proxy" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (containers "istio-init", "istio-proxy" must set securityContext.capabilities.drop=["ALL"])`,
			CodePodSecurityViolation, `Istio's sidecar injector added them`, "sidecar.istio.io", "In the pod template, set"},
		{"a system daemon gets the namespace label first",
			func() *WorkloadSnapshot {
				ws := testDaemonSet([]*corev1.Node{testNode("node-1", true, "v1.37.2")})
				ws.DaemonSet.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0"}}
				ws.DaemonSet.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "kubelet", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet"}}}}
				ws.DaemonSet.Status.DesiredNumberScheduled = 1
				ws.Events = map[types.UID][]Event{}
				return ws
			},
			`pods "agent-x" is forbidden: violates PodSecurity "baseline:latest": privileged (container "node" must not set securityContext.privileged=true), hostPath volumes (volume "kubelet")`,
			CodePodSecurityViolation, "node-level system daemon", "kubectl label namespace shop pod-security.kubernetes.io/enforce=privileged --overwrite", "remove securityContext.privileged"},
		{"a fail-closed webhook that refuses its own backend is a deadlock",
			func() *WorkloadSnapshot {
				ws := withTemplate(deploymentWS(2), corev1.Container{Name: "app"})
				ws.WebhookServices = map[string]*corev1.Service{"shop/checkout-webhook": {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout-webhook"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "checkout"}}}}
				return ws
			},
			`Internal error occurred: failed calling webhook "mutate.checkout.example.com": failed to call webhook: Post "https://checkout-webhook.shop.svc:443/mutate?timeout=10s": no endpoints available for service "checkout-webhook"`,
			CodeAdmissionWebhookDenied, "Deadlock", "failurePolicy to Ignore", ""},
		{"a webhook whose backend is elsewhere is no deadlock",
			func() *WorkloadSnapshot {
				ws := withTemplate(deploymentWS(2), corev1.Container{Name: "app"})
				ws.WebhookServices = map[string]*corev1.Service{"infra/hook": {ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "hook"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "hook"}}}}
				return ws
			},
			`Internal error occurred: failed calling webhook "v.example.com": failed to call webhook: Post "https://hook.infra.svc:443/v?timeout=10s": no endpoints available for service "hook"`,
			CodeAdmissionWebhookDenied, "failurePolicy is Fail, so every pod is refused", "Check the webhook's Service and pods", "Deadlock"},
		{"a ServiceAccount that exists only in another namespace",
			func() *WorkloadSnapshot {
				ws := withTemplate(deploymentWS(2), corev1.Container{Name: "app"})
				ws.ServiceAccountNames, ws.ServiceAccountElsewhere = []string{"default"}, []string{"payments"}
				return ws
			},
			`pods "checkout-7d9f8b6c4-" is forbidden: error looking up service account shop/checkout-runner: serviceaccount "checkout-runner" not found`,
			CodeServiceAccountNotFound, "exists in namespace payments, but a pod can only use one of its own namespace", "kubectl create serviceaccount -n shop checkout-runner", "<existing>"},
		{"a LimitRange bound is the value to set, on the container that breaks it",
			func() *WorkloadSnapshot {
				return withTemplate(deploymentWS(2), corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("2")}}}, corev1.Container{Name: "side"})
			},
			`pods "checkout-7d9f8b6c4-" is forbidden: maximum cpu usage per Container is 1, but limit is 2`,
			CodeLimitRangeViolation, "maximum cpu usage per Container is 1", "kubectl set resources deploy/checkout -n shop -c app --limits=cpu=1", "<container>"},
		{"a LimitRange bound no template container breaks: an injected one does",
			func() *WorkloadSnapshot {
				return withTemplate(deploymentWS(2), corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("500m")}}})
			},
			`pods "checkout-7d9f8b6c4-" is forbidden: maximum cpu usage per Container is 1, but limit is 2`,
			CodeLimitRangeViolation, "a container added at admission", "kubectl get mutatingwebhookconfigurations", "kubectl set resources"},
		{"the quota's remaining room is the request to set",
			func() *WorkloadSnapshot {
				return withTemplate(deploymentWS(3, ownedPod("aaaaa", time.Hour)), corev1.Container{Name: "app"})
			},
			`pods "checkout-7d9f8b6c4-" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=1200m, limited: requests.cpu=1500m`,
			CodeResourceQuotaExceeded, "only 300m of the 1500m allowed is left", "kubectl set resources deploy/checkout -n shop -c app --requests=cpu=150m", "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := tt.ws()
			uid := types.UID("uid-rs")
			if ws.DaemonSet != nil {
				uid = ws.DaemonSet.UID
			}
			ws.Events[uid] = []Event{failedCreate(tt.msg, 5, time.Minute)}
			p := EvaluateWorkload(ws).Primary()
			fix := strings.Join(p.Fix, "\n")
			t.Logf("%s: %s\n%s", p.Code, p.Summary, fix)
			if p.Code != tt.want || !strings.Contains(p.Summary, tt.says) {
				t.Errorf("primary = %s %q, want %s saying %q", p.Code, p.Summary, tt.want, tt.says)
			}
			if !strings.Contains(fix, tt.fix) {
				t.Errorf("fix = %q, want %q", fix, tt.fix)
			}
			if tt.notInFx != "" && strings.Contains(fix, tt.notInFx) {
				t.Errorf("fix = %q, must not contain %q", fix, tt.notInFx)
			}
		})
	}
}

// TestImmutableTemplatesGetNoInPlaceEdit: a Job's template cannot change, so no fix edits it.
func TestImmutableTemplatesGetNoInPlaceEdit(t *testing.T) {
	job := testJob(nil)
	job.Job.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
	job.Job.Spec.Parallelism = new(int32)
	*job.Job.Spec.Parallelism = 1
	job.Events = map[types.UID][]Event{"uid-job": {failedCreate(`pods "migrate-" is forbidden: error looking up service account shop/runnr: serviceaccount "runnr" not found`, 3, time.Minute)}}
	job.ServiceAccountNames = []string{"runner"}
	p := EvaluateWorkload(job).Primary()
	for _, l := range p.Fix {
		if strings.HasPrefix(l, "kubectl set ") && strings.Contains(l, "job/") {
			t.Errorf("fix edits the immutable template of a Job: %q", l)
		}
	}
	if fix := strings.Join(p.Fix, "\n"); !strings.Contains(fix, "kubectl create serviceaccount -n shop runnr") || !strings.Contains(fix, "immutable") {
		t.Errorf("fix = %q, want the ServiceAccount created and the template's immutability named", fix)
	}
	for _, tt := range []struct{ pod *corev1.Pod }{{func() *corev1.Pod {
		p := testPod(pending("ImagePullBackOff", `Back-off pulling image "x"`))
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "report-29146440", Controller: isTrue()}}
		return p
	}()}} {
		if got := setImageTo(tt.pod, "app", "x:2"); strings.HasPrefix(got, "kubectl") || !strings.Contains(got, "CronJob report") {
			t.Errorf("setImageTo on a Job's pod = %q, want no kubectl set image and the CronJob named", got)
		}
	}
}
