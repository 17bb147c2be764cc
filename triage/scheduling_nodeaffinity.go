package triage

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file is the NodeAffinity filter: the pod's nodeSelector and required node affinity
// must match the node's labels (a DaemonSet pod's affinity names its one node).

// affinityReasons reports a node that the pod's nodeSelector or required node affinity
// rejects, naming the nodeSelector labels the node lacks.
func affinityReasons(d *demand, n *corev1.Node, _ *cluster) []NodeReason {
	if ok, _ := d.affinity.Match(n); ok {
		return nil
	}
	var missing []string
	for _, k := range sortedKeys(d.pod.Spec.NodeSelector) {
		want := d.pod.Spec.NodeSelector[k]
		if have, ok := n.Labels[k]; !ok {
			missing = append(missing, fmt.Sprintf("nodeSelector %s=%s (node has no %s label)", k, want, k))
		} else if have != want {
			missing = append(missing, fmt.Sprintf("nodeSelector %s=%s (node has %s=%s)", k, want, k, have))
		}
	}
	if len(missing) == 0 {
		return []NodeReason{{Code: CodeNodeSelectorMismatch, Message: "required node affinity does not match the node's labels"}}
	}
	return []NodeReason{{Code: CodeNodeSelectorMismatch, Message: strings.Join(missing, "; ")}}
}

// pinnedNode returns the one node pod's required node affinity allows by name, "" when there
// is none: the DaemonSet controller pins each of its pods to its node with a matchFields term
// on metadata.name (and a pod may be written that way by hand). Such a pod can only ever run
// there, so every fix is about that node.
func pinnedNode(pod *corev1.Pod) string {
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 {
		return ""
	}
	for _, f := range terms[0].MatchFields {
		if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
			return f.Values[0]
		}
	}
	return ""
}

// describeSelector explains a nodeSelector / required node affinity that matches no node.
func (v *schedulingView) describeSelector(f *Finding) {
	nodes, reasons := v.nodesWith(CodeNodeSelectorMismatch)
	// Whether the selector matches a node is a fact about every node, also those an earlier
	// filter rejects first; the scheduler's count is said next to it.
	all := nodes
	if v.pinned == "" {
		all = v.nodesWithAnywhere(CodeNodeSelectorMismatch)
	}
	counted := ""
	if earlier := len(all) - len(nodes); earlier > 0 {
		counted = fmt.Sprintf(" (the scheduler counts %d of them under an earlier filter's reason)", earlier)
	}
	ns, pod := v.pod.Namespace, v.pod.Name
	sel := v.pod.Spec.NodeSelector
	if len(sel) > 0 {
		var pairs []string
		for _, k := range sortedKeys(sel) {
			pairs = append(pairs, k+"="+sel[k])
		}
		f.Summary = fmt.Sprintf("The pod's nodeSelector %s %s%s", strings.Join(pairs, ","), v.matchesNone(len(all)), counted)
		if len(nodes) > 0 && len(reasons[nodes[0]]) > 0 {
			f.Summary += ": e.g. " + nodes[0] + ": " + reasons[nodes[0]][0].Message
		}
		f.Summary += "."
		keys := strings.Join(sortedKeys(sel), ",")
		f.Fix = []string{
			fmt.Sprintf("kubectl get nodes -L %s", shellQuote(keys)),
			fmt.Sprintf("Fix spec.nodeSelector of pod %s/%s (or its workload) to labels the nodes carry.", ns, pod),
		}
		// Only labels a person may add: missing on the node, and not in a namespace Kubernetes
		// or the cloud provider owns (arch, os, zone, instance type, role), where a new value
		// would lie about the node.
		var labelable []string
		for _, name := range nodes {
			if n := v.cluster.nodeByName[name]; n != nil && len(missingLabels(n, sel)) > 0 && !changesLabels(n, sel) {
				labelable = append(labelable, name)
			}
		}
		var owned []string
		for _, k := range sortedKeys(sel) {
			if reservedLabel(k) {
				owned = append(owned, k)
			}
		}
		if len(owned) > 0 {
			f.Fix = append(f.Fix, fmt.Sprintf("%s %s set by Kubernetes or the cloud provider from what the node is: change the selector, never the nodes' labels.",
				strings.Join(owned, ", "), plural(len(owned), "is", "are")))
		}
		helped := v.tryFix(labelable, func(n *corev1.Node) {
			for k, val := range missingLabels(n, sel) {
				n.Labels[k] = val
			}
		}).helped
		if len(helped) > 0 {
			// Labelling a node is the other way out: the selector's fix says it is one of two.
			f.Fix[1] = "Either " + lowerFirst(f.Fix[1])
		}
		for i, n := range helped {
			if i == 0 {
				f.Fix = append(f.Fix, fmt.Sprintf("Or, if %s is meant for this pod, label it (the pod fits there otherwise):", joinLimited(helped, 3)))
			}
			if i == 3 {
				break
			}
			var labels []string
			for _, k := range sortedKeys(missingLabels(v.cluster.nodeByName[n], sel)) {
				labels = append(labels, shellQuote(k+"="+sel[k]))
			}
			f.Fix = append(f.Fix, fmt.Sprintf("kubectl label node %s %s", shellQuote(n), strings.Join(labels, " ")))
		}
	} else {
		f.Summary = fmt.Sprintf("The pod's required node affinity %s%s.", v.matchesNone(len(all)), counted)
		f.Fix = []string{
			fmt.Sprintf("kubectl get pod -n %s %s -o jsonpath='{.spec.affinity.nodeAffinity}'", shellQuote(ns), shellQuote(pod)),
			"kubectl get nodes --show-labels",
		}
	}
	v.nodeEvidence(f, nodes, reasons, "metadata.labels")
}

// missingLabels returns the labels of sel the node lacks (key absent).
func missingLabels(n *corev1.Node, sel map[string]string) map[string]string {
	out := map[string]string{}
	for k, val := range sel {
		if _, has := n.Labels[k]; !has {
			out[k] = val
		}
	}
	return out
}

// changesLabels reports whether matching sel would change a label the node already has, or
// add one in a namespace Kubernetes or the cloud provider owns: a fix that would falsify what
// the node is.
func changesLabels(n *corev1.Node, sel map[string]string) bool {
	for k, val := range sel {
		if have, has := n.Labels[k]; (has && have != val) || (!has && reservedLabel(k)) {
			return true
		}
	}
	return false
}

// reservedLabel reports whether a label key is in a namespace that Kubernetes, the kubelet or
// the cloud provider owns (kubernetes.io/arch, topology.kubernetes.io/zone,
// node-role.kubernetes.io/…, node.kubernetes.io/instance-type, *.k8s.io/…), except
// node-restriction.kubernetes.io/, which is meant for administrators.
func reservedLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	if prefix == "node-restriction.kubernetes.io" {
		return false // the namespace meant for labels administrators set on nodes
	}
	for _, domain := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return false
}
