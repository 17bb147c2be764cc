package triage

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// This file is the TaintToleration filter: a NoSchedule or NoExecute taint the pod does not
// tolerate keeps it off the node. Its prose tells taints apart by owner: a controller's taint
// (fix the node), a control-plane or system taint (leave it), and an operator's own taint.

// isSystemTaint reports whether a taint key keeps ordinary workloads off control-plane or
// system nodes on purpose: node-role.kubernetes.io/* (control-plane, master, infra, …) and
// CriticalAddonsOnly (system node pools on AKS, EKS, GKE and kops). Removing such a taint to
// place a workload is never the fix.
func isSystemTaint(key string) bool {
	return strings.HasPrefix(key, "node-role.kubernetes.io/") || key == "CriticalAddonsOnly"
}

// isLifecycleTaint reports whether a taint key is set and cleared by a controller from the
// node's condition or lifecycle (not-ready, unreachable, pressure, cloud initialisation,
// autoscaler scale-down): the fix is the node, never removing the taint.
func isLifecycleTaint(key string) bool {
	return strings.HasPrefix(key, "node.kubernetes.io/") ||
		strings.HasPrefix(key, "node.cloudprovider.kubernetes.io/") ||
		strings.HasPrefix(key, "node.cluster.x-k8s.io/") ||
		strings.HasPrefix(key, "karpenter.sh/") ||
		key == "ToBeDeletedByClusterAutoscaler" || key == "DeletionCandidateOfClusterAutoscaler"
}

// taintKeyOf returns the taint key of an untolerated-taint reason ("taint key=value:Effect").
func taintKeyOf(r NodeReason) string {
	key, _ := taintKeyEffect(strings.TrimPrefix(r.Message, "taint "))
	return key
}

// tolerationReasons judges n like the TaintToleration filter (taintReasons), then adds the
// node's Ready condition as context (readyReasons): the scheduler sees a NotReady node only
// through the not-ready and unreachable taints the node lifecycle controller adds.
func tolerationReasons(d *demand, n *corev1.Node, _ *cluster) []NodeReason {
	return append(taintReasons(d, n), readyReasons(n)...)
}

// taintReasons reports every NoSchedule and NoExecute taint of n that the pod does not
// tolerate, one reason per taint (the scheduler names only the first). The unschedulable taint
// of a cordoned node is left to cordonReasons.
func taintReasons(d *demand, n *corev1.Node) []NodeReason {
	var out []NodeReason
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if t.Key == unschedulableTaintKey && n.Spec.Unschedulable {
			continue
		}
		if corev1helpers.TolerationsTolerateTaint(klog.Background(), d.pod.Spec.Tolerations, t, false) {
			continue
		}
		out = append(out, NodeReason{Code: CodeUntoleratedTaint, Message: "taint " + taintString(t)})
	}
	return out
}

// taintString renders a taint as kubectl does: key=value:Effect, or key:Effect.
func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// readyReasons reports a node whose Ready condition is not True. The scheduler itself only
// sees the not-ready/unreachable taints the node lifecycle controller adds, so this reason is
// context (CodeNodeNotReady) that never decides the primary code on its own.
func readyReasons(n *corev1.Node) []NodeReason {
	for _, cond := range n.Status.Conditions {
		if cond.Type != corev1.NodeReady {
			continue
		}
		if cond.Status == corev1.ConditionTrue {
			return nil
		}
		msg := "NotReady"
		if cond.Status == corev1.ConditionUnknown {
			msg = "NotReady (status Unknown: the kubelet stopped posting status)"
		} else if cond.Message != "" {
			msg = "NotReady: " + cond.Message
		}
		return []NodeReason{{Code: CodeNodeNotReady, Message: msg}}
	}
	return []NodeReason{{Code: CodeNodeNotReady, Message: "NotReady (no Ready condition)"}}
}

// describeTaints groups the untolerated taints by taint and names the nodes of each.
func (v *schedulingView) describeTaints(f *Finding) {
	nodes, reasons := v.nodesWith(CodeUntoleratedTaint)
	byTaint := map[string][]string{}
	for _, n := range nodes {
		for _, r := range reasons[n] {
			taint := strings.TrimPrefix(r.Message, "taint ")
			byTaint[taint] = append(byTaint[taint], n)
		}
	}
	taints := sortedKeys(byTaint)
	var parts []string
	for _, t := range taints {
		parts = append(parts, fmt.Sprintf("%s on %s", t, joinLimited(byTaint[t], 3)))
	}
	f.Summary = fmt.Sprintf("%s a taint the pod does not tolerate: %s.", v.nodesVerb(len(nodes), "has", "have"), strings.Join(parts, "; "))
	notReady := 0
	for _, nv := range v.verdicts {
		for _, r := range nv.Reasons {
			if r.Code == CodeNodeNotReady {
				notReady++
				break
			}
		}
	}
	if notReady == len(v.verdicts) {
		f.Summary += fmt.Sprintf(" None of the %d nodes is Ready, so no node can take pods until the nodes recover.", len(v.verdicts))
	}
	v.nodeEvidence(f, nodes, reasons, "spec.taints")
	for _, t := range taints {
		key, effect := taintKeyEffect(t)
		tainted := byTaint[t]
		first := tainted[0]
		toleration := fmt.Sprintf("{key: %s, operator: Exists, effect: %s}", key, effect)
		switch {
		case isLifecycleTaint(key):
			f.Fix = append(f.Fix, fmt.Sprintf("kubectl describe node %s   # %s is set by a controller from the node's state: fix the node (kubelet, runtime, CNI, disk or memory pressure), don't remove the taint", shellQuote(first), key))
		case isSystemTaint(key):
			f.Fix = append(f.Fix, fmt.Sprintf("%s keeps ordinary workloads off control-plane and system nodes (%s): leave it in place. Only if this pod is a system add-on that belongs there, tolerate it on purpose: %s; otherwise the pod needs room on the other nodes.", key, joinLimited(tainted, 3), toleration))
		default:
			res := v.tryFix(tainted, func(n *corev1.Node) {
				n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return taintString(&tn) == t })
			})
			helped := res.helped
			switch {
			case res.unsure != "":
				f.Fix = append(f.Fix, fmt.Sprintf("Whether tolerating or removing %s would place the pod cannot be told: %s. Tolerate it on purpose only if the pod belongs on %s: %s", t, res.unsure, joinLimited(tainted, 3), toleration))
				continue
			case len(helped) == 0:
				f.Fix = append(f.Fix, fmt.Sprintf("Tolerating or removing %s alone would not place the pod: %s would still reject it for %s.", t, joinLimited(tainted, 3), strings.Join(res.left, ", ")))
				continue
			}
			f.Fix = append(f.Fix, fmt.Sprintf("If the pod may run on %s, tolerate the taint on purpose: %s", joinLimited(helped, 3), toleration))
			for i, n := range helped {
				if i == 3 {
					break
				}
				f.Fix = append(f.Fix, fmt.Sprintf("kubectl taint nodes %s %s-   # only if the taint is no longer wanted; the pod fits there otherwise", shellQuote(n), shellQuote(key+":"+effect)))
			}
		}
	}
}

// taintKeyEffect splits "key=value:Effect" or "key:Effect".
func taintKeyEffect(t string) (key, effect string) {
	i := strings.LastIndex(t, ":")
	if i < 0 {
		return t, ""
	}
	key, effect = t[:i], t[i+1:]
	if j := strings.Index(key, "="); j >= 0 {
		key = key[:j]
	}
	return key, effect
}
