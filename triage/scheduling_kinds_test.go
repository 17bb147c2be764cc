package triage

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// This file holds the table tests of issue 12's scheduling kinds: every scheduler reason is
// accounted for (kind 3), node fixes help and never hurt (kind 4), and topology spread knows
// which domains count (kind 8). Each kind has variants that differ in surface details: other
// drivers, taints, reason orderings.

// withCSIVolumes gives the Snapshot a CSI driver's per-node attachable limit on nodes and pods
// that each mount one bound volume of that driver, plus an unbound WaitForFirstConsumer claim
// for the pod under diagnosis (the StatefulSet-per-replica shape of the reports).
func withCSIVolumes(s *Snapshot, driver string, limit int32, nodes ...string) {
	s.CSINodes = map[string]*storagev1.CSINode{}
	s.NodeClaims = map[string]*corev1.PersistentVolumeClaim{}
	s.PVs = map[string]*corev1.PersistentVolume{}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	s.StorageClasses = map[string]*storagev1.StorageClass{"fast": {
		ObjectMeta:        metav1.ObjectMeta{Name: "fast"},
		Provisioner:       driver,
		VolumeBindingMode: &wffc,
	}}
	for _, n := range nodes {
		s.CSINodes[n] = &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(limit)}}}}}
	}
	for _, pods := range s.PodsByNode {
		for _, p := range pods {
			claim := p.Name + "-data"
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
			pv := "pv-" + p.Name
			s.NodeClaims[p.Namespace+"/"+claim] = &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: p.Namespace},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv, StorageClassName: ptr.To("fast")},
				Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
			}
			s.PVs[pv] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv},
				Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
					CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + p.Name}}}}
		}
	}
	s.Pod.Spec.Volumes = append(s.Pod.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.Pod.Name + "-data"}}})
	s.PVCs = map[string]*corev1.PersistentVolumeClaim{s.Pod.Name + "-data": {
		ObjectMeta: metav1.ObjectMeta{Name: s.Pod.Name + "-data", Namespace: s.Pod.Namespace},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast")},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}}
}

// fullOfVolumes returns pods bound to node, one per volume slot.
func fullOfVolumes(node string, n int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, boundTo(node, fmt.Sprintf("%s-db-%d", node, i)))
	}
	return out
}

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
		})
	}
}

func TestTopologySpreadKnowsWhichDomainsCount(t *testing.T) {
	spreadPod := func(mods ...func(*corev1.TopologySpreadConstraint)) *corev1.Pod {
		p := withPodLabels(podRequesting("web"), "app", "web")
		c := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
		for _, m := range mods {
			m(&c)
		}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c}
		return p
	}
	replica := func(node, name string) *corev1.Pod { return withPodLabels(boundTo(node, name), "app", "web") }
	zone := func(z string) func(*corev1.Node) { return withLabel("topology.kubernetes.io/zone", z) }
	tests := []struct {
		name string
		s    *Snapshot
		// wantFix is a substring one fix must have; notFix one no fix may have.
		wantFix, notFix string
	}{
		{
			name: "tainted control planes count as empty hostname domains (nodeTaintsPolicy unset): suggest Honor",
			s: snap(spreadPod(), []*corev1.Node{
				nodeWithTaints("cp-1", "node-role.kubernetes.io/control-plane:NoSchedule"), nodeWithTaints("cp-2", "node-role.kubernetes.io/control-plane:NoSchedule"),
				node("w-1"), node("w-2")},
				[]*corev1.Pod{replica("w-1", "r1"), replica("w-2", "r2")},
				failedScheduling("0/4 nodes are available: 2 node(s) didn't match pod topology spread constraints, 2 node(s) had untolerated taint(s).", 1)),
			wantFix: "nodeTaintsPolicy: Honor", notFix: "cp-",
		},
		{
			name: "zones: a zone of only tainted GPU nodes holds the skew down (explicit Ignore)",
			s: snap(spreadPod(func(c *corev1.TopologySpreadConstraint) {
				c.TopologyKey = "topology.kubernetes.io/zone"
				c.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
			}), []*corev1.Node{
				node("gpu-c", zone("zone-c"), withTaints("nvidia.com/gpu=true:NoSchedule")),
				node("w-a", zone("zone-a")), node("w-b", zone("zone-b"))},
				[]*corev1.Pod{replica("w-a", "r1"), replica("w-b", "r2")},
				failedScheduling("0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 node(s) didn't match pod topology spread constraints.", 1)),
			wantFix: "nodeTaintsPolicy: Honor", notFix: "zone-c",
		},
		{
			name: "an empty zone the pod can run in: add capacity there (it is not the control plane)",
			s: snap(spreadPod(func(c *corev1.TopologySpreadConstraint) { c.TopologyKey = "topology.kubernetes.io/zone" }),
				[]*corev1.Node{
					node("w-a", zone("zone-a")), node("w-b", zone("zone-b")), node("w-c", zone("zone-c"), withAllocatable("pods", "1"))},
				[]*corev1.Pod{replica("w-a", "r1"), replica("w-b", "r2"), boundTo("w-c", "other")},
				failedScheduling("0/3 nodes are available: 1 Too many pods, 2 node(s) didn't match pod topology spread constraints.", 1)),
			wantFix: "zone-c", notFix: "nodeTaintsPolicy",
		},
		{
			name: "nodeAffinityPolicy Ignore counts nodes the pod's selector excludes: suggest Honor",
			s: func() *Snapshot {
				p := spreadPod(func(c *corev1.TopologySpreadConstraint) {
					c.NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
				})
				p.Spec.NodeSelector = map[string]string{"pool": "web"}
				return snap(p, []*corev1.Node{node("other-1"), node("w-1", withLabel("pool", "web")), node("w-2", withLabel("pool", "web"))},
					[]*corev1.Pod{replica("w-1", "r1"), replica("w-2", "r2")},
					failedScheduling("0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't match pod topology spread constraints.", 1))
			}(),
			wantFix: "nodeAffinityPolicy: Honor", notFix: "other-1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(tt.s)
			p := d.Primary()
			if p.Code != CodeTopologySpreadUnsatisfiable {
				t.Fatalf("primary = %s, want topology-spread-unsatisfiable: %s", p.Code, p.Summary)
			}
			all := strings.Join(p.Fix, "\n")
			if !strings.Contains(all, tt.wantFix) {
				t.Errorf("fixes lack %q:\n%s", tt.wantFix, all)
			}
			if strings.Contains(all, tt.notFix) {
				t.Errorf("fixes name %q, where the pod cannot run:\n%s", tt.notFix, all)
			}
		})
	}
}
