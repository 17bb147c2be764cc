package collect

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/triage"
)

// Sweep benchmark size (the target: a namespace of 5,000 pods and 500 workloads).
const (
	sweepWorkloads   = 500
	sweepPodsPerLoad = 10
	sweepNamespace   = "shop"
)

// BenchmarkSweep measures a namespace sweep (why-pending --all) with the informer-backed
// Collector on a local control plane holding benchNodes nodes and one namespace of
// sweepWorkloads Deployments (each with its ReplicaSet) and 5,000 pods with status: most Running
// and Ready; in every tenth Deployment 3 pods crash-loop; in another tenth 2 pods are Pending
// with the scheduler's FailedScheduling event; in another tenth the ReplicaSet cannot create its
// last pod (a FailedCreate from quota admission); plus bare pods, some failing to pull. It
// reports:
//
//   - p50-ms, p95-ms: Sweep latency with warm caches;
//   - api-requests/op: API requests per warm sweep (non-watch requests of the collector);
//   - direct-api-requests: the requests of one sweep with the direct backend (the CLI), one
//     paginated list per kind;
//   - stuck-pods, causes: what one sweep found (a check that it found the planted trouble).
//
// The cluster is built once; -benchtime sets the number of sweeps. Run:
// go test ./triage/collect -run '^$' -bench BenchmarkSweep -benchtime 50x
func BenchmarkSweep(b *testing.B) {
	c, loader := benchCluster(b)
	ctx := b.Context()
	start := time.Now()
	populateSweepCluster(b, ctx, loader)
	b.Logf("created %d nodes, %d Deployments and %d pods in %s in %s", benchNodes, sweepWorkloads, sweepWorkloads*sweepPodsPerLoad, sweepNamespace, time.Since(start).Round(time.Second))

	directClient, directCount, _ := countedClient(b, c)
	if _, err := Sweep(ctx, New(directClient), sweepNamespace); err != nil {
		b.Fatal(err)
	}
	direct := directCount.count.Load()

	client, counter, _ := countedClient(b, c)
	collectorCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	col, err := NewCached(collectorCtx, client)
	if err != nil {
		b.Fatal(err)
	}
	var last *triage.NamespaceDiagnosis
	for range 3 { // warm up: the version cache
		if last, err = Sweep(ctx, col, sweepNamespace); err != nil {
			b.Fatal(err)
		}
	}
	counter.count.Store(0)
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		d, err := Sweep(ctx, col, sweepNamespace)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		last = d
	}
	b.ReportMetric(percentileMS(lat, 0.50), "p50-ms")
	b.ReportMetric(percentileMS(lat, 0.95), "p95-ms")
	b.ReportMetric(float64(counter.count.Load())/float64(len(lat)), "api-requests/op")
	b.ReportMetric(float64(direct), "direct-api-requests")
	b.ReportMetric(float64(last.Stuck), "stuck-pods")
	b.ReportMetric(float64(len(last.Causes)), "causes")
	for _, cause := range last.Causes {
		b.Logf("%-26s %4d pods in %d items", cause.Code, cause.Pods, len(cause.Items))
	}
}

