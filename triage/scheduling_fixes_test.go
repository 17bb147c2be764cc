package triage

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// This file holds the table test of issue 12's kind 4 over every filter: node fixes (untaint,
// uncordon, label) help and never hurt. Its variants differ in surface details: other taints,
// other reasons behind the first one. TestNodeFixesOnTheRealScheduler (triage/collect) checks
// the same against the real kube-scheduler.

// nodeFixes returns the fixes of every finding that change a node: untaint, uncordon, label.
func nodeFixes(d *Diagnosis) []string {
	var out []string
	for _, f := range d.Findings {
		for _, x := range f.Fix {
			if strings.HasPrefix(x, "kubectl taint") || strings.HasPrefix(x, "kubectl uncordon") || strings.HasPrefix(x, "kubectl label node") {
				out = append(out, x)
			}
		}
	}
	return out
}

// fixTargets returns the node a node fix targets (the word after "nodes"/"node"/"uncordon").
func fixTarget(fix string) string {
	f := strings.Fields(fix)
	for i, w := range f {
		if (w == "nodes" || w == "node" || w == "uncordon") && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}

func TestNodeFixesHelpAndNeverHurt(t *testing.T) {
	sched := func(msg string) Event { return failedScheduling(msg, 1) }
	tests := []struct {
		name string
		s    *Snapshot
		// want are the nodes the fixes may target; wantNone means no node fix at all.
		want []string
	}{
		{
			name: "control-plane taint with full workers: no untaint of the control plane",
			s: snap(podRequesting("web", "cpu=1"),
				[]*corev1.Node{nodeWithTaints("cp-1", "node-role.kubernetes.io/control-plane:NoSchedule"), node("w-1"), node("w-2")},
				[]*corev1.Pod{boundTo("w-1", "a", "cpu=3500m"), boundTo("w-2", "b", "cpu=3500m")},
				sched("0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu.")),
		},
		{
			name: "CriticalAddonsOnly system pool and a cordoned worker: no untaint, and uncordon only the worker",
			s: snap(podRequesting("web"),
				[]*corev1.Node{nodeWithTaints("sys-1", "CriticalAddonsOnly=true:NoSchedule"), node("w-1", cordoned)}, nil,
				sched("0/2 nodes are available: 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable.")),
			want: []string{"w-1"},
		},
		{
			name: "a custom taint on a node that is also full: no untaint there",
			s: snap(podRequesting("web", "memory=2Gi"),
				[]*corev1.Node{nodeWithTaints("gpu-1", "dedicated=gpu:NoSchedule"), node("w-1")},
				[]*corev1.Pod{boundTo("gpu-1", "a", "memory=7Gi"), boundTo("w-1", "b", "memory=7Gi")},
				sched("0/2 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint(s).")),
		},
		{
			name: "a custom taint alone: untaint only that node",
			s: snap(podRequesting("web"),
				[]*corev1.Node{nodeWithTaints("n1", "team=batch:NoSchedule"), nodeWithTaints("cp", "node-role.kubernetes.io/master:NoSchedule")}, nil,
				sched("0/2 nodes are available: 2 node(s) had untolerated taint(s).")),
			want: []string{"n1"},
		},
		{
			name: "a cordoned node that is also out of memory: no uncordon",
			s: snap(podRequesting("web", "memory=4Gi"),
				[]*corev1.Node{node("w-1", cordoned), node("w-2")},
				[]*corev1.Pod{boundTo("w-1", "a", "memory=6Gi"), boundTo("w-2", "b", "memory=6Gi")},
				sched("0/2 nodes are available: 1 Insufficient memory, 1 node(s) were unschedulable.")),
		},
		{
			name: "nodeSelector mismatch: label only a node where it is the only reason, never the control plane",
			s: func() *Snapshot {
				p := podRequesting("web")
				p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
				return snap(p, []*corev1.Node{nodeWithTaints("a-cp", "node-role.kubernetes.io/control-plane:NoSchedule"), node("b-full", withAllocatable("pods", "1")), node("c-free")},
					[]*corev1.Pod{boundTo("b-full", "x")},
					sched("0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match Pod's node affinity/selector."))
			}(),
			want: []string{"c-free"},
		},
		{
			name: "cordoned nodes carry the unschedulable taint: uncordon only the one with room (or label the free worker)",
			s: func() *Snapshot {
				p := podRequesting("web", "cpu=1")
				p.Spec.NodeSelector = map[string]string{"disktype": "ssd"}
				return snap(p, []*corev1.Node{
					node("worker-1", cordoned, withLabel("disktype", "ssd"), withTaints("node.kubernetes.io/unschedulable:NoSchedule")),
					node("worker-2"),
					node("worker-3", cordoned, withLabel("disktype", "ssd"), withTaints("node.kubernetes.io/unschedulable:NoSchedule"))},
					[]*corev1.Pod{boundTo("worker-1", "big", "cpu=3500m")},
					sched("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) were unschedulable."))
			}(),
			want: []string{"worker-2", "worker-3"},
		},
		{
			name: "a nodeSelector on the architecture: never relabel nodes",
			s: func() *Snapshot {
				p := podRequesting("web")
				p.Spec.NodeSelector = map[string]string{"kubernetes.io/arch": "arm64"}
				return snap(p, []*corev1.Node{node("w-1", withLabel("kubernetes.io/arch", "amd64")), node("w-2", withLabel("kubernetes.io/arch", "amd64"))}, nil,
					sched("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."))
			}(),
		},
		{
			name: "a nodeSelector on a zone no node is in, or on a role: never add such labels",
			s: func() *Snapshot {
				p := podRequesting("web")
				p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": "eu-west-1c", "node-role.kubernetes.io/control-plane": ""}
				return snap(p, []*corev1.Node{node("w-1"), node("w-2", withLabel("topology.kubernetes.io/zone", "eu-west-1a"))}, nil,
					sched("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."))
			}(),
		},
		{
			name: "a nodeSelector on an administrator's label: label a node that lacks it",
			s: func() *Snapshot {
				p := podRequesting("web")
				p.Spec.NodeSelector = map[string]string{"node-restriction.kubernetes.io/pool": "batch"}
				return snap(p, []*corev1.Node{node("w-1"), node("w-2", withLabel("node-restriction.kubernetes.io/pool", "web"))}, nil,
					sched("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."))
			}(),
			want: []string{"w-1"},
		},
		{
			name: "a NotReady node with a custom taint: untainting does not help",
			s: snap(podRequesting("web"),
				[]*corev1.Node{node("n1", notReady, withTaints("maintenance=true:NoSchedule"))}, nil,
				sched("0/1 nodes are available: 1 node(s) had untolerated taint(s).")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(tt.s)
			for _, fix := range nodeFixes(d) {
				target := fixTarget(fix)
				if !slices.Contains(tt.want, target) {
					t.Errorf("fix %q targets %s, want only %v", fix, target, tt.want)
				}
				for _, sys := range []string{"node-role.kubernetes.io", "CriticalAddonsOnly", "node.kubernetes.io/"} {
					if strings.HasPrefix(fix, "kubectl taint") && strings.Contains(fix, sys) {
						t.Errorf("fix %q removes a system or lifecycle taint", fix)
					}
				}
			}
			if len(tt.want) > 0 && len(nodeFixes(d)) == 0 {
				t.Errorf("no node fix, want one for %v; fixes: %q", tt.want, d.Primary().Fix)
			}
			for _, f := range d.Findings {
				if !looksFirst(f.Fix) {
					t.Errorf("%s fix acts before it looks:\n%s", f.Code, strings.Join(f.Fix, "\n"))
				}
				// Who cordoned a node, and why, is read before it is uncordoned; removing a
				// taint is said to be the other of two ways (tolerating it) before it is pasted;
				// labelling a node is said to be the other way to fixing the selector.
				if i := stepIndex(f.Fix, "kubectl uncordon"); i >= 0 {
					checkBefore(t, f.Fix, "kubectl describe node", "kubectl uncordon")
				}
				if i := stepIndex(f.Fix, "kubectl taint nodes"); i >= 0 && f.Code == CodeUntoleratedTaint && stepIndex(f.Fix, "single-machine") < 0 {
					checkBefore(t, f.Fix, "Either, if the pod may run on", "kubectl taint nodes")
				}
				if i := stepIndex(f.Fix, "kubectl label node"); i >= 0 {
					checkBefore(t, f.Fix, "Either fix spec.nodeSelector", "kubectl label node")
				}
			}
		})
	}
}
