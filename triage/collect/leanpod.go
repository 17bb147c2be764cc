package collect

import (
	"bytes"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unique"
	"weak"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/whypending/whypending/calico"
)

// The pod cache of the bot holds every pod of the cluster, and a 1,000-node cluster has over
// 100,000 of them. Kept whole, even without managedFields, a pod costs about 11 KB of memory.
// The cache keeps each pod as a leanPod instead:
//
//   - only the fields the rules read (prunePod says which), so the pods handed to the rules
//     still carry everything the rules look at;
//   - what pods of one workload share (the spec, labels, owner references) once, in weak intern
//     tables, with the per-pod parts of the spec (node name, the random name of the service
//     account token volume) kept apart;
//   - the status as a shared shape (interned, with its times and pod IP taken out) plus the
//     pod's own times and pod IP;
//   - Calico's view of the pod's addresses (calico.PodUseOf), for the IPAM cache.
//
// Readers get ordinary *corev1.Pod objects (leanPod.pod), built on demand and shared while in
// use. The pod asked about is always read whole from the API server (Collector.getPod).

// leanPod is what the pod cache stores for one pod.
type leanPod struct {
	name, uid, rv string
	namespace     unique.Handle[string]
	node          unique.Handle[string] // spec.nodeName
	phase         unique.Handle[string] // status.phase
	created       metav1.Time
	deleted       *metav1.Time
	deletionGrace *int64
	labels        *map[string]string // interned
	annotations   *map[string]string // interned; only the annotations the rules read; usually nil
	owners        *[]metav1.OwnerReference
	finalizers    *[]string
	spec          *corev1.PodSpec   // interned; no nodeName, token volume renamed (tokenVolume)
	tokenVolume   string            // the pod's service account token volume name, if renamed
	status        *corev1.PodStatus // interned; no podIP, every time zero (statusTimes)
	times         []int64           // the status's times in statusTimes order (UnixNano; zeroTime)
	podIP         string
	ipam          leanIPAM

	view atomic.Pointer[weak.Pointer[corev1.Pod]]
}

// leanIPAM is calico.PodUseOf of the pod: ok is false for a pod that cannot hold a Calico
// address.
type leanIPAM struct {
	ips         []netip.Addr
	ok, pending bool
}

func (a leanIPAM) equal(b leanIPAM) bool {
	return a.ok == b.ok && a.pending == b.pending && slices.Equal(a.ips, b.ips)
}

// GetObjectMeta makes leanPod a metav1.ObjectMetaAccessor, which the informer's store and
// indexes need.
func (lp *leanPod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: lp.name, Namespace: lp.namespace.Value(), ResourceVersion: lp.rv, UID: types.UID(lp.uid)}
}

// Intern tables shared by every pod cache of the process.
var (
	internedSpecs      = newInternTable[corev1.PodSpec]()
	internedStatuses   = newInternTable[corev1.PodStatus]()
	internedLabels     = newInternTable[map[string]string]() // label and annotation sets
	internedOwners     = newInternTable[[]metav1.OwnerReference]()
	internedFinalizers = newInternTable[[]string]()
)

// tokenVolumePrefix starts the name of the projected service account token volume the
// ServiceAccount admission plugin adds to every pod, with a random suffix per pod.
const tokenVolumePrefix = "kube-api-access-"

// leanPodTransform is the pod informer's cache.TransformFunc. Objects already transformed and
// tombstones pass through (a transform must be idempotent).
func leanPodTransform(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return newLeanPod(pod), nil
}

// newLeanPod makes the cache entry of pod (which it does not change).
func newLeanPod(pod *corev1.Pod) *leanPod {
	p := prunePod(pod)
	lp := &leanPod{
		name: p.Name, uid: string(p.UID), rv: p.ResourceVersion,
		namespace: unique.Make(p.Namespace), node: unique.Make(p.Spec.NodeName), phase: unique.Make(string(p.Status.Phase)),
		created: p.CreationTimestamp, deleted: p.DeletionTimestamp, deletionGrace: p.DeletionGracePeriodSeconds,
	}
	if len(p.Labels) > 0 {
		lp.labels = internedLabels.get(labelKey(p.Labels), func() *map[string]string { return &p.Labels })
	}
	if len(p.Annotations) > 0 {
		lp.annotations = internedLabels.get(labelKey(p.Annotations), func() *map[string]string { return &p.Annotations })
	}
	if len(p.OwnerReferences) > 0 {
		var key []byte
		for i := range p.OwnerReferences {
			b, _ := p.OwnerReferences[i].Marshal()
			key = append(append(key, b...), 0)
		}
		lp.owners = internedOwners.get(key, func() *[]metav1.OwnerReference { return &p.OwnerReferences })
	}
	if len(p.Finalizers) > 0 {
		lp.finalizers = internedFinalizers.get([]byte(strings.Join(p.Finalizers, "\x00")), func() *[]string { return &p.Finalizers })
	}
	spec := p.Spec
	spec.NodeName = ""
	lp.tokenVolume = renameTokenVolume(&spec, tokenVolumePrefix)
	key, _ := spec.Marshal()
	lp.spec = internedSpecs.get(key, func() *corev1.PodSpec { return &spec })
	status := p.Status
	lp.podIP, status.PodIP = status.PodIP, ""
	for _, t := range statusTimes(&status) {
		lp.times = append(lp.times, unixNano(*t))
		*t = metav1.Time{}
	}
	key, _ = status.Marshal()
	lp.status = internedStatuses.get(key, func() *corev1.PodStatus { return &status })
	if u, ok := calico.PodUseOf(pod); ok {
		lp.ipam = leanIPAM{ips: u.IPs, ok: true, pending: u.Pending}
	}
	return lp
}

