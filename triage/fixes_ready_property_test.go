package triage

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
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
// beside running replicas of its own, Ready or not, and pods of other workloads, every rule's
// fix is read, and none may
//   - paste a kubectl delete (or evict, force, drain) of a Ready replica of that workload;
//   - name a Ready replica with a delete in prose without saying readyFirst (deleting the last
//     Ready one takes the workload down);
//   - scale down or restart the workload itself;
//   - loosen its rollout (maxUnavailable) without saying what that costs.
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
	withReplacement := 0
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
			if strings.Contains(fix, "replaced") || strings.Contains(fix, "maxUnavailable") {
				withReplacement++
				if !shown[w.kind] {
					shown[w.kind] = true
					t.Logf("world %d (%s): %s", i, w.desc, fix)
				}
			}
		}
	}
	t.Logf("%d worlds, %d fixes about replacing the workload's running replicas", worlds, withReplacement)
	if withReplacement == 0 {
		t.Fatal("no world made a fix about the workload's running replicas: the generator no longer reaches the case")
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
	pod := replica(name(mine))
	w.snap = snap(pod, nodes, bound, failedScheduling(fmt.Sprintf("0/%d nodes are available: %d Insufficient cpu.", len(nodes), len(nodes)), 4))
	if rng.IntN(4) > 0 {
		w.snap.WorkloadReplicas = ptr.To(replicas)
	}
	w.desc = fmt.Sprintf("%s/%s of %d at %s, %d on nodes (%d Ready), %d nodes", w.kind, w.owner, replicas, req, mine, len(w.ready), len(nodes))
	return w
}
