package triage

import (
	"strings"
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

// TestControllerTaintsNameTheirOwner is issue 17's kind 4: a taint a controller or agent owns
// names its owner and what it says about the node, and the fix is that owner, never removing
// the taint by hand.
func TestControllerTaintsNameTheirOwner(t *testing.T) {
	tests := []struct {
		taint string
		mods  []func(*corev1.Node)
		// owner is what the summary must say; fix what one fix must say.
		owner, fix string
	}{
		{taint: "node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule",
			owner: "belongs to the cloud controller manager: the kubelet sets it at registration (--cloud-provider=external)", fix: "grep -i cloud-controller"},
		{taint: "node.kubernetes.io/not-ready:NoSchedule", mods: []func(*corev1.Node){notReady},
			owner: "belongs to the node lifecycle controller (kube-controller-manager): it taints a node while its Ready condition is False", fix: "journalctl -u kubelet"},
		{taint: "node.kubernetes.io/unreachable:NoSchedule",
			owner: "its kubelet stopped posting status", fix: "delete the Node if the machine is gone for good"},
		{taint: "node.kubernetes.io/disk-pressure:NoSchedule", owner: "while the kubelet reports DiskPressure", fix: "crictl rmi --prune"},
		{taint: "node.kubernetes.io/memory-pressure:NoSchedule", owner: "while the kubelet reports MemoryPressure", fix: "kubectl top pods -A --sort-by=memory"},
		{taint: "node.kubernetes.io/pid-pressure:NoSchedule", owner: "while the kubelet reports PIDPressure", fix: "podPidsLimit"},
		{taint: "node.kubernetes.io/network-unavailable:NoSchedule", owner: "until the CNI agent", fix: "is the CNI agent's pod"},
		{taint: "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute", owner: "belongs to an administrator", fix: "only once"},
		{taint: "node.cloudprovider.kubernetes.io/shutdown:NoSchedule", owner: "while the cloud reports its instance shut down", fix: "Start the instance"},
		{taint: "ToBeDeletedByClusterAutoscaler=1700000000:NoSchedule", owner: "belongs to the cluster autoscaler: it is scaling these nodes down", fix: "logs deploy/cluster-autoscaler"},
		{taint: "karpenter.sh/disruption=disrupting:NoSchedule", owner: "belongs to Karpenter: it is disrupting these nodes", fix: "kubectl get nodeclaims"},
		{taint: "karpenter.sh/unregistered:NoExecute", owner: "once the node has registered with its NodeClaim", fix: "kubectl get nodeclaims"},
		{taint: "node.cluster.x-k8s.io/uninitialized:NoSchedule", owner: "belongs to Cluster API", fix: "kubectl get machines"},
		{taint: "ebs.csi.aws.com/agent-not-ready:NoExecute", owner: "once its pod on the node is ready", fix: "(ebs.csi.aws.com)"},
		{taint: "node.cilium.io/agent-not-ready:NoSchedule", owner: "a node agent", fix: "(node.cilium.io)"},
		{taint: "kubernetes.azure.com/scalesetpriority=spot:NoSchedule", owner: "spot VMs", fix: "If the pod may run on spot VMs, tolerate it on purpose"},
	}
	for _, tt := range tests {
		t.Run(tt.taint, func(t *testing.T) {
			mods := append([]func(*corev1.Node){withTaints(tt.taint)}, tt.mods...)
			s := snap(podRequesting("web"), []*corev1.Node{node("n1", mods...), node("n2", mods...)}, nil,
				failedScheduling("0/2 nodes are available: 2 node(s) had untolerated taint(s).", 2))
			p := Evaluate(s).Primary()
			if p.Code != CodeUntoleratedTaint {
				t.Fatalf("primary = %s, want untolerated-taint: %s", p.Code, p.Summary)
			}
			if !strings.Contains(p.Summary, tt.owner) {
				t.Errorf("summary does not name the owner (%q): %s", tt.owner, p.Summary)
			}
			all := strings.Join(p.Fix, "\n")
			if !strings.Contains(all, tt.fix) {
				t.Errorf("fixes lack %q:\n%s", tt.fix, all)
			}
			key, _, _ := strings.Cut(tt.taint, "=")
			key, _, _ = strings.Cut(key, ":")
			for _, fix := range p.Fix {
				if strings.HasPrefix(fix, "kubectl taint") && strings.Contains(fix, key) {
					t.Errorf("fix removes the owned taint %s: %s", key, fix)
				}
			}
			if !looksFirst(p.Fix) {
				t.Errorf("fix acts before it looks:\n%s", all)
			}
			// Every look comes before the step that says what to change.
			for _, o := range map[string][][2]string{
				"node.kubernetes.io/not-ready:NoSchedule":     {{"kubectl get pods -A -o wide --field-selector spec.nodeName=n1", "Fix what the Ready condition names"}},
				"node.kubernetes.io/unreachable:NoSchedule":   {{"systemctl status kubelet", "Bring the machine or its kubelet back"}},
				"node.kubernetes.io/disk-pressure:NoSchedule": {{"df -h /var/lib/kubelet", "crictl rmi --prune"}},
			}[tt.taint] {
				checkBefore(t, p.Fix, o[0], o[1])
			}
		})
	}
	t.Run("the not-ready taint quotes the node's Ready condition", func(t *testing.T) {
		s := snap(podRequesting("web"), []*corev1.Node{node("n1", notReady, withTaints("node.kubernetes.io/not-ready:NoSchedule"))}, nil)
		if p := Evaluate(s).Primary(); !strings.Contains(p.Summary, "(n1: NotReady: container runtime network not ready)") {
			t.Errorf("summary does not quote the Ready condition: %s", p.Summary)
		}
	})
}

// TestSystemTaintWithNowhereElse is issue 17's kind 8 (first bullet): a cluster with no node
// free of the control-plane taint gets no "find room on the other nodes".
func TestSystemTaintWithNowhereElse(t *testing.T) {
	cp := func(name string) *corev1.Node {
		return node(name, withTaints("node-role.kubernetes.io/control-plane:NoSchedule"), withLabel("node-role.kubernetes.io/control-plane", ""))
	}
	tests := []struct {
		name      string
		nodes     []*corev1.Node
		want, not string
	}{
		{name: "a single-node cluster: add a worker, or untaint for a single-machine cluster",
			nodes: []*corev1.Node{cp("kind-control-plane")},
			want:  "kubectl taint nodes kind-control-plane node-role.kubernetes.io/control-plane:NoSchedule-   # single-machine clusters only", not: "other nodes"},
		{name: "three control planes and no worker: add a node for workloads, no untaint",
			nodes: []*corev1.Node{cp("cp-1"), cp("cp-2"), cp("cp-3")},
			want:  "otherwise add a node for workloads", not: "kubectl taint"},
		{name: "a control plane beside full workers: room on the other nodes",
			nodes: []*corev1.Node{cp("cp-1"), node("w-1", withAllocatable("pods", "0"))},
			want:  "the pod needs room on the other nodes", not: "kubectl taint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(snap(podRequesting("web"), tt.nodes, nil))
			var all []string
			for _, f := range d.Findings {
				all = append(all, f.Fix...)
			}
			fixes := strings.Join(all, "\n")
			if !strings.Contains(fixes, tt.want) {
				t.Errorf("fixes lack %q:\n%s", tt.want, fixes)
			}
			if strings.Contains(fixes, tt.not) {
				t.Errorf("fixes say %q:\n%s", tt.not, fixes)
			}
		})
	}
}