// pod returns the pod as the rules see it: the fields prunePod keeps. Pods are built on
// demand and shared while someone holds them; treat them as read-only.
func (lp *leanPod) pod() *corev1.Pod {
	if wp := lp.view.Load(); wp != nil {
		if p := wp.Value(); p != nil {
			return p
		}
	}
	p := &corev1.Pod{ObjectMeta: lp.objectMeta(), Spec: *lp.spec}
	if lp.finalizers != nil {
		p.Finalizers = *lp.finalizers
	}
	p.Spec.NodeName = lp.node.Value()
	if lp.tokenVolume != "" {
		renameTokenVolume(&p.Spec, lp.tokenVolume)
	}
	lp.status.DeepCopyInto(&p.Status)
	p.Status.PodIP = lp.podIP
	for i, t := range statusTimes(&p.Status) {
		*t = fromUnixNano(lp.times[i])
	}
	wp := weak.Make(p)
	lp.view.Store(&wp)
	return p
}

// objectMeta is the pod's metadata as the cache keeps it (finalizers aside), sharing the
// cache's label, annotation and owner maps and slices: read-only.
func (lp *leanPod) objectMeta() metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name: lp.name, Namespace: lp.namespace.Value(), UID: types.UID(lp.uid), ResourceVersion: lp.rv,
		CreationTimestamp: lp.created, DeletionTimestamp: lp.deleted, DeletionGracePeriodSeconds: lp.deletionGrace,
	}
	if lp.labels != nil {
		m.Labels = *lp.labels
	}
	if lp.annotations != nil {
		m.Annotations = *lp.annotations
	}
	if lp.owners != nil {
		m.OwnerReferences = *lp.owners
	}
	return m
}

// renameTokenVolume renames the pod's service account token volume (projected, named
// tokenVolumePrefix plus a random suffix, or the placeholder tokenVolumePrefix) to name, in
// spec.volumes and in every container's volumeMounts, and returns its old name ("" when the
// pod has none). The slices it changes are copied first: spec may share them with others.
func renameTokenVolume(spec *corev1.PodSpec, name string) string {
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.Projected != nil && strings.HasPrefix(v.Name, tokenVolumePrefix)
	})
	if i < 0 || spec.Volumes[i].Name == name {
		return ""
	}
	old := spec.Volumes[i].Name
	spec.Volumes = slices.Clone(spec.Volumes)
	spec.Volumes[i].Name = name
	rename := func(cs []corev1.Container) []corev1.Container {
		copied := false
		for j := range cs {
			k := slices.IndexFunc(cs[j].VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == old })
			if k < 0 {
				continue
			}
			if !copied {
				cs, copied = slices.Clone(cs), true
			}
			cs[j].VolumeMounts = slices.Clone(cs[j].VolumeMounts)
			cs[j].VolumeMounts[k].Name = name
		}
		return cs
	}
	spec.Containers = rename(spec.Containers)
	spec.InitContainers = rename(spec.InitContainers)
	return old
}

// statusTimes returns pointers to every time of a pruned status, in a fixed order: the
// conditions' lastTransitionTime, then each container status's (init containers first) state
// and lastTerminationState times. Statuses with the same shape have the same list.
func statusTimes(st *corev1.PodStatus) []*metav1.Time {
	var out []*metav1.Time
	for i := range st.Conditions {
		out = append(out, &st.Conditions[i].LastTransitionTime)
	}
	state := func(s *corev1.ContainerState) {
		if s.Running != nil {
			out = append(out, &s.Running.StartedAt)
		}
		if s.Terminated != nil {
			out = append(out, &s.Terminated.StartedAt, &s.Terminated.FinishedAt)
		}
	}
	for _, cs := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range cs {
			state(&cs[i].State)
			state(&cs[i].LastTerminationState)
		}
	}
	return out
}

