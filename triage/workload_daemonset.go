package triage

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// This file explains a DaemonSet that does not run on every node. The DaemonSet controller
// creates one pod per node that passes the template's node selector, required node affinity
// and NoSchedule/NoExecute taints (with the tolerations every daemon pod gets); the
// kube-scheduler then places it. So a node without a daemon pod is either one the controller
// skips by the DaemonSet's own rules, or one whose pod cannot be scheduled (or was never
// created).

// daemonSetRules reports daemonset-unplaced: a blocker naming every node the DaemonSet wants
// but has no scheduled pod on (with the pod's own reason from its diagnosis), and as context the
// nodes its rules skip (a taint it does not tolerate, a selector the node does not match).
func daemonSetRules(v *workloadView) []Finding {
	ds := v.ws.DaemonSet
	if ds == nil || v.ws.NodesErr != nil || len(v.ws.Nodes) == 0 {
		return nil
	}
	ref := v.ws.Ref()
	spec := ds.Spec.Template.Spec
	tolerations := daemonTolerations(spec)
	affinity := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec})
	pods := map[string][]*corev1.Pod{}
	for _, p := range v.ws.Pods {
		if n := daemonPodNode(p); n != "" {
			pods[n] = append(pods[n], p)
		}
	}
	var unplaced, skipped []NodeVerdict
	var fix []string
	var tolerate []corev1.Taint
	for _, n := range v.ws.Nodes {
		switch {
		case spec.NodeName != "" && spec.NodeName != n.Name:
			skipped = append(skipped, NodeVerdict{Node: n.Name, Reasons: []NodeReason{{Code: CodeNodeSelectorMismatch, Message: "the template's spec.nodeName is " + spec.NodeName}}})
			continue
		}
		if ok, _ := affinity.Match(n); !ok {
			skipped = append(skipped, NodeVerdict{Node: n.Name, Reasons: []NodeReason{{Code: CodeNodeSelectorMismatch, Message: "does not match the template's nodeSelector or required node affinity"}}})
			continue
		}
		if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); untolerated {
			skipped = append(skipped, NodeVerdict{Node: n.Name, Reasons: []NodeReason{{Code: CodeUntoleratedTaint, Message: "taint " + taintString(&t) + " is not tolerated"}}})
			tolerate = append(tolerate, t)
			continue
		}
		placed, row := false, NodeVerdict{Node: n.Name}
		for _, p := range pods[n.Name] {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		if len(pods[n.Name]) == 0 {
			row.Reasons = []NodeReason{{Code: CodeUnknown, Message: "no daemon pod exists for this node (see the controller's events)"}}
		}
		for _, p := range pods[n.Name] {
			row.Reasons = append(row.Reasons, v.unplacedReasons(p, n.Name)...)
			if d := v.diagnoses[p.UID]; d != nil && len(fix) == 0 {
				fix = d.Primary().Fix
			}
		}
		unplaced = append(unplaced, row)
	}
	total := len(v.ws.Nodes)
	if len(unplaced) > 0 {
		f := Finding{
			Code:     CodeDaemonSetUnplaced,
			Severity: SeverityBlocker,
			Summary:  fmt.Sprintf("%s cannot place pods on %d of the %d nodes it should run on: %s.", ref, len(unplaced), total-len(skipped), describeRows(unplaced, 4)),
			Nodes:    append(unplaced, skipped...),
			Evidence: []Evidence{{Object: ref.String(), Field: "status", Message: workloadStatusLine(v.ws)}},
		}
		if len(skipped) > 0 {
			f.Summary += fmt.Sprintf(" Its own rules skip %d more: %s.", len(skipped), describeRows(skipped, 3))
		}
		// Its pods and where they are first, then the stuck pod's own fix, then the tolerations.
		f.Fix = append([]string{fmt.Sprintf("kubectl get pods -n %s -o wide -l %s", shellQuote(ref.Namespace), shellQuote(selectorString(ds.Spec.Selector)))}, fix...)
		f.Fix = append(f.Fix, tolerationFixes(ref, tolerate, len(spec.Tolerations) > 0)...)
		return []Finding{f}
	}
	if len(skipped) == 0 {
		return nil
	}
	if len(skipped) == total {
		// desiredNumberScheduled is 0 although nodes exist: the DaemonSet runs nowhere. That
		// is never "scaled to zero" (a DaemonSet has no replicas), so say which rule rejects
		// each node.
		f := Finding{
			Code:     CodeDaemonSetUnplaced,
			Severity: SeverityBlocker,
			Summary:  fmt.Sprintf("%s runs on none of the %d nodes: its own rules reject every one: %s.", ref, total, describeRows(skipped, 4)),
			Nodes:    skipped,
			Evidence: []Evidence{{Object: ref.String(), Field: "status", Message: workloadStatusLine(v.ws)}},
		}
		if len(tolerate) < total {
			// Reads first: what the nodes carry against what the template asks for.
			f.Fix = append(f.Fix,
				"kubectl get nodes --show-labels  # compare with the template's nodeSelector and required node affinity",
				fmt.Sprintf("kubectl get daemonset -n %s %s -o jsonpath='{.spec.template.spec.nodeSelector}{\"\\n\"}{.spec.template.spec.affinity.nodeAffinity}'", shellQuote(ref.Namespace), shellQuote(ref.Name)),
			)
		}
		f.Fix = append(f.Fix, tolerationFixes(ref, tolerate, len(spec.Tolerations) > 0)...)
		return []Finding{f}
	}
	f := Finding{
		Code:     CodeDaemonSetUnplaced,
		Severity: SeverityInfo,
		Summary:  fmt.Sprintf("%s runs on %d of %d nodes by its own rules; it skips %s.", ref, total-len(skipped), total, describeRows(skipped, 4)),
		Nodes:    skipped,
		Evidence: []Evidence{{Object: ref.String(), Field: "status", Message: workloadStatusLine(v.ws)}},
	}
	f.Fix = append(f.Fix, tolerationFixes(ref, tolerate, len(spec.Tolerations) > 0)...)
	return []Finding{f}
}

