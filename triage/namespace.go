package triage

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NamespaceSnapshot is what a namespace sweep (why-pending --all) reads, collected once by
// package triage/collect with one read per kind: every top-level workload of the namespace
// with its pods, and the pods no such workload owns. Only the pods that do not look Running
// and Ready (or Succeeded) have a Snapshot, and those are light: no previous container logs,
// no Calico IPAM, no near names and no storage extras, so a sweep of thousands of pods stays
// fast. The one-line causes come from those light reads; asking about one workload reads its
// pods in full.
type NamespaceSnapshot struct {
	// Now is the collection time.
	Now time.Time
	// Namespace is the namespace swept.
	Namespace string
	// Workloads are the namespace's top-level workloads: Deployments (with their ReplicaSets),
	// StatefulSets, DaemonSets, CronJobs (with their Jobs), and the Jobs and ReplicaSets no
	// CronJob or Deployment controls; each with its pods and the Snapshots of its stuck pods.
	Workloads []*WorkloadSnapshot
	// Pods are the namespace's pods that none of Workloads owns (bare pods, pods of other
	// controllers), sorted by name; PodSnapshots holds the Snapshots of the stuck ones.
	Pods         []*corev1.Pod
	PodSnapshots map[types.UID]*Snapshot
	// Refused are the reads of the sweep the API server refused (see Snapshot.Refused).
	Refused []RefusedRead
	// MissingNamespace is set when the namespace does not exist (the rest is then empty).
	MissingNamespace *MissingNamespace
	// StuckElsewhere are the other namespaces with stuck pods (PodNeedsDiagnosis), most
	// first, read when the namespace is empty or is "default" with nothing stuck, so the
	// answer says where to look instead of an all-clear; ElsewhereRead says whether they were
	// read (a user who may not list pods in every namespace gets no such line).
	StuckElsewhere []NamespaceStuck
	ElsewhereRead  bool
}

// PodNeedsDiagnosis reports whether a sweep reads pod: it does not look Running and Ready, and
// did not run to completion.
func PodNeedsDiagnosis(now time.Time, pod *corev1.Pod) bool {
	return !podLooksHealthy(now, pod) && !podLooksCompleted(pod)
}

// NamespaceDiagnosis is the answer to "what is stuck in this namespace?": every stuck pod and
// failing workload, grouped by cause, most pods first, each with its one-line cause.
type NamespaceDiagnosis struct {
	// Namespace is the namespace swept.
	Namespace string `json:"namespace"`
	// Summary is one sentence: how much is stuck and the biggest causes, or that nothing is.
	Summary string `json:"summary"`
	// Causes are the stuck pods and failing workloads grouped by code, most pods first (ties:
	// by code). [] when nothing is stuck (never null in JSON).
	Causes []SweepCause `json:"causes"`
	// Pods counts the namespace's pods; Ready those Running and Ready, Completed those that
	// Succeeded, Stuck the others.
	Pods      int `json:"pods"`
	Ready     int `json:"ready"`
	Completed int `json:"completed"`
	Stuck     int `json:"stuck"`
	// Workloads counts the top-level workloads looked at; Failing those with a cause listed.
	Workloads int `json:"workloads"`
	Failing   int `json:"failing"`
	// Missing counts the pods the failing workloads want but do not have (a controller the API
	// server refuses, a DaemonSet no node accepts): counted in Causes, not in Pods or Stuck, so
	// the causes' pods add up to Stuck plus Missing.
	Missing int `json:"missing"`
	// NotFound is true when the namespace does not exist (Summary says so, with the closest
	// names); Empty when it exists but holds no pod and no workload.
	NotFound bool `json:"notFound,omitempty"`
	Empty    bool `json:"empty,omitempty"`
	// StuckElsewhere are the other namespaces with stuck pods, most first, for a sweep of an
	// empty namespace or of "default" with nothing stuck (see NamespaceSnapshot).
	StuckElsewhere []NamespaceStuck `json:"stuckElsewhere,omitempty"`
	// Partial is true when the API server refused some reads (Refused): the sweep shows what
	// could be read, and Summary says what was refused.
	Partial bool `json:"partial,omitempty"`
	// Refused are the reads the API server refused (403 Forbidden).
	Refused []RefusedRead `json:"refused,omitempty"`
	// CollectedAt is when the snapshot was taken.
	CollectedAt time.Time `json:"collectedAt"`
}

