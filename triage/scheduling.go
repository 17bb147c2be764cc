package triage

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// schedulerGrace is how long a new pod may wait for the scheduler's first word before its
// silence counts as "no scheduler is running".
const schedulerGrace = 30 * time.Second

// isUnscheduled reports whether the scheduling rules apply to pod: Pending (or no phase yet),
// not bound to a node, not being deleted.
func isUnscheduled(pod *corev1.Pod) bool {
	return pod != nil && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil &&
		(pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "")
}

// schedulingRules explains an unscheduled Pending pod. It checks what blocks the pod before any
// node is considered (scheduling gates, missing or unbound PVCs, no nodes, a scheduler that never
// looked at it), then builds the per-node verdict table and names the reason that blocks the
// most nodes, cross-checked against the scheduler's own latest "0/N nodes are available" line.
func schedulingRules(s *Snapshot) []Finding {
	if !isUnscheduled(s.Pod) {
		return nil
	}
	v := newSchedulingView(s)
	if f, ok := v.gatedFinding(); ok {
		return []Finding{f}
	}

	var blockers, warnings []Finding
	if f, ok := v.schedulerNotRunningFinding(); ok {
		blockers = append(blockers, f)
	}
	claimBlockers, claimWarnings := v.claimFindings()
	blockers = append(blockers, claimBlockers...)
	warnings = append(warnings, claimWarnings...)
	switch {
	case v.snap.NodesErr != nil:
		if f, ok := v.messageOnlyFinding(); ok {
			blockers = append(blockers, f)
		}
	case len(v.snap.Nodes) == 0:
		blockers = append(blockers, v.noNodesFinding())
	default:
		if f, ok := v.tableFinding(); ok {
			blockers = append(blockers, f)
			warnings = append(warnings, v.secondaryFindings(f.Code)...)
		} else {
			warnings = append(warnings, v.secondaryFindings("")...)
		}
	}
	if len(blockers) > 0 && blockers[0].Nodes == nil {
		blockers[0].Nodes = v.verdicts
	}
	return append(blockers, warnings...)
}

// schedulingView is what the scheduling rules derive from a Snapshot once.
type schedulingView struct {
	snap     *Snapshot
	pod      *corev1.Pod
	demand   *demand
	cluster  *cluster
	spread   *spreadState
	verdicts []NodeVerdict
	// msg is the scheduler's latest FailedScheduling message; hasMsg is false when there is none.
	// When the events could not be read it is the PodScheduled condition's message
	// (msgFromCondition), which the scheduler writes with the same words.
	msg              SchedulerMessage
	hasMsg           bool
	msgFromCondition bool
	// inexact is true when reconcile could not say exactly which nodes a scheduler reason the
	// model does not reproduce belongs to.
	inexact bool
	// pinned is the one node the pod's required node affinity names (pinnedNode: a DaemonSet
	// pod's node) when that node exists, else "". Findings and fixes are then about that node
	// only: the other nodes reject the pod by design.
	pinned string
}

func newSchedulingView(s *Snapshot) *schedulingView {
	v := &schedulingView{snap: s, pod: s.Pod, demand: newDemand(s), cluster: newCluster(s)}
	v.spread = v.cluster.spreadFor(v.demand)
	v.verdicts = slices.Clone(s.NodeTables.verdicts(v.demand, v.cluster)) // reconcile edits its copy
	v.msg, v.hasMsg = LatestSchedulerMessage(s.Events)
	if !v.hasMsg && s.EventsErr != nil {
		v.msg, v.hasMsg = ConditionSchedulerMessage(s.Pod)
		v.msgFromCondition = v.hasMsg
	}
	v.inexact = !v.reconcile()
	if name := pinnedNode(v.pod); v.cluster.nodeByName[name] != nil {
		v.pinned = name
	}
	return v
}

// podRef is "namespace/name" of the pod under diagnosis.
func (v *schedulingView) podRef() string { return v.pod.Namespace + "/" + v.pod.Name }

// schedulerEvidence returns the scheduler's latest FailedScheduling event (or the PodScheduled
// condition it came from) as evidence.
func (v *schedulingView) schedulerEvidence() []Evidence {
	switch {
	case !v.hasMsg:
		return nil
	case v.msgFromCondition:
		return []Evidence{{Object: "Pod " + v.podRef(), Field: "status.conditions[PodScheduled]", Reason: v.msg.Event.Reason, Message: v.msg.Event.Message}}
	}
	return []Evidence{EventEvidence(v.pod, v.msg.Event)}
}

