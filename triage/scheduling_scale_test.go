package triage

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ofDeployment makes p a pod of Deployment name (through ReplicaSet name-5d8f) in namespace ns.
func ofDeployment(p *corev1.Pod, ns, name string) *corev1.Pod {
	p.Namespace = ns
	p.Labels["pod-template-hash"] = "5d8f"
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-5d8f", Controller: isTrue()}}
	return p
}

func TestScaleFixNeverScalesThePodsOwnWorkloadNorGuessesReplicas(t *testing.T) {
	pod := ofDeployment(podRequesting("big-5d8f-zzzzz", "cpu=900m"), "shop", "big")
	nodes := []*corev1.Node{node("n1", withAllocatable("cpu", "2"))}
	bound := []*corev1.Pod{
		ofDeployment(boundTo("n1", "big-5d8f-aaaaa", "cpu=900m"), "shop", "big"),
		ofDeployment(boundTo("n1", "web-5d8f-bbbbb", "cpu=600m"), "other", "web"),
	}
	s := snap(pod, nodes, bound, failedScheduling("0/1 nodes are available: 1 Insufficient cpu.", 3))
	var scale []string
	for _, f := range schedulingRules(s) {
		for _, fix := range f.Fix {
			if strings.HasPrefix(fix, "kubectl scale ") {
				scale = append(scale, fix)
			}
		}
	}
	if len(scale) != 1 {
		t.Fatalf("scale fixes = %q, want exactly one", scale)
	}
	got := scale[0]
	if strings.Contains(got, "--current-replicas") || strings.Contains(got, "deployment/big ") {
		t.Errorf("scale fix %q guesses the replica count or scales the pod's own Deployment", got)
	}
	if !strings.HasPrefix(got, "kubectl scale deployment/web -n other --replicas=<fewer>") || !strings.Contains(got, "another team's workload") {
		t.Errorf("scale fix = %q, want Deployment other/web flagged as another namespace's", got)
	}
}

// TestScaleFixOnlyWhenItFreesEnough checks that scaling another workload down is suggested only
// when what its pods request on the node would let the pod fit there, and never for a pod
// bigger than any node.
func TestScaleFixOnlyWhenItFreesEnough(t *testing.T) {
	tests := []struct {
		name, request string
		want          bool
	}{
		{"freeing web's 600m makes room for 900m", "cpu=900m", true},
		{"freeing web's 600m still leaves too little for 1500m", "cpu=1500m", false},
		{"bigger than any node", "cpu=50", false},
	}
	for _, tt := range tests {
		pod := ofDeployment(podRequesting("big-5d8f-zzzzz", tt.request), "shop", "big")
		nodes := []*corev1.Node{node("n1", withAllocatable("cpu", "2"))}
		bound := []*corev1.Pod{
			ofDeployment(boundTo("n1", "big-5d8f-aaaaa", "cpu=900m"), "shop", "big"),
			ofDeployment(boundTo("n1", "web-5d8f-bbbbb", "cpu=600m"), "other", "web"),
		}
		s := snap(pod, nodes, bound, failedScheduling("0/1 nodes are available: 1 Insufficient cpu.", 3))
		got := false
		for _, f := range schedulingRules(s) {
			for _, fix := range f.Fix {
				got = got || strings.HasPrefix(fix, "kubectl scale ")
			}
		}
		if got != tt.want {
			t.Errorf("%s: a kubectl scale fix = %t, want %t", tt.name, got, tt.want)
		}
	}
}
