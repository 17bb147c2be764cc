package collect

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/whypending/whypending/triage"
)

// Sweep collects a triage.NamespaceSnapshot of namespace with c and evaluates it: every stuck
// pod and failing workload, grouped by cause. It fails only when the namespace's pods or
// workloads cannot be listed; a namespace that does not exist is a NamespaceDiagnosis with
// NotFound set.
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
	quiet := c
	c, refused := c.recording()
	now := c.now()
	out := &triage.NamespaceSnapshot{Now: now, Namespace: namespace}
	defer func() { out.Refused = refused.refused() }()
	// A refused or failed workload list (RBAC, a list that timed out) leaves its kind out and
	// makes the sweep partial (noted by recording), as long as the pods could be read; when
	// every list of pods and workloads is refused there is nothing to answer from.
	w, wErr := c.workloadsIn(ctx, namespace)
	pods, err := c.read.pods(ctx, namespace, labels.Everything())
	if err != nil && !onlyForbidden(err) {
		return nil, err
	}
	if err != nil && wErr != nil && !onlyForbidden(wErr) {
		return nil, wErr
	}
	if err != nil && wErr != nil && len(w.refs()) == 0 {
		return nil, fmt.Errorf("the API server refused every read of namespace %s (list pods and list %s: forbidden); a sweep needs at least list pods there: check with kubectl auth can-i list pods -n %s",
			namespace, strings.Join(refusedWorkloadLists(namespace, refused.refused()), ", "), namespace)
	}
	nsEvents, eventsErr := c.read.namespaceEvents(ctx, namespace)
	admission := &triage.WorkloadSnapshot{}
	nsErr := c.admission(ctx, admission, namespace)

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
	var saCreated map[string]time.Time
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
		ws.Events = controllerEvents(uids, nsEvents)
		ws.EventsErr = eventsErr
		if triage.NeedsServiceAccountNames(ws) {
			if !saRead {
				saNames, saCreated, _ = c.read.names(ctx, namespace, "serviceaccounts")
				saRead = true
			}
			ws.ServiceAccountNames, ws.ServiceAccountCreated = saNames, saCreated
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
	// An empty sweep of a misspelt namespace must not say "nothing is stuck". When the
	// Namespace cannot be read for another reason (RBAC), sweep what was listed.
	empty := len(all) == 0 && len(pods) == 0
	if empty && apierrors.IsNotFound(nsErr) {
		out.MissingNamespace = &triage.MissingNamespace{Name: namespace}
		out.MissingNamespace.Existing = c.existingNamespaces(ctx, quiet, namespace)
		return out, nil
	}
	// An empty namespace, or "default" (where a question without -n lands) with nothing
	// stuck, says where the stuck pods are rather than giving an all-clear.
	if empty || (namespace == metav1.NamespaceDefault && len(stuck) == 0) {
		out.StuckElsewhere, out.ElsewhereRead = quiet.stuckElsewhere(ctx, namespace)
	}
	return out, nil
}

// missingNamespace returns the answer's MissingNamespace when namespace does not exist, nil
// when it does or cannot be read.
func (c *Collector) missingNamespace(ctx context.Context, namespace string) *triage.MissingNamespace {
	if _, err := c.read.namespace(ctx, namespace); !apierrors.IsNotFound(err) {
		return nil
	}
	m := &triage.MissingNamespace{Name: namespace}
	m.Existing = c.existingNamespaces(ctx, c, namespace)
	return m
}

// existingNamespaces lists the namespaces through rd for a namespace-not-found answer's "did
// you mean": under per-user authorization only those the asker may read, the closest
// first (nil when they cannot be listed).
func (c *Collector) existingNamespaces(ctx context.Context, rd *Collector, missing string) []string {
	names, err := rd.read.namespaceNames(ctx)
	if err != nil {
		return nil
	}
	if _, ok := ctx.Value(visibleKey{}).(func(context.Context, string) bool); !ok {
		return names
	}
	near := triage.ClosestNamespaceNames(missing, names, len(names))
	keep, _ := visibleNamespaces(ctx, missing, near, len(near))
	return keep
}

// stuckElsewhere counts the stuck pods (triage.PodNeedsDiagnosis) of every namespace but
// namespace, most first; read is false when the pods of every namespace cannot be listed.
func (c *Collector) stuckElsewhere(ctx context.Context, namespace string) ([]triage.NamespaceStuck, bool) {
	pods, err := c.read.pods(ctx, metav1.NamespaceAll, labels.Everything())
	if err != nil {
		return nil, false
	}
	counts := map[string]int{}
	for _, p := range podsNeedingDiagnosis(c.now(), pods) {
		if p.Namespace != namespace {
			counts[p.Namespace]++
		}
	}
	var out []triage.NamespaceStuck
	for ns, n := range counts {
		out = append(out, triage.NamespaceStuck{Namespace: ns, Pods: n})
	}
	triage.SortNamespaceStuck(out)
	// Under per-user authorization only the namespaces the asker may read are named; when
	// any is left out, the answer must not say that the others have nothing stuck.
	names := make([]string, len(out))
	for i, s := range out {
		names[i] = s.Namespace
	}
	keep, hidden := visibleNamespaces(ctx, namespace, names, len(names))
	if hidden && len(keep) == 0 {
		return nil, false
	}
	out = slices.DeleteFunc(out, func(s triage.NamespaceStuck) bool { return !slices.Contains(keep, s.Namespace) })
	return out, true
}
