package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/internal/clock"
)

// TestControllerManagerCreatesPods starts a cluster with the workload controllers and checks
// the Deployment → ReplicaSet → Pod chain is Kubernetes' own: the deployment controller makes a
// ReplicaSet the Deployment controls, the replicaset controller makes the pods (with their
// ServiceAccount injected by the admission plugin, which is on) and records SuccessfulCreate.
func TestControllerManagerCreatesPods(t *testing.T) {
	c := startT(t, Options{ControllerManager: true})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if !c.ControllerManagerRunning() {
		t.Fatal("ControllerManagerRunning() = false after Start")
	}
	two := int32(2)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	for len(pods) < 2 {
		list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		pods = list.Items
		if err := clock.Sleep(ctx, 200*time.Millisecond); err != nil {
			t.Fatalf("pods of Deployment web = %d, want 2: %v\nkube-controller-manager log:\n%s", len(pods), err, c.LogTail("kube-controller-manager", 30))
		}
	}
	rs := metav1.GetControllerOf(&pods[0])
	if rs == nil || rs.Kind != "ReplicaSet" || !strings.HasPrefix(rs.Name, "web-") {
		t.Fatalf("pod %s controller = %+v, want a ReplicaSet web-…", pods[0].Name, rs)
	}
	if pods[0].Spec.ServiceAccountName != "default" {
		t.Errorf("pod serviceAccountName = %q, want default (ServiceAccount admission on)", pods[0].Spec.ServiceAccountName)
	}
	evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + rs.Name + ",reason=SuccessfulCreate"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 {
		t.Errorf("no SuccessfulCreate event on ReplicaSet %s", rs.Name)
	}
}
