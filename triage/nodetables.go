package triage

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// NodeTables shares node tables (the per-node verdicts of the scheduling filters) among the
// Snapshots of one batch: Snapshots that share Nodes, BoundPods (or PodsByNode),
// RequestedByNode and Readable, such as the pods of a workload, a namespace sweep, or the
// stuck pods a watch diagnoses at once. The pods of a Deployment that go Pending together
// have the same demand (namespace, labels and spec, the service account token volume's random
// name aside), so their tables are the same: 200 such pods cost one table, not 200. A pod
// whose table depends on more than its demand and the shared parts (claims, ephemeral or CSI
// volumes: the per-pod storage parts of its Snapshot) gets its own. Safe for concurrent use.
type NodeTables struct {
	mu     sync.Mutex
	tables map[string]*nodeTable
}

type nodeTable struct {
	once     sync.Once
	verdicts []NodeVerdict
}

// NewNodeTables returns an empty NodeTables for one batch of Snapshots.
func NewNodeTables() *NodeTables { return &NodeTables{tables: map[string]*nodeTable{}} }

// verdicts returns nodeVerdicts(d, c), from t when a pod with the same demand was judged
// already. The result is shared: callers copy it before changing it. A nil t computes it.
func (t *NodeTables) verdicts(d *demand, c *cluster) []NodeVerdict {
	key, ok := demandKey(d.pod)
	if t == nil || !ok {
		return nodeVerdicts(d, c)
	}
	t.mu.Lock()
	e := t.tables[key]
	if e == nil {
		e = &nodeTable{}
		t.tables[key] = e
	}
	t.mu.Unlock()
	e.once.Do(func() { e.verdicts = nodeVerdicts(d, c) })
	return e.verdicts
}

// tokenVolumePrefix starts the name of the projected service account token volume the
// ServiceAccount admission plugin adds to every pod, with a random suffix per pod.
const tokenVolumePrefix = "kube-api-access-"

// demandKey is what the node table of pod depends on besides the cluster: its namespace,
// labels and spec, with the token volume's name and the node name left out. ok is false for
// a pod whose table also depends on per-pod parts of its Snapshot (claims, ephemeral or CSI
// volumes), which is not shared.
func demandKey(pod *corev1.Pod) (key string, ok bool) {
	spec := pod.Spec
	spec.NodeName = ""
	spec.Volumes = nil
	tokens := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil, v.Ephemeral != nil, v.CSI != nil:
			return "", false
		case v.Projected != nil && strings.HasPrefix(v.Name, tokenVolumePrefix):
			tokens[v.Name] = true
			v.Name = tokenVolumePrefix
		}
		spec.Volumes = append(spec.Volumes, v)
	}
	rename := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = c
			out[i].VolumeMounts = nil
			for _, m := range c.VolumeMounts {
				if tokens[m.Name] {
					m.Name = tokenVolumePrefix
				}
				out[i].VolumeMounts = append(out[i].VolumeMounts, m)
			}
		}
		return out
	}
	spec.Containers, spec.InitContainers = rename(spec.Containers), rename(spec.InitContainers)
	b, err := spec.Marshal()
	if err != nil {
		return "", false
	}
	var k strings.Builder
	k.WriteString(pod.Namespace)
	k.WriteByte(0)
	for _, l := range sortedKeys(pod.Labels) {
		k.WriteString(l)
		k.WriteByte(0)
		k.WriteString(pod.Labels[l])
		k.WriteByte(0)
	}
	k.Write(b)
	return k.String(), true
}
