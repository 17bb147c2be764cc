package triage

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// This file holds what the admission refusals of workload_create.go share beyond parsing the
// message: OpenShift's SecurityContextConstraints refusal, parts of the pod that a mutating
// webhook (a sidecar injector) added and the template lacks, system daemons (CSI and CNI node
// plugins) that need the privileges Pod Security refuses, and a fail-closed webhook that refuses
// the pods of its own backend (a deadlock).

// sccMarker is OpenShift's SecurityContextConstraints admission error.
const sccMarker = "unable to validate against any security context constraint"

// sccProblem is one SCC's verdict in an SCC refusal: not usable by the pods' ServiceAccount, or
// the fields it rejects.
type sccProblem struct {
	scc      string
	unusable bool
	fields   []string // ".containers[0].runAsUser: Invalid value: 0: must be in the ranges: [1000680000, 1000689999]"
}

// reSCCProvider matches an item's provider prefix: `provider "anyuid": …`, `provider restricted-v2: …`.
var reSCCProvider = regexp.MustCompile(`^provider "?([A-Za-z0-9_.-]+)"?: (.*)$`)

// parseSCC reads the list in brackets after sccMarker into each SCC's verdict, in order.
func parseSCC(msg string) []sccProblem {
	i := strings.Index(msg, sccMarker)
	if i < 0 {
		return nil
	}
	rest := strings.TrimSpace(msg[i+len(sccMarker):])
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, ":"), " ")
	rest = strings.TrimSuffix(strings.TrimPrefix(rest, "["), "]")
	var out []sccProblem
	for _, item := range splitTopLevel(rest) {
		if m := reSCCProvider.FindStringSubmatch(item); m != nil {
			p := sccProblem{scc: m[1]}
			if strings.Contains(m[2], "not usable by user or serviceaccount") {
				p.unusable = true
			} else {
				p.fields = append(p.fields, m[2])
			}
			out = append(out, p)
			continue
		}
		if len(out) > 0 && item != "" {
			out[len(out)-1].fields = append(out[len(out)-1].fields, item)
		}
	}
	return out
}

// reSCCField reads a rejected field: "spec.containers[0].securityContext.runAsUser: Invalid
// value: 0: must be in the ranges: […]" (older releases start at ".containers[0]…").
var reSCCField = regexp.MustCompile(`^(?:spec)?\.?((?:initContainers|containers)\[(\d+)\]\.([A-Za-z.]+)|[A-Za-z.\[\]0-9]+): Invalid value: ([^:]+): (.*)$`)

// sccFor names the SCC that allows a field OpenShift's restricted SCC rejects.
func sccFor(field string) string {
	switch {
	case containsAny(field, "runAsUser", "runAsNonRoot", "fsGroup", "supplementalGroups"):
		return "anyuid"
	case containsAny(field, "hostNetwork", "hostPort"):
		return "hostnetwork-v2"
	case containsAny(field, "hostPath"):
		return "hostmount-anyuid"
	}
	return "privileged"
}

// sccFinding explains openshift-scc-denied: for each SCC, whether the pods' ServiceAccount may
// use it and which field it rejects, and fixes the field first (the policy change second).
func sccFinding(ws *WorkloadSnapshot, c creator, msg string) Finding {
	f := Finding{Code: CodeOpenShiftSCCDenied}
	ns := c.ref.Namespace
	spec := ws.podTemplate()
	sa := "default"
	if spec != nil {
		sa = serviceAccountOf(*spec)
	}
	probs := parseSCC(msg)
	var unusable, rejecting []string
	var fieldFixes, grants []string
	for _, p := range probs {
		if p.unusable {
			unusable = append(unusable, p.scc)
			continue
		}
		var fields []string
		for _, fe := range p.fields {
			m := reSCCField.FindStringSubmatch(fe)
			if m == nil {
				fields = append(fields, fe)
				continue
			}
			path, value, why := m[1], strings.TrimSpace(m[4]), strings.TrimSuffix(strings.TrimSpace(m[5]), ",")
			what := path + "=" + value
			if m[2] != "" && spec != nil {
				list := spec.Containers
				if strings.HasPrefix(path, "initContainers") {
					list = spec.InitContainers
				}
				if i := atoi(m[2]); i >= 0 && i < len(list) {
					what = fmt.Sprintf("%s=%s on container %q", m[3], value, list[i].Name)
				}
			}
			fields = append(fields, fmt.Sprintf("%s (%s)", what, why))
			fix := fmt.Sprintf("In the pod template, remove or change %s so SCC %s admits it (%s).", what, p.scc, why)
			if !slices.Contains(fieldFixes, fix) {
				fieldFixes = append(fieldFixes, fix)
			}
			if g := sccFor(path); !slices.Contains(grants, g) {
				grants = append(grants, g)
			}
		}
		rejecting = append(rejecting, fmt.Sprintf("%s rejects %s", p.scc, strings.Join(fields, ", ")))
	}
	f.Summary = fmt.Sprintf("%s cannot create %s: no OpenShift SecurityContextConstraints that ServiceAccount %s may use admits them", c.ref, c.what(), sa)
	if len(rejecting) > 0 {
		f.Summary += ": " + strings.Join(rejecting, "; ")
	}
	f.Summary += "."
	if len(unusable) > 0 {
		f.Summary += fmt.Sprintf(" %s %s not usable by the ServiceAccount.", joinLimited(unusable, 4), plural(len(unusable), "is", "are"))
	}
	f.Fix = append(f.Fix, fieldFixes...)
	for _, g := range grants {
		f.Fix = append(f.Fix, fmt.Sprintf("Policy change, for the owner of namespace %s to decide, only if the workload really needs it:", ns),
			fmt.Sprintf("oc adm policy add-scc-to-user %s -z %s -n %s", g, shellQuote(sa), shellQuote(ns)))
	}
	if len(fieldFixes) == 0 && len(grants) == 0 {
		f.Uncertain = true
		f.Fix = append(f.Fix, "oc describe scc   # what each SCC allows; the refusal above did not name a field to change")
	}
	return f
}