// gatedFinding reports spec.schedulingGates: the scheduler does not consider the pod at all
// until every gate is removed.
func (v *schedulingView) gatedFinding() (Finding, bool) {
	gates := v.pod.Spec.SchedulingGates
	if len(gates) == 0 {
		return Finding{}, false
	}
	var names []string
	for _, g := range gates {
		names = append(names, g.Name)
	}
	f := Finding{
		Code:     CodeSchedulingGated,
		Severity: SeverityBlocker,
		Summary: fmt.Sprintf("The pod waits for %d scheduling gate(s) to be removed (%s); the scheduler does not look at it until then.",
			len(gates), strings.Join(names, ", ")),
		Evidence: []Evidence{{
			Object:  "Pod " + v.podRef(),
			Field:   "spec.schedulingGates",
			Message: strings.Join(names, ", "),
		}},
		Fix: []string{
			fmt.Sprintf("kubectl get pod -n %s %s -o jsonpath='{.spec.schedulingGates}'", shellQuote(v.pod.Namespace), shellQuote(v.pod.Name)),
			"Find the controller that owns each gate (the gate's name usually names it) and check why it has not released the pod.",
			fmt.Sprintf(`kubectl patch pod -n %s %s --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]'   # only if that controller is gone`, shellQuote(v.pod.Namespace), shellQuote(v.pod.Name)),
		},
	}
	return f, true
}

// schedulerSeen reports whether any scheduler has reported on the pod: an event from it, or
// the PodScheduled condition it writes.
func (v *schedulingView) schedulerSeen() bool {
	name := v.pod.Spec.SchedulerName
	if name == "" {
		name = corev1.DefaultSchedulerName
	}
	for _, e := range v.snap.Events {
		if e.Reason == "FailedScheduling" || e.Reason == "Scheduled" || e.Source == name {
			return true
		}
	}
	for _, c := range v.pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return true
		}
	}
	return false
}

// anyFits reports whether the table has a node the pod fits.
func (v *schedulingView) anyFits() bool {
	for _, nv := range v.verdicts {
		if nv.Fits {
			return true
		}
	}
	return false
}

// schedulerNotRunningFinding reports a pod no scheduler has ever reported on: it is older than
// schedulerGrace, or a node would take it right now (a running scheduler would have bound it).
func (v *schedulingView) schedulerNotRunningFinding() (Finding, bool) {
	if v.schedulerSeen() {
		return Finding{}, false
	}
	age := v.snap.Now.Sub(v.pod.CreationTimestamp.Time)
	fits := v.fittingNodes()
	if age < schedulerGrace && len(fits) == 0 {
		return Finding{}, false
	}
	name := v.pod.Spec.SchedulerName
	if name == "" {
		name = corev1.DefaultSchedulerName
	}
	why := fmt.Sprintf("it was created %s ago", FormatAge(age))
	if len(fits) > 0 {
		why = fmt.Sprintf("%s would take it right now", joinLimited(fits, 3))
	}
	f := Finding{
		Code:     CodeSchedulerNotRunning,
		Severity: SeverityBlocker,
		Summary: fmt.Sprintf("No scheduler has looked at this pod: it has no scheduling event and no PodScheduled condition although %s. Is %s running?",
			why, name),
		Evidence: []Evidence{
			{Object: "Pod " + v.podRef(), Field: "spec.schedulerName", Message: name},
			{Object: "Pod " + v.podRef(), Field: "status.conditions[PodScheduled]", Message: "absent"},
			{Object: "Pod " + v.podRef(), Field: "events", Message: fmt.Sprintf("%d event(s), none from a scheduler", len(v.snap.Events))},
		},
	}
	if u := v.snap.eventsUnread(); u != "" {
		// The missing condition alone says it; the events were not read, so none is claimed.
		f.Summary = fmt.Sprintf("No scheduler has looked at this pod: it has no PodScheduled condition although %s (its events could not be read: %s). Is %s running?", why, u, name)
		f.Evidence[2].Message = "could not be read: " + u
	}
	if name == corev1.DefaultSchedulerName {
		f.Fix = []string{
			"kubectl get pods -n kube-system -l component=kube-scheduler -o wide",
			"kubectl get lease -n kube-system kube-scheduler -o jsonpath='{.spec.holderIdentity} {.spec.renewTime}{\"\\n\"}'",
			"kubectl logs -n kube-system -l component=kube-scheduler --tail=50",
		}
	} else {
		f.Summary += fmt.Sprintf(" The pod asks for scheduler %q, not the default one.", name)
		f.Fix = []string{
			fmt.Sprintf("kubectl get pods -A | grep %s", shellQuote(name)),
			fmt.Sprintf("Check that the %s scheduler is deployed and running, or drop spec.schedulerName to use the default scheduler.", name),
		}
	}
	return f, true
}

