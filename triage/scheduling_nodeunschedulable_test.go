package triage

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNodeUnschedulableReasons(t *testing.T) {
	tolerating := podRequesting("web")
	tolerating.Spec.Tolerations = []corev1.Toleration{{Key: unschedulableTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	testFilterReasons(t, "NodeUnschedulable", []reasonsCase{
		{name: "a cordoned node", pod: podRequesting("web"), node: node("n1", cordoned),
			want: []NodeReason{{Code: CodeNodeUnschedulable}}},
		{name: "a schedulable node", pod: podRequesting("web"), node: node("n1")},
		{name: "a pod that tolerates the unschedulable taint goes on a cordoned node", pod: tolerating, node: node("n1", cordoned)},
	})
}