// SweepCause is one cause and everything in the namespace that has it.
type SweepCause struct {
	// Code is the primary code of the items.
	Code Code `json:"code"`
	// Pods is how many pods this cause keeps from running: the stuck pods listed, plus, for a
	// controller that cannot create pods, the pods it lacks.
	Pods int `json:"pods"`
	// Items are the workloads and bare pods with this cause, most pods first.
	Items []SweepItem `json:"items"`
}

// SweepItem is one workload (or bare pod) with one cause, in one line.
type SweepItem struct {
	// Kind and Name name the workload, or the pod for a pod no workload owns.
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
	// Pods are the names of the item's stuck pods with this cause ([] for a controller-level
	// cause with no pod).
	Pods []string `json:"pods"`
	// Count is how many pods the item counts for the cause (see SweepCause.Pods).
	Count int `json:"count"`
	// State is the pods' state as kubectl shows it, when they share one.
	State string `json:"state,omitempty"`
	// Summary is the one-line cause.
	Summary string `json:"summary"`
	// Uncertain is true when the rules are not sure of the cause.
	Uncertain bool `json:"uncertain,omitempty"`
}

// EvaluateNamespace sweeps a namespace: it evaluates each workload (EvaluateWorkload over its
// light pod Snapshots) and each other pod, and groups what is stuck by cause. A workload whose
// primary cause is its own (a controller that cannot create pods, a stalled rollout, a failed
// Job, a DaemonSet short of nodes) is listed once under that cause; otherwise each group of its
// stuck pods is listed under the group's code. EvaluateNamespace is pure: it reads only ns.
func EvaluateNamespace(ns *NamespaceSnapshot) *NamespaceDiagnosis {
	d := &NamespaceDiagnosis{Namespace: ns.Namespace, CollectedAt: ns.Now, Workloads: len(ns.Workloads), Causes: []SweepCause{}}
	if m := ns.MissingNamespace; m != nil {
		d.NotFound = true
		d.Summary = namespaceNotFoundFinding(m, "", "").Summary
		return d
	}
	memo := newEvalMemo()
	causes := map[Code]*SweepCause{}
	add := func(code Code, it SweepItem) {
		c := causes[code]
		if c == nil {
			c = &SweepCause{Code: code}
			causes[code] = c
		}
		c.Pods += it.Count
		c.Items = append(c.Items, it)
	}
	count := func(pods []*corev1.Pod, codes map[types.UID]Code) {
		for _, p := range pods {
			d.Pods++
			switch code, ok := codes[p.UID]; {
			case ok && code == CodePodHealthy, !ok && podLooksHealthy(ns.Now, p):
				d.Ready++
			case ok && code == CodePodCompleted, !ok && podLooksCompleted(p):
				d.Completed++
			default:
				d.Stuck++
			}
		}
	}
	for _, ws := range ns.Workloads {
		wd, v, own := evaluateWorkload(ws, memo)
		ref := wd.Workload
		failing := false
		var codes map[types.UID]Code
		if v != nil {
			codes = v.codes
		}
		count(ws.Pods, codes)
		listGroups := func() {
			for _, g := range wd.Groups {
				if !g.Stuck() {
					continue
				}
				it := SweepItem{Kind: ref.Kind, Name: ref.Name, Count: len(g.Pods), State: sharedState(g.Pods), Uncertain: g.Diagnosis.Uncertain, Summary: g.Diagnosis.Summary}
				for _, pl := range g.Pods {
					it.Pods = append(it.Pods, pl.Name)
				}
				add(g.Code, it)
				failing = true
			}
		}
		p := wd.Primary()
		switch {
		case own && p.Severity == SeverityBlocker && explainsItsPods(p.Code):
			// A stalled rollout, a failed Job, a DaemonSet short of nodes: the workload's own
			// cause is what its stuck pods add up to, so they are listed under it.
			stuckPods := []string{}
			for _, g := range wd.Groups {
				for _, pl := range g.Pods {
					if g.Stuck() {
						stuckPods = append(stuckPods, pl.Name)
					}
				}
			}
			missing := missingPods(wd)
			d.Missing += missing
			add(p.Code, SweepItem{Kind: ref.Kind, Name: ref.Name, Pods: stuckPods, Count: len(stuckPods) + missing, Summary: p.Summary, Uncertain: p.Uncertain})
			failing = true
		case own && p.Severity == SeverityBlocker:
			// A controller the API server refuses: the cause holds the pods it cannot create;
			// the pods it did create (before, or that the refusal spared) are stuck for their
			// own reasons, listed under those.
			missing := missingPods(wd)
			d.Missing += missing
			add(p.Code, SweepItem{Kind: ref.Kind, Name: ref.Name, Pods: []string{}, Count: missing, Summary: p.Summary, Uncertain: p.Uncertain})
			failing = true
			listGroups()
		default:
			listGroups()
		}
		if failing {
			d.Failing++
		}
	}
	podCodes := map[types.UID]Code{}
	for _, p := range ns.Pods {
		s := ns.PodSnapshots[p.UID]
		if s == nil {
			continue
		}
		pd := Evaluate(s)
		podCodes[p.UID] = pd.Primary().Code
		if code := pd.Primary().Code; code != CodePodHealthy && code != CodePodCompleted {
			add(code, SweepItem{Kind: KindPod, Name: p.Name, Pods: []string{p.Name}, Count: 1, State: pd.State, Summary: pd.Summary, Uncertain: pd.Uncertain})
		}
	}
	count(ns.Pods, podCodes)

	for _, c := range causes {
		sort.SliceStable(c.Items, func(i, j int) bool {
			if c.Items[i].Count != c.Items[j].Count {
				return c.Items[i].Count > c.Items[j].Count
			}
			return c.Items[i].Name < c.Items[j].Name
		})
		d.Causes = append(d.Causes, *c)
	}
	sort.Slice(d.Causes, func(i, j int) bool {
		if d.Causes[i].Pods != d.Causes[j].Pods {
			return d.Causes[i].Pods > d.Causes[j].Pods
		}
		return d.Causes[i].Code < d.Causes[j].Code
	})
	d.Summary = sweepSummary(d)
	if len(d.Causes) == 0 && len(ns.Refused) > 0 {
		// Refused lists: nothing stuck among what could be read, not "nothing is stuck".
		d.Summary = fmt.Sprintf("Nothing stuck among what could be read in namespace %s: %d of %d %s Running and Ready, %d Completed, across %d %s.",
			d.Namespace, d.Ready, d.Pods, ofPods(d.Ready, d.Pods, "pod", "pods"), d.Completed, d.Workloads, plural(d.Workloads, "workload", "workloads"))
	}
	if len(d.Causes) == 0 {
		d.Empty = len(ns.Workloads) == 0 && len(ns.Pods) == 0 && len(ns.Refused) == 0
		if d.Empty {
			d.Summary = fmt.Sprintf("Namespace %s is empty: it has no pods and no workloads, so nothing in it can be stuck.", d.Namespace)
		}
		d.StuckElsewhere = ns.StuckElsewhere
		d.Summary += stuckElsewhere(ns.StuckElsewhere, ns.ElsewhereRead)
	}
	if len(ns.Refused) > 0 {
		d.Partial, d.Refused = true, ns.Refused
		d.Summary += partialSummary(ns.Refused)
	}
	return d
}

