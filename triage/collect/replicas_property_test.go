package collect

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// TestReplicaResourcesFixOnTheRealScheduler is issue 22's item 6 (first bullet) against the
// real kube-scheduler: for generated clusters (2-CPU to 4-CPU nodes, some tainted, with bound
// pods of other workloads) and a Deployment whose replicas do not all fit, the answer's
// `kubectl set resources deployment/… --requests=cpu=X` fix must let every replica fit: all
// replicas created afresh with X per container are bound by the scheduler. And X is the
// largest such request: with 1m more, a replica stays Pending. No controller runs, so the
// Deployment and its ReplicaSet only give the pods their owner and the answer its spec.replicas.
// WHYPENDING_REPLICA_WORLDS sets how many worlds to try (default 6); the seed is logged.
func TestReplicaResourcesFixOnTheRealScheduler(t *testing.T) {
	worlds, rng := propertyWorlds(t, "WHYPENDING_REPLICA_WORLDS", 6, 1)
	c := testcluster.Start(t, testenv.Options{Scheduler: true})
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	checked := 0
	for attempt := 0; checked < worlds && attempt < 4*worlds; attempt++ {
		w, rw := generateReplicaWorld(rng, attempt)
		t.Logf("world %d: %s", attempt, w)
		if err := c.Load(ctx, w.scenario()); err != nil {
			t.Fatalf("load world %d: %v", attempt, err)
		}
		time.Sleep(time.Second) // let the scheduler see the nodes' final taints first
		pods := rw.create(ctx, t, c, rw.cpu)
		var pending string
		for _, p := range pods {
			if judged(ctx, t, c, w.ns, p, "") == "" {
				pending = p
			}
		}
		if pending == "" {
			rw.deletePods(ctx, t, c, pods)
			w.delete(ctx, t, c)
			continue // every replica fits: nothing to fix
		}
		d, err := Diagnose(ctx, New(c.Client), w.ns, pending)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("world %d: %s: %s", attempt, d.Primary().Code, d.Summary)
		per, fix := replicaFix(d)
		if fix == "" {
			t.Logf("world %d: no set resources fix (fixes %q)", attempt, d.Primary().Fix)
			rw.deletePods(ctx, t, c, pods)
			w.delete(ctx, t, c)
			continue
		}
		checked++
		t.Logf("world %d: applying %q", attempt, fix)
		if !strings.Contains(fix, fmt.Sprintf("all %d replicas fit then", rw.replicas)) {
			t.Errorf("world %d: fix %q does not say all %d replicas fit", attempt, fix, rw.replicas)
		}
		rw.deletePods(ctx, t, c, pods)
		// With the fix, every replica fits.
		pods = rw.create(ctx, t, c, per)
		if left := waitAllBound(ctx, t, c, w.ns, pods, 30*time.Second); len(left) > 0 {
			t.Errorf("world %d: after %q the scheduler leaves %v Pending (%s)", attempt, fix, left, w)
		}
		rw.deletePods(ctx, t, c, pods)
		// With 1m more per container, one does not.
		more := per.DeepCopy()
		more.Add(resource.MustParse("1m"))
		pods = rw.create(ctx, t, c, more)
		if left := waitAllBound(ctx, t, c, w.ns, pods, 15*time.Second); len(left) == 0 {
			t.Errorf("world %d: with %s per container (1m more than %q) every replica fits too: the fix is not the largest request that fits (%s)", attempt, more.String(), fix, w)
		}
		rw.deletePods(ctx, t, c, pods)
		w.delete(ctx, t, c)
	}
	t.Logf("%d worlds' replica fixes checked against the scheduler", checked)
	if checked < worlds/2 {
		t.Fatalf("only %d of %d worlds gave a replica fix to check; the generator no longer makes such worlds", checked, worlds)
	}
}

// replicaWorld is the Deployment of a generated world: its replicas' shape and owners.
type replicaWorld struct {
	ns         string
	replicas   int
	containers int
	// cpu is each container's request as generated.
	cpu   resource.Quantity
	rs    *appsv1.ReplicaSet
	round int
}

