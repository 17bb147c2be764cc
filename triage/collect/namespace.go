package collect

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/whypending/whypending/triage"
)

// Sweep collects a triage.NamespaceSnapshot of namespace with c and evaluates it: every stuck
// pod and failing workload, grouped by cause. It fails only when the namespace's pods or
// workloads cannot be listed.
func Sweep(ctx context.Context, c *Collector, namespace string) (*triage.NamespaceDiagnosis, error) {
	ns, err := c.CollectNamespace(ctx, namespace)
	if err != nil {
		return nil, err
	}
	return triage.EvaluateNamespace(ns), nil
}

// CollectNamespace reads a namespace for a sweep with one read per kind, whatever its size:
// the six workload kinds, the pods, the events (one list; the cached backend reads its
// informers and sends nothing), the admission settings, the nodes and bound pods once for all
// stuck pods, and a light Snapshot of each pod that does not look Running and Ready (see
// triage.NamespaceSnapshot). Workloads are assembled the way CollectWorkload reads one.
func (c *Collector) CollectNamespace(ctx context.Context, namespace string) (*triage.NamespaceSnapshot, error) {
	now := c.now()
	out := &triage.NamespaceSnapshot{Now: now, Namespace: namespace}
	w, err := c.workloadsIn(ctx, namespace)
	if err != nil {
		return nil, err
	}
	pods, err := c.namespacePods(ctx, namespace, labels.Everything())
	if err != nil {
		return nil, err
	}
	var nsEvents map[types.UID][]triage.Event
	var eventsErr error
	if c.cache == nil {
		nsEvents, eventsErr = c.namespaceEvents(ctx, namespace)
	}
	admission := &triage.WorkloadSnapshot{}
	c.admission(ctx, admission, namespace)

	// Top-level workloads: a Deployment takes its ReplicaSets, a CronJob its Jobs; the others
	// stand alone.
	owned := map[types.UID]bool{}
	var all []*triage.WorkloadSnapshot
	newWS := func(kind triage.Kind, m metav1.Object) *triage.WorkloadSnapshot {
		ws := &triage.WorkloadSnapshot{Now: now, Requested: triage.WorkloadRef{Kind: kind, Namespace: namespace, Name: m.GetName()},
			Namespace: admission.Namespace, ResourceQuotas: admission.ResourceQuotas, LimitRanges: admission.LimitRanges}
		all = append(all, ws)
		return ws
	}
	for _, d := range w.deployments {
		ws := newWS(triage.KindDeployment, d)
		ws.Deployment, ws.ReplicaSets = d, triage.OwnedReplicaSets(d, w.replicaSets)
		for _, rs := range ws.ReplicaSets {
			owned[rs.UID] = true
		}
	}
	for _, cj := range w.cronJobs {
		ws := newWS(triage.KindCronJob, cj)
		ws.CronJob, ws.Jobs = cj, triage.OwnedJobs(cj, w.jobs)
		for _, j := range ws.Jobs {
			owned[j.UID] = true
		}
	}
	for _, rs := range w.replicaSets {
		if !owned[rs.UID] {
			newWS(triage.KindReplicaSet, rs).ReplicaSet = rs
		}
	}
	for _, j := range w.jobs {
		if !owned[j.UID] {
			newWS(triage.KindJob, j).Job = j
		}
	}
	for _, s := range w.statefulSets {
		newWS(triage.KindStatefulSet, s).StatefulSet = s
	}
	var nodes []*corev1.Node
	var nodesErr error
	if len(w.daemonSets) > 0 {
		nodes, nodesErr = c.allNodes(ctx)
	}
	for _, d := range w.daemonSets {
		ws := newWS(triage.KindDaemonSet, d)
		ws.DaemonSet, ws.Nodes, ws.NodesErr = d, nodes, nodesErr
	}

	// Pods by their controller, then each workload's pods; the rest are the namespace's own.
	byOwner := map[types.UID][]*corev1.Pod{}
	for _, p := range pods {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			byOwner[ref.UID] = append(byOwner[ref.UID], p)
		}
	}
	claimed := map[types.UID]bool{}
	var saNames []string
	var saRead bool
	for _, ws := range all {
		uids := creatorUIDs(ws)
		for _, uid := range uids {
			ws.Pods = append(ws.Pods, byOwner[uid]...)
		}
		triage.SortPods(ws.Pods)
		for _, p := range ws.Pods {
			claimed[p.UID] = true
		}
		ws.Events = c.controllerEvents(uids, nsEvents)
		ws.EventsErr = eventsErr
		if triage.NeedsServiceAccountNames(ws) {
			if !saRead {
				saNames, _ = c.namesIn(ctx, namespace, "serviceaccounts")
				saRead = true
			}
			ws.ServiceAccountNames = saNames
		}
	}
	for _, p := range pods {
		if !claimed[p.UID] {
			out.Pods = append(out.Pods, p)
		}
	}
	sort.Slice(out.Pods, func(i, j int) bool { return out.Pods[i].Name < out.Pods[j].Name })

	// Light Snapshots of the stuck pods, the shared reads done once.
	stuck := podsNeedingDiagnosis(now, pods)
	snaps := c.newPodBatch(ctx, namespace, stuck, nsEvents, eventsErr).snapshots(ctx, stuck, false)
	for _, ws := range all {
		ws.PodSnapshots = map[types.UID]*triage.Snapshot{}
		for _, p := range ws.Pods {
			if s := snaps[p.UID]; s != nil {
				ws.PodSnapshots[p.UID] = s
			}
		}
	}
	out.PodSnapshots = map[types.UID]*triage.Snapshot{}
	for _, p := range out.Pods {
		if s := snaps[p.UID]; s != nil {
			out.PodSnapshots[p.UID] = s
		}
	}
	out.Workloads = all
	if len(all) == 0 && len(pods) == 0 {
		if _, err := c.namespaceExists(ctx, namespace, admission.Namespace); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// namespaceExists returns an error naming the namespace when it does not exist (an empty sweep
// of a misspelt namespace must not say "nothing is stuck"); nsObj is the Namespace if it was
// read.
func (c *Collector) namespaceExists(ctx context.Context, namespace string, nsObj *corev1.Namespace) (bool, error) {
	if nsObj != nil {
		return true, nil
	}
	_, err := c.client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err == nil {
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		nf := &NamespaceNotFoundError{Namespace: namespace}
		if list, err := c.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
			names := make([]string, len(list.Items))
			for i, n := range list.Items {
				names[i] = n.Name
			}
			nf.Closest = triage.ClosestNames(namespace, names, 3)
		}
		return false, nf
	}
	return true, nil // cannot tell (RBAC): sweep what was listed
}

// NamespaceNotFoundError is returned by Sweep and CollectNamespace for a namespace that does
// not exist.
type NamespaceNotFoundError struct {
	Namespace string
	// Closest are existing namespaces whose names are close to Namespace (a typo), closest
	// first; empty when none is, or namespaces may not be listed.
	Closest []string
}

func (e *NamespaceNotFoundError) Error() string {
	msg := fmt.Sprintf("namespace %q does not exist", e.Namespace)
	if len(e.Closest) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", quotedOr(e.Closest))
	}
	return msg
}

// quotedOr joins names as "a", "b" or "c".
func quotedOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
