package triage

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// This file sizes the "lower the request" fix of NodeResourcesFit for a workload: kubectl set
// resources changes the pod template, so every replica is replaced with the new request, and
// the value must let all of them fit, not only the pod asked about ("1000m" fits one more pod
// on the roomiest node, and 4 of 5 replicas; 666m fits all five).

// replicaFit is what a lower per-container request leaves.
type replicaFit struct {
	// per is the request of the resource each container and init container then has (kubectl
	// set resources sets them all), in base units.
	per int64
	// counts is how many replicas then fit on each node that takes one.
	counts map[string]int
	// replicas is how many replicas must fit; known says it is the workload's spec.replicas
	// (else the replicas seen: those on nodes and this pod).
	replicas int
	known    bool
	// running are the workload's pods on nodes whose room the fit counts on: they only make
	// room once the rollout has replaced them. ready are those of them that are Ready (serving):
	// no fix may tell the user to delete one of those while it could be the last.
	running, ready []string
	// rollout is true when no lower request is needed: the replicas fit as they are once the
	// workload's running pods (running) are replaced, so a rollout waits on its own old pods.
	rollout bool
}

// requestUnit is the step of a per-container request of res the fix names: 1m of cpu, 1Mi of
// memory or ephemeral-storage.
func requestUnit(res corev1.ResourceName) int64 {
	if res == corev1.ResourceCPU {
		return 1
	}
	return 1 << 20
}

// replicasToFit returns how many replicas a resources fix on the pod's workload must make room
// for: the workload's spec.replicas (Snapshot.WorkloadReplicas) for a Deployment, StatefulSet or
// ReplicaSet, else 1 (a DaemonSet pod has one node; a bare pod is one pod); without
// spec.replicas, the workload's pods on nodes and this one. own says which pods are the
// workload's.
func (v *schedulingView) replicasToFit(kind string, own func(*corev1.Pod) bool) (n int, known bool) {
	switch kind {
	case "deployment", "statefulset", "replicaset":
	default:
		return 1, true
	}
	if r := v.snap.WorkloadReplicas; r != nil {
		return max(int(*r), 1), true
	}
	n = 1
	for _, node := range v.cluster.nodes {
		n += len(v.cluster.pods.Where(node.Name, own))
	}
	return n, false
}

