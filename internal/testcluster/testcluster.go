// Package testcluster is testenv for go test: Start and Load fail the test instead of
// returning an error and stop the cluster in t.Cleanup, and Main is a whole TestMain that
// shuts the shared etcd down. Only tests import it (as they do internal/chattest), so the
// shipped binary, which links testenv for demo, does not link package testing.
package testcluster

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/internal/testenv"
)

// Start starts a fresh cluster for a test or benchmark and stops it in t.Cleanup. Setup
// failures (including a failed binary build) are t.Fatal, never a skip: CI must be able to
// build the control plane. Startup is bounded by 10 minutes, enough for a cold build.
func Start(t testing.TB, opts testenv.Options) *testenv.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := testenv.Start(ctx, opts)
	if err != nil {
		t.Fatalf("testenv.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	return c
}

// Load reads the scenario nameOrDir (a directory, or a folder name under testdata/scenarios
// or testdata/cases such as "seed-nginx-taint"; see testenv.FindScenario), loads it into c and
// returns it; failures are t.Fatal.
func Load(t testing.TB, c *testenv.Cluster, nameOrDir string) *testenv.Scenario {
	t.Helper()
	dir, err := testenv.FindScenario(nameOrDir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := testenv.LoadScenarioDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Load(ctx, s); err != nil {
		t.Fatalf("%v\nkube-apiserver log tail:\n%s", err, c.LogTail("kube-apiserver", 20))
	}
	return s
}

// Main runs the package's tests and then testenv.Shutdown, so the shared etcd and the temp dir do
// not outlive the test binary. Use it as the whole TestMain:
//
//	func TestMain(m *testing.M) { testcluster.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := testenv.Shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// ReadyNode creates node name, Ready, with cpu and pods allocatable (plenty of memory) and no
// taints: no kubelet runs in a test cluster, so the test plays one (node admission adds the
// not-ready taint on create; a kubelet would clear it).
func ReadyNode(t testing.TB, cs kubernetes.Interface, name, cpu, pods string) {
	t.Helper()
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse(pods)}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}}}
	created, err := cs.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.NodeStatus{Capacity: rl, Allocatable: rl, Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err = cs.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Spec.Taints = nil
	if _, err := cs.CoreV1().Nodes().Update(t.Context(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Deployment creates Deployment ns/name of replicas pods (label app=name, one container
// requesting cpu); edit, when set, may change the pod spec first.
func Deployment(t testing.TB, cs kubernetes.Interface, ns, name string, replicas int32, cpu string, edit func(*corev1.PodSpec)) {
	t.Helper()
	lb := map[string]string{"app": name}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/shop/" + name + ":1.0",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}
	if edit != nil {
		edit(&spec)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: lb},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lb}, Spec: spec}}}
	if _, err := cs.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// MarkRunning sets p's status as a kubelet does once its containers have started and are
// ready (Running, every condition true, a running status per container); the caller writes
// it with UpdateStatus.
func MarkRunning(p *corev1.Pod, now metav1.Time) {
	p.Status.Phase = corev1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	p.Status.ContainerStatuses = nil
	for _, ctr := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, Ready: true, Started: new(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
}