// evalMemo shares one evaluation among the unscheduled pods of one controller that ask the
// scheduler for the same thing and got the same answer (a Deployment's 50 Pending replicas):
// the scheduling rules judge every node against the pod, the costliest rule, and would judge
// each replica identically. A nil *evalMemo evaluates every pod.
type evalMemo struct {
	byKey map[string]*Diagnosis
}

func newEvalMemo() *evalMemo { return &evalMemo{byKey: map[string]*Diagnosis{}} }

// evaluate returns Evaluate(s), or the diagnosis of an earlier sibling with the same
// siblingKey.
func (m *evalMemo) evaluate(s *Snapshot) *Diagnosis {
	if m == nil {
		return Evaluate(s)
	}
	key, ok := siblingKey(s)
	if !ok {
		return Evaluate(s)
	}
	if d, seen := m.byKey[key]; seen {
		return d
	}
	d := Evaluate(s)
	m.byKey[key] = d
	return d
}

// siblingKey identifies what the scheduling rules read of an unscheduled pod that a controller
// owns: the controller, the pod's labels and spec (volumes other than claims left out: a
// ServiceAccount token volume's name differs per pod), its PodScheduled condition and its events
// (type, reason, message; not counts or times). Two pods with one key get one diagnosis; the
// rest of the Snapshot (nodes, bound pods, claims) is the same for both in a sweep. ok is false
// for a pod that is bound or has no controller.
func siblingKey(s *Snapshot) (string, bool) {
	pod := s.Pod
	ref := controllerOf(pod)
	if ref == nil || !isUnscheduled(pod) {
		return "", false
	}
	spec := pod.Spec.DeepCopy()
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim == nil && v.Ephemeral == nil })
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			cs[i].VolumeMounts = nil
		}
	}
	type event struct{ Type, Reason, Message string }
	key := struct {
		Owner     types.UID
		Labels    map[string]string
		Spec      *corev1.PodSpec
		Condition *corev1.PodCondition
		Events    []event
	}{Owner: ref.UID, Labels: pod.Labels, Spec: spec}
	if c := podCondition(pod, corev1.PodScheduled); c != nil {
		key.Condition = &corev1.PodCondition{Reason: c.Reason, Message: c.Message}
	}
	for _, e := range s.Events {
		key.Events = append(key.Events, event{e.Type, e.Reason, e.Message})
	}
	b, err := json.Marshal(key)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// explainsItsPods reports whether a workload-level cause is what the workload's stuck pods add