// lowerRequestFit finds the largest per-container request of res (a core resource) with which
// the replicas of the pod's workload (kind/name, see workloadOf) all fit: on every node the
// modelled filters judge again with that request, the replicas it takes are counted, with the
// workload's own pods gone (the rollout replaces them). When the replicas fit at the current
// request once the workload's running pods are gone but not beside them, fit.rollout is set
// instead: the rollout waits on its own old pods. ok is false when no such request is
// below the current one, when the model is not complete for this pod (modelGaps), and, for
// more than one replica, when the pod's topology spread or inter-pod affinity decides how
// replicas share nodes (the count would be a guess).
func (v *schedulingView) lowerRequestFit(res corev1.ResourceName, kind, name string) (fit replicaFit, ok bool) {
	if v.modelGaps() != "" {
		return fit, false
	}
	// The workload's pods: its controller's own (by UID: a pod left by a deleted StatefulSet of
	// the same name is not one), or for a Deployment those of any of its ReplicaSets.
	ctrl := metav1.GetControllerOf(v.pod)
	own := func(p *corev1.Pod) bool {
		k, n := workloadOf(p)
		if name == "" || p.Namespace != v.pod.Namespace || k != kind || n != name {
			return false
		}
		if kind == "deployment" || ctrl == nil || ctrl.UID == "" {
			return true
		}
		c := metav1.GetControllerOf(p)
		return c != nil && c.UID == ctrl.UID
	}
	fit.replicas, fit.known = v.replicasToFit(kind, own)
	perNode := 0 // replicas a node takes at most (0: as many as fit)
	if fit.replicas > 1 {
		aff := v.pod.Spec.Affinity
		switch {
		case slices.ContainsFunc(v.pod.Spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool { return c.WhenUnsatisfiable == corev1.DoNotSchedule }),
			aff != nil && aff.PodAffinity != nil && len(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0:
			return fit, false
		case aff != nil && aff.PodAntiAffinity != nil && len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0:
			for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if term.TopologyKey != corev1.LabelHostname || !termMatches(v.pod, term, v.pod) {
					return fit, false
				}
			}
			perNode = 1
		}
		if len(v.demand.hostPorts) > 0 {
			perNode = 1
		}
	}
	// The cluster as the rollout leaves it: the workload's own pods gone. A node without the
	// workload's pods keeps its summed requests (Snapshot.RequestedByNode, shared read-only);
	// the others are summed again from the pods left (cluster.usedOn).
	s := *v.snap
	s.RequestedByNode = make(map[string]corev1.ResourceList, len(v.snap.RequestedByNode))
	gone := withoutPods{NodePods: v.cluster.pods, own: own, on: map[string]bool{}}
	var running, ready []string
	for _, n := range v.cluster.nodes {
		for _, p := range v.cluster.pods.Where(n.Name, own) {
			running = append(running, p.Name)
			if servesTraffic(p) {
				ready = append(ready, p.Name)
			}
			gone.on[n.Name] = true
		}
		if used, ok := v.snap.RequestedByNode[n.Name]; ok && !gone.on[n.Name] {
			s.RequestedByNode[n.Name] = used
		}
	}
	sort.Strings(running)
	sort.Strings(ready)
	without := newClusterOf(&s, gone)

	unit := requestUnit(res)
	hi := int64(0) // the largest per-container request now, in units
	for _, c := range append(slices.Clone(v.pod.Spec.InitContainers), v.pod.Spec.Containers...) {
		if q, has := c.Resources.Requests[res]; has {
			hi = max(hi, baseUnits(res, q)/unit)
		}
	}
	// Of the filters, only NodeResourcesFit reads the pod's requests: a node another filter
	// rejects stays rejected at every request, so those are judged once per cluster, and each
	// request tried is judged by NodeResourcesFit alone on the nodes left.
	eligible := map[*cluster][]*corev1.Node{}
	for _, c := range []*cluster{without, v.cluster} {
		for _, n := range c.nodes {
			if len(nodeReasonsExcept(v.demand, n, c, resourcesFit)) == 0 {
				eligible[c] = append(eligible[c], n)
			}
		}
	}
	place := func(per int64, c *cluster) map[string]int {
		d := v.withEveryContainerRequest(res, per*unit)
		counts := map[string]int{}
		for _, n := range eligible[c] {
			if len(resourceReasons(d, n, c)) > 0 {
				continue
			}
			k := copiesFitting(d, n, c)
			if perNode > 0 {
				k = min(k, perNode)
			}
			counts[n.Name] = k
		}
		return counts
	}
	total := func(counts map[string]int) int {
		t := 0
		for _, k := range counts {
			t += k
		}
		return t
	}
	if total(place(hi, without)) >= fit.replicas {
		if len(running) == 0 || total(place(hi, v.cluster)) >= fit.replicas {
			return fit, false
		}
		// They fit as they are once the running ones are gone: a rollout waits on its own pods.
		fit.rollout, fit.running, fit.ready = true, running, ready
		return fit, true
	}
	// The largest per in [1, hi-1] whose replicas all fit (fewer fit as per grows).
	lo, top := int64(0), hi-1
	for lo < top {
		mid := (lo + top + 1) / 2
		if total(place(mid, without)) >= fit.replicas {
			lo = mid
		} else {
			top = mid - 1
		}
	}
	if lo < 1 {
		return fit, false
	}
	fit.per = lo * unit
	fit.counts = place(lo, without)
	if len(running) > 0 && total(place(lo, v.cluster)) < fit.replicas {
		fit.running, fit.ready = running, ready
	}
	return fit, true
}

