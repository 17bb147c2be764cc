package collect

import (
	"context"
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
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// TestNodeFixesOnTheRealScheduler is the property test of issue 12's kind 4: for generated
// clusters (taints of every sort, cordons, full nodes, CSI volume limits, nodeSelectors,
// topology spread, pods bigger than any node) judged by the real kube-scheduler, every fix that
// changes a node (untaint, uncordon, label) must let the scheduler place the pod on that very
// node when applied alone, every "lower the request to X (fits N)" fix must let it place the
// lowered pod on N, the node table must count each node under the reason the scheduler counts
// it (its first failing filter, issue 10), and no fix may remove a control-plane, system or
// lifecycle taint. Each fix is applied to the
// live cluster, checked against the scheduler, and reverted. WHYPENDING_PROPERTY_WORLDS sets
// how many unschedulable worlds to try (default 8); the seed is logged.
func TestNodeFixesOnTheRealScheduler(t *testing.T) {
	worlds, rng := propertyWorlds(t, "WHYPENDING_PROPERTY_WORLDS", 8, 0)
	c := testcluster.Start(t, testenv.Options{Scheduler: true})
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	tested, fixes := 0, 0
	for attempt := 0; tested < worlds && attempt < 4*worlds; attempt++ {
		w := generateWorld(rng, attempt)
		t.Logf("world %d: %s", attempt, w)
		if err := c.Load(ctx, w.scenario()); err != nil {
			t.Fatalf("load world %d: %v", attempt, err)
		}
		// The scheduler's informers see the nodes' final taints (the loader resets the
		// not-ready taint admission adds) in no particular order with the pod: create the pod
		// only once they have settled.
		time.Sleep(time.Second)
		if _, err := c.Client.CoreV1().Pods(w.ns).Create(ctx, w.pod.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if judged(ctx, t, c, w.ns, w.pod.Name, w.claim) != "" {
			w.delete(ctx, t, c)
			continue // the scheduler placed it: no fix to judge
		}
		tested++
		d, err := Diagnose(ctx, New(c.Client).WithCalico(c.Config), w.ns, w.pod.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range d.Findings {
			for _, fix := range f.Fix {
				if removesProtectedTaint(fix) {
					t.Errorf("world %d: fix %q removes a control-plane, system or lifecycle taint (%s)", attempt, fix, w)
				}
			}
		}
		t.Logf("world %d: %s: %s", attempt, d.Primary().Code, d.Summary)
		checkCountsAsTheScheduler(t, attempt, d, w)
		// The diagnosed pod goes away: once a fix frees a node it would take the place that
		// each fix's fresh pod is checked against.
		if err := c.Client.CoreV1().Pods(w.ns).Delete(ctx, w.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		for _, fix := range nodeFixCommands(d) {
			t.Logf("world %d: applying %q", attempt, fix)
			fixes++
			checkFixPlacesPod(ctx, t, c, w, fix)
		}
		for _, fix := range lowerRequestFixes(d) {
			t.Logf("world %d: applying %q", attempt, fix.text)
			fixes++
			checkLowerRequestPlacesPod(ctx, t, c, w, fix)
		}
		w.delete(ctx, t, c)
	}
	t.Logf("%d unschedulable worlds judged, %d node fixes applied and checked against the scheduler", tested, fixes)
	if tested < worlds/2 {
		t.Fatalf("only %d of %d worlds were unschedulable; the generator no longer makes hard worlds", tested, worlds)
	}
}

// propertyWorlds returns how many worlds a property test tries (the environment variable
// worldsEnv, else def) and its random source: seeded from WHYPENDING_PROPERTY_SEED or the
// clock (logged, to rerun), on stream.
func propertyWorlds(t *testing.T, worldsEnv string, def int, stream uint64) (int, *rand.Rand) {
	t.Helper()
	worlds := def
	if v, err := strconv.Atoi(os.Getenv(worldsEnv)); err == nil && v > 0 {
		worlds = v
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("WHYPENDING_PROPERTY_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (rerun with WHYPENDING_PROPERTY_SEED=%d)", seed, seed)
	return worlds, rand.New(rand.NewPCG(seed, stream))
}

// world is one generated cluster: its nodes and their objects, and a pod to place.
type world struct {
	id      int
	ns      string
	objects []runtime.Object
	nodes   []*corev1.Node
	pod     *corev1.Pod
	// claim is the pending pod's WaitForFirstConsumer claim ("" without one): with it the
	// scheduler cannot bind the pod (no provisioner runs), so its choice shows on the claim.
	claim string
	desc  []string
}

func (w *world) String() string { return strings.Join(w.desc, "; ") }

const (
	propDriver = "ebs.csi.aws.com"
	propClass  = "prop-wffc"
)

// generateWorld builds a world of 3 to 5 nodes with random taints, cordons, CPU fillers, labels
// and CSI volume limits, and a pod that requests 1 CPU and maybe a nodeSelector, a CSI volume
// and a hostname spread constraint.
func generateWorld(rng *rand.Rand, id int) *world {
	w := &world{id: id, ns: fmt.Sprintf("prop-%d", id)}
	w.objects = append(w.objects, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}})
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	w.objects = append(w.objects, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: propClass}, Provisioner: propDriver, VolumeBindingMode: &wffc})
	taints := []string{"", "", "CriticalAddonsOnly=true:NoSchedule", "node-role.kubernetes.io/control-plane:NoSchedule",
		"dedicated=batch:NoSchedule", "dedicated=batch:NoSchedule", "team=ml:NoExecute", "node.kubernetes.io/disk-pressure:NoSchedule"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: w.ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/web:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
	}
	if rng.IntN(10) < 2 {
		// Bigger than any node: only lowering the request helps.
		pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("5")
		w.desc = append(w.desc, "pod requests 5 CPU")
	}
	useVolume := rng.IntN(10) < 3
	if rng.IntN(10) < 3 {
		pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		w.desc = append(w.desc, "pod selects disk=ssd")
	}
	if useVolume {
		w.claim = "web-data"
		w.objects = append(w.objects, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: w.claim, Namespace: w.ns},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(propClass), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		})
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: w.claim}}}}
		w.desc = append(w.desc, "pod mounts a WaitForFirstConsumer EBS claim")
	}
	spread := rng.IntN(10) < 2
	if spread {
		pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		w.desc = append(w.desc, "pod spreads by hostname")
	}
	n := 3 + rng.IntN(3)
	for j := range n {
		name := fmt.Sprintf("p%d-n%d", id, j)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			},
		}
		var traits []string
		if t := taints[rng.IntN(len(taints))]; t != "" {
			kv, effect, _ := strings.Cut(t, ":")
			k, v, _ := strings.Cut(kv, "=")
			node.Spec.Taints = []corev1.Taint{{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}}
			traits = append(traits, "taint "+t)
		}
		if rng.IntN(10) < 3 {
			// As the node lifecycle controller keeps it on a cordoned node.
			node.Spec.Unschedulable = true
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule})
			traits = append(traits, "cordoned")
		}
		if rng.IntN(10) < 5 {
			node.Labels["disk"] = "ssd"
			traits = append(traits, "disk=ssd")
		}
		if rng.IntN(10) < 2 {
			w.objects = append(w.objects, boundPod(w.ns, name+"-filler", name, "3500m", nil))
			traits = append(traits, "cpu full")
		}
		if useVolume {
			w.objects = append(w.objects, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: propDriver, NodeID: "i-" + name, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](2)}}}}})
			if rng.IntN(10) < 4 {
				for k := range 2 {
					vol := fmt.Sprintf("%s-vol-%d", name, k)
					w.objects = append(w.objects,
						&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: vol}, Spec: corev1.PersistentVolumeSpec{
							Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
							AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: propClass,
							ClaimRef:               &corev1.ObjectReference{Namespace: w.ns, Name: vol},
							PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: propDriver, VolumeHandle: "vol-" + vol}}},
							Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}},
						&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: vol, Namespace: w.ns}, Spec: corev1.PersistentVolumeClaimSpec{
							VolumeName: vol, StorageClassName: ptr.To(propClass), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
							Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
							Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
						boundPod(w.ns, vol+"-user", name, "10m", &corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: vol}}}))
				}
				traits = append(traits, "2 of 2 EBS volumes in use")
			}
		}
		if spread && rng.IntN(2) == 0 {
			p := boundPod(w.ns, name+"-replica", name, "10m", nil)
			p.Labels = map[string]string{"app": "web"}
			w.objects = append(w.objects, p)
			traits = append(traits, "runs a replica")
		}
		w.nodes = append(w.nodes, node)
		w.objects = append(w.objects, node)
		w.desc = append(w.desc, name+": "+strings.Join(append(traits, "ok"), ", "))
	}
	w.pod = pod // created by the test once the world has loaded
	return w
}