// fittingNodes returns the names of the nodes the table says fit.
func (v *schedulingView) fittingNodes() []string {
	var out []string
	for _, nv := range v.verdicts {
		if nv.Fits {
			out = append(out, nv.Node)
		}
	}
	return out
}

// noNodesFinding reports a cluster with no nodes at all.
func (v *schedulingView) noNodesFinding() Finding {
	return Finding{
		Code:     CodeNoNodes,
		Severity: SeverityBlocker,
		Summary:  "The cluster has no nodes, so there is nowhere to schedule the pod.",
		Evidence: append(v.schedulerEvidence(), Evidence{Object: "Nodes", Message: "0 nodes"}),
		Fix: []string{
			"kubectl get nodes",
			"Check that the kubelets can register (kubelet logs, bootstrap token, node group / autoscaler size).",
		},
	}
}

// claimFindings reports PVCs that block scheduling before any node is considered: a claim that
// does not exist (always a blocker) and an unbound claim, with why (explainUnboundClaim). An
// unbound claim is the blocker when the scheduler says so ("unbound immediate
// PersistentVolumeClaims") or, without a scheduler message, when waiting will not bind it;
// a WaitForFirstConsumer claim that binds once the pod is placed is only a warning.
func (v *schedulingView) claimFindings() (blockers, warnings []Finding) {
	ns := v.pod.Namespace
	counts := v.msg.Counts()
	for _, name := range sortedKeys(v.snap.PVCs) {
		pvc := v.snap.PVCs[name]
		obj := "PersistentVolumeClaim " + ns + "/" + name
		if pvc == nil {
			blockers = append(blockers, Finding{
				Code:     CodePVCNotFound,
				Severity: SeverityBlocker,
				Summary: fmt.Sprintf("The pod mounts PersistentVolumeClaim %q, which does not exist in namespace %s.", name, ns) +
					missingObjectNote(v.snap, "persistentvolumeclaims", name),
				Evidence: append(v.schedulerEvidence(), Evidence{Object: obj, Message: "not found"}),
				Fix: missingObjectFix(v.snap, "persistentvolumeclaims", name,
					fmt.Sprintf("Create the claim %s in %s, or fix spec.volumes[].persistentVolumeClaim.claimName in the pod's workload.", name, ns)),
			})
			continue
		}
		if pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName != "" {
			continue
		}
		why := explainUnboundClaim(v.snap, name, pvc)
		blocking := counts[CodePVCUnbound] > 0 || (!v.hasMsg && why.Stuck)
		summary := fmt.Sprintf("PersistentVolumeClaim %s is not bound (status %s): %s", name, claimPhase(pvc), why.Summary)
		if blocking {
			summary += "; the scheduler will not place the pod until it binds."
		} else {
			summary += "."
		}
		f := Finding{
			Code:      CodePVCUnbound,
			Severity:  SeverityWarning,
			Summary:   summary,
			Uncertain: why.Unsure,
			Evidence:  append(append(v.schedulerEvidence(), Evidence{Object: obj, Field: "status.phase", Message: claimPhase(pvc)}), why.Evidence...),
			Fix:       why.Fix,
		}
		if blocking {
			f.Severity = SeverityBlocker
			blockers = append(blockers, f)
		} else {
			warnings = append(warnings, f)
		}
	}
	return blockers, warnings
}

// nodeCodes returns, for one verdict, the distinct blocking codes (node-not-ready is context:
// the scheduler only sees its taint).
func nodeCodes(nv NodeVerdict) []Code {
	seen := map[Code]bool{}
	var out []Code
	for _, r := range nv.Reasons {
		if r.Code == CodeNodeNotReady || seen[r.Code] {
			continue
		}
		seen[r.Code] = true
		out = append(out, r.Code)
	}
	return out
}