// unplacedReasons says why daemon pod p is not on node: its diagnosis's verdict for that node
// when it was read in full, else its state and code.
func (v *workloadView) unplacedReasons(p *corev1.Pod, node string) []NodeReason {
	code := v.codes[p.UID]
	if d := v.diagnoses[p.UID]; d != nil {
		for _, nv := range d.Primary().Nodes {
			if nv.Node == node && len(nv.Reasons) > 0 {
				out := make([]NodeReason, len(nv.Reasons))
				copy(out, nv.Reasons)
				for i := range out {
					out[i].Message = fmt.Sprintf("pod %s: %s", p.Name, out[i].Message)
				}
				return out
			}
		}
	}
	if code == "" {
		code = CodeUnknown
	}
	return []NodeReason{{Code: code, Message: fmt.Sprintf("pod %s is %s: %s", p.Name, PodState(p), code)}}
}

// describeRows renders up to n rows as "node-4 (reason; reason)", then "and N more".
func describeRows(rows []NodeVerdict, n int) string {
	var parts []string
	for i, r := range rows {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(rows)-n))
			break
		}
		var reasons []string
		for _, x := range r.Reasons {
			reasons = append(reasons, x.Message)
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", r.Node, strings.Join(reasons, "; ")))
	}
	return strings.Join(parts, ", ")
}

// daemonPodNode is the node a daemon pod is for: spec.nodeName once bound, else the node its
// required node affinity pins it to (the controller sets a matchFields term on metadata.name).
func daemonPodNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// daemonTolerations are the template's tolerations plus the ones the DaemonSet controller adds
// to every daemon pod (AddOrUpdateDaemonPodTolerations in kube-controller-manager): not-ready
// and unreachable (NoExecute), disk-, memory- and pid-pressure and unschedulable
// (NoSchedule), and network-unavailable for host-network pods.
func daemonTolerations(spec corev1.PodSpec) []corev1.Toleration {
	out := append([]corev1.Toleration(nil), spec.Tolerations...)
	add := func(key string, effect corev1.TaintEffect) {
		out = append(out, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect})
	}
	add(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)
	add(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	add(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)
	add(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule)
	add(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule)
	add(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)
	if spec.HostNetwork {
		add(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)
	}
	return out
}

// tolerationFixes returns, per distinct taint, the patch that adds a toleration for it to the
// DaemonSet's template (appended to its tolerations, or as the first when it has none), to run
// only if the DaemonSet should run on those nodes.
func tolerationFixes(ref WorkloadRef, taints []corev1.Taint, hasTolerations bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range taints {
		ts := taintString(&t)
		if seen[ts] {
			continue
		}
		seen[ts] = true
		tol := corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpExists, Effect: t.Effect}
		if t.Value != "" {
			tol.Operator, tol.Value = corev1.TolerationOpEqual, t.Value
		}
		op := map[string]any{"op": "add", "path": "/spec/template/spec/tolerations/-", "value": tol}
		if !hasTolerations {
			op["path"], op["value"] = "/spec/template/spec/tolerations", []corev1.Toleration{tol}
		}
		patch, _ := json.Marshal([]map[string]any{op})
		out = append(out, fmt.Sprintf("kubectl patch daemonset -n %s %s --type=json -p %s  # only if it should run on the nodes tainted %s",
			shellQuote(ref.Namespace), shellQuote(ref.Name), shellQuote(string(patch)), ts))
	}
	return out
}
