package triage

import (
	"fmt"
)

// This file holds the prose helpers the filters' describe functions share: evidence lines for
// the nodes of a code, and the wording of node counts.

// maxNodeEvidence caps the per-node evidence lines of one finding; the full table is in
// Finding.Nodes.
const maxNodeEvidence = 5

// nodeEvidence appends the reasons of code on up to maxNodeEvidence of the given nodes.
func (v *schedulingView) nodeEvidence(f *Finding, nodes []string, reasons map[string][]NodeReason, field string) {
	for i, n := range nodes {
		if i == maxNodeEvidence {
			break
		}
		for _, r := range reasons[n] {
			f.Evidence = append(f.Evidence, Evidence{Object: "Node " + n, Field: field, Message: r.Message})
		}
	}
}

// nodesVerb renders ofNodes(n) as a sentence subject with its verb: "The only node has",
// "All 3 nodes have".
func (v *schedulingView) nodesVerb(n int, singular, plural string) string {
	if n == 1 {
		return capitalize(v.ofNodes(n)) + " " + singular
	}
	return capitalize(v.ofNodes(n)) + " " + plural
}

// matchesNone renders "does not match the only node", "matches none of the 3 nodes" or
// "does not match 2 of 3 nodes".
func (v *schedulingView) matchesNone(n int) string {
	total := len(v.verdicts)
	switch {
	case total == 1 && n == 1:
		return "does not match the only node"
	case n == total:
		return fmt.Sprintf("matches none of the %d nodes", total)
	default:
		return fmt.Sprintf("does not match %d of %d nodes", n, total)
	}
}

// ofNodes renders "every node" or "2 of 3 nodes" for a count of nodes with a reason.
func (v *schedulingView) ofNodes(n int) string {
	total := len(v.verdicts)
	switch {
	case n == total && total == 1:
		return "the only node"
	case n == total:
		return fmt.Sprintf("all %d nodes", total)
	default:
		return fmt.Sprintf("%d of %d nodes", n, total)
	}
}

// firstOr returns names[0], or fallback when names is empty.
func firstOr(names []string, fallback string) string {
	if len(names) == 0 {
		return fallback
	}
	return names[0]
}

// describeGeneric is the prose of a code whose filter writes none of its own: the nodes it rules
// out and one of their reasons.
func (v *schedulingView) describeGeneric(f *Finding) {
	nodes, reasons := v.nodesWith(f.Code)
	f.Summary = fmt.Sprintf("%s rule out %s.%s", f.Code, v.ofNodes(len(nodes)), v.forExample(nodes, reasons))
}

// forExample renders " For example NODE: REASON." for the first of nodes ("" when none).
func (v *schedulingView) forExample(nodes []string, reasons map[string][]NodeReason) string {
	if len(nodes) > 0 && len(reasons[nodes[0]]) > 0 {
		return " For example " + nodes[0] + ": " + reasons[nodes[0]][0].Message + "."
	}
	return ""
}