// firstCode returns the code of the first blocking reason of a verdict, in filter order: the
// one the scheduler counts the node under, since it stops at the first filter that fails
// ("" for a node that fits).
func firstCode(nv NodeVerdict) Code {
	if codes := nodeCodes(nv); len(codes) > 0 {
		return codes[0]
	}
	return ""
}

// codeTally counts, per code, the nodes the scheduler counts under it (present: the code is
// the node's first blocking reason in filter order, see firstCode), the nodes it blocks at all
// (anywhere, also behind an earlier filter) and the nodes it alone blocks (solo: fixing this
// one cause would free that node).
type codeTally struct {
	present  map[Code]int
	anywhere map[Code]int
	solo     map[Code]int
}

func tally(verdicts []NodeVerdict) codeTally {
	t := codeTally{present: map[Code]int{}, anywhere: map[Code]int{}, solo: map[Code]int{}}
	for _, nv := range verdicts {
		codes := nodeCodes(nv)
		for _, c := range codes {
			t.anywhere[c]++
		}
		if len(codes) > 0 {
			t.present[codes[0]]++
		}
		if len(codes) == 1 {
			t.solo[codes[0]]++
		}
	}
	return t
}

// candidates returns the verdicts of the nodes the pod is meant for, and what chose them (""
// when they are all the nodes): the nodes the pod could use but for resources, ports, cordons
// and other pods, i.e. those its nodeSelector and required node affinity accept (a DaemonSet
// pod's affinity names one node), where its bound volumes can be used, and whose taints it
// tolerates. When no node passes all three, it returns those that pass the selector and the
// volumes (a taint on them is then the cause), then those that pass the selector (the volumes
// are the cause: they sit where the pod may not run), and when none does, every verdict (a
// selector that matches nothing is the cause).
func (v *schedulingView) candidates() (verdicts []NodeVerdict, basis string) {
	var placeable, usable, selected []NodeVerdict
	volumeRuledOut := false
	for _, nv := range v.verdicts {
		hasCode := func(codes ...Code) bool {
			return slices.ContainsFunc(nv.Reasons, func(r NodeReason) bool { return slices.Contains(codes, r.Code) })
		}
		if hasCode(CodeNodeSelectorMismatch) {
			continue
		}
		selected = append(selected, nv)
		if hasCode(CodeVolumeNodeAffinityConflict, CodePVCUnbound) {
			volumeRuledOut = true
			continue
		}
		usable = append(usable, nv)
		if !hasCode(CodeUntoleratedTaint) {
			placeable = append(placeable, nv)
		}
	}
	volumes := ""
	if volumeRuledOut {
		volumes = ", volumes"
	}
	all := len(v.verdicts)
	switch {
	case len(placeable) > 0 && len(placeable) < all:
		return placeable, "nodeSelector, affinity" + volumes + " and tolerations"
	case len(placeable) > 0:
		return placeable, ""
	case len(usable) > 0 && len(usable) < all && volumeRuledOut:
		return usable, "nodeSelector, affinity and volumes"
	case len(usable) > 0 && len(usable) < all:
		return usable, "nodeSelector and affinity"
	case len(usable) > 0:
		return usable, ""
	case len(selected) > 0 && len(selected) < all:
		return selected, "nodeSelector and affinity"
	default:
		return v.verdicts, ""
	}
}

// reasonCounts is the one line that says how many nodes fail each reason, most nodes first,
// and which nodes the cause was ranked on: " Nodes failing each reason (40 in all): 30
// untolerated-taint, 10 insufficient-cpu; the cause is ranked on the 10 nodes the pod's
// nodeSelector, affinity and tolerations allow." It is empty when the table has one reason
// (the summary counts it already) and for a pod pinned to one node.
func (v *schedulingView) reasonCounts(t codeTally) string {
	if len(t.anywhere) < 2 || v.pinned != "" {
		return ""
	}
	codes := make([]Code, 0, len(t.anywhere))
	for c := range t.anywhere {
		codes = append(codes, c)
	}
	sort.Slice(codes, func(i, j int) bool {
		a, b := codes[i], codes[j]
		if t.anywhere[a] != t.anywhere[b] {
			return t.anywhere[a] > t.anywhere[b]
		}
		return codeRank(a) < codeRank(b)
	})
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d %s", t.anywhere[c], c))
	}
	line := fmt.Sprintf(" Nodes failing each reason (%d in all): %s", len(v.verdicts), strings.Join(parts, ", "))
	if cands, basis := v.candidates(); basis != "" {
		line += fmt.Sprintf("; the cause is ranked on the %d %s the pod's %s allow", len(cands), plural(len(cands), "node", "nodes"), basis)
	}
	return line + "."
}