// atoi parses a small non-negative decimal (the index in "containers[2]"); -1 when it is not one.
func atoi(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return -1
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// reNamedParts matches the containers and volumes an admission message names:
// `container "istio-proxy"`, `containers "app", "istio-proxy"`, `volumes "istio-envoy", "x"`.
var reNamedParts = regexp.MustCompile(`\b(containers?|volumes?) ((?:"[^"]+"(?:, )?)+)`)

// injectedParts returns the containers and volumes an admission message names that the
// workload's pod template does not have: a mutating webhook (a sidecar injector) added them
// to the pod after the template.
func injectedParts(ws *WorkloadSnapshot, msg string) (containers, volumes []string) {
	spec := ws.podTemplate()
	if spec == nil || len(spec.Containers) == 0 {
		return nil, nil // no template read to compare with
	}
	var have, haveVol []string
	for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		have = append(have, c.Name)
	}
	for _, v := range spec.Volumes {
		haveVol = append(haveVol, v.Name)
	}
	for _, m := range reNamedParts.FindAllStringSubmatch(msg, -1) {
		for _, q := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(m[2], -1) {
			name := q[1]
			switch {
			case strings.HasPrefix(m[1], "container") && !slices.Contains(have, name) && !slices.Contains(containers, name):
				containers = append(containers, name)
			case strings.HasPrefix(m[1], "volume") && !slices.Contains(haveVol, name) && !slices.Contains(volumes, name):
				volumes = append(volumes, name)
			}
		}
	}
	return containers, volumes
}

// injector names the mutating webhook that adds a sidecar of that name, and where its
// resources and security settings are configured; "" when the name is not a known one.
func injector(container string) (who, configure string) {
	switch {
	case strings.HasPrefix(container, "istio-"):
		return "Istio's sidecar injector", `the pod template's sidecar.istio.io/proxyCPU, proxyCPULimit, proxyMemory and proxyMemoryLimit annotations, or the mesh's global proxy settings; label the template sidecar.istio.io/inject: "false" to keep the workload out of the mesh`
	case strings.HasPrefix(container, "linkerd-"):
		return "Linkerd's proxy injector", `the config.linkerd.io/proxy-cpu-request, proxy-cpu-limit, proxy-memory-request and proxy-memory-limit annotations; linkerd.io/inject: disabled keeps the workload out`
	case strings.HasPrefix(container, "vault-agent"):
		return "the Vault agent injector", "the vault.hashicorp.com/agent-requests-cpu, agent-limits-cpu, agent-requests-mem and agent-limits-mem annotations"
	case container == "daprd":
		return "Dapr's sidecar injector", "the dapr.io/sidecar-cpu-request, sidecar-cpu-limit, sidecar-memory-request and sidecar-memory-limit annotations"
	case strings.HasPrefix(container, "kuma-"):
		return "Kuma's sidecar injector", "the kuma.io/sidecar-* annotations or the mesh's sidecar settings"
	}
	return "", ""
}

