package triage

import (
	"cmp"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The scheduling rules judge each node the way the kube-scheduler's filter plugins do, one row
// of filters per plugin of the default profile, in the profile's order
// (pkg/scheduler/apis/config/v1/default_plugins.go in Kubernetes v1.37). Each plugin the rules
// model has one file, scheduling_<plugin>.go, that holds its judgement (the row's reasons), its
// prose (the row's describe) and, beside it, its table test, the way a scheduler plugin keeps
// its name, reason strings and Filter together. Everything else is derived from the rows:
//
//   - nodeReasons runs every row's reasons in order: the node table keeps every reason, in
//     filter order (the scheduler stops at the first failing plugin; the table, like Fit with
//     its shortfalls, keeps them all);
//   - filterRank is a code's row: the scheduler counts a node under its first failing plugin;
//   - reasonCode maps the words of "0/N nodes are available: …" to a code with the rows' phrases;
//   - describe writes a code's finding with its row's describe;
//   - schedulingOrder, the tie-break order of the Pending codes, is the pod-level codes, then
//     the rows' codes by the rows' tieBreak, then the context codes.
//
// A new scheduling code is a code in a row (or a new row and its file), the constant in
// codes.go, its row in docs/triage-codes.md and a test case. TestEveryPendingCodeHasARow fails
// for a Pending code that has none.

// filter is one kube-scheduler filter plugin.
type filter struct {
	// plugin is the plugin's name in the scheduler's registry (framework/plugins/names).
	plugin string
	// codes are the codes the plugin's verdicts map to, in tie-break order within the row.
	codes []Code
	// phrases are the plugin's words in "0/N nodes are available: …", as current and older
	// schedulers write them, most specific first.
	phrases []phrase
	// reasons returns every reason node n rejects the pod for under this plugin, with codes
	// of codes (or contextCodes); nil for a plugin the table does not model, whose rejections
	// reach the table as the scheduler's own verdict (reconcile).
	reasons func(d *demand, n *corev1.Node, c *cluster) []NodeReason
	// describe writes the summary, evidence and fix of a finding whose code is one of codes;
	// nil: describeGeneric.
	describe func(v *schedulingView, f *Finding)
	// tieBreak ranks the row's codes for tie-breaks between causes that block as many nodes
	// (lower first): resources before placement constraints, because they are the most common
	// cause and the one a person can act on without changing the workload's design.
	tieBreak int
}

// phrase maps the scheduler's words for one reason to its code.
type phrase struct {
	// words are lower-case; the reason contains them, or starts with them when start is set.
	words string
	start bool
	// re, when set, matches the reason instead of words (a reason that names an object).
	re   *regexp.Regexp
	code Code
}

// matches reports whether the lower-cased reason t has the phrase.
func (p phrase) matches(t string) bool {
	switch {
	case p.re != nil:
		return p.re.MatchString(t)
	case p.start:
		return strings.HasPrefix(t, p.words)
	default:
		return strings.Contains(t, p.words)
	}
}

// filters are the default profile's filter plugins, in its order. They are set in init, as
// their functions reach nodeReasons, which reads them.
var filters []filter

func init() {
	filters = []filter{
		// A pod with spec.nodeName set never waits for the scheduler, so the table does not
		// judge NodeName; its words count as a selector mismatch, as they did for older
		// schedulers' node name predicate.
		{plugin: "NodeName", phrases: []phrase{{words: "requested node name", code: CodeNodeSelectorMismatch}}},
		{plugin: "NodeUnschedulable", codes: []Code{CodeNodeUnschedulable}, tieBreak: 5,
			phrases: []phrase{{words: "were unschedulable", code: CodeNodeUnschedulable}},
			reasons: cordonReasons, describe: (*schedulingView).describeCordoned},
		{plugin: "TaintToleration", codes: []Code{CodeUntoleratedTaint}, tieBreak: 6,
			phrases: []phrase{{words: "taint", code: CodeUntoleratedTaint}},
			reasons: tolerationReasons, describe: (*schedulingView).describeTaints},
		{plugin: "NodeAffinity", codes: []Code{CodeNodeSelectorMismatch}, tieBreak: 4,
			phrases: []phrase{{words: "node affinity/selector", code: CodeNodeSelectorMismatch}, {words: "didn't match node selector", code: CodeNodeSelectorMismatch}},
			reasons: affinityReasons, describe: (*schedulingView).describeSelector},
		{plugin: "NodePorts", codes: []Code{CodeHostPortConflict}, tieBreak: 3,
			phrases: []phrase{{words: "free ports", code: CodeHostPortConflict}},
			reasons: hostPortReasons, describe: (*schedulingView).describeHostPorts},
		{plugin: "NodeResourcesFit", tieBreak: 1,
			codes: []Code{CodeInsufficientCPU, CodeInsufficientMemory, CodeInsufficientEphemeralStorage, CodeInsufficientExtendedResource, CodeTooManyPods},
			phrases: []phrase{
				{words: "insufficient cpu", start: true, code: CodeInsufficientCPU},
				{words: "insufficient memory", start: true, code: CodeInsufficientMemory},
				{words: "insufficient ephemeral-storage", start: true, code: CodeInsufficientEphemeralStorage},
				{words: "too many pods", start: true, code: CodeTooManyPods},
				{words: "insufficient pods", start: true, code: CodeTooManyPods},
				{words: "insufficient ", start: true, code: CodeInsufficientExtendedResource},
			},
			reasons: resourceReasons, describe: (*schedulingView).describeResource},
		// VolumeRestrictions (a disk or ReadWriteOncePod claim another pod holds) is not modelled.
		{plugin: "VolumeRestrictions"},
		{plugin: "NodeVolumeLimits", codes: []Code{CodeVolumeAttachLimit}, tieBreak: 2,
			phrases: []phrase{{words: "max volume count", code: CodeVolumeAttachLimit}},
			reasons: volumeLimitReasons, describe: (*schedulingView).describeVolumeLimit},
		// VolumeBinding's PreFilter verdicts (a missing claim, unbound Immediate claims) are
		// pod-level: claimFindings reports them before any node.
		{plugin: "VolumeBinding", codes: []Code{CodePVCNotFound, CodePVCUnbound, CodeVolumeNodeAffinityConflict}, tieBreak: 7,
			phrases: []phrase{
				{words: "volume node affinity conflict", code: CodeVolumeNodeAffinityConflict},
				{words: "persistentvolume's node affinity", code: CodeVolumeNodeAffinityConflict},
				{re: pvcNotFound, code: CodePVCNotFound},
				{words: "unbound immediate persistentvolumeclaims", code: CodePVCUnbound},
				{words: "available persistent volumes to bind", code: CodePVCUnbound},
				{words: "not have enough free storage", code: CodePVCUnbound},
				{words: "bound to non-existent pv", code: CodePVCUnbound},
			},
			reasons: volumeBindingReasons, describe: (*schedulingView).describeVolumeBinding},
		{plugin: "VolumeZone", codes: []Code{CodeVolumeNodeAffinityConflict}, tieBreak: 7,
			phrases: []phrase{{words: "volume zone", code: CodeVolumeNodeAffinityConflict}},
			reasons: volumeZoneReasons, describe: (*schedulingView).describeVolumeBinding},
		{plugin: "PodTopologySpread", codes: []Code{CodeTopologySpreadUnsatisfiable}, tieBreak: 8,
			phrases: []phrase{{words: "topology spread", code: CodeTopologySpreadUnsatisfiable}},
			reasons: spreadReasons, describe: (*schedulingView).describeSpread},
		{plugin: "InterPodAffinity", codes: []Code{CodePodAntiAffinityUnsatisfiable, CodePodAffinityUnsatisfiable}, tieBreak: 9,
			phrases: []phrase{{words: "anti-affinity", code: CodePodAntiAffinityUnsatisfiable}, {words: "pod affinity", code: CodePodAffinityUnsatisfiable}},
			reasons: interPodReasons, describe: (*schedulingView).describeInterPod},
	}
	filterOfCode = map[Code]int{}
	for i, f := range filters {
		for _, c := range f.codes {
			if _, ok := filterOfCode[c]; !ok {
				filterOfCode[c] = i
			}
		}
	}
	schedulingOrder = tieBreakOrder()
	codeRanks = map[Code]int{}
	for i, c := range schedulingOrder {
		codeRanks[c] = i
	}
}

// podLevelCodes are the Pending codes found before any node is judged, first in tie-breaks:
// scheduling gates, VolumeBinding's PreFilter verdicts on the pod's claims, an empty cluster,
// and a scheduler that never looked at the pod.
var podLevelCodes = []Code{CodeSchedulingGated, CodePVCNotFound, CodePVCUnbound, CodeNoNodes, CodeSchedulerNotRunning}

// contextCodes are reasons the node table shows that no filter decides: a NotReady node (the
// scheduler sees only the taints the node lifecycle controller adds for it).
var contextCodes = []Code{CodeNodeNotReady}

// pvcNotFound is VolumeBinding's verdict on a claim that does not exist.
var pvcNotFound = regexp.MustCompile(`persistentvolumeclaim "([^"]+)" not found`)

// filterOfCode maps a code to the index of the first row that lists it; schedulingOrder and
// codeRanks are derived from the rows in init.
var (
	filterOfCode    map[Code]int
	schedulingOrder []Code
	codeRanks       map[Code]int
)

// tieBreakOrder is schedulingOrder: podLevelCodes, then the rows' codes by tieBreak (a code
// listed earlier keeps its place), then contextCodes.
func tieBreakOrder() []Code {
	out := append([]Code(nil), podLevelCodes...)
	seen := map[Code]bool{}
	for _, c := range out {
		seen[c] = true
	}
	rows := slices.Clone(filters)
	slices.SortStableFunc(rows, func(a, b filter) int { return cmp.Compare(a.tieBreak, b.tieBreak) })
	for _, f := range rows {
		for _, c := range f.codes {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return append(out, contextCodes...)
}

// codeRank is c's position in schedulingOrder (codes outside it rank last).
func codeRank(c Code) int {
	if r, ok := codeRanks[c]; ok {
		return r
	}
	return len(schedulingOrder)
}

// filterRank is the position, in the default profile, of the filter plugin whose verdicts map
// to c: the scheduler counts a node under the first plugin that rejects it. Codes no plugin
// reports rank last.
func filterRank(c Code) int {
	if i, ok := filterOfCode[c]; ok {
		return i
	}
	return 99
}

// filterOf returns the row whose verdicts map to c, or nil.
func filterOf(c Code) *filter {
	if i, ok := filterOfCode[c]; ok {
		return &filters[i]
	}
	return nil
}

// nodeReasons returns every reason node n rejects the pod, in filter order.
func nodeReasons(d *demand, n *corev1.Node, c *cluster) []NodeReason {
	return nodeReasonsExcept(d, n, c, "")
}

// nodeReasonsExcept is nodeReasons without the row of plugin ("": every row).
func nodeReasonsExcept(d *demand, n *corev1.Node, c *cluster, plugin string) []NodeReason {
	var reasons []NodeReason
	for i := range filters {
		if f := &filters[i]; f.reasons != nil && f.plugin != plugin {
			reasons = append(reasons, f.reasons(d, n, c)...)
		}
	}
	return reasons
}

// reasonCode maps one scheduler reason to a code with the rows' phrases, covering the wording
// of current and older scheduler versions: first the phrases a reason starts with ("Insufficient
// cpu", not "…is insufficient to cover…"), then the others in filter order; "" when none matches.
func reasonCode(text string) Code {
	t := strings.ToLower(text)
	for _, start := range []bool{true, false} {
		for i := range filters {
			for _, p := range filters[i].phrases {
				if p.start == start && p.matches(t) {
					return p.code
				}
			}
		}
	}
	return ""
}

// describe renders the finding for one per-node code from the verdict table: a summary that
// names the nodes, evidence (the scheduler's message, then the nodes' reasons) and fixes with
// real names, written by the code's filter.
func (v *schedulingView) describe(code Code, t codeTally) Finding {
	f := Finding{Code: code, Severity: SeverityBlocker, Evidence: v.schedulerEvidence()}
	switch row := filterOf(code); {
	case code == CodeUnknown:
		v.describeUnmodelled(&f)
	case row != nil && row.describe != nil:
		row.describe(v, &f)
	default:
		v.describeGeneric(&f)
	}
	if t.anywhere[code] == 0 && v.hasMsg && v.snap.NodesErr == nil { // no table: messageOnlyFinding says so
		f.Summary += " (The node table shows no node with this reason; it rests on the scheduler's message.)"
	}
	return f
}
