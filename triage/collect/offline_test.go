package collect

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// This file checks the non-scheduling rule families against every scenario folder without a
// control plane: it builds the triage.Snapshot a Collector would build from the manifests (the clock
// line is "now", delete_after_load pods get a deletionTimestamp) and evaluates it. The real
// control-plane test over the same folders is scenarios_test.go; this one is fast and runs the
// same expectations, so a rule change is checked in a second.

// scenarioDirs lists testdata/scenarios/* and testdata/cases/*.
func scenarioDirs(t testing.TB) []string {
	t.Helper()
	var dirs []string
	for _, pattern := range []string{"../../testdata/scenarios/*", "../../testdata/cases/*"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range m {
			if _, err := os.Stat(filepath.Join(d, "expected.yaml")); err == nil {
				dirs = append(dirs, d)
			}
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no scenario folders found under testdata/scenarios and testdata/cases")
	}
	return dirs
}

func TestScenariosOffline(t *testing.T) {
	for _, dir := range scenarioDirs(t) {
		sc, err := testenv.LoadScenarioDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Expected.NeedsScheduler || sc.Expected.SchedulerMustBeStopped || sc.Expected.Target != "" {
			continue // workload targets are read through the workload reads: TestScenarios
		}
		t.Run(sc.Name, func(t *testing.T) {
			s := offlineSnapshot(t, sc)
			d := triage.Evaluate(s)
			got := d.Primary()
			if string(got.Code) != sc.Expected.Code && !slices.Contains(sc.Expected.AlsoOK, string(got.Code)) {
				t.Errorf("primary code = %s, want %s (also ok %v); summary: %s", got.Code, sc.Expected.Code, sc.Expected.AlsoOK, got.Summary)
			}
			if len(got.Evidence) == 0 {
				t.Errorf("primary finding %s has no evidence", got.Code)
			}
			if len(got.Fix) == 0 {
				t.Errorf("primary finding %s has no fix", got.Code)
			}
			var codes []string
			for _, f := range d.Findings {
				codes = append(codes, string(f.Code))
			}
			for _, want := range sc.Expected.Context {
				if !slices.Contains(codes, want) {
					t.Errorf("findings = %v, want context %s among them", codes, want)
				}
			}
			logDiagnosis(t, d)
		})
	}
}

// offlineSnapshot builds the triage.Snapshot a Collector would build for the scenario's pod, with the
// scenario clock as now and IPAM state derived from the Calico objects in the manifests.
func offlineSnapshot(t testing.TB, sc *testenv.Scenario) *triage.Snapshot {
	t.Helper()
	ns, name, _ := strings.Cut(sc.Expected.Pod, "/")
	now := sc.Clock
	if now.IsZero() {
		now = time.Now()
	}
	s := &triage.Snapshot{
		Now:           now,
		Requested:     triage.PodRef{Namespace: ns, Name: name},
		PodsByNode:    map[string][]*corev1.Pod{},
		ServerVersion: &version.Info{Major: "1", Minor: "37", GitVersion: "v0.0.0-master+$Format:%H$"},
	}
	var pods []*corev1.Pod
	var nodes []*corev1.Node
	pvcs := map[string]*corev1.PersistentVolumeClaim{}
	pvs := map[string]*corev1.PersistentVolume{}
	var calicoObjs []*unstructured.Unstructured
	classes := map[string]*storagev1.StorageClass{}
	claimEvents := map[string][]triage.Event{}   // by claim name, in the pod's namespace
	names := map[string][]string{}               // resource -> names in the pod's namespace
	created := map[string]map[string]time.Time{} // resource -> name -> creationTimestamp
	configMaps := map[string]*corev1.ConfigMap{} // by name, in the pod's namespace
	jobs := map[string]*unstructured.Unstructured{}
	workloads := map[string]*unstructured.Unstructured{} // "Kind/name" in the pod's namespace
	for _, u := range sc.Objects {
		if u.GetNamespace() == ns {
			// The loader creates every object at load time (the clock line: now), unless the
			// manifest sets its creationTimestamp.
			at := u.GetCreationTimestamp().Time
			if at.IsZero() {
				at = now
			}
			addName := func(res string) {
				names[res] = append(names[res], u.GetName())
				if created[res] == nil {
					created[res] = map[string]time.Time{}
				}
				created[res][u.GetName()] = at
			}
			switch u.GetKind() {
			case "ConfigMap":
				addName("configmaps")
				cm := &corev1.ConfigMap{}
				fromUnstructured(t, u, cm)
				configMaps[cm.Name] = cm
			case "Secret":
				addName("secrets")
			case "PersistentVolumeClaim":
				addName("persistentvolumeclaims")
			case "Job":
				jobs[u.GetName()] = u
			case "Deployment", "ReplicaSet", "StatefulSet":
				workloads[u.GetKind()+"/"+u.GetName()] = u
			}
		}
		switch u.GetKind() {
		case "StorageClass":
			c := &storagev1.StorageClass{}
			fromUnstructured(t, u, c)
			classes[c.Name] = c
		case "Pod":
			p := &corev1.Pod{}
			fromUnstructured(t, u, p)
			pods = append(pods, p)
		case "Node":
			n := &corev1.Node{}
			fromUnstructured(t, u, n)
			nodes = append(nodes, n)
		case "PersistentVolumeClaim":
			c := &corev1.PersistentVolumeClaim{}
			fromUnstructured(t, u, c)
			pvcs[c.Namespace+"/"+c.Name] = c
		case "PersistentVolume":
			v := &corev1.PersistentVolume{}
			fromUnstructured(t, u, v)
			pvs[v.Name] = v
		case "Event":
			e := &corev1.Event{}
			fromUnstructured(t, u, e)
			switch {
			case e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Namespace == ns && e.InvolvedObject.Name == name:
				s.Events = append(s.Events, eventFromCore(e))
			case e.InvolvedObject.Kind == "PersistentVolumeClaim" && e.InvolvedObject.Namespace == ns:
				claimEvents[e.InvolvedObject.Name] = append(claimEvents[e.InvolvedObject.Name], eventFromCore(e))
			}
		}
		if strings.HasPrefix(u.GetAPIVersion(), "crd.projectcalico.org/") {
			calicoObjs = append(calicoObjs, u)
		}
	}
	triage.SortEvents(s.Events)
	for i, p := range pods {
		p.UID = types.UID(fmt.Sprintf("uid-%d", i))
		if p.Namespace == ns && p.Name == name {
			s.Pod = p
		}
	}
	if s.Pod == nil {
		t.Fatalf("pod %s not in manifests", sc.Expected.Pod)
	}
	if slices.Contains(sc.Expected.DeleteAfterLoad, sc.Expected.Pod) {
		grace := int64(30)
		if s.Pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = *s.Pod.Spec.TerminationGracePeriodSeconds
		}
		at := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
		s.Pod.DeletionTimestamp, s.Pod.DeletionGracePeriodSeconds = &at, &grace
	}
	for _, n := range nodes {
		if s.Pod.Spec.NodeName == "" || n.Name == s.Pod.Spec.NodeName {
			s.Nodes = append(s.Nodes, n)
		}
	}
	for _, p := range pods {
		if p == s.Pod || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if s.Pod.Spec.NodeName == "" || p.Spec.NodeName == s.Pod.Spec.NodeName {
			s.PodsByNode[p.Spec.NodeName] = append(s.PodsByNode[p.Spec.NodeName], p)
		}
		if p.Labels["k8s-app"] == "calico-node" {
			s.CalicoNodePods = append(s.CalicoNodePods, p)
		}
	}
	for _, v := range s.Pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		if s.PVCs == nil {
			s.PVCs, s.PVs = map[string]*corev1.PersistentVolumeClaim{}, map[string]*corev1.PersistentVolume{}
		}
		c := pvcs[ns+"/"+v.PersistentVolumeClaim.ClaimName]
		s.PVCs[v.PersistentVolumeClaim.ClaimName] = c
		if c != nil && pvs[c.Spec.VolumeName] != nil {
			s.PVs[c.Spec.VolumeName] = pvs[c.Spec.VolumeName]
		}
	}
	if triage.NeedsStorageClasses(s) {
		s.StorageClasses, s.ClaimEvents = classes, map[string][]triage.Event{}
		for claim, pvc := range s.PVCs {
			if pvc != nil && pvc.Spec.VolumeName == "" {
				triage.SortEvents(claimEvents[claim])
				s.ClaimEvents[claim] = claimEvents[claim]
			}
		}
	}
	if resources := triage.NeedsNames(s); len(resources) > 0 {
		s.NamesInNamespace, s.CreatedInNamespace = map[string][]string{}, map[string]map[string]time.Time{}
		for _, r := range resources {
			slices.Sort(names[r])
			s.NamesInNamespace[r], s.CreatedInNamespace[r] = names[r], created[r]
		}
		if ref := metav1.GetControllerOf(s.Pod); ref != nil && ref.Kind == "Job" && jobs[ref.Name] != nil {
			s.Controller = &metav1.PartialObjectMetadata{}
			fromUnstructured(t, jobs[ref.Name], s.Controller)
		}
	}
	for _, name := range triage.NeedsConfigMapKeys(s) {
		if cm := configMaps[name]; cm != nil {
			keepConfigMap(s, cm)
		}
	}
	if triage.NeedsWorkloadReplicas(s) {
		s.WorkloadReplicas = offlineReplicas(metav1.GetControllerOf(s.Pod), workloads)
	}
	offlineComponents(t, sc, s)
	if len(calicoObjs) > 0 && triage.NeedsIPAM(s) {
		s.IPAM = offlineIPAM(t, calicoObjs, pods, nodes)
	}
	return s
}