// primaryCode picks the per-node code a careful engineer would name. It looks at the candidate
// nodes (see candidates: the nodes the pod could use but for resources and the like) and ranks
// their codes: the one that alone blocks the most nodes (fixing it frees the most nodes), then
// the one present on the most nodes (also behind an earlier filter: a nodeSelector no node
// matches is the cause even where a taint rejects the node first), then the one the scheduler
// counted most, then schedulingOrder. So three full workers and a tainted control-plane node
// give insufficient-cpu, not untolerated-taint; 30 tainted GPU nodes and the 10 full nodes the
// pod is meant for give insufficient-cpu too; and a DaemonSet pod whose node is full gives
// insufficient-cpu, not node-selector-mismatch for the other nodes.
func (v *schedulingView) primaryCode() Code {
	cands, _ := v.candidates()
	t := tally(cands)
	var codes []Code
	for c := range t.anywhere {
		codes = append(codes, c)
	}
	sched := v.msg.Counts()
	sort.Slice(codes, func(i, j int) bool {
		a, b := codes[i], codes[j]
		switch {
		case t.solo[a] != t.solo[b]:
			return t.solo[a] > t.solo[b]
		case t.anywhere[a] != t.anywhere[b]:
			return t.anywhere[a] > t.anywhere[b]
		case sched[a] != sched[b]:
			return sched[a] > sched[b]
		default:
			return codeRank(a) < codeRank(b)
		}
	})
	if len(codes) == 0 {
		return ""
	}
	return codes[0]
}

// disagreement compares the table with the scheduler's message and describes any mismatch
// ("" when they agree): the scheduler found no node while the table has one that fits, or the
// scheduler counted a reason on more nodes than the table shows it. Node counts that differ
// (nodes came or went since the message) are not a disagreement of the table.
func (v *schedulingView) disagreement(t codeTally) string {
	if !v.hasMsg || v.msg.Total != len(v.verdicts) {
		return ""
	}
	var problems []string
	if fits := v.fittingNodes(); len(fits) > 0 && v.msg.PodLevel == nil {
		problems = append(problems, fmt.Sprintf("the table says %s fit(s) the pod", joinLimited(fits, 3)))
	}
	for _, r := range v.msg.Reasons {
		if r.Code == "" {
			continue
		}
		if t.present[r.Code] < r.Count {
			problems = append(problems, fmt.Sprintf("the scheduler counts %d node(s) with %q, the table %d", r.Count, r.Text, t.present[r.Code]))
		}
	}
	return strings.Join(problems, "; ")
}

// tableFinding builds the primary per-node finding from the verdict table. When a node fits,
// the table names no primary cause (the other findings explain the wait); when the table
// disagrees with the scheduler's latest message, the scheduler's counts decide the code and the
// summary says so.
func (v *schedulingView) tableFinding() (Finding, bool) {
	t := tally(v.verdicts)
	disagree := v.disagreement(t)
	code := Code("")
	if !v.anyFits() {
		code = v.primaryCode()
	}
	if disagree != "" && !v.inexact {
		// The table and the scheduler disagree on reasons the model knows: its counts decide.
		// (When reconcile could not attribute the scheduler's reasons, the counts cannot be
		// compared, and the unknown reason in the table is the honest answer.)
		if top := v.msg.topCode(); top != "" {
			code = top
		}
	}
	if code == "" || code == CodePVCUnbound || code == CodePVCNotFound {
		return Finding{}, false
	}
	f := v.describe(code, t)
	f.Nodes = v.verdicts
	f.Summary += v.reasonCounts(t)
	if nominated := v.pod.Status.NominatedNodeName; nominated != "" {
		f.Summary += fmt.Sprintf(" The scheduler has nominated %s and preempted pods there; the pod should bind once they have exited.", nominated)
		f.Evidence = append(f.Evidence, Evidence{Object: "Pod " + v.podRef(), Field: "status.nominatedNodeName", Message: nominated})
	}
	switch {
	case v.inexact && code != CodeUnknown:
		f.Uncertain = true
		f.Summary += " Note: the scheduler also rejects nodes for reasons the node table does not reproduce (marked as the scheduler's verdict in the table)."
	case disagree != "" && !v.inexact:
		f.Uncertain = true
		f.Summary += " Note: the node table disagrees with the scheduler's latest message (" + disagree +
			"); the primary cause follows the scheduler's counts."
	}
	return f, true
}