// servesTraffic reports whether pod is Ready and not being deleted: a replica that serves, so
// deleting it by hand leaves the workload with one Ready replica fewer.
func servesTraffic(pod *corev1.Pod) bool {
	c := podCondition(pod, corev1.PodReady)
	return pod.DeletionTimestamp == nil && c != nil && c.Status == corev1.ConditionTrue
}

// resourcesFit is the plugin of resourceReasons, the only filter that reads the pod's requests.
const resourcesFit = "NodeResourcesFit"

// withEveryContainerRequest returns the pod's demand as it would be with every container and
// init container requesting amount (base units) of res, as kubectl set resources sets them.
func (v *schedulingView) withEveryContainerRequest(res corev1.ResourceName, amount int64) *demand {
	pod := v.pod.DeepCopy()
	q := *resource.NewQuantity(amount, resource.BinarySI)
	if res == corev1.ResourceCPU {
		q = *resource.NewMilliQuantity(amount, resource.DecimalSI)
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Resources.Requests == nil {
				list[i].Resources.Requests = corev1.ResourceList{}
			}
			list[i].Resources.Requests[res] = q
		}
	}
	d := *v.demand
	d.pod = pod
	d.requests = resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	return &d
}

// copiesFitting is how many pods of demand d node n takes at once, by what its pods leave
// free of each resource d requests and of its pod count.
func copiesFitting(d *demand, n *corev1.Node, c *cluster) int {
	alloc, used := n.Status.Allocatable, c.usedOn(n.Name)
	k := int(alloc.Pods().Value()) - c.pods.Count(n.Name)
	for name, q := range d.requests {
		want := baseUnits(name, q)
		if want <= 0 || name == corev1.ResourcePods {
			continue
		}
		free := baseUnits(name, alloc[name]) - baseUnits(name, used[name])
		k = min(k, int(free/want))
	}
	return max(k, 0)
}

// placement renders the room for replicas per node: "room for 3 on node-1, 1 on node-2, 1 on
// node-3", most first.
func (f replicaFit) placement() string {
	nodes := make([]string, 0, len(f.counts))
	for n, k := range f.counts {
		if k > 0 {
			nodes = append(nodes, n)
		}
	}
	sort.Slice(nodes, func(i, j int) bool {
		if f.counts[nodes[i]] != f.counts[nodes[j]] {
			return f.counts[nodes[i]] > f.counts[nodes[j]]
		}
		return nodes[i] < nodes[j]
	})
	var parts []string
	for i, n := range nodes {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("more on %d other %s", len(nodes)-3, plural(len(nodes)-3, "node", "nodes")))
			break
		}
		parts = append(parts, fmt.Sprintf("%d on %s", f.counts[n], n))
	}
	return "room for " + strings.Join(parts, ", ")
}

// firstNode returns the node of rooms (roomiest first) that takes a replica, else the first by
// name.
func (f replicaFit) firstNode(rooms []nodeRoom) string {
	for _, r := range rooms {
		if f.counts[r.Node] > 0 {
			return r.Node
		}
	}
	var names []string
	for n, k := range f.counts {
		if k > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return firstOr(names, "")
}

// withoutPods is NodePods without the pods own accepts, which are all on the nodes of on.
type withoutPods struct {
	NodePods
	own func(*corev1.Pod) bool
	on  map[string]bool
}

func (w withoutPods) On(node string) []*corev1.Pod {
	pods := w.NodePods.On(node)
	if !w.on[node] {
		return pods
	}
	return slices.DeleteFunc(slices.Clone(pods), w.own)
}

func (w withoutPods) Count(node string) int {
	if !w.on[node] {
		return w.NodePods.Count(node)
	}
	return len(w.On(node))
}

func (w withoutPods) Where(node string, keep func(*corev1.Pod) bool) []*corev1.Pod {
	if !w.on[node] {
		return w.NodePods.Where(node, keep)
	}
	return w.NodePods.Where(node, func(p *corev1.Pod) bool { return keep(p) && !w.own(p) })
}
