package collect

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/whypending/whypending/triage"
)

// DiagnoseWorkload collects a triage.WorkloadSnapshot of ref with c and evaluates it. It
// returns an error only when the workload itself could not be read for a reason other than
// NotFound; a missing workload is a triage.WorkloadDiagnosis with triage.CodeWorkloadNotFound.
func DiagnoseWorkload(ctx context.Context, c *Collector, ref triage.WorkloadRef) (*triage.WorkloadDiagnosis, error) {
	ws, err := c.CollectWorkload(ctx, ref)
	if err != nil {
		return nil, err
	}
	return triage.EvaluateWorkload(ws), nil
}

// CollectWorkload reads everything the workload rules need about ref into a
// triage.WorkloadSnapshot, the way kubectl finds a workload's pods: the workload; for a
// Deployment its ReplicaSets, for a CronJob its Jobs (ownerReferences); the namespace's pods
// that those control; the events of the workload and of those ReplicaSets and Jobs (where the
// controllers write FailedCreate); the namespace's pod-security labels, ResourceQuotas and
// LimitRanges; every node for a DaemonSet; and a full pod Snapshot of each pod
// triage.PodsToDiagnose picks, the shared parts read once for all of them (podBatch). The direct
// backend sends one request (or one paginated list) per kind; the cached one reads its
// informers. Only a failed read of the workload itself fails it.
func (c *Collector) CollectWorkload(ctx context.Context, ref triage.WorkloadRef) (*triage.WorkloadSnapshot, error) {
	ws := &triage.WorkloadSnapshot{Now: c.now(), Requested: ref}
	found, err := c.getWorkload(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	if !found {
		if w, err := c.workloadsIn(ctx, ref.Namespace); err == nil {
			ws.SimilarWorkloads = triage.ClosestWorkloadNames(w.refs(), ref, maxSimilarPods)
		}
		return ws, nil
	}
	ns := ref.Namespace
	sel := labels.Everything()
	switch {
	case ws.Deployment != nil:
		if w, err := c.workloadsIn(ctx, ns, triage.KindReplicaSet); err == nil {
			ws.ReplicaSets = triage.OwnedReplicaSets(ws.Deployment, w.replicaSets)
		}
		sel = selectorOf(ws.Deployment.Spec.Selector)
	case ws.CronJob != nil:
		if w, err := c.workloadsIn(ctx, ns, triage.KindJob); err == nil {
			ws.Jobs = triage.OwnedJobs(ws.CronJob, w.jobs)
		}
	case ws.ReplicaSet != nil:
		sel = selectorOf(ws.ReplicaSet.Spec.Selector)
	case ws.StatefulSet != nil:
		sel = selectorOf(ws.StatefulSet.Spec.Selector)
	case ws.DaemonSet != nil:
		sel = selectorOf(ws.DaemonSet.Spec.Selector)
	case ws.Job != nil:
		sel = selectorOf(ws.Job.Spec.Selector)
	}
	if pods, err := c.namespacePods(ctx, ns, sel); err == nil {
		ws.Pods = triage.PodsOf(ws, pods)
	}
	var nsEvents map[types.UID][]triage.Event
	if c.cache == nil {
		nsEvents, ws.EventsErr = c.namespaceEvents(ctx, ns)
	}
	ws.Events = c.controllerEvents(creatorUIDs(ws), nsEvents)
	c.admission(ctx, ws, ns)
	if ws.DaemonSet != nil {
		ws.Nodes, ws.NodesErr = c.allNodes(ctx)
	}
	if triage.NeedsServiceAccountNames(ws) {
		if names, err := c.namesIn(ctx, ns, "serviceaccounts"); err == nil {
			ws.ServiceAccountNames = names
		}
	}
	c.collectWorkloadComponents(ctx, ws)
	diagnose := triage.PodsToDiagnose(ws)
	b := c.newPodBatch(ctx, ns, diagnose, nsEvents, ws.EventsErr)
	ws.PodSnapshots = b.snapshots(ctx, diagnose, true)
	return ws, nil
}

// creatorUIDs are the UIDs of the workload and of its ReplicaSets and Jobs, whose events the
// workload rules read.
func creatorUIDs(ws *triage.WorkloadSnapshot) []types.UID {
	uids := []types.UID{types.UID(ws.Ref().UID)}
	for _, rs := range ws.ReplicaSets {
		uids = append(uids, rs.UID)
	}
	for _, j := range ws.Jobs {
		uids = append(uids, j.UID)
	}
	return uids
}

// selectorOf converts a workload's label selector; a missing or invalid one selects every pod
// (ownerReferences then decide).
func selectorOf(ls *metav1.LabelSelector) labels.Selector {
	if ls == nil {
		return labels.Everything()
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Everything()
	}
	return sel
}

// podsNeedingDiagnosis returns the pods a sweep reads (triage.PodNeedsDiagnosis).
func podsNeedingDiagnosis(now time.Time, pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if triage.PodNeedsDiagnosis(now, p) {
			out = append(out, p)
		}
	}
	return out
}