func boundPod(ns, name, node, cpu string, vol *corev1.Volume) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/filler:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if vol != nil {
		p.Spec.Volumes = []corev1.Volume{*vol}
	}
	return p
}

// scenario turns the world into objects testenv.Load takes.
func (w *world) scenario() *testenv.Scenario {
	s := &testenv.Scenario{Name: w.ns}
	for _, o := range w.objects {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			panic(err)
		}
		u := &unstructured.Unstructured{Object: m}
		switch o.(type) {
		case *storagev1.StorageClass, *storagev1.CSINode:
			u.SetAPIVersion("storage.k8s.io/v1")
		default:
			u.SetAPIVersion("v1")
		}
		u.SetKind(strings.TrimPrefix(fmt.Sprintf("%T", o), "*v1."))
		s.Objects = append(s.Objects, u)
	}
	return s
}

// delete removes the world's nodes, pods, StorageClass and PVs, so the next world starts from
// an empty cluster (the scheduler sees every node).
func (w *world) delete(ctx context.Context, t *testing.T, c *testenv.Cluster) {
	t.Helper()
	for _, o := range append(w.objects, w.pod) {
		var err error
		switch o := o.(type) {
		case *corev1.Node:
			err = c.Client.CoreV1().Nodes().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *storagev1.CSINode:
			err = c.Client.StorageV1().CSINodes().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *corev1.PersistentVolume:
			err = c.Client.CoreV1().PersistentVolumes().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *storagev1.StorageClass:
			err = c.Client.StorageV1().StorageClasses().Delete(ctx, o.Name, metav1.DeleteOptions{})
		case *corev1.Pod:
			err = c.Client.CoreV1().Pods(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		if err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatalf("delete world %d: %v", w.id, err)
		}
	}
}

// placed returns the node the scheduler chose for the pod: its spec.nodeName, or, while a
// WaitForFirstConsumer claim waits for a provisioner that never runs here, the claim's
// selected-node annotation. "" means not placed.
func placed(ctx context.Context, t *testing.T, c *testenv.Cluster, ns, pod, claim string) string {
	t.Helper()
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if claim != "" {
		pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pvc.Annotations["volume.kubernetes.io/selected-node"]
	}
	return ""
}

// judged waits until the scheduler has judged the pod: placed it (see placed) or written a
// FailedScheduling event. It returns the node it placed the pod on, or "".
func judged(ctx context.Context, t *testing.T, c *testenv.Cluster, ns, pod, claim string) string {
	t.Helper()
	for {
		if node := placed(ctx, t, c, ns, pod, claim); node != "" {
			return node
		}
		evs, err := c.FailedScheduling(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, UID: types.UID(podUID(ctx, t, c, ns, pod))}})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 {
			return ""
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the scheduler never judged pod %s/%s", ns, pod)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// removesProtectedTaint reports whether a fix removes a taint no fix may remove.
func removesProtectedTaint(fix string) bool {
	if !strings.HasPrefix(fix, "kubectl taint") || !strings.Contains(fix, "-") {
		return false
	}
	for _, key := range []string{"node-role.kubernetes.io/", "CriticalAddonsOnly", "node.kubernetes.io/", "node.cloudprovider.kubernetes.io/"} {
		if strings.Contains(fix, " "+key) || strings.Contains(fix, "'"+key) {
			return true
		}
	}
	return false
}

// nodeFixCommands returns the fixes of d that change a node.
func nodeFixCommands(d *triage.Diagnosis) []string {
	var out []string
	for _, f := range d.Findings {
		for _, x := range f.Fix {
			if strings.HasPrefix(x, "kubectl taint nodes ") || strings.HasPrefix(x, "kubectl uncordon ") || strings.HasPrefix(x, "kubectl label node ") {
				if !slices.Contains(out, x) {
					out = append(out, x)
				}
			}
		}
	}
	return out
}

// checkFixPlacesPod applies one node fix to the live cluster, recreates the pod (and its
// claim) so the scheduler judges it afresh, and requires the scheduler to place it on the
// fixed node; then it puts the node back as it was.
func checkFixPlacesPod(ctx context.Context, t *testing.T, c *testenv.Cluster, w *world, fix string) {
	t.Helper()
	words := strings.Fields(strings.SplitN(fix, "#", 2)[0])
	var target string
	switch {
	case words[1] == "taint":
		target = words[3]
	case words[1] == "uncordon":
		target = words[2]
	case words[1] == "label":
		target = words[3]
	}
	target = strings.Trim(target, "'")
	before, err := c.Client.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("fix %q names node %s: %v", fix, target, err)
	}
	after := before.DeepCopy()
	switch words[1] {
	case "taint":
		key, effect, _ := strings.Cut(strings.TrimSuffix(strings.Trim(words[4], "'"), "-"), ":")
		after.Spec.Taints = slices.DeleteFunc(after.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == key && string(tn.Effect) == effect })
	case "uncordon":
		// kubectl uncordon, and the node lifecycle controller lifting its taint.
		after.Spec.Unschedulable = false
		after.Spec.Taints = slices.DeleteFunc(after.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == "node.kubernetes.io/unschedulable" })
	case "label":
		for _, kv := range words[4:] {
			k, v, _ := strings.Cut(strings.Trim(kv, "'"), "=")
			after.Labels[k] = v
		}
	}
	if _, err := c.Client.CoreV1().Nodes().Update(ctx, after, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("apply %q: %v", fix, err)
	}
	defer func() {
		cur, err := c.Client.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.Taints, cur.Spec.Unschedulable, cur.Labels = before.Spec.Taints, before.Spec.Unschedulable, before.Labels
		if _, err := c.Client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("revert %q: %v", fix, err)
		}
	}()

	// A fresh pod (and claim) under a new name, judged by the scheduler after the fix.
	pod := w.pod.DeepCopy()
	pod.Name = fmt.Sprintf("web-fix-%d", time.Now().UnixNano()%1_000_000)
	placeFresh(ctx, t, c, w, pod, target, false, fix)
}