// up to (a stalled rollout, a failed Job, a DaemonSet short of nodes), rather than a refusal
// to create pods that leaves the created ones to their own causes.
func explainsItsPods(code Code) bool {
	switch code {
	case CodeRolloutStalled, CodeJobBackoffLimit, CodeJobFailed, CodeDaemonSetUnplaced:
		return true
	}
	return false
}

// missingPods is how many pods the workload wants beyond those it has.
func missingPods(wd *WorkloadDiagnosis) int {
	if wd.Desired == nil {
		return 0
	}
	return max(int(*wd.Desired)-wd.Pods, 0)
}

// sharedState is the pods' state when they all share one, else "".
func sharedState(pods []PodLine) string {
	if len(pods) == 0 {
		return ""
	}
	for _, p := range pods[1:] {
		if p.State != pods[0].State {
			return ""
		}
	}
	return pods[0].State
}

// sweepSummary says how much is stuck and the biggest causes, or that nothing is.
func sweepSummary(d *NamespaceDiagnosis) string {
	if len(d.Causes) == 0 {
		return fmt.Sprintf("Nothing is stuck in namespace %s: %d of %d %s Running and Ready, %d Completed, across %d %s.",
			d.Namespace, d.Ready, d.Pods, ofPods(d.Ready, d.Pods, "pod", "pods"), d.Completed, d.Workloads, plural(d.Workloads, "workload", "workloads"))
	}
	var top []string
	for i, c := range d.Causes {
		if i == 3 {
			top = append(top, fmt.Sprintf("%d more %s", len(d.Causes)-3, plural(len(d.Causes)-3, "cause", "causes")))
			break
		}
		top = append(top, fmt.Sprintf("%s (%d %s)", c.Code, c.Pods, plural(c.Pods, "pod", "pods")))
	}
	missing := ""
	if d.Missing > 0 {
		missing = fmt.Sprintf(", %d more %s wanted but not created,", d.Missing, plural(d.Missing, "pod is", "pods are"))
	}
	return fmt.Sprintf("In namespace %s, %d of %d %s stuck%s and %d of %d %s failing: %s.",
		d.Namespace, d.Stuck, d.Pods, ofPods(d.Stuck, d.Pods, "pod", "pods"), missing, d.Failing, d.Workloads, ofPods(d.Failing, d.Workloads, "workload", "workloads"), strings.Join(top, ", "))
}

// ofPods is the noun and verb of "n of total pods is/are": the noun agrees with total, the
// verb with n ("1 of 75 pods is", "3 of 75 pods are", "1 of 1 pod is").
func ofPods(n, total int, one, many string) string {
	return plural(total, one, many) + " " + plural(n, "is", "are")
}