// offlineComponents fills the parts collectComponents reads (component_reads.go) from the
// manifests: a CSI driver's node DaemonSets with their events and namespaces and the node's
// CSINode, the aws-node DaemonSet, the published local registry.
func offlineComponents(t testing.TB, sc *testenv.Scenario, s *triage.Snapshot) {
	t.Helper()
	var dss []*appsv1.DaemonSet
	events := map[string][]triage.Event{} // "Kind namespace/name" -> events
	namespaces := map[string]*corev1.Namespace{}
	var csiNodes []*storagev1.CSINode
	var configMaps []*corev1.ConfigMap
	for _, u := range sc.Objects {
		switch u.GetKind() {
		case "DaemonSet":
			ds := &appsv1.DaemonSet{}
			fromUnstructured(t, u, ds)
			ds.UID = types.UID("uid-ds-" + ds.Namespace + "-" + ds.Name)
			dss = append(dss, ds)
		case "Namespace":
			n := &corev1.Namespace{}
			fromUnstructured(t, u, n)
			namespaces[n.Name] = n
		case "CSINode":
			n := &storagev1.CSINode{}
			fromUnstructured(t, u, n)
			csiNodes = append(csiNodes, n)
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			fromUnstructured(t, u, cm)
			configMaps = append(configMaps, cm)
		case "Event":
			e := &corev1.Event{}
			fromUnstructured(t, u, e)
			key := e.InvolvedObject.Kind + " " + e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
			events[key] = append(events[key], eventFromCore(e))
		}
	}
	if driver := triage.NeedsCSIPlugin(s); driver != "" {
		p := &triage.CSIPlugin{Driver: driver, Events: map[types.UID][]triage.Event{}, Namespaces: map[string]*corev1.Namespace{}}
		p.DaemonSets = triage.CSIPluginDaemonSets(dss, driver)
		for _, ds := range p.DaemonSets {
			evs := events["DaemonSet "+ds.Namespace+"/"+ds.Name]
			triage.SortEvents(evs)
			p.Events[ds.UID] = evs
			if n := namespaces[ds.Namespace]; n != nil {
				p.Namespaces[ds.Namespace] = n
			}
		}
		for _, n := range csiNodes {
			if n.Name == s.Pod.Spec.NodeName {
				p.CSINode = n
			}
		}
		s.CSIPlugin = p
	}
	if triage.NeedsAWSNode(s) {
		for _, ds := range dss {
			if ds.Namespace == "kube-system" && ds.Name == "aws-node" {
				s.AWSNode = ds
			}
		}
		if name := triage.AWSNodePodName(s); name != "" {
			for _, p := range s.PodsByNode[s.Pod.Spec.NodeName] {
				if p.Namespace == "kube-system" && p.Name == name {
					s.AWSNodePod = p
				}
			}
		}
	}
	if triage.NeedsRegistryHosting(s) {
		for _, cm := range configMaps {
			if cm.Namespace == "kube-public" && cm.Name == "local-registry-hosting" {
				var err error
				if s.RegistryHosting, err = triage.ParseRegistryHosting(cm.Data); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func fromUnstructured(t testing.TB, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("convert %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// offlineIPAM derives triage.IPAMState from Calico objects the way calicoctl ipam check and ipam show
// would: an allocation is in use when a running pod or a node tunnel annotation has its IP,
// and a block is empty when it has no allocation.
func offlineIPAM(t testing.TB, objs []*unstructured.Unstructured, pods []*corev1.Pod, nodes []*corev1.Node) *triage.IPAMState {
	t.Helper()
	st := &triage.IPAMState{LeaksChecked: true, NodeBlocks: map[string]int{}, LeakedIPsByNode: map[string]int{}, EmptyBlocksByNode: map[string]int{}}
	used := map[netip.Addr]bool{}
	for _, p := range pods {
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				used[a] = true
			}
		}
	}
	for _, n := range nodes {
		for k, v := range n.Annotations {
			if strings.HasPrefix(k, "projectcalico.org/") && strings.Contains(k, "Tunnel") {
				if a, err := netip.ParseAddr(v); err == nil {
					used[a] = true
				}
			}
		}
	}
	type pool struct {
		p     netip.Prefix
		usage *triage.PoolUsage
	}
	var pools []pool
	for _, u := range objs {
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		switch u.GetKind() {
		case "ClusterInformation":
			if v, ok := spec["datastoreReady"].(bool); ok {
				st.DatastoreReady = &v
			}
		case "IPAMConfig":
			st.StrictAffinity, _ = spec["strictAffinity"].(bool)
			if v, ok := spec["maxBlocksPerHost"].(int64); ok {
				st.MaxBlocksPerHost = int(v)
			}
		case "IPPool":
			cidr, _ := spec["cidr"].(string)
			pfx := netip.MustParsePrefix(cidr)
			bs, _ := spec["blockSize"].(int64)
			disabled, _ := spec["disabled"].(bool)
			st.Pools = append(st.Pools, triage.PoolUsage{Name: u.GetName(), CIDR: cidr, Disabled: disabled, BlockSize: int(bs), Total: 1 << (32 - pfx.Bits())})
		}
	}
	if st.MaxBlocksPerHost == 0 {
		st.MaxBlocksPerHost = calico.DefaultMaxBlocksPerHost
	}
	for i := range st.Pools {
		pools = append(pools, pool{netip.MustParsePrefix(st.Pools[i].CIDR), &st.Pools[i]})
	}
	for _, u := range objs {
		if u.GetKind() != "BlockAffinity" {
			continue
		}
		state, _, _ := unstructured.NestedString(u.Object, "spec", "state")
		node, _, _ := unstructured.NestedString(u.Object, "spec", "node")
		if state == "confirmed" {
			st.NodeBlocks[node]++
		}
	}
	for _, u := range objs {
		if u.GetKind() != "IPAMBlock" {
			continue
		}
		cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
		aff, _, _ := unstructured.NestedString(u.Object, "spec", "affinity")
		node := strings.TrimPrefix(aff, "host:")
		allocs, _, _ := unstructured.NestedSlice(u.Object, "spec", "allocations")
		base := netip.MustParsePrefix(cidr).Addr()
		inUse, allocated := 0, 0
		for i, a := range allocs {
			ip := base
			for range i {
				ip = ip.Next()
			}
			if a == nil {
				continue
			}
			allocated++
			for _, p := range pools {
				if p.p.Contains(ip) {
					p.usage.InUse++
				}
			}
			if used[ip] {
				inUse++
			} else {
				st.LeakedIPs++
				st.LeakedIPsByNode[node]++
			}
		}
		// Like calico.Utilization: a block is empty when it holds no allocation at all (a
		// block full of leaked addresses is not releasable until they are released).
		if allocated == 0 && node != "" {
			st.EmptyBlocks++
			st.EmptyBlocksByNode[node]++
			if st.EmptyBlockCIDRs == nil {
				st.EmptyBlockCIDRs = map[string][]string{}
			}
			st.EmptyBlockCIDRs[node] = append(st.EmptyBlockCIDRs[node], cidr)
		}
	}
	return st
}

// offlineReplicas is Collector.workloadReplicas over the scenario's objects: spec.replicas of
// the StatefulSet or ReplicaSet ref names, or of the Deployment that controls that ReplicaSet.
func offlineReplicas(ref *metav1.OwnerReference, workloads map[string]*unstructured.Unstructured) *int32 {
	u := workloads[ref.Kind+"/"+ref.Name]
	if u == nil {
		return nil
	}
	if owner := metav1.GetControllerOfNoCopy(u); ref.Kind == "ReplicaSet" && owner != nil && owner.Kind == "Deployment" {
		if u = workloads["Deployment/"+owner.Name]; u == nil {
			return nil
		}
	}
	r, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		r = 1
	}
	n := int32(r)
	return &n
}