// injectedNote says that the refused parts were added by a mutating webhook, not the template,
// and where to change them instead; "" when the message names only the template's own parts.
func injectedNote(ws *WorkloadSnapshot, msg string) (summary string, fix []string) {
	containers, volumes := injectedParts(ws, msg)
	if len(containers)+len(volumes) == 0 {
		return "", nil
	}
	var parts []string
	if len(containers) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s", plural(len(containers), "container", "containers"), strings.Join(quoteAll(containers), ", ")))
	}
	if len(volumes) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s", plural(len(volumes), "volume", "volumes"), strings.Join(quoteAll(volumes), ", ")))
	}
	who := "a mutating admission webhook (a sidecar injector)"
	configure := "the injector's own settings (its annotations on the pod template, or its global configuration)"
	for _, c := range containers {
		if w, conf := injector(c); w != "" {
			who, configure = w, conf
			break
		}
	}
	n := len(containers) + len(volumes)
	summary = fmt.Sprintf(" The refused %s %s not in the pod template: %s added %s to the pod before this check, so editing the template's own containers will not change %s.", strings.Join(parts, " and "), plural(n, "is", "are"), who, plural(n, "it", "them"), plural(n, "it", "them"))
	fix = []string{
		"kubectl get mutatingwebhookconfigurations   # the injectors that modify pods at admission",
		fmt.Sprintf("Change the injected parts where %s takes them from: %s.", who, configure),
	}
	return summary, fix
}

// quoteAll quotes each name.
func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

// systemDaemon reports whether the workload is a node-level system daemon (a CSI or CNI node
// plugin, a node agent) that needs host privileges to work: a DaemonSet whose template mounts
// the kubelet's, CNI's or device directories, runs a CSI node-driver-registrar, or is
// privileged on the host network. Pod Security refusals of such pods are fixed with the
// namespace's level, never by removing what the daemon needs.
func systemDaemon(ws *WorkloadSnapshot) bool {
	if ws.DaemonSet == nil {
		return false
	}
	spec := ws.DaemonSet.Spec.Template.Spec
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		for _, p := range []string{"/var/lib/kubelet", "/etc/cni", "/opt/cni", "/run/containerd", "/var/run/containerd", "/dev", "/sys", "/lib/modules", "/var/lib/calico", "/run/xtables.lock"} {
			if v.HostPath.Path == p || strings.HasPrefix(v.HostPath.Path, p+"/") {
				return true
			}
		}
	}
	for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		if strings.Contains(c.Image, "csi-node-driver-registrar") {
			return true
		}
		if spec.HostNetwork && c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return true
		}
	}
	return false
}

// reWebhookService reads the Service a webhook call went to: the URL host
// "NAME.NAMESPACE.svc" or `no endpoints available for service "NAME"`.
var (
	reWebhookURLService = regexp.MustCompile(`https://([a-z0-9-]+)\.([a-z0-9-]+)\.svc(?:\.cluster\.local)?(?::\d+)?/`)
	reNoEndpoints       = regexp.MustCompile(`no endpoints available for service "([^"]+)"`)
)

// webhookService returns "namespace/name" of the Service a failed webhook call went to, or "".
func webhookService(msg string) string {
	if m := reWebhookURLService.FindStringSubmatch(msg); m != nil {
		return m[2] + "/" + m[1]
	}
	return ""
}

// NeedsWebhookServices returns "namespace/name" of the Services behind the webhooks that the
// workload's current FailedCreate errors say could not be called, for the Collector to read into
// WorkloadSnapshot.WebhookServices (is the refused workload the webhook's own backend?).
func NeedsWebhookServices(ws *WorkloadSnapshot) []string {
	var out []string
	for _, c := range ws.creators() {
		msg, _, current := creationFailure(ws, c)
		if !current || !webhookCallRE.MatchString(msg) {
			continue
		}
		if svc := webhookService(msg); svc != "" && !slices.Contains(out, svc) {
			out = append(out, svc)
		}
	}
	return out
}

// webhookDeadlock reports whether the workload's pods are the backend of the webhook that
// cannot be called: its Service (read into WebhookServices) is in the workload's namespace and
// selects the workload's pod template. known is false when the Service was not read.
func webhookDeadlock(ws *WorkloadSnapshot, msg string) (svc string, deadlock, known bool) {
	svc = webhookService(msg)
	if svc == "" {
		return "", false, false
	}
	ns, _, _ := strings.Cut(svc, "/")
	s, read := ws.WebhookServices[svc]
	if !read {
		return svc, false, false
	}
	if s == nil || ns != ws.Ref().Namespace || len(s.Spec.Selector) == 0 {
		return svc, false, true
	}
	tmpl := ws.podTemplateLabels()
	return svc, labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(tmpl)), true
}

// podTemplateLabels returns the labels of the workload's pod template.
func (ws *WorkloadSnapshot) podTemplateLabels() map[string]string {
	switch {
	case ws.Deployment != nil:
		return ws.Deployment.Spec.Template.Labels
	case ws.ReplicaSet != nil:
		return ws.ReplicaSet.Spec.Template.Labels
	case ws.StatefulSet != nil:
		return ws.StatefulSet.Spec.Template.Labels
	case ws.DaemonSet != nil:
		return ws.DaemonSet.Spec.Template.Labels
	case ws.Job != nil:
		return ws.Job.Spec.Template.Labels
	case ws.CronJob != nil:
		return ws.CronJob.Spec.JobTemplate.Spec.Template.Labels
	}
	return nil
}