// messageOnlyFinding names the scheduler's most counted reason when the nodes could not be
// read (Snapshot.NodesErr), so there is no table to judge by.
func (v *schedulingView) messageOnlyFinding() (Finding, bool) {
	if !v.hasMsg {
		return Finding{}, false
	}
	if v.msg.Total == 0 {
		return v.noNodesFinding(), true
	}
	code := v.msg.topCode()
	if code == "" || code == CodePVCUnbound || code == CodePVCNotFound {
		return Finding{}, false
	}
	f := v.describe(code, tally(nil))
	f.Summary += fmt.Sprintf(" The nodes could not be read (%s), so there is no per-node table; this rests on the scheduler's message alone.", oneLineErr(v.snap.NodesErr, v.snap.Refused))
	return f, true
}

// oneLineErr is err on one line for a summary: "refused by the API server, see below" when
// the reads were refused (their messages are the evidence, one line each), why they failed
// when they timed out or failed otherwise ("nodes: timed out after 30s"), else err's lines
// joined with "; ".
func oneLineErr(err error, refused []RefusedRead) string {
	msg := err.Error()
	if len(refused) > 0 && strings.Contains(msg, "forbidden") {
		return "the API server refused the reads; each is listed below"
	}
	for _, r := range refused {
		if !r.Forbidden() && (r.Resource == "nodes" || r.Resource == "pods") {
			return r.Resource + ": " + r.Reason()
		}
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
}

// secondaryFindings reports each other blocking code of the table as a warning, so a person
// sees every obstacle (for example the control-plane taint next to full workers).
func (v *schedulingView) secondaryFindings(primary Code) []Finding {
	t := tally(v.verdicts)
	var codes []Code
	for c := range t.anywhere {
		if c != primary && (v.pinned == "" || v.nodeHas(v.pinned, c)) {
			codes = append(codes, c)
		}
	}
	sort.Slice(codes, func(i, j int) bool { return codeRank(codes[i]) < codeRank(codes[j]) })
	var out []Finding
	for _, c := range codes {
		f := v.describe(c, t)
		f.Severity = SeverityWarning
		out = append(out, f)
	}
	return out
}

// nodesWith returns the nodes the scheduler counts under code (code is their first blocking
// reason in filter order, see firstCode), and those nodes' reasons of code. When no node has
// code first, it returns the nodes where code hides behind an earlier filter, so a secondary
// finding still has its numbers.
func (v *schedulingView) nodesWith(code Code) ([]string, map[string][]NodeReason) {
	var names, behind []string
	reasons := map[string][]NodeReason{}
	for _, nv := range v.verdicts {
		if v.pinned != "" && nv.Node != v.pinned && v.nodeHas(v.pinned, code) {
			continue // a pinned pod's fixes are about its own node
		}
		for _, r := range nv.Reasons {
			if r.Code == code {
				if len(reasons[nv.Node]) == 0 {
					if firstCode(nv) == code {
						names = append(names, nv.Node)
					} else {
						behind = append(behind, nv.Node)
					}
				}
				reasons[nv.Node] = append(reasons[nv.Node], r)
			}
		}
	}
	if len(names) == 0 {
		return behind, reasons
	}
	for _, n := range behind {
		delete(reasons, n)
	}
	return names, reasons
}

// maxFixChecks caps how many nodes tryFix judges again: an answer names at most three.
const maxFixChecks = 20

// fixOutcome is what a node fix (untaint, uncordon, label) would leave on the nodes it was
// tried on.
type fixOutcome struct {
	// helped are the nodes that would then take the pod.
	helped []string
	// left are the codes still rejecting the pod on the other tried nodes, sorted.
	left []string
	// unsure says why the outcome cannot be judged ("" when it can): the model is not
	// complete for this pod (see modelGaps), so no node fix is suggested at all.
	unsure string
}

// tryFix judges the nodes among names (the first maxFixChecks) again, with every modelled
// filter, as fix would leave them (a label, for example, can make a node count for topology
// spread). A fix that touches a node is suggested for the nodes in helped and no others.
func (v *schedulingView) tryFix(names []string, fix func(*corev1.Node)) fixOutcome {
	var out fixOutcome
	if out.unsure = v.modelGaps(); out.unsure != "" {
		return out
	}
	left := map[string]bool{}
	for _, name := range names[:min(len(names), maxFixChecks)] {
		n := v.cluster.nodeByName[name]
		if n == nil {
			continue
		}
		changed := n.DeepCopy()
		fix(changed)
		c := v.cluster.withNode(changed)
		reasons := nodeReasons(v.demand, changed, c)
		if len(reasons) == 0 {
			out.helped = append(out.helped, name)
		}
		for _, r := range reasons {
			left[string(r.Code)] = true
		}
	}
	out.left = sortedKeys(left)
	return out
}

// modelGaps says why the node table may not model every filter that can reject this pod, so
// that a node with no reason left might still refuse it; "" when the model is complete. Gaps:
// reasons only the scheduler gave, dynamic resource (DRA) claims, a claim whose class has no
// provisioner (static PVs are not modelled), and claims whose CSINode limits were not read.
func (v *schedulingView) modelGaps() string {
	if v.inexact {
		return "the scheduler rejects nodes for reasons the node table does not reproduce"
	}
	for _, nv := range v.verdicts {
		for _, r := range nv.Reasons {
			if r.FromScheduler {
				return "the scheduler rejects nodes for reasons the node table does not reproduce"
			}
		}
	}
	if len(v.pod.Spec.ResourceClaims) > 0 {
		return "the pod claims dynamic resources (DRA), which the node table does not model"
	}
	for name, pvc := range v.snap.PVCs {
		if pvc == nil {
			continue
		}
		if sc := claimClass(v.snap, pvc); pvc.Spec.VolumeName == "" && (sc == nil || sc.Provisioner == noProvisioner) {
			return fmt.Sprintf("claim %s waits for a pre-created PersistentVolume, which the node table does not model", name)
		}
	}
	if len(v.snap.PVCs) > 0 && v.snap.CSINodes == nil {
		return "the nodes' CSI volume limits could not be read"
	}
	return ""
}

// onlyReasonIs returns the nodes among names whose only reason satisfies match.
func (v *schedulingView) onlyReasonIs(names []string, match func(NodeReason) bool) []string {
	var out []string
	for _, nv := range v.verdicts {
		if len(nv.Reasons) == 1 && match(nv.Reasons[0]) && slices.Contains(names, nv.Node) {
			out = append(out, nv.Node)
		}
	}
	return out
}

// otherCodes returns the blocking codes other than code on the given nodes, sorted: what still
// rejects the pod there after code is fixed.
func (v *schedulingView) otherCodes(names []string, code Code) []string {
	seen := map[string]bool{}
	for _, nv := range v.verdicts {
		if !slices.Contains(names, nv.Node) {
			continue
		}
		for _, r := range nv.Reasons {
			if r.Code != code {
				seen[string(r.Code)] = true
			}
		}
	}
	return sortedKeys(seen)
}

// nodeHas reports whether code is among node's reasons.
func (v *schedulingView) nodeHas(node string, code Code) bool {
	for _, nv := range v.verdicts {
		if nv.Node == node {
			return slices.ContainsFunc(nv.Reasons, func(r NodeReason) bool { return r.Code == code })
		}
	}
	return false
}

// nodesWithAnywhere returns every node with a reason of code, also where an earlier filter
// rejects the node first (see nodesWith for the scheduler's count).
func (v *schedulingView) nodesWithAnywhere(code Code) []string {
	var out []string
	for _, nv := range v.verdicts {
		if v.nodeHas(nv.Node, code) {
			out = append(out, nv.Node)
		}
	}
	return out
}

// onlyBlockedBy reports whether code is the only blocking code on node.
func (v *schedulingView) onlyBlockedBy(node string, code Code) bool {
	for _, nv := range v.verdicts {
		if nv.Node == node {
			codes := nodeCodes(nv)
			return len(codes) == 1 && codes[0] == code
		}
	}
	return false
}
