package triage

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSchedulerMessage(t *testing.T) {
	tests := []struct {
		msg  string
		want SchedulerMessage
	}{
		{
			msg: "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod.",
			want: SchedulerMessage{Total: 3, Reasons: []SchedulerReason{
				{1, "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }", CodeUntoleratedTaint},
				{2, "Insufficient cpu", CodeInsufficientCPU},
			}},
		},
		{
			msg: "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, 2 node(s) didn't match pod anti-affinity rules.",
			want: SchedulerMessage{Total: 3, Reasons: []SchedulerReason{
				{1, "node(s) didn't match pod topology spread constraints", CodeTopologySpreadUnsatisfiable},
				{2, "node(s) didn't match pod anti-affinity rules", CodePodAntiAffinityUnsatisfiable},
			}},
		},
		{
			msg: "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 Too many pods, 1 node(s) were unschedulable, 1 node(s) didn't have free ports for the requested pod ports, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had volume node affinity conflict, 1 node(s) didn't match pod affinity rules.",
			want: SchedulerMessage{Total: 2, Reasons: []SchedulerReason{
				{1, "Insufficient nvidia.com/gpu", CodeInsufficientExtendedResource},
				{1, "Too many pods", CodeTooManyPods},
				{1, "node(s) were unschedulable", CodeNodeUnschedulable},
				{1, "node(s) didn't have free ports for the requested pod ports", CodeHostPortConflict},
				{1, "node(s) didn't match Pod's node affinity/selector", CodeNodeSelectorMismatch},
				{1, "node(s) had volume node affinity conflict", CodeVolumeNodeAffinityConflict},
				{1, "node(s) didn't match pod affinity rules", CodePodAffinityUnsatisfiable},
			}},
		},
		{
			msg:  "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
			want: SchedulerMessage{Total: 3, PodLevel: &SchedulerReason{3, "pod has unbound immediate PersistentVolumeClaims", CodePVCUnbound}},
		},
		{
			msg:  `0/1 nodes are available: persistentvolumeclaim "data" not found.`,
			want: SchedulerMessage{Total: 1, PodLevel: &SchedulerReason{1, `persistentvolumeclaim "data" not found`, CodePVCNotFound}},
		},
		{
			msg: "0/3 nodes are available: 3 node(s) had taint {node.kubernetes.io/not-ready: }, that the pod didn't tolerate.",
			want: SchedulerMessage{Total: 3, Reasons: []SchedulerReason{
				{3, "node(s) had taint {node.kubernetes.io/not-ready: }, that the pod didn't tolerate", CodeUntoleratedTaint},
			}},
		},
		{
			msg:  "no nodes available to schedule pods",
			want: SchedulerMessage{Total: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			e := failedScheduling(tt.msg, 1)
			got, ok := ParseSchedulerMessage(e)
			if !ok {
				t.Fatalf("ParseSchedulerMessage(%q) not ok", tt.msg)
			}
			tt.want.Event = e
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(SchedulerMessage{}, SchedulerReason{})); diff != "" {
				t.Errorf("ParseSchedulerMessage() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if _, ok := ParseSchedulerMessage(Event{Reason: "FailedScheduling", Message: "binding rejected: pods \"x\" not found"}); ok {
		t.Errorf("ParseSchedulerMessage(binding error) ok, want not ok")
	}
}
