package main

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// TestWhyPendingWorkloads runs the CLI's workload questions on the workload-grouped scenario
// (Deployment checkout: 4 of 5 pods Pending on Insufficient cpu, judged by the real
// scheduler): TYPE/NAME, the bare name, the stable -o json shape, --all, a namespace named like
// a kind, and an unknown workload.
func TestWhyPendingWorkloads(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{Scheduler: true})
	s := testcluster.Load(t, c, "workload-grouped")
	pns, pod, _ := strings.Cut(s.Expected.Pod, "/")
	if err := c.WaitForScheduler(t.Context(), pns, pod); err != nil {
		t.Fatal(err)
	}
	ns := s.Expected.Namespace
	kc := c.KubeconfigPath

	t.Run("-o json holds the groups, each with a full Diagnosis", func(t *testing.T) {
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kc, "-n", ns, "deploy/checkout", "-o", "json")
		if code != 0 {
			t.Fatalf("exit code = %d, want 0; stderr: %s", code, errOut)
		}
		var wd triage.WorkloadDiagnosis
		if err := json.Unmarshal([]byte(out), &wd); err != nil {
			t.Fatalf("decode: %v\n%s", err, out)
		}
		if wd.Workload.Kind != triage.KindDeployment || wd.Findings[0].Code != triage.CodeInsufficientCPU {
			t.Errorf("workload %s, findings[0].code %s, want Deployment and insufficient-cpu", wd.Workload.Kind, wd.Findings[0].Code)
		}
		if len(wd.Groups) != 2 || wd.Groups[0].Label != "4 of 5 pods Pending: insufficient-cpu" || len(wd.Groups[0].Pods) != 4 {
			t.Fatalf("groups = %+v, want 4 Pending then 1 healthy", wd.Groups)
		}
		rep := wd.Groups[0].Diagnosis
		if rep == nil || rep.Findings[0].Code != triage.CodeInsufficientCPU || len(rep.Findings[0].Nodes) != 3 || rep.Pod.Name != wd.Groups[0].Pods[0].Name {
			t.Errorf("the group's diagnosis is not the representative's full Diagnosis: %+v", rep)
		}
		// The shape is stable: the same keys a script reads.
		var raw map[string]any
		if err := json.Unmarshal([]byte(out), &raw); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"workload", "summary", "findings", "groups", "ready", "pods", "collectedAt"} {
			if _, ok := raw[key]; !ok {
				t.Errorf("-o json lacks %q", key)
			}
		}
	})

	t.Run("a bare name no pod has is the Deployment, and the text leads with the groups", func(t *testing.T) {
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kc, "-n", ns, "checkout")
		if code != 0 {
			t.Fatalf("exit code = %d; stderr: %s", code, errOut)
		}
		for _, want := range []string{"Deployment " + ns + "/checkout: insufficient-cpu", "4 of 5 pods Pending: insufficient-cpu", "1 Running and Ready", "No pod is named checkout"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("the fix never says to delete the only Ready replica (the tester's report)", func(t *testing.T) {
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kc, "-n", ns, "deploy/checkout")
		if code != 0 {
			t.Fatalf("exit code = %d; stderr: %s", code, errOut)
		}
		ready := "checkout-6f7b9c5d4-2lq8v"
		for _, want := range []string{"--requests=cpu=666m", "Nothing needs deleting now: the Deployment controller removes old replicas by itself",
			ready + " is the only Ready replica of checkout: deleting it now takes checkout down"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "kubectl delete pod -n "+ns+" "+ready) {
			t.Errorf("output pastes a delete of the only Ready replica %s:\n%s", ready, out)
		}
	})

	t.Run("--all lists the stuck pods by cause", func(t *testing.T) {
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", kc, "-n", ns, "--all", "-o", "json")
		if code != 0 {
			t.Fatalf("exit code = %d", code)
		}
		var nd triage.NamespaceDiagnosis
		if err := json.Unmarshal([]byte(out), &nd); err != nil {
			t.Fatal(err)
		}
		if len(nd.Causes) != 1 || nd.Causes[0].Code != triage.CodeInsufficientCPU || nd.Causes[0].Pods != 4 || nd.Stuck != 4 {
			t.Errorf("sweep = %+v, want insufficient-cpu with 4 pods", nd)
		}
		code, out, _ = runCLI(t, "why-pending", "--kubeconfig", kc, "-n", "no-such-ns", "--all")
		if code != exitPodNotFound || !strings.Contains(out, `Namespace "no-such-ns" does not exist`) {
			t.Errorf("--all on a missing namespace: exit %d, output %q, want 2 and a line saying it does not exist (not \"nothing is stuck\")", code, out)
		}
	})

	t.Run("a namespace named like a kind: the workload wins and the answer says how to ask for the pod", func(t *testing.T) {
		ctx := t.Context()
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "deploy"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "checkout", Namespace: "deploy"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}, SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/hold"}}}}
		if _, err := c.Client.CoreV1().Pods("deploy").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", kc, "-n", ns, "deploy/checkout")
		if code != 0 || !strings.Contains(out, "Deployment "+ns+"/checkout") || !strings.Contains(out, "-n deploy checkout") {
			t.Errorf("exit %d; output should answer for the Deployment and say how to ask for pod deploy/checkout:\n%s", code, out)
		}
		// No Deployment "checkout" in the default namespace: the old NAMESPACE/POD reading answers.
		code, out, _ = runCLI(t, "why-pending", "--kubeconfig", kc, "deploy/checkout", "-o", "json")
		var d triage.Diagnosis
		if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil || d.Findings[0].Code != triage.CodeSchedulingGated {
			t.Errorf("deploy/checkout in default: exit %d, %v, code %v, want pod deploy/checkout's scheduling-gated", code, err, d.Findings)
		}
		// With -n the asker named the namespace: no Deployment there is the answer, and the note
		// says how to ask for the pod.
		code, out, _ = runCLI(t, "why-pending", "--kubeconfig", kc, "-n", "default", "deploy/checkout")
		if code != exitPodNotFound || !strings.Contains(out, "workload-not-found") || !strings.Contains(out, "-n deploy checkout") {
			t.Errorf("-n default deploy/checkout: exit %d, want %d, workload-not-found and how to ask for the pod:\n%s", code, exitPodNotFound, out)
		}
	})

	t.Run("NAMESPACE/NAME with no such pod is the Deployment of that name", func(t *testing.T) {
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kc, ns+"/checkout")
		if code != 0 || !strings.Contains(out, "Deployment "+ns+"/checkout: insufficient-cpu") {
			t.Errorf("exit %d; output should answer for Deployment %s/checkout:\n%s%s", code, ns, out, errOut)
		}
	})

	t.Run("a name neither a pod nor a workload has suggests the workloads of close names", func(t *testing.T) {
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", kc, "-n", ns, "checkou")
		if code != exitPodNotFound || !strings.Contains(out, "No Deployment, StatefulSet, DaemonSet, CronJob, Job or ReplicaSet is named checkou") || !strings.Contains(out, "deploy/checkout") {
			t.Errorf("exit %d, want %d and a note naming deploy/checkout:\n%s", code, exitPodNotFound, out)
		}
	})

	t.Run("a bare name asked in another namespace names the workload where it is", func(t *testing.T) {
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", kc, "-n", "default", "checkout")
		if code != exitPodNotFound || !strings.Contains(out, "Deployment checkout in namespace "+ns) || !strings.Contains(out, "-n "+ns+" deploy/checkout") {
			t.Errorf("exit %d, want %d and a note naming Deployment checkout in %s:\n%s", code, exitPodNotFound, ns, out)
		}
	})

	t.Run("an unknown workload exits 2 with close names", func(t *testing.T) {
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", kc, "-n", ns, "sts/checkout", "-o", "json")
		var wd triage.WorkloadDiagnosis
		if err := json.Unmarshal([]byte(out), &wd); err != nil {
			t.Fatal(err)
		}
		if code != exitPodNotFound || wd.Findings[0].Code != triage.CodeWorkloadNotFound || len(wd.Findings[0].Evidence) == 0 || wd.Findings[0].Evidence[0].Object != "deploy/checkout" {
			t.Errorf("exit %d, findings %+v, want 2 and workload-not-found suggesting deploy/checkout", code, wd.Findings)
		}
	})
}
