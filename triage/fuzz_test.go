package triage

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/version"
)

// fuzzBytes hands out choices from fuzz input; once it runs dry every choice is 0.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) next() int {
	if len(f.b) == 0 {
		return 0
	}
	v := int(f.b[0])
	f.b = f.b[1:]
	return v
}

func (f *fuzzBytes) pick(n int) int { return f.next() % n }
func (f *fuzzBytes) bool() bool     { return f.next()%2 == 1 }

// pickString returns one of the options, or "" for an out-of-range choice.
func (f *fuzzBytes) pickString(options ...string) string {
	i := f.pick(len(options) + 1)
	if i == len(options) {
		return ""
	}
	return options[i]
}

var (
	fuzzReasons = []string{"FailedCreatePodSandBox", "FailedMount", "FailedAttachVolume", "Failed", "BackOff", "Killing", "Unhealthy",
		"InspectFailed", "ErrImageNeverPull", "NodeNotReady", "TaintManagerEviction", "FailedUnmount", "Evicted", "FailedScheduling", "Scheduled", "NetworkNotReady"}
	fuzzMessages = []string{msgIPAMExhausted, msgBlockLimit, msgLocked, msgAWS, msgNoCNI, msgNodename, msgOther,
		`MountVolume.SetUp failed for volume "c" : configmap "x" not found`, `Multi-Attach error for volume "p" Volume is already used by pod(s) y`,
		`Failed to pull image "x": 403 Forbidden: quota exceeded`, "Error: ErrImagePull", "Error: ", "Liveness probe failed:", "Startup probe failed",
		"Container app failed liveness probe, will be restarted", "Readiness probe failed: x", `couldn't find key k in Secret ns/s`, `secret "" not found`,
		"exec format error", "permission denied", "", "{", `configmap "`, "0/3 nodes are available: 3 Insufficient cpu."}
	fuzzWaiting = []string{"ContainerCreating", "PodInitializing", "CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull",
		"InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
	fuzzTermReasons = []string{"OOMKilled", "Error", "Completed", "ContainerCannotRun"}
)

// fuzzContainerState builds a random container state (possibly empty).
func fuzzContainerState(f *fuzzBytes) corev1.ContainerState {
	switch f.pick(4) {
	case 0:
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: f.pickString(fuzzWaiting...), Message: f.pickString(fuzzMessages...)}}
	case 1:
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(clock0.Add(-time.Duration(f.next()) * time.Minute))}}
	case 2:
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(f.next()) - 1, Reason: f.pickString(fuzzTermReasons...),
			Message: f.pickString(fuzzMessages...), FinishedAt: metav1.NewTime(clock0.Add(-time.Duration(f.next()) * time.Minute))}}
	}
	return corev1.ContainerState{}
}

// fuzzContainer builds a spec and status pair; the status may name no spec container.
func fuzzContainer(f *fuzzBytes, name string) (corev1.Container, corev1.ContainerStatus) {
	c := corev1.Container{Name: name, Image: f.pickString("nginx", "registry.example.com/a/b:1", "images:ubuntu", "x@sha256:00")}
	if f.bool() {
		c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(int32(f.next()))}}}
	}
	if f.bool() {
		c.ReadinessProbe = &corev1.Probe{}
	}
	if f.bool() {
		always := corev1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	st := corev1.ContainerStatus{Name: name, Ready: f.bool(), RestartCount: int32(f.next()), State: fuzzContainerState(f), LastTerminationState: fuzzContainerState(f)}
	if f.bool() {
		started := f.bool()
		st.Started = &started
	}
	return c, st
}

