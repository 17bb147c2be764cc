package collect

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/whypending/whypending/triage"
)

// Answer answers one why-pending question about t with c, the way the CLI and the bot both
// ask:
//
//   - --all: the namespace sweep (Sweep);
//   - a pod (NAMESPACE/POD, po/NAME): its Diagnosis;
//   - a bare NAME (or NAMESPACE/NAME): the pod of that name; when there is none, the first
//     workload of that name in triage.WorkloadKinds order (the answer notes it, and any other
//     kind with that name); with neither, the pod-not-found answer with the closest pod names;
//   - TYPE/NAME: the workload's WorkloadDiagnosis. When TYPE is also a namespace name
//     (t.OtherReading) and a pod exists under that reading, the answer notes how to ask for it;
//     when the workload does not exist but that pod does, the answer is the pod's (as
//     whypending read NAMESPACE/POD before it understood TYPE/NAME), with a note, unless the
//     asker named the namespace with -n (t.NamespaceGiven).
//
// It returns an error only when the API server cannot answer the main read (the pod, the
// workload, or the namespace's pods and workloads for a sweep), or a *triage.TwoNamespacesError
// when t.FlagNamespace is set and its NAMESPACE exists (the asker's error, for the asker).
func Answer(ctx context.Context, c *Collector, t triage.Target) (*triage.Answer, error) {
	ctx = withVisible(ctx, t.Visible)
	switch {
	case t.All:
		d, err := Sweep(ctx, c, t.Namespace)
		if err != nil {
			return nil, err
		}
		return &triage.Answer{Namespace: d}, nil
	case t.Kind == triage.KindPod:
		d, err := Diagnose(ctx, c, t.Namespace, t.Name)
		if err != nil {
			return nil, err
		}
		return &triage.Answer{Pod: d}, nil
	case t.Kind == "":
		if err := twoNamespaces(ctx, c, t); err != nil {
			return nil, err
		}
		return bareName(ctx, c, t)
	}
	ref := triage.WorkloadRef{Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}
	wd, err := DiagnoseWorkload(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	a := &triage.Answer{Workload: wd}
	if o := t.OtherReading; o != nil && c.read.podExists(ctx, o.Namespace, o.Name) {
		if code := wd.Primary().Code; (code == triage.CodeWorkloadNotFound || code == triage.CodeNamespaceNotFound) && !t.NamespaceGiven {
			d, err := Diagnose(ctx, c, o.Namespace, o.Name)
			if err != nil {
				return nil, err
			}
			return &triage.Answer{Pod: d, Notes: []string{fmt.Sprintf(
				"Read %s/%s as pod %s in namespace %s: there is no %s %s in namespace %s. %q is read as TYPE/NAME, the way kubectl reads it, whenever such a workload exists.",
				o.Namespace, o.Name, o.Name, o.Namespace, t.Kind, t.Name, t.Namespace, o.Namespace+"/"+o.Name)}}, nil
		}
		a.Notes = append(a.Notes, fmt.Sprintf("Read %s/%s as %s %s in namespace %s (TYPE/NAME, as kubectl reads it). Pod %s in namespace %s exists too: ask for it with -n %s %s.",
			o.Namespace, o.Name, t.Kind, t.Name, t.Namespace, o.Name, o.Namespace, o.Namespace, o.Name))
	}
	return a, nil
}

// twoNamespaces is t.TwoNamespaces() when t's NAMESPACE, named like a kind ("svc/web -n
// shop"), is not known to be missing: the question is then refused as naming two namespaces,
// as Given refuses any other. The test is the one a question without -n makes (Collect's
// missingNamespace): only a namespace that does not exist is read as a kind.
func twoNamespaces(ctx context.Context, c *Collector, t triage.Target) error {
	err := t.TwoNamespaces()
	if err == nil {
		return nil
	}
	if _, nsErr := c.read.namespace(ctx, t.Namespace); apierrors.IsNotFound(nsErr) {
		return nil
	}
	return err
}

// bareName answers a bare NAME: the pod, else a workload of that name.
func bareName(ctx context.Context, c *Collector, t triage.Target) (*triage.Answer, error) {
	s, err := c.Collect(ctx, t.Namespace, t.Name)
	if err != nil {
		return nil, err
	}
	if s.MissingNamespace != nil {
		s.MissingNamespace.Flag = t.FlagNamespace
	}
	if s.Pod != nil || s.MissingNamespace != nil { // namespace-not-found: no workload either
		return &triage.Answer{Pod: triage.Evaluate(s)}, nil
	}
	rc, refused := c.recording()
	var found []triage.Kind
	var first *triage.WorkloadSnapshot
	for _, k := range triage.WorkloadKinds {
		ws := &triage.WorkloadSnapshot{Requested: triage.WorkloadRef{Kind: k, Namespace: t.Namespace, Name: t.Name}}
		ok, err := rc.getWorkload(ctx, ws)
		if _, failed := failure(err); err != nil && !failed {
			return nil, fmt.Errorf("get %s %s/%s: %w", k, t.Namespace, t.Name, err)
		}
		if ok {
			found = append(found, k)
			if first == nil {
				first = ws
			}
		}
	}
	if first == nil {
		// A refused or failed lookup is no answer: the pod-not-found answer is then partial
		// and uncertain (the workload may exist), and says nothing of workloads it could not
		// read.
		if s.Refused = append(s.Refused, refused.refused()...); len(s.Refused) > 0 {
			return &triage.Answer{Pod: triage.Evaluate(s)}, nil
		}
		return &triage.Answer{Pod: triage.Evaluate(s), Notes: []string{noWorkloadNote(ctx, c, t)}}, nil
	}
	wd, err := DiagnoseWorkload(ctx, c, first.Requested)
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("No pod is named %s in namespace %s, so this is %s %s.", t.Name, t.Namespace, found[0], t.Name)
	for _, k := range found[1:] {
		note += fmt.Sprintf(" A %s has that name too: ask for %s/%s.", k, k.Short(), t.Name)
	}
	return &triage.Answer{Workload: wd, Notes: []string{note}}, nil
}

// noWorkloadNote says that no workload has the name either, with the namespace's workloads of
// close names (kubectl's "kind/name"), so a typo in a workload's name gets an answer too.
func noWorkloadNote(ctx context.Context, c *Collector, t triage.Target) string {
	note := fmt.Sprintf("No Deployment, StatefulSet, DaemonSet, CronJob, Job or ReplicaSet is named %s in namespace %s either.", t.Name, t.Namespace)
	if w, err := c.workloadsIn(ctx, t.Namespace); err == nil {
		asked := triage.WorkloadRef{Namespace: t.Namespace, Name: t.Name}
		if near := triage.ClosestWorkloadNames(w.refs(), asked, maxSimilarPods); len(near) > 0 {
			note += " Workloads with close names: " + strings.Join(near, ", ") + " (ask with -n " + t.Namespace + " " + near[0] + ")."
		}
	}
	var others []string
	byName := map[string]triage.WorkloadRef{}
	for _, r := range c.read.workloadsNamed(ctx, t.Name) {
		if r.Namespace != t.Namespace {
			key := r.Namespace + "/" + string(r.Kind)
			others, byName[key] = append(others, key), r
		}
	}
	var elsewhere []string
	for _, key := range visibleNames(ctx, t.Namespace, others, maxSimilarPods) {
		r := byName[key]
		elsewhere = append(elsewhere, fmt.Sprintf("%s %s in namespace %s (ask with -n %s %s/%s)", r.Kind, r.Name, r.Namespace, r.Namespace, r.Kind.Short(), r.Name))
	}
	if len(elsewhere) > 0 {
		note += " Other namespaces have " + strings.Join(elsewhere, "; ") + "."
	}
	return note
}
