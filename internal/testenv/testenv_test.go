package testenv

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestStartServesVersionAndCalicoCRDs(t *testing.T) {
	c := startT(t, Options{})
	t.Logf("cluster start: %s", c.StartupTime)
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" || v.Major != "1" || v.Minor != "37" {
		t.Errorf("/version = %s (major %q minor %q), want v1.37.2", v.GitVersion, v.Major, v.Minor)
	}
	crds, err := c.Dynamic.Resource(crdGVR).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, crd := range crds.Items {
		names = append(names, crd.GetName())
		if !crdEstablished(&crd) {
			t.Errorf("crd %s not established", crd.GetName())
		}
	}
	for _, kind := range []string{"BlockAffinity", "ClusterInformation", "IPAMBlock", "IPAMConfig", "IPAMHandle", "IPPool", "KubeControllersConfiguration"} {
		if _, err := c.Mapper.RESTMapping(schema.GroupKind{Group: "crd.projectcalico.org", Kind: kind}, "v1"); err != nil {
			t.Errorf("mapping crd.projectcalico.org/v1 %s: %v (crds: %v)", kind, err, names)
		}
	}
	// RBAC is on: an unknown token is rejected and the scheduler's identity is limited.
	if _, err := os.Stat(c.KubeconfigPath); err != nil {
		t.Errorf("kubeconfig: %v", err)
	}
}

