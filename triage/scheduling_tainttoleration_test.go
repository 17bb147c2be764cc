package triage

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTaintTolerationReasons(t *testing.T) {
	tolerates := func(key string) *corev1.Pod {
		p := podRequesting("web")
		p.Spec.Tolerations = []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpExists}}
		return p
	}
	testFilterReasons(t, "TaintToleration", []reasonsCase{
		{name: "one reason per untolerated NoSchedule and NoExecute taint", pod: podRequesting("web"),
			node: nodeWithTaints("n1", "dedicated=db:NoSchedule", "team=ml:NoExecute"),
			want: []NodeReason{{Code: CodeUntoleratedTaint}, {Code: CodeUntoleratedTaint}}},
		{name: "PreferNoSchedule does not block", pod: podRequesting("web"), node: nodeWithTaints("n1", "spot=true:PreferNoSchedule")},
		{name: "a tolerated taint does not block", pod: tolerates("dedicated"), node: nodeWithTaints("n1", "dedicated=db:NoSchedule")},
		{name: "the unschedulable taint of a cordoned node is left to NodeUnschedulable", pod: podRequesting("web"),
			node: node("n1", cordoned, withTaints("node.kubernetes.io/unschedulable:NoSchedule"))},
		{name: "the unschedulable taint on a node that is not cordoned is a taint", pod: podRequesting("web"),
			node: nodeWithTaints("n1", "node.kubernetes.io/unschedulable:NoSchedule"), want: []NodeReason{{Code: CodeUntoleratedTaint}}},
		{name: "a NotReady node gets its taint and, as context, its Ready condition", pod: podRequesting("web"),
			node: node("n1", notReady, withTaints("node.kubernetes.io/not-ready:NoSchedule")),
			want: []NodeReason{{Code: CodeUntoleratedTaint}, {Code: CodeNodeNotReady}}},
		{name: "a NotReady node whose taint the pod tolerates still shows the condition", pod: tolerates("node.kubernetes.io/not-ready"),
			node: node("n1", notReady, withTaints("node.kubernetes.io/not-ready:NoSchedule")),
			want: []NodeReason{{Code: CodeNodeNotReady}}},
	})
}