// placeFresh creates pod (a changed copy of the world's pod under a new name, with a claim of
// its own when the world's pod has one) and requires the scheduler to place it on target
// within 30 seconds (on any node when anywhere); fix names what is being checked.
func placeFresh(ctx context.Context, t *testing.T, c *testenv.Cluster, w *world, pod *corev1.Pod, target string, anywhere bool, fix string) {
	t.Helper()
	name, claim := pod.Name, ""
	pod.ResourceVersion, pod.UID = "", ""
	if w.claim != "" {
		claim = name + "-data"
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: w.ns},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(propClass), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if _, err := c.Client.CoreV1().PersistentVolumeClaims(w.ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = claim
	}
	if _, err := c.Client.CoreV1().Pods(w.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Client.CoreV1().Pods(w.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		node := placed(ctx, t, c, w.ns, name, claim)
		if node == target || (node != "" && anywhere) {
			return
		}
		if node != "" {
			t.Errorf("world %d: after %q the scheduler placed the pod on %s, not on %s (%s)", w.id, fix, node, target, w)
			return
		}
		if time.Now().After(deadline) {
			evs, _ := c.FailedScheduling(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, UID: types.UID(podUID(ctx, t, c, w.ns, name))}})
			last := ""
			if len(evs) > 0 {
				last = evs[len(evs)-1].Message
			}
			t.Errorf("world %d: fix %q does not place the pod on %s: the scheduler still says %q (%s)", w.id, fix, target, last, w)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podUID(ctx context.Context, t *testing.T, c *testenv.Cluster, ns, name string) string {
	t.Helper()
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(p.UID)
}

// checkCountsAsTheScheduler requires the node table to count each node under the reason the
// scheduler's latest FailedScheduling message counts it: its first failing filter.
func checkCountsAsTheScheduler(t *testing.T, id int, d *triage.Diagnosis, w *world) {
	t.Helper()
	msg, ok := triage.LatestSchedulerMessage(d.Events)
	var verdicts []triage.NodeVerdict
	for _, f := range d.Findings {
		if f.Nodes != nil {
			verdicts = f.Nodes
			break
		}
	}
	if !ok || msg.Total != len(verdicts) {
		return
	}
	first := map[triage.Code]int{}
	for _, nv := range verdicts {
		for _, r := range nv.Reasons {
			if r.Code != triage.CodeNodeNotReady {
				first[r.Code]++
				break
			}
		}
	}
	for _, r := range msg.Reasons {
		if r.Code != "" && r.Code != triage.CodeUnknown && first[r.Code] != r.Count {
			t.Errorf("world %d: the scheduler counts %d node(s) with %q, the table's first reasons %d (%s; %s)", id, r.Count, r.Text, first[r.Code], msg.Event.Message, w)
		}
	}
}

// lowerFix is a "lower the request" fix: the cpu request it suggests for the pod and the node
// it says the pod then fits.
type lowerFix struct {
	text, node string
	cpu        resource.Quantity
}

var (
	lowerRE      = regexp.MustCompile(`^Lower the cpu request of pod \S+ to at most (\S+) \(what (\S+) has free\)`)
	setRequestRE = regexp.MustCompile(`--requests=cpu=(\S+)\s+# per container: fits (\S+),`)
)

// lowerRequestFixes returns the fixes of d that lower the pod's cpu request to fit a node.
func lowerRequestFixes(d *triage.Diagnosis) []lowerFix {
	var out []lowerFix
	for _, f := range d.Findings {
		for _, x := range f.Fix {
			m := lowerRE.FindStringSubmatch(x)
			if m == nil {
				m = setRequestRE.FindStringSubmatch(x)
			}
			if m == nil {
				continue
			}
			q, err := resource.ParseQuantity(m[1])
			if err != nil {
				out = append(out, lowerFix{text: x}) // checkLowerRequestPlacesPod reports it
				continue
			}
			out = append(out, lowerFix{text: x, node: strings.TrimSuffix(m[2], ","), cpu: q})
		}
	}
	return out
}

// checkLowerRequestPlacesPod creates the pod afresh with the lowered cpu request and requires
// the scheduler to place it on the node the fix names (pinned there by node affinity on
// metadata.name, unless the pod spreads: pinning would shrink its spread domains, so it must
// then only be placed somewhere).
func checkLowerRequestPlacesPod(ctx context.Context, t *testing.T, c *testenv.Cluster, w *world, fix lowerFix) {
	t.Helper()
	if fix.node == "" {
		t.Errorf("world %d: fix %q has no amount a manifest takes", w.id, fix.text)
		return
	}
	pod := w.pod.DeepCopy()
	pod.Name = fmt.Sprintf("web-low-%d", time.Now().UnixNano()%1_000_000)
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = fix.cpu
	pinned := len(pod.Spec.TopologySpreadConstraints) == 0
	if pinned {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{fix.node}}}}}}}}
	}
	placeFresh(ctx, t, c, w, pod, fix.node, !pinned, fix.text)
}
