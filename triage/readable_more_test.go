package triage

// Objects of namespaces the asker cannot read (Snapshot.Readable) found by a fresh tester after
// readable_test.go: none may be named in the answer.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The CSI node-plugin DaemonSet and its pod live in namespace "storage-team", which
// the asker cannot read (Readable empty); the answer must not name them.
func TestUnreadableCSIPluginIsNotNamed(t *testing.T) {
	const driver = "ebs.csi.aws.com"
	mount := warning("FailedMount", `MountVolume.MountDevice failed for volume "pvc-1" : kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver name ebs.csi.aws.com not found in the list of registered CSI drivers`, 30, time.Minute)
	pod := testPod(pending("ContainerCreating", ""))
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "storage-team", Name: "secret-csi-node", UID: "uid-ebs"}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node-driver-registrar", Args: []string{"--kubelet-registration-path=/var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock"}}}
	s := testSnapshot(pod, mount)
	s.CSIPlugin = &CSIPlugin{Driver: driver, DaemonSets: CSIPluginDaemonSets([]*appsv1.DaemonSet{ds}, driver), Events: map[types.UID][]Event{}, Namespaces: map[string]*corev1.Namespace{},
		CSINode: &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}}
	p := testPod(crashLoop("ebs-plugin", 4, 1, "Error", "boom"))
	p.Namespace, p.Name = "storage-team", "secret-csi-node-abcde"
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "secret-csi-node", UID: "uid-ebs", Controller: isTrue()}}
	s.PodsByNode["node-1"] = []*corev1.Pod{p}
	s.Readable = map[string]bool{}
	if s.MayName("storage-team") {
		t.Fatal("MayName(storage-team) should be false")
	}
	b, _ := json.Marshal(Evaluate(s))
	if out := string(b); strings.Contains(out, "storage-team") || strings.Contains(out, "secret-csi-node") {
		t.Errorf("LEAK: answer names an unreadable namespace's DaemonSet/pod:\n%s", out)
	}
}

// A host-port holder in unreadable "payments" belongs to a Deployment that happens to
// share our Deployment's name ("web"); the answer must not say anything about it beyond
// "a pod in a namespace you cannot read".
func TestHostPortHolderOfAnotherNamespaceIsNotOurWorkload(t *testing.T) {
	pod := ofDeployment(withHostPort(podRequesting("web-5d8f-zzzzz"), 80), "shop", "web")
	holder := ofDeployment(withHostPort(boundTo("n1", "web-5d8f-aaaaa"), 80), "payments", "web")
	s := snap(pod, []*corev1.Node{node("n1")}, []*corev1.Pod{holder})
	s.Readable = map[string]bool{}
	b, _ := json.Marshal(Evaluate(s))
	if out := string(b); strings.Contains(out, "older pod of the same") || strings.Contains(out, "kubectl patch deployment") {
		t.Errorf("LEAK/wrong: a pod of an unreadable namespace is described as our own workload's older pod:\n%s", out)
	}
}

// A pod of unreadable "payments" whose name contains the agent word is never named as "the
// node's flannel agent".
func TestUnreadableNodeAgentIsNotNamed(t *testing.T) {
	pod := testPod(pending("ContainerCreating", ""))
	s := testSnapshot(pod, warning("FailedCreatePodSandBox", `plugin type="flannel" failed (add): loadFlannelSubnetEnv failed: open /run/flannel/subnet.env: no such file or directory`, 40, 20*time.Second))
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "secret-flannel-exporter"}}
	other.Spec.NodeName = pod.Spec.NodeName
	s.PodsByNode = map[string][]*corev1.Pod{pod.Spec.NodeName: {other}}
	s.Readable = map[string]bool{}
	b, _ := json.Marshal(Evaluate(s))
	if out := string(b); strings.Contains(out, "payments") || strings.Contains(out, "secret-flannel-exporter") {
		t.Errorf("LEAK: answer names an unreadable namespace's pod as the node agent (node %q):\n%s", pod.Spec.NodeName, out)
	}
}