// zeroTime stands for a zero metav1.Time in leanPod.times.
const zeroTime = math.MinInt64

func unixNano(t metav1.Time) int64 {
	if t.IsZero() {
		return zeroTime
	}
	return t.UnixNano()
}

// fromUnixNano is the time as the API client decodes one: in the local zone.
func fromUnixNano(n int64) metav1.Time {
	if n == zeroTime {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(0, n).Local())
}

// prunePod returns a copy of pod with only what the rules read (the fields listed here; a rule
// that reads another field of a pod must add it, and TestLeanPodsDiagnoseTheSame fails until it
// does):
//
//   - metadata: name, namespace, uid, resourceVersion, creation and deletion timestamps,
//     deletionGracePeriodSeconds, labels, ownerReferences, finalizers, and the annotations
//     keptAnnotation accepts (Helm hooks, sidecar injection);
//   - spec: all of it except ephemeral containers, hostname and subdomain, container
//     lifecycle hooks and the values of env vars (their names and valueFrom stay);
//   - status: phase, reason, message, nominatedNodeName, podIP, qosClass, conditions (type,
//     status, reason, message, lastTransitionTime) and the container and init container
//     statuses (name, image, ready, started, restartCount, state and lastTerminationState
//     without container IDs).
//
// Calico's podIP annotations are not kept: the cache keeps their effect (calico.PodUseOf).
func prunePod(pod *corev1.Pod) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
		DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
		Labels:                     pod.Labels, OwnerReferences: pod.OwnerReferences, Finalizers: pod.Finalizers,
	}}
	for k, v := range pod.Annotations {
		if keptAnnotation(k) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[k] = v
		}
	}
	spec := pod.Spec.DeepCopy()
	spec.EphemeralContainers = nil
	spec.Hostname, spec.Subdomain = "", ""
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			cs[i].Lifecycle = nil
			for j := range cs[i].Env {
				cs[i].Env[j].Value = ""
			}
		}
	}
	p.Spec = *spec

	st := &pod.Status
	p.Status = corev1.PodStatus{Phase: st.Phase, Reason: st.Reason, Message: st.Message, NominatedNodeName: st.NominatedNodeName,
		PodIP: st.PodIP, QOSClass: st.QOSClass}
	for _, c := range st.Conditions {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason,
			Message: c.Message, LastTransitionTime: c.LastTransitionTime})
	}
	p.Status.ContainerStatuses = pruneContainerStatuses(st.ContainerStatuses)
	p.Status.InitContainerStatuses = pruneContainerStatuses(st.InitContainerStatuses)
	return p
}

// keptAnnotation says which pod annotations the rules read: Helm's (a hook pod's
// helm.sh/hook), sidecar injectors' (…/inject, which can block a finalizer's removal), and
// whypending's own (whypending.io/watch, the watch's opt-out).
func keptAnnotation(key string) bool {
	return strings.HasPrefix(key, "helm.sh/") || strings.Contains(key, "inject") || strings.HasPrefix(key, "whypending.io/")
}

func pruneContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, c := range in {
		out[i] = corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: c.Ready, Started: c.Started, RestartCount: c.RestartCount,
			State: pruneContainerState(c.State), LastTerminationState: pruneContainerState(c.LastTerminationState)}
	}
	return out
}

func pruneContainerState(s corev1.ContainerState) corev1.ContainerState {
	var out corev1.ContainerState
	if w := s.Waiting; w != nil {
		out.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
	}
	if r := s.Running; r != nil {
		out.Running = &corev1.ContainerStateRunning{StartedAt: r.StartedAt}
	}
	if t := s.Terminated; t != nil {
		out.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Signal: t.Signal, Reason: t.Reason, Message: t.Message,
			StartedAt: t.StartedAt, FinishedAt: t.FinishedAt}
	}
	return out
}

// labelKey is a canonical encoding of a label set.
func labelKey(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.Bytes()
}

// leanPodOf returns the cache entry of a store item (nil for anything else).
func leanPodOf(obj any) *leanPod {
	lp, _ := obj.(*leanPod)
	return lp
}

// leanPodLister lists the pod cache as *corev1.Pod (corelisters.PodLister), building each
// pod returned with leanPod.pod; label selectors are matched on the cached labels, so pods
// not returned are not built.
type leanPodLister struct{ indexer cache.Indexer }

var _ corelisters.PodLister = leanPodLister{}

