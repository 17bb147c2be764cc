package triage

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// This file is the NodeUnschedulable filter: a cordoned node (spec.unschedulable) takes no new
// pods unless they tolerate its node.kubernetes.io/unschedulable taint.

// unschedulableTaintKey is the taint the node lifecycle controller adds to a cordoned node.
const unschedulableTaintKey = "node.kubernetes.io/unschedulable"

// cordonReasons reports a cordoned node (spec.unschedulable) unless the pod tolerates the
// node.kubernetes.io/unschedulable taint, as the NodeUnschedulable plugin does.
func cordonReasons(d *demand, n *corev1.Node, _ *cluster) []NodeReason {
	if !n.Spec.Unschedulable {
		return nil
	}
	taint := &corev1.Taint{Key: unschedulableTaintKey, Effect: corev1.TaintEffectNoSchedule}
	if corev1helpers.TolerationsTolerateTaint(klog.Background(), d.pod.Spec.Tolerations, taint, false) {
		return nil
	}
	return []NodeReason{{Code: CodeNodeUnschedulable, Message: "cordoned (spec.unschedulable)"}}
}

// describeCordoned names the cordoned nodes.
func (v *schedulingView) describeCordoned(f *Finding) {
	nodes, reasons := v.nodesWith(CodeNodeUnschedulable)
	f.Summary = fmt.Sprintf("%s cordoned (spec.unschedulable): %s.", v.nodesVerb(len(nodes), "is", "are"), joinLimited(nodes, 5))
	v.nodeEvidence(f, nodes, reasons, "spec.unschedulable")
	// Uncordoning also lifts the node.kubernetes.io/unschedulable taint the node lifecycle
	// controller keeps on a cordoned node.
	res := v.tryFix(nodes, func(n *corev1.Node) {
		n.Spec.Unschedulable = false
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == unschedulableTaintKey })
	})
	if len(res.helped) > 0 {
		// Whether its maintenance is over is for whoever cordoned it: look before uncordoning.
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl describe node %s   # Taints and Events: who cordoned it and why (a drain, an upgrade, an autoscaler's scale-down)", shellQuote(res.helped[0])))
	}
	for _, n := range res.helped {
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl uncordon %s   # if its maintenance is over; the pod fits there otherwise", shellQuote(n)))
	}
	switch {
	case res.unsure != "":
		f.Fix = append(f.Fix, fmt.Sprintf("Whether uncordoning would place the pod cannot be told: %s.", res.unsure))
	case len(res.helped) == 0:
		f.Fix = append(f.Fix, fmt.Sprintf("Uncordoning %s alone would not place the pod: they would still reject it for %s.", joinLimited(nodes, 3), strings.Join(res.left, ", ")))
	}
}
