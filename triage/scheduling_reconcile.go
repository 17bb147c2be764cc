package triage

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// This file squares the modelled node table with the kube-scheduler's own verdict. The
// scheduler counts each node once, under the first filter plugin that rejects it (several
// reasons only when that one plugin gives several, e.g. Insufficient cpu and memory); the
// table keeps every reason it models. A scheduler reason the table does not account for is
// never dropped and never silently read as "fits": it goes, verbatim, to the nodes the model
// found no reason for.

// firstFilterCodes returns the codes the scheduler would count a node under: the node's
// blocking codes of its first failing plugin.
func firstFilterCodes(nv NodeVerdict) []Code {
	codes := nodeCodes(nv)
	best := 100
	for _, c := range codes {
		best = min(best, filterRank(c))
	}
	var out []Code
	for _, c := range codes {
		if filterRank(c) == best {
			out = append(out, c)
		}
	}
	return out
}

// unaccounted is a scheduler reason (or the part of its count) that the table does not explain.
type unaccounted struct {
	SchedulerReason
	// missing is how many of its nodes the table does not show with it.
	missing int
}

// reconcile gives every node the model says fits, while the scheduler's latest message says
// no node fits, the scheduler reasons the model does not account for (FromScheduler reasons),
// so the table never claims a node the scheduler rejects. It returns whether that attribution
// is exact: one unaccounted reason, counted on exactly those nodes. It changes nothing when
// there is no message, when it is a pod-level (PreFilter) verdict, or when the scheduler
// counted a different number of nodes than the table has (nodes came or went since).
func (v *schedulingView) reconcile() (exact bool) {
	if !v.hasMsg || v.msg.PodLevel != nil || v.msg.Total != len(v.verdicts) {
		return true
	}
	var fits []int
	predicted := map[Code]int{}
	for i, nv := range v.verdicts {
		codes := firstFilterCodes(nv)
		if len(codes) == 0 {
			fits = append(fits, i)
		}
		for _, c := range codes {
			predicted[c]++
		}
	}
	if len(fits) == 0 {
		return true
	}
	var open []unaccounted
	for _, r := range v.msg.Reasons {
		missing := r.Count
		if r.Code != "" {
			explained := min(predicted[r.Code], r.Count)
			predicted[r.Code] -= explained
			missing -= explained
		}
		if missing > 0 {
			open = append(open, unaccounted{SchedulerReason: r, missing: missing})
		}
	}
	sort.SliceStable(open, func(i, j int) bool { return open[i].missing > open[j].missing })
	ago := ""
	if age := v.snap.Now.Sub(v.msg.Event.LastSeen); age > 0 && !v.msg.Event.LastSeen.IsZero() {
		ago = " (" + FormatAge(age) + " ago)"
	}
	var reason NodeReason
	switch {
	case len(open) == 1:
		u := open[0]
		code := u.Code
		if code == "" {
			code = CodeUnknown
		}
		reason = NodeReason{Code: code, FromScheduler: true,
			Message: fmt.Sprintf("the scheduler's latest verdict%s: %q on %d node(s); the node table found no other reason here", ago, u.Text, u.Count)}
		exact = u.missing == len(fits) && u.Code != ""
	case len(open) > 1:
		var parts []string
		for _, u := range open {
			parts = append(parts, fmt.Sprintf("%q (%d)", u.Text, u.missing))
		}
		reason = NodeReason{Code: CodeUnknown, FromScheduler: true,
			Message: fmt.Sprintf("the scheduler's latest verdict%s rejects this node for one of: %s; the node table found no reason here", ago, strings.Join(parts, ", "))}
	default:
		reason = NodeReason{Code: CodeUnknown, FromScheduler: true,
			Message: fmt.Sprintf("the scheduler's latest verdict%s found no node for the pod, but its counts do not say why this node was rejected", ago)}
	}
	for _, i := range fits {
		v.verdicts[i].Fits = false
		v.verdicts[i].Reasons = append(slices.Clip(v.verdicts[i].Reasons), reason) // shared with the NodeTables entry
	}
	return exact
}

// describeUnmodelled explains a rejection the rules do not model: the scheduler's own words,
// verbatim, on the nodes the table found no other reason for. It is never a confident cause.
func (v *schedulingView) describeUnmodelled(f *Finding) {
	nodes, reasons := v.nodesWith(CodeUnknown)
	f.Uncertain = true
	var text string
	if len(nodes) > 0 {
		text = reasons[nodes[0]][0].Message
	}
	f.Summary = fmt.Sprintf("The scheduler rejects %s for a reason whypending does not model, so this is its verdict, not a diagnosis: %s.", v.ofNodes(len(nodes)), text)
	v.nodeEvidence(f, nodes, reasons, "FailedScheduling")
	f.Fix = []string{
		fmt.Sprintf("kubectl describe pod -n %s %s   # the scheduler's full message", shellQuote(v.pod.Namespace), shellQuote(v.pod.Name)),
		fmt.Sprintf("kubectl describe node %s", shellQuote(firstOr(nodes, "NODE"))),
		"Search the scheduler's message in the docs of the scheduler plugin that writes it (a CSI driver's limits, DRA, a custom plugin).",
	}
}
