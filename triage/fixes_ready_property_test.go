package triage

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestNoFixDeletesAReadyReplica is the property behind the tester's workload-grouped report (a
// fix told the user to delete the only Ready replica of the Deployment asked about): over
// generated clusters where a replica of a Deployment, StatefulSet or ReplicaSet is Pending
// beside running replicas of its own, Ready or not, and pods of other workloads, or where the
// pod asked about (of such a workload, or a bare pod) runs Ready again between OOM kills, every
// rule's fix is read, and none may
//   - paste a kubectl delete (or evict, force, drain) of a Ready replica of that workload;
//   - name a Ready replica with a delete in prose without saying readyFirst (deleting the last
//     Ready one takes the workload down);
//   - scale down or restart the workload itself;
//   - loosen its rollout (maxUnavailable) without saying what that costs;
//   - replace a Ready bare pod (it has no other replica) without saying it then serves nothing.
//
// WHYPENDING_READY_WORLDS sets how many worlds (default 400); the seed is logged, and
// WHYPENDING_PROPERTY_SEED reruns one.
func TestNoFixDeletesAReadyReplica(t *testing.T) {
	worlds := 400
	if v, err := strconv.Atoi(os.Getenv("WHYPENDING_READY_WORLDS")); err == nil && v > 0 {
		worlds = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("WHYPENDING_PROPERTY_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (rerun with WHYPENDING_PROPERTY_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	withReplacement, replaces := 0, 0
	shown := map[string]bool{} // one replacement fix logged per workload kind, to read
	for i := range worlds {
		w := generateReadyWorld(rng)
		d := Evaluate(w.snap)
		var fixes []string
		for _, f := range d.Findings {
			fixes = append(fixes, f.Fix...)
		}
		for _, fix := range fixes {
			if problem := hurtsReadyReplica(fix, w); problem != "" {
				t.Errorf("world %d (%s): fix %q %s", i, w.desc, fix, problem)
			}
			if strings.Contains(fix, "replace --force") {
				replaces++
			}
			if strings.Contains(fix, "replaced") || strings.Contains(fix, "maxUnavailable") {
				withReplacement++
				if !shown[w.kind] {
					shown[w.kind] = true
					t.Logf("world %d (%s): %s", i, w.desc, fix)
				}
			}
		}
	}
	t.Logf("%d worlds, %d fixes about replacing the workload's running replicas, %d replacing a bare pod", worlds, withReplacement, replaces)
	if withReplacement == 0 || replaces == 0 {
		t.Fatal("no world made a fix about the workload's running replicas or a bare pod's replace: the generator no longer reaches the cases")
	}
}

// readyWorld is one generated cluster: the Snapshot of the Pending replica asked about, its
// workload (kind/name as workloadOf says), and the names of its replicas that are Ready.
type readyWorld struct {
	snap        *Snapshot
	kind, owner string
	ready       []string
	desc        string
}

var (
	// destructive matches a fix that removes pods: deleting, evicting, draining or force-
	// replacing them.
	destructive = regexp.MustCompile(`(?i)\b(delete|deleting|evict|drain)\b|replace --force|--force`)
	// pastedDelete matches a kubectl command that deletes or evicts pods.
	pastedDelete = regexp.MustCompile(`kubectl (delete|drain|evict)\b[^#]*`)
)

// hurtsReadyReplica returns what is wrong with fix for w's Ready replicas, or "".
func hurtsReadyReplica(fix string, w *readyWorld) string {
	for _, cmd := range pastedDelete.FindAllString(fix, -1) {
		for _, name := range w.ready {
			if strings.Contains(cmd, name) {
				return fmt.Sprintf("pastes a delete of the Ready replica %s", name)
			}
		}
	}
	if w.kind == "" {
		// A bare pod has no other replica to be Ready first: the fix must say what it costs.
		if len(w.ready) > 0 && strings.Contains(fix, w.ready[0]) && destructive.MatchString(fix) && !strings.Contains(fix, "it serves nothing until the new pod is Ready") {
			return "replaces the Ready bare pod without saying it serves nothing meanwhile"
		}
		return ""
	}
	for _, name := range w.ready {
		if strings.Contains(fix, name) && destructive.MatchString(fix) && !strings.Contains(fix, readyFirst) {
			return fmt.Sprintf("says to delete the Ready replica %s without %q", name, readyFirst)
		}
	}
	for _, verb := range []string{"kubectl scale ", "kubectl rollout restart "} {
		if strings.Contains(fix, verb+w.kind+"/"+w.owner+" ") {
			return "scales down or restarts the workload itself"
		}
	}
	if strings.Contains(fix, `"maxUnavailable":1`) && strings.Contains(fix, w.kind+" "+w.owner) && !strings.Contains(fix, "costs") {
		return "loosens the workload's rollout without saying what it costs"
	}
	return ""
}

// generateReadyWorld makes 1-4 nodes of 1-4 CPUs, fills them with pods of another Deployment
// and with running replicas (Ready or not) of a Deployment, StatefulSet or ReplicaSet named
// checkout, and makes one more replica of checkout the Pending pod asked about.
func generateReadyWorld(rng *rand.Rand) *readyWorld {
	w := &readyWorld{owner: "checkout", kind: []string{"deployment", "statefulset", "replicaset"}[rng.IntN(3)]}
	cpus := []string{"300m", "500m", "700m", "1", "1500m", "2"}
	req := cpus[rng.IntN(len(cpus))]
	replicas := int32(1 + rng.IntN(6))
	mine := 0
	replica := func(name string) *corev1.Pod {
		p := podRequesting(name, "cpu="+req)
		switch w.kind {
		case "deployment":
			return ofDeployment(p, "shop", w.owner)
		case "statefulset":
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: w.owner, Controller: ptr.To(true)}}
		default:
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: w.owner, Controller: ptr.To(true)}}
		}
		return p
	}
	name := func(i int) string {
		if w.kind == "statefulset" {
			return fmt.Sprintf("%s-%d", w.owner, i)
		}
		return fmt.Sprintf("%s-5d8f-%05d", w.owner, i)
	}
	var nodes []*corev1.Node
	var bound []*corev1.Pod
	for i := range 1 + rng.IntN(4) {
		alloc := int64(1000 * (1 + rng.IntN(4)))
		n := node(fmt.Sprintf("node-%d", i+1), withAllocatable(corev1.ResourceCPU, resource.NewMilliQuantity(alloc, resource.DecimalSI).String()))
		nodes = append(nodes, n)
		free := alloc
		for j := range rng.IntN(3) {
			other := int64(100 * (1 + rng.IntN(10)))
			if other > free {
				break
			}
			free -= other
			bound = append(bound, ofDeployment(boundTo(n.Name, fmt.Sprintf("reports-5d8f-%d%d", i, j), fmt.Sprintf("cpu=%dm", other)), "shop", "reports"))
		}
		own := resource.MustParse(req)
		for free >= own.MilliValue() && mine < int(replicas) && rng.IntN(3) > 0 {
			free -= own.MilliValue()
			p := replica(name(mine))
			p.Spec.NodeName, p.Status.Phase = n.Name, corev1.PodRunning
			if rng.IntN(3) > 0 {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(testNow.Add(-time.Hour))}}}}
				w.ready = append(w.ready, p.Name)
			}
			bound = append(bound, p)
			mine++
		}
	}
	if rng.IntN(3) == 0 {
		return w.oomWorld(rng, replica(name(mine)), nodes, bound)
	}
	pod := replica(name(mine))
	w.snap = snap(pod, nodes, bound, failedScheduling(fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu.", len(nodes), len(nodes)), 4))
	if rng.IntN(4) > 0 {
		w.snap.WorkloadReplicas = ptr.To(replicas)
	}
	w.desc = fmt.Sprintf("%s/%s of %d at %s, %d on nodes (%d Ready), %d nodes", w.kind, w.owner, replicas, req, mine, len(w.ready), len(nodes))
	return w
}

// oomWorld makes pod (a replica of w's workload, or with one chance in three a bare pod) the
// pod asked about, bound to the first node and Ready again 2 minutes after an OOM kill: the
// fixes raise its memory limit, which for a bare pod means deleting it.
func (w *readyWorld) oomWorld(rng *rand.Rand, pod *corev1.Pod, nodes []*corev1.Node, bound []*corev1.Pod) *readyWorld {
	if rng.IntN(3) == 0 {
		w.kind, w.owner, w.ready = "", "", nil
		pod.OwnerReferences = nil
		delete(pod.Labels, "pod-template-hash")
		bound = slices.DeleteFunc(bound, func(p *corev1.Pod) bool { return strings.HasPrefix(p.Name, "checkout-") })
	}
	pod.Spec.NodeName, pod.Status.Phase = nodes[0].Name, corev1.PodRunning
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: int32(1 + rng.IntN(9)),
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(testNow.Add(-time.Minute))}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: metav1.NewTime(testNow.Add(-2 * time.Minute))}}}}
	w.ready = append(w.ready, pod.Name)
	w.snap = snap(pod, nodes, append(bound, pod))
	w.desc = fmt.Sprintf("%s/%s: the pod asked about Ready again after an OOM kill, %d Ready", orDefault(w.kind, "bare"), orDefault(w.owner, pod.Name), len(w.ready))
	return w
}
