package triage

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestEveryReasonIsAccountedFor(t *testing.T) {
	sched := func(msg string) Event { return failedScheduling(msg, 2) }
	systemNodes := []*corev1.Node{nodeWithTaints("sys-1", "CriticalAddonsOnly=true:NoSchedule"), nodeWithTaints("sys-2", "CriticalAddonsOnly=true:NoSchedule")}
	workers := []*corev1.Node{node("w-1"), node("w-2"), node("w-3")}
	var bound []*corev1.Pod
	for _, w := range []string{"w-1", "w-2", "w-3"} {
		bound = append(bound, fullOfVolumes(w, 5)...)
	}
	tests := []struct {
		name      string
		snap      func() *Snapshot
		want      Code
		uncertain bool
	}{
		{
			name: "system nodes tainted CriticalAddonsOnly and EBS-full workers is volume-attach-limit (modelled from CSINodes)",
			snap: func() *Snapshot {
				s := snap(podRequesting("echo"), append(systemNodes, workers...), bound,
					sched("0/5 nodes are available: 2 node(s) had untolerated taint {CriticalAddonsOnly: true}, 3 node(s) exceed max volume count. preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."))
				withCSIVolumes(s, "ebs.csi.aws.com", 5, "sys-1", "sys-2", "w-1", "w-2", "w-3")
				return s
			},
			want: CodeVolumeAttachLimit,
		},
		{
			name: "the same with the reasons in the other order and a GCE PD driver limit of 15",
			snap: func() *Snapshot {
				var full []*corev1.Pod
				for _, w := range []string{"w-1", "w-2", "w-3"} {
					full = append(full, fullOfVolumes(w, 15)...)
				}
				s := snap(podRequesting("echo"), append(systemNodes, workers...), full,
					sched("0/5 nodes are available: 3 node(s) exceed max volume count, 2 node(s) had untolerated taint(s)."))
				withCSIVolumes(s, "pd.csi.storage.gke.io", 15, "sys-1", "sys-2", "w-1", "w-2", "w-3")
				return s
			},
			want: CodeVolumeAttachLimit,
		},
		{
			name: "without CSINode data the workers still do not fit: the scheduler's own count is given to them",
			snap: func() *Snapshot {
				return snap(podRequesting("echo"), append(systemNodes, workers...), nil,
					sched("0/5 nodes are available: 2 node(s) had untolerated taint {CriticalAddonsOnly: true}, 3 node(s) exceed max volume count."))
			},
			want: CodeVolumeAttachLimit,
		},
		{
			name: "a reason the rules do not model (DRA) is the primary cause, verbatim and uncertain",
			snap: func() *Snapshot {
				return snap(podRequesting("train"), []*corev1.Node{nodeWithTaints("cp", "node-role.kubernetes.io/control-plane:NoSchedule"), node("g1"), node("g2")}, nil,
					sched("0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 cannot allocate all claims."))
			},
			want: CodeUnknown, uncertain: true,
		},
		{
			name: "two unmodelled reasons over three fitting nodes: none fits, and the answer is uncertain",
			snap: func() *Snapshot {
				return snap(podRequesting("web"), []*corev1.Node{node("n1"), node("n2"), node("n3")}, nil,
					sched("0/3 nodes are available: 1 node(s) had volume zone conflict, 2 node(s) didn't satisfy plugin(s) [ExamplePlugin]."))
			},
			want: CodeUnknown, uncertain: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.snap()
			d := Evaluate(s)
			p := d.Primary()
			if p.Code != tt.want || d.Uncertain != tt.uncertain {
				t.Fatalf("primary = %s (uncertain %t), want %s (uncertain %t): %s", p.Code, d.Uncertain, tt.want, tt.uncertain, p.Summary)
			}
			if len(p.Nodes) != len(s.Nodes) {
				t.Fatalf("node table has %d rows, want %d", len(p.Nodes), len(s.Nodes))
			}
			msg, _ := LatestSchedulerMessage(s.Events)
			for _, nv := range p.Nodes {
				if nv.Fits {
					t.Errorf("node %s fits in the table, but the scheduler found no node (%q)", nv.Node, msg.Event.Message)
				}
			}
			// Every reason of the scheduler's message is on at least its count of rows.
			for _, r := range msg.Reasons {
				rows := 0
				for _, nv := range p.Nodes {
					if slices.ContainsFunc(nv.Reasons, func(nr NodeReason) bool {
						return (r.Code != "" && nr.Code == r.Code) || (nr.FromScheduler && strings.Contains(nr.Message, r.Text))
					}) {
						rows++
					}
				}
				if rows < r.Count {
					t.Errorf("scheduler reason %q on %d node(s), the table shows it on %d", r.Text, r.Count, rows)
				}
			}
		})
	}
}