// List implements corelisters.PodLister.
func (l leanPodLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	return selectPods(l.indexer.List(), sel), nil
}

// Pods implements corelisters.PodLister.
func (l leanPodLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return leanPodNamespaceLister{indexer: l.indexer, namespace: namespace}
}

type leanPodNamespaceLister struct {
	indexer   cache.Indexer
	namespace string
}

// List implements corelisters.PodNamespaceLister.
func (l leanPodNamespaceLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	objs, err := l.indexer.ByIndex(cache.NamespaceIndex, l.namespace)
	if err != nil {
		return nil, err
	}
	return selectPods(objs, sel), nil
}

// Get implements corelisters.PodNamespaceLister.
func (l leanPodNamespaceLister) Get(name string) (*corev1.Pod, error) {
	obj, ok, err := l.indexer.GetByKey(l.namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	lp := leanPodOf(obj)
	if !ok || lp == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("pod"), name)
	}
	return lp.pod(), nil
}

// selectPods builds the pods among objs whose labels match sel.
func selectPods(objs []any, sel labels.Selector) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		lp := leanPodOf(o)
		if lp == nil {
			continue
		}
		if !sel.Empty() {
			var set labels.Set
			if lp.labels != nil {
				set = *lp.labels
			}
			if !sel.Matches(set) {
				continue
			}
		}
		out = append(out, lp.pod())
	}
	return out
}

// leanNodePods is the pod cache's triage.NodePods: the cache entries of the pods bound to each
// node, taken when a question starts (entries are immutable: an update replaces them, so the
// question reads one consistent set), whose pods are built (leanPod.pod) only when a rule
// reads a node (or, through Where, only the pods a rule looks for). A node table that reads
// no node's pods (most of them: only host ports,
// inter-pod affinity, topology spread and volume limits do) builds none; one that does holds
// the pods of one node at a time. The pods built are shared while in use (leanPod.view), so
// concurrent questions build each at most once.
type leanNodePods map[string][]*leanPod

// newLeanNodePods groups the cache entries that are bound pods still holding resources by
// node, each node's sorted by namespace and name, and sums what they request on each node
// (component-helpers' PodRequests depends on the spec alone, so pods sharing an interned spec
// are summed with one computation).
func newLeanNodePods(objs []any) (leanNodePods, map[string]corev1.ResourceList) {
	byNode := leanNodePods{}
	for _, o := range objs {
		lp := leanPodOf(o)
		if lp == nil || !holdsResources(lp.node.Value(), corev1.PodPhase(lp.phase.Value())) {
			continue
		}
		byNode[lp.node.Value()] = append(byNode[lp.node.Value()], lp)
	}
	perSpec := map[*corev1.PodSpec]corev1.ResourceList{}
	used := make(map[string]corev1.ResourceList, len(byNode))
	for node, pods := range byNode {
		sort.Slice(pods, func(i, j int) bool {
			if a, b := pods[i].namespace.Value(), pods[j].namespace.Value(); a != b {
				return a < b
			}
			return pods[i].name < pods[j].name
		})
		sum := corev1.ResourceList{}
		for _, lp := range pods {
			reqs, ok := perSpec[lp.spec]
			if !ok {
				reqs = resourcehelper.PodRequests(&corev1.Pod{Spec: *lp.spec}, resourcehelper.PodResourcesOptions{})
				perSpec[lp.spec] = reqs
			}
			for name, q := range reqs {
				s := sum[name]
				s.Add(q)
				sum[name] = s
			}
		}
		used[node] = sum
	}
	return byNode, used
}

// On implements triage.NodePods.
func (m leanNodePods) On(node string) []*corev1.Pod {
	pods := m[node]
	out := make([]*corev1.Pod, len(pods))
	for i, lp := range pods {
		out[i] = lp.pod()
	}
	return out
}

// Count implements triage.NodePods.
func (m leanNodePods) Count(node string) int { return len(m[node]) }

// Where implements triage.NodePods: keep sees a scratch pod with the entry's metadata and
// its interned spec (without nodeName, the token volume under its shared name).
func (m leanNodePods) Where(node string, keep func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	var scratch corev1.Pod
	for _, lp := range m[node] {
		scratch.ObjectMeta = metav1.ObjectMeta{Name: lp.name, Namespace: lp.namespace.Value(), UID: types.UID(lp.uid)}
		if lp.labels != nil {
			scratch.Labels = *lp.labels
		}
		if lp.owners != nil {
			scratch.OwnerReferences = *lp.owners
		}
		scratch.Spec = *lp.spec
		if keep(&scratch) {
			out = append(out, lp.pod())
		}
	}
	return out
}