// fuzzSnapshot builds a random pod, node and events.
func fuzzSnapshot(data []byte) *Snapshot {
	f := &fuzzBytes{b: data}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	pod.Spec.NodeName = f.pickString("node-1", "gone")
	pod.Spec.RestartPolicy = corev1.RestartPolicy(f.pickString("Always", "Never", "OnFailure"))
	pod.Status.Phase = corev1.PodPhase(f.pickString("Pending", "Running", "Succeeded", "Failed", "Unknown"))
	pod.Status.Reason = f.pickString("Evicted", "NodeLost", "Shutdown")
	pod.Status.Message = f.pickString(fuzzMessages...)
	if f.bool() {
		at := metav1.NewTime(clock0.Add(time.Duration(f.next()-128) * time.Second))
		pod.DeletionTimestamp = &at
		if f.bool() {
			g := int64(f.next())
			pod.DeletionGracePeriodSeconds = &g
		}
	}
	for range f.pick(3) {
		pod.Finalizers = append(pod.Finalizers, f.pickString("a/b", "batch.kubernetes.io/job-tracking", "x"))
	}
	for i := range f.pick(3) {
		c, st := fuzzContainer(f, f.pickString("init", "i2", "app"))
		if f.bool() {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		}
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, st)
		_ = i
	}
	for range f.pick(4) {
		c, st := fuzzContainer(f, f.pickString("app", "side", "init"))
		if f.bool() {
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, st)
	}
	for range f.pick(3) {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodConditionType(f.pickString("Ready", "PodReadyToStartContainers", "DisruptionTarget")), Status: corev1.ConditionStatus(f.pickString("True", "False"))})
	}
	if f.bool() {
		pod.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
	}
	s := &Snapshot{Now: clock0, Pod: pod, Requested: PodRef{Namespace: "ns", Name: "p"}}
	if f.bool() {
		n := testNode("node-1", f.bool(), f.pickString("v1.37.2", "v1.20.0", "bogus", "v1.99"))
		if f.bool() {
			n.Status.Conditions = nil
		}
		if f.bool() {
			n.Status.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/d^pv"}
		}
		s.Nodes = []*corev1.Node{n}
	}
	if f.bool() {
		s.ServerVersion = &version.Info{Major: f.pickString("1", "x"), Minor: f.pickString("37", "27+", "")}
	}
	if f.bool() {
		s.PVCs = map[string]*corev1.PersistentVolumeClaim{"c": nil}
		if f.bool() {
			s.PVCs["c"] = &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"}}
		}
	}
	if f.bool() {
		s.CalicoNodePods = []*corev1.Pod{calicoNode(f.pickString("calico-system", "kube-system"), f.bool()), nil}
	}
	if f.bool() {
		s.IPAM = &IPAMState{MaxBlocksPerHost: f.next() - 2, LeaksChecked: f.bool(), LeakedIPs: f.next(), EmptyBlocks: f.next(),
			Pools: []PoolUsage{{CIDR: f.pickString("10.0.0.0/24", "fd00::/64"), Total: f.next(), InUse: f.next(), BlockSize: f.next()}}}
	}
	if f.bool() {
		s.PreviousLogs = map[string]LogTail{"app": {Lines: []string{f.pickString(fuzzMessages...)}}}
	}
	for range f.pick(8) {
		e := Event{Type: f.pickString("Normal", "Warning"), Reason: f.pickString(fuzzReasons...), Message: f.pickString(fuzzMessages...),
			Count: int32(f.next()), LastSeen: clock0.Add(-time.Duration(f.next()) * time.Second), FieldPath: f.pickString("spec.containers{app}", "spec.initContainers{init}", "{", "}")}
		s.Events = append(s.Events, e)
	}
	SortEvents(s.Events)
	return s
}

// FuzzEvaluate feeds random pod, node and event shapes to every rule: Evaluate must never
// panic, must always answer, and must rank a blocker (or a not-stuck finding) first unless it
// says it is uncertain.
func FuzzEvaluate(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 1, 2, 0, 3, 2, 5, 1, 1, 0, 9, 9, 9})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17"))
	f.Add([]byte("terminating-evicted-crashloop-imagepull-sandbox-volumes-init"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzSnapshot(data)
		d := Evaluate(s)
		if len(d.Findings) == 0 {
			t.Fatal("Evaluate() returned no findings")
		}
		p := d.Findings[0]
		if !d.Uncertain && p.Severity != SeverityBlocker && p.Code != CodePodHealthy && p.Code != CodePodCompleted {
			t.Errorf("primary %s has severity %s but the diagnosis is not marked uncertain", p.Code, p.Severity)
		}
		if d.Summary == "" {
			t.Error("Evaluate() summary is empty")
		}
	})
}