// populateSweepCluster creates the nodes, the namespace's Deployments and ReplicaSets, their
// pods with status and events, and the bare pods, with benchWorkers goroutines.
func populateSweepCluster(b *testing.B, ctx context.Context, cs kubernetes.Interface) {
	b.Helper()
	createBenchNodes(b, ctx, cs)
	for _, ns := range []string{sweepNamespace, "calico-system"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	benchParallel(b, sweepWorkloads, func(w int) error {
		return createSweepWorkload(ctx, cs, w)
	})
	// 50 bare pods (benchPod's shapes: running, crash-looping, pulling, waiting for a volume) and
	// one calico-node per node in calico-system, as BenchmarkDiagnose has them.
	benchParallel(b, benchNodes+sweepWorkloads/10, func(i int) error {
		p, events := benchPod(i)
		if i >= benchNodes {
			p.Namespace, p.OwnerReferences = sweepNamespace, nil
			p.Name = fmt.Sprintf("debug-%03d", i)
		}
		return createPodWithEvents(ctx, cs, p, events)
	})
}

// createSweepWorkload creates Deployment w of the sweep namespace, its ReplicaSet and its pods.
func createSweepWorkload(ctx context.Context, cs kubernetes.Interface, w int) error {
	name := fmt.Sprintf("svc-%03d", w)
	hash := "7d58v5wzn2"
	replicas := int32(sweepPodsPerLoad)
	lb := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lb}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/shop/" + name + ":1.8.2",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}}
	d, err := cs.AppsV1().Deployments(sweepNamespace).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sweepNamespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: lb}, Template: tmpl}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	rsLabels := map[string]string{"app": name, "pod-template-hash": hash}
	rsTmpl := tmpl.DeepCopy()
	rsTmpl.Labels = rsLabels
	rs, err := cs.AppsV1().ReplicaSets(sweepNamespace).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + hash, Namespace: sweepNamespace, Labels: rsLabels, Annotations: map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: benchPtr(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: *rsTmpl}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	pods := sweepPodsPerLoad
	if w%10 == 9 {
		pods-- // the ReplicaSet cannot create its last pod
		rs.Status = appsv1.ReplicaSetStatus{Replicas: int32(pods), ReadyReplicas: int32(pods), ObservedGeneration: 1}
		if _, err := cs.AppsV1().ReplicaSets(sweepNamespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
			return err
		}
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: rs.Name + "."}, Type: corev1.EventTypeWarning, Reason: "FailedCreate", Count: 12,
			Message:        fmt.Sprintf(`Error creating: pods "%s-" is forbidden: exceeded quota: compute, requested: requests.cpu=50m, used: requests.cpu=20, limited: requests.cpu=20`, rs.Name),
			FirstTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)), LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "replicaset-controller"},
			InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", APIVersion: "apps/v1", Namespace: sweepNamespace, Name: rs.Name, UID: rs.UID}}
		if _, err := cs.CoreV1().Events(sweepNamespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i := range pods {
		p, events := benchPod(benchNodes + w*sweepPodsPerLoad + i)
		p.Namespace, p.Name = sweepNamespace, fmt.Sprintf("%s-%s-%05d", rs.Name, "x", i)
		p.Labels = rsLabels
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: benchPtr(true)}}
		p.Spec.Containers[0].Image = tmpl.Spec.Containers[0].Image
		p.Status.ContainerStatuses[0].Image = tmpl.Spec.Containers[0].Image
		switch {
		case w%10 == 7 && i < 3:
			crashLoopBenchPod(p, &events)
		case w%10 == 8 && i < 2:
			unscheduledBenchPod(p, &events)
		default:
			events = events[:2] // healthy: Pulled, Started
			p.Status.ContainerStatuses[0] = healthyStatus(p)
			p.Status.Phase = corev1.PodRunning
			for j := range p.Status.Conditions {
				p.Status.Conditions[j].Status = corev1.ConditionTrue
			}
		}
		if err := createPodWithEvents(ctx, cs, p, events); err != nil {
			return err
		}
	}
	return nil
}

// healthyStatus is a running, ready container status for p's container.
func healthyStatus(p *corev1.Pod) corev1.ContainerStatus {
	earlier := metav1.NewTime(time.Now().Add(-time.Hour))
	return corev1.ContainerStatus{Name: "app", Image: p.Spec.Containers[0].Image, Ready: true, Started: benchPtr(true),
		ImageID:     "registry.example.com/shop/app@sha256:41d7386dbb0756676c5142dd7b6b038be0ad1197cc2ff195535cef8149c6c822",
		ContainerID: "containerd://45534c25391fc51d6a44d83bfcd6129d62a3b533d86f74fb7fb9e21c5a6e770a",
		State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: earlier}}}
}

// crashLoopBenchPod makes p crash-loop, with the kubelet's BackOff event.
func crashLoopBenchPod(p *corev1.Pod, events *[]*corev1.Event) {
	now := metav1.Now()
	st := &p.Status.ContainerStatuses[0]
	*st = healthyStatus(p)
	st.Ready, st.RestartCount = false, 7
	st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container=app"}}
	st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: now, FinishedAt: now}}
	p.Status.Phase = corev1.PodRunning
	for j := range p.Status.Conditions {
		if t := p.Status.Conditions[j].Type; t == corev1.PodReady || t == corev1.ContainersReady {
			p.Status.Conditions[j].Status = corev1.ConditionFalse
		}
	}
	*events = append((*events)[:2], &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + "."}, Type: corev1.EventTypeWarning, Reason: "BackOff",
		Message: "Back-off restarting failed container app", Count: 30, FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "kubelet"}, InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{app}"}})
}

// unscheduledBenchPod makes p unscheduled with the scheduler's FailedScheduling event: it asks
// more cpu than any node has.
func unscheduledBenchPod(p *corev1.Pod, events *[]*corev1.Event) {
	now := metav1.Now()
	p.Spec.NodeName = ""
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("16")
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu.", benchNodes, benchNodes), LastTransitionTime: now}}}
	*events = []*corev1.Event{{ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + "."}, Type: corev1.EventTypeWarning, Reason: "FailedScheduling",
		Message: fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu. preemption: 0/%d nodes are available: %d No preemption victims found for incoming pod.", benchNodes, benchNodes, benchNodes, benchNodes),
		Count:   9, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "default-scheduler"}}}
}