func TestStopKillsProcessesAndRemovesFiles(t *testing.T) {
	c, err := Start(t.Context(), Options{Scheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{c.apiserver.pid, c.scheduler.pid}
	dir := c.dir
	if err := c.StopScheduler(); err != nil {
		t.Fatal(err)
	}
	if c.SchedulerRunning() {
		t.Error("SchedulerRunning() = true after StopScheduler")
	}
	if err := c.StartScheduler(t.Context()); err != nil {
		t.Fatal(err)
	}
	pids = append(pids, c.scheduler.pid)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop() = %v, want nil", err)
	}
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("process %d alive after Stop", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s: stat err = %v, want not exist", dir, err)
	}
	if err := c.StartScheduler(t.Context()); err == nil {
		t.Error("StartScheduler after Stop = nil, want error")
	}
}

func TestShiftString(t *testing.T) {
	l := &loader{shift: 90 * time.Minute}
	tests := []struct{ in, want string }{
		{"2025-06-01T12:00:00Z", "2025-06-01T13:30:00Z"},
		{"2025-06-01T11:59:52.123456Z", "2025-06-01T13:29:52.123456Z"},
		{"2025-06-01T12:00:00+02:00", "2025-06-01T11:30:00Z"},
		{"2025-04-22 12:00:00.000 +0000 UTC", "2025-04-22 12:00:00.000 +0000 UTC"}, // Calico's format, spec only
		{"Back-off restarting failed container 2025-06-01T12:00:00Z", "Back-off restarting failed container 2025-06-01T12:00:00Z"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := l.shiftString(tt.in); got != tt.want {
			t.Errorf("shiftString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestReadScenarioAll(t *testing.T) {
	dirs, err := ScenarioDirs(filepath.Join(repoRoot(t), "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 40 {
		t.Fatalf("ScenarioDirs found %d folders, want at least 40", len(dirs))
	}
	for _, dir := range dirs {
		s, err := LoadScenarioDir(dir)
		if err != nil {
			t.Error(err)
			continue
		}
		if s.Name != filepath.Base(dir) || s.Clock.IsZero() || len(s.Objects) == 0 || (s.Expected.Pod == "" && s.Expected.Target == "") || s.Expected.Code == "" {
			t.Errorf("%s: name %q clock %v objects %d pod %q target %q code %q", dir, s.Name, s.Clock, len(s.Objects), s.Expected.Pod, s.Expected.Target, s.Expected.Code)
		}
	}
}

// TestLoadScenarios loads every scenario and case folder into its own fresh cluster (two at
// a time) and checks the loader's promises.
func TestLoadScenarios(t *testing.T) {
	dirs, err := ScenarioDirs(filepath.Join(repoRoot(t), "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			s, err := LoadScenarioDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			c := startT(t, Options{})
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			begin := time.Now()
			if err := c.Load(ctx, s); err != nil {
				t.Fatalf("Load: %v", err)
			}
			loadTime := time.Since(begin)
			t.Logf("cluster start %s, load of %d objects %s", c.StartupTime.Round(time.Millisecond), len(s.Objects), loadTime.Round(time.Millisecond))
			checkLoaded(ctx, t, c, s, begin)
			ns, name, _ := strings.Cut(s.Expected.Pod, "/")
			switch {
			case s.Expected.NeedsScheduler:
				checkScheduler(ctx, t, c, s, ns, name)
			case s.Expected.SchedulerMustBeStopped:
				checkNoScheduler(ctx, t, c, ns, name)
			}
		})
	}
}

func checkLoaded(ctx context.Context, t *testing.T, c *Cluster, s *Scenario, loadStart time.Time) {
	t.Helper()
	deleted := map[string]bool{}
	for _, ref := range s.Expected.DeleteAfterLoad {
		deleted[ref] = true
	}
	shift := loadStart.Sub(s.Clock)
	live := map[objKey]*unstructured.Unstructured{}
	for _, want := range s.Objects {
		gvk := want.GroupVersionKind()
		m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("mapping %s: %v", gvk, err)
			continue
		}
		ns := want.GetNamespace()
		if m.Scope.Name() == meta.RESTScopeNameNamespace && ns == "" {
			ns = metav1.NamespaceDefault
		}
		got, err := c.Dynamic.Resource(m.Resource).Namespace(ns).Get(ctx, want.GetName(), metav1.GetOptions{})
		ref := ns + "/" + want.GetName()
		if err != nil {
			unbound, _, _ := unstructured.NestedString(want.Object, "spec", "nodeName")
			if gvk.Kind == "Pod" && deleted[ref] && unbound == "" {
				continue // an unbound pod is deleted at once
			}
			t.Errorf("get %s %s: %v", gvk.Kind, ref, err)
			continue
		}
		live[objKey{gvk.Group, gvk.Kind, got.GetNamespace(), got.GetName()}] = got
		switch gvk.Kind {
		case "Pod":
			wantPhase, _, _ := unstructured.NestedString(want.Object, "status", "phase")
			gotPhase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
			node, _, _ := unstructured.NestedString(want.Object, "spec", "nodeName")
			if node != "" && wantPhase != "" && gotPhase != wantPhase {
				t.Errorf("pod %s phase = %q, want %q", ref, gotPhase, wantPhase)
			}
			if node == "" && gotPhase != "Pending" {
				t.Errorf("unbound pod %s phase = %q, want Pending", ref, gotPhase)
			}
			if deleted[ref] && got.GetDeletionTimestamp() == nil {
				t.Errorf("pod %s has no deletionTimestamp, want Terminating", ref)
			}
			checkShifted(t, "pod "+ref+" status.startTime", want, got, shift, "status", "startTime")
		case "Node":
			wantTaints, _, _ := unstructured.NestedSlice(want.Object, "spec", "taints")
			gotTaints, _, _ := unstructured.NestedSlice(got.Object, "spec", "taints")
			if len(wantTaints) != len(gotTaints) {
				t.Errorf("node %s taints = %v, want %v", got.GetName(), gotTaints, wantTaints)
			}
			for i := range min(len(wantTaints), len(gotTaints)) {
				w, g := wantTaints[i].(map[string]any), gotTaints[i].(map[string]any)
				if w["key"] != g["key"] || w["value"] != g["value"] || w["effect"] != g["effect"] {
					t.Errorf("node %s taint %d = %v, want %v", got.GetName(), i, g, w)
				}
				checkShifted(t, "node "+got.GetName()+" taint timeAdded",
					&unstructured.Unstructured{Object: w}, &unstructured.Unstructured{Object: g}, shift, "timeAdded")
			}
			wantConds, _, _ := unstructured.NestedSlice(want.Object, "status", "conditions")
			gotConds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			if len(gotConds) != len(wantConds) {
				t.Errorf("node %s has %d conditions, want %d", got.GetName(), len(gotConds), len(wantConds))
			}
		case "IPAMBlock":
			wantAlloc, _, _ := unstructured.NestedSlice(want.Object, "spec", "allocations")
			gotAlloc, _, _ := unstructured.NestedSlice(got.Object, "spec", "allocations")
			if !reflect.DeepEqual(gotAlloc, wantAlloc) {
				t.Errorf("IPAMBlock %s allocations = %v, want %v", got.GetName(), gotAlloc, wantAlloc)
			}
		case "Event":
			checkShifted(t, "event "+ref+" lastTimestamp", want, got, shift, "lastTimestamp")
			checkShifted(t, "event "+ref+" eventTime", want, got, shift, "eventTime")
		}
	}
	// Events name their involved object by uid.
	uidChecks := 0
	defer func() { t.Logf("checked involvedObject.uid of %d events", uidChecks) }()
	for key, ev := range live {
		if key.kind != "Event" || key.group != "" {
			continue
		}
		var e corev1.Event
		if err := runtimeFromUnstructured(ev, &e); err != nil {
			t.Fatal(err)
		}
		io := e.InvolvedObject
		gv, _ := schema.ParseGroupVersion(io.APIVersion)
		target, ok := live[objKey{gv.Group, io.Kind, io.Namespace, io.Name}]
		if !ok {
			continue // the involved object is not part of the scenario
		}
		uidChecks++
		if io.UID != target.GetUID() {
			t.Errorf("event %s/%s involvedObject.uid = %q, want %q (%s %s)", e.Namespace, e.Name, io.UID, target.GetUID(), io.Kind, io.Name)
		}
	}
}

// checkShifted checks that the timestamp at fields moved by the load's clock shift (within a
// minute of slack for the load's own duration).
func checkShifted(t *testing.T, what string, want, got *unstructured.Unstructured, shift time.Duration, fields ...string) {
	t.Helper()
	w, ok, _ := unstructured.NestedString(want.Object, fields...)
	if !ok || w == "" {
		return
	}
	g, _, _ := unstructured.NestedString(got.Object, fields...)
	wt, err1 := time.Parse(time.RFC3339Nano, w)
	gt, err2 := time.Parse(time.RFC3339Nano, g)
	if err1 != nil || err2 != nil {
		t.Errorf("%s: parse %q / %q: %v %v", what, w, g, err1, err2)
		return
	}
	if d := gt.Sub(wt.Add(shift)); d < -time.Minute || d > time.Minute {
		t.Errorf("%s = %s, want about %s (file %s shifted by %s)", what, g, wt.Add(shift).Format(time.RFC3339), w, shift.Round(time.Second))
	}
}

func checkScheduler(ctx context.Context, t *testing.T, c *Cluster, s *Scenario, ns, name string) {
	t.Helper()
	begin := time.Now()
	if err := c.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.WaitForScheduler(wctx, ns, name); err != nil {
		t.Fatalf("%v\nkube-scheduler log tail:\n%s", err, c.LogTail("kube-scheduler", 20))
	}
	t.Logf("scheduler start + verdict: %s", time.Since(begin).Round(time.Millisecond))
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" {
		t.Fatalf("scheduler bound %s/%s to %s, want FailedScheduling", ns, name, pod.Spec.NodeName)
	}
	evs, err := c.FailedScheduling(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	msg := evs[0].Message
	t.Logf("FailedScheduling: %s", msg)
	if want := s.Expected.ExpectSchedulerMessage; want != "" && !strings.Contains(msg, want) {
		t.Errorf("FailedScheduling message = %q, want it to contain %q", msg, want)
	}
}

func checkNoScheduler(ctx context.Context, t *testing.T, c *Cluster, ns, name string) {
	t.Helper()
	if c.SchedulerRunning() {
		t.Fatal("scheduler running, want none")
	}
	if err := c.WaitForScheduler(ctx, ns, name); err == nil {
		t.Error("WaitForScheduler with no scheduler = nil, want error")
	}
	time.Sleep(2 * time.Second)
	pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending {
		t.Errorf("pod %s/%s node %q phase %q, want unscheduled Pending", ns, name, pod.Spec.NodeName, pod.Status.Phase)
	}
	evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(pod.UID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 0 {
		t.Errorf("pod %s/%s has %d events, want none", ns, name, len(evs.Items))
	}
}

func runtimeFromUnstructured(u *unstructured.Unstructured, out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

const edgeManifests = `# clock: 2025-06-01T12:00:00Z
---
apiVersion: v1
kind: Node
metadata:
  name: node-1
spec: {}
status:
  allocatable: {cpu: '4', memory: 8Gi, pods: '110'}
  capacity: {cpu: '4', memory: 8Gi, pods: '110'}
  conditions:
  - type: Ready
    status: 'True'
    reason: KubeletReady
    lastHeartbeatTime: '2025-06-01T11:59:50Z'
    lastTransitionTime: '2025-05-01T12:00:00Z'
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: a, namespace: undeclared}
  data: {k: v}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: b, namespace: undeclared}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: undeclared}
spec: {size: 3, parts: [1, null, 2]}
---
apiVersion: crd.projectcalico.org/v1
kind: IPAMBlock
metadata: {name: 10-0-0-0-30}
spec:
  cidr: 10.0.0.0/30
  affinity: host:node-1
  allocations: [0, null, null, 1]
  unallocated: [1, 2]
  attributes: [{handle_id: h1}, {handle_id: h2}]
  strictAffinity: false
---
apiVersion: v1
kind: Pod
metadata: {name: fits, namespace: undeclared}
spec:
  containers: [{name: c, image: busybox}]
---
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: fits.1, namespace: undeclared}
eventTime: '2025-06-01T11:59:30.000000Z'
reportingController: example.com/test
reportingInstance: test-1
action: Testing
reason: Tested
note: an events.k8s.io event
type: Normal
regarding: {apiVersion: v1, kind: Pod, name: fits, namespace: undeclared}
`

// TestLoadEdgeCases covers what no scenario folder has yet: a kind: List, an undeclared
// namespace, a custom resource without a CRD, an events.k8s.io/v1 Event, and a pod the
// scheduler binds.
func TestLoadEdgeCases(t *testing.T) {
	fsys := fstest.MapFS{
		"edge/manifests.yaml": {Data: []byte(edgeManifests)},
		"edge/expected.yaml":  {Data: []byte("pod: undeclared/fits\ncode: none\n")},
	}
	s, err := ReadScenario(fsys, "edge")
	if err != nil {
		t.Fatal(err)
	}
	c := startT(t, Options{Scheduler: true})
	ctx := t.Context()
	loadStart := time.Now()
	if err := c.Load(ctx, s); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := c.Client.CoreV1().ConfigMaps("undeclared").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap undeclared/%s from the List: %v", name, err)
		}
	}
	widget, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).
		Namespace("undeclared").Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Widget without a CRD: %v", err)
	}
	if parts, _, _ := unstructured.NestedSlice(widget.Object, "spec", "parts"); !reflect.DeepEqual(parts, []any{int64(1), nil, int64(2)}) {
		t.Errorf("Widget spec.parts = %v, want [1 <nil> 2]", parts)
	}
	if err := c.WaitForScheduler(ctx, "undeclared", "fits"); err != nil {
		t.Fatal(err)
	}
	pod, err := c.Client.CoreV1().Pods("undeclared").Get(ctx, "fits", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "node-1" {
		t.Errorf("pod fits bound to %q, want node-1", pod.Spec.NodeName)
	}
	ev, err := c.Client.EventsV1().Events("undeclared").Get(ctx, "fits.1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Regarding.UID != pod.UID {
		t.Errorf("events.k8s.io event regarding.uid = %q, want %q", ev.Regarding.UID, pod.UID)
	}
	wantTime := time.Date(2025, 6, 1, 11, 59, 30, 0, time.UTC).Add(loadStart.Sub(s.Clock))
	if d := ev.EventTime.Sub(wantTime); d < -time.Minute || d > time.Minute {
		t.Errorf("eventTime = %s, want about %s", ev.EventTime.Time, wantTime)
	}
	node, err := c.Client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("node-1 taints = %v, want none (the admission's not-ready taint removed)", node.Spec.Taints)
	}
	if hb := node.Status.Conditions[0].LastHeartbeatTime.Time; time.Since(hb) > time.Minute {
		t.Errorf("node-1 lastHeartbeatTime = %s, want within the last minute", hb)
	}
}