// generateReplicaWorld builds 3 or 4 nodes of 2 to 4 CPU, some with a taint the replicas do
// not tolerate, some with a bound pod of another workload, and a Deployment of 3 to 7 replicas
// of 1 or 2 containers whose cpu request makes some of them Pending.
func generateReplicaWorld(rng *rand.Rand, id int) (*world, *replicaWorld) {
	w := &world{id: id, ns: fmt.Sprintf("replicas-%d", id)}
	w.objects = append(w.objects, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}})
	rw := &replicaWorld{ns: w.ns, replicas: 3 + rng.IntN(5), containers: 1 + rng.IntN(2)}
	perPod := 800 + 100*rng.IntN(15) // 800m to 2200m
	rw.cpu = *resource.NewMilliQuantity(int64(perPod/rw.containers), resource.DecimalSI)
	w.desc = append(w.desc, fmt.Sprintf("Deployment web: %d replicas of %d container(s) of %s cpu", rw.replicas, rw.containers, rw.cpu.String()))
	for j := range 3 + rng.IntN(2) {
		name := fmt.Sprintf("r%d-n%d", id, j)
		cpu := resource.MustParse(fmt.Sprint(2 + rng.IntN(3)))
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			},
		}
		traits := []string{cpu.String() + " cpu"}
		if rng.IntN(5) == 0 {
			node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
			traits = append(traits, "taint dedicated=batch:NoSchedule")
		}
		if rng.IntN(2) == 0 {
			used := fmt.Sprintf("%dm", 100*(1+rng.IntN(15)))
			w.objects = append(w.objects, boundPod(w.ns, name+"-other", name, used, nil))
			traits = append(traits, "other pods request "+used)
		}
		w.nodes = append(w.nodes, node)
		w.objects = append(w.objects, node)
		w.desc = append(w.desc, name+": "+strings.Join(traits, ", "))
	}
	// The world's pod is none of the replicas (they are created by the test): a placeholder
	// for world.delete.
	w.pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "none", Namespace: w.ns}}
	return w, rw
}

// create makes the Deployment and its ReplicaSet (once) and the world's replicas with cpu per
// container, and returns their names.
func (rw *replicaWorld) create(ctx context.Context, t *testing.T, c *testenv.Cluster, cpu resource.Quantity) []string {
	t.Helper()
	labels := map[string]string{"app": "web", "pod-template-hash": "6f7b9c5d4"}
	if rw.rs == nil {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: rw.ns}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(rw.replicas)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/web:1"}}}}}}
		dep, err := c.Client.AppsV1().Deployments(rw.ns).Create(ctx, dep, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-6f7b9c5d4", Namespace: rw.ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(rw.replicas)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/web:1"}}}}}}
		if rw.rs, err = c.Client.AppsV1().ReplicaSets(rw.ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rw.round++
	var names []string
	for i := range rw.replicas {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-6f7b9c5d4-%d%c", rw.round, 'a'+i), Namespace: rw.ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rw.rs.Name, UID: rw.rs.UID, Controller: ptr.To(true)}}}}
		for k := range rw.containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", k), Image: "registry.example.com/web:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}}})
		}
		if _, err := c.Client.CoreV1().Pods(rw.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	return names
}

// deletePods deletes the replicas at once (no kubelet confirms a graceful deletion).
func (rw *replicaWorld) deletePods(ctx context.Context, t *testing.T, c *testenv.Cluster, pods []string) {
	t.Helper()
	for _, name := range pods {
		if err := c.Client.CoreV1().Pods(rw.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatalf("delete pod %s: %v", name, err)
		}
	}
	for _, name := range pods {
		for {
			if _, err := c.Client.CoreV1().Pods(rw.ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// waitAllBound waits up to limit for the scheduler to bind every pod and returns those it
// left unbound; it returns early once a pod has a FailedScheduling event and the others are
// judged.
func waitAllBound(ctx context.Context, t *testing.T, c *testenv.Cluster, ns string, pods []string, limit time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var left []string
		judgedAll := true
		for _, name := range pods {
			if placed(ctx, t, c, ns, name, "") != "" {
				continue
			}
			left = append(left, name)
			evs, err := c.FailedScheduling(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, UID: types.UID(podUID(ctx, t, c, ns, name))}})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				judgedAll = false
			}
		}
		if len(left) == 0 || (judgedAll && time.Now().After(deadline.Add(-limit/2))) || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var replicaFixRE = regexp.MustCompile(`^kubectl set resources deployment/web -n \S+ --requests=cpu=(\S+)\s+# per container: (.*)$`)

// replicaFix returns the cpu per container of the primary finding's set resources fix, and
// the fix ("" when it has none).
func replicaFix(d *triage.Diagnosis) (resource.Quantity, string) {
	for _, x := range d.Primary().Fix {
		if m := replicaFixRE.FindStringSubmatch(x); m != nil {
			if q, err := resource.ParseQuantity(m[1]); err == nil {
				return q, x
			}
		}
	}
	return resource.Quantity{}, ""
}
