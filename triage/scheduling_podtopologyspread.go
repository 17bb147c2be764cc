package triage

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// This file is the PodTopologySpread filter: with whenUnsatisfiable DoNotSchedule, placing
// the pod on the node must keep its domain within maxSkew of the emptiest eligible domain.

// spreadState is PodTopologySpread's pre-filter state: for each DoNotSchedule constraint, the
// number of matching pods in each topology domain of the eligible nodes.
type spreadState struct {
	pod         *corev1.Pod
	constraints []spreadConstraint
}

type spreadConstraint struct {
	src      corev1.TopologySpreadConstraint
	selector labels.Selector
	// counts is the number of matching pods per domain (topology value) of the nodes the
	// constraint's node inclusion policies admit; domains lists those nodes per domain.
	counts   map[string]int
	domains  map[string][]string
	minMatch int
}

// newSpreadState counts matching pods per domain. Eligible nodes have every constraint's
// topology key and pass the pod's required node affinity (the default nodeAffinityPolicy
// Honor; nodeTaintsPolicy Honor also skips nodes with untolerated taints).
func newSpreadState(d *demand, c *cluster) *spreadState {
	st := &spreadState{pod: d.pod}
	for _, tsc := range d.pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
		if err != nil {
			continue
		}
		st.constraints = append(st.constraints, spreadConstraint{src: tsc, selector: sel, counts: map[string]int{}, domains: map[string][]string{}})
	}
	if len(st.constraints) == 0 {
		return st
	}
	for _, n := range c.nodes {
		if !hasAllKeys(n, st.constraints) {
			continue
		}
		for i := range st.constraints {
			sc := &st.constraints[i]
			if !spreadEligible(d, n, sc.src) {
				continue
			}
			value := n.Labels[sc.src.TopologyKey]
			count := 0
			if !sc.selector.Empty() {
				for _, p := range c.pods.On(n.Name) {
					if p.DeletionTimestamp == nil && p.Namespace == d.pod.Namespace && sc.selector.Matches(labels.Set(p.Labels)) {
						count++
					}
				}
			}
			sc.counts[value] += count
			sc.domains[value] = append(sc.domains[value], n.Name)
		}
	}
	for i := range st.constraints {
		sc := &st.constraints[i]
		first := true
		for _, n := range sc.counts {
			if first || n < sc.minMatch {
				sc.minMatch, first = n, false
			}
		}
		if sc.src.MinDomains != nil && len(sc.counts) < int(*sc.src.MinDomains) {
			sc.minMatch = 0
		}
	}
	return st
}

func hasAllKeys(n *corev1.Node, cs []spreadConstraint) bool {
	for _, c := range cs {
		if _, ok := n.Labels[c.src.TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// spreadEligible applies a constraint's node inclusion policies to n.
func spreadEligible(d *demand, n *corev1.Node, tsc corev1.TopologySpreadConstraint) bool {
	if tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		if ok, _ := d.affinity.Match(n); !ok {
			return false
		}
	}
	if tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, d.pod.Spec.Tolerations,
			func(t *corev1.Taint) bool {
				return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
			}, false)
		if untolerated {
			return false
		}
	}
	return true
}

// spreadReasons judges n like the PodTopologySpread filter, with the pod's spread state over c.
func spreadReasons(d *demand, n *corev1.Node, c *cluster) []NodeReason {
	return c.spreadFor(d).reasons(n)
}

// reasons judges n against every constraint: the node lacks the topology key, or placing the
// pod there would make its domain exceed maxSkew over the least loaded domain.
func (st *spreadState) reasons(n *corev1.Node) []NodeReason {
	var out []NodeReason
	for _, sc := range st.constraints {
		value, ok := n.Labels[sc.src.TopologyKey]
		if !ok {
			out = append(out, NodeReason{
				Code:    CodeTopologySpreadUnsatisfiable,
				Message: fmt.Sprintf("topology spread: node has no %s label", sc.src.TopologyKey),
			})
			continue
		}
		self := 0
		if sc.selector.Matches(labels.Set(st.pod.Labels)) {
			self = 1
		}
		skew := sc.counts[value] + self - sc.minMatch
		if skew > int(sc.src.MaxSkew) {
			out = append(out, NodeReason{
				Code: CodeTopologySpreadUnsatisfiable,
				Message: fmt.Sprintf("topology spread on %s: %s=%s already has %d matching pod(s), the emptiest domain %d; placing it here gives skew %d > maxSkew %d",
					sc.src.TopologyKey, sc.src.TopologyKey, value, sc.counts[value], sc.minMatch, skew, sc.src.MaxSkew),
			})
		}
	}
	return out
}

// describeSpreadDomains says, per DoNotSchedule constraint, which domains hold the skew down
// and whether the pod can run in them at all. With nodeTaintsPolicy Ignore (the default) a
// tainted node still counts as a domain with 0 matching pods, so a control-plane node the pod
// can never use can make every worker's skew too large; with nodeAffinityPolicy Ignore the same
// holds for nodes the pod's affinity excludes. Fixes name domains that can take the pod, or the
// policy and maxSkew/whenUnsatisfiable trade-offs, never nodes that would still reject it.
func (v *schedulingView) describeSpreadDomains(f *Finding) {
	for _, sc := range v.spread.constraints {
		key := sc.src.TopologyKey
		var emptiest, blockedEmptiest []string
		why := map[string]string{}
		for _, dom := range sortedKeys(sc.domains) {
			placeable := false
			for _, node := range sc.domains[dom] {
				if other := v.nonSpreadReasons(node); len(other) == 0 {
					placeable = true
				} else if why[dom] == "" {
					why[dom] = other[0].Message
				}
			}
			if sc.counts[dom] == sc.minMatch {
				emptiest = append(emptiest, dom)
				if !placeable {
					blockedEmptiest = append(blockedEmptiest, dom)
				}
			}
		}
		if len(emptiest) == 0 {
			continue
		}
		if len(blockedEmptiest) == len(emptiest) {
			f.Summary += fmt.Sprintf(" The emptiest %s domains (%s, %d matching pods) hold the skew down, but the pod cannot run in any of them (e.g. %s: %s), so this skew can never be met.",
				key, joinLimited(emptiest, 3), sc.minMatch, blockedEmptiest[0], why[blockedEmptiest[0]])
			policy := false
			if (sc.src.NodeTaintsPolicy == nil || *sc.src.NodeTaintsPolicy == corev1.NodeInclusionPolicyIgnore) && strings.HasPrefix(why[blockedEmptiest[0]], "taint ") {
				f.Fix = append(f.Fix, fmt.Sprintf("Set nodeTaintsPolicy: Honor on the %s constraint, so nodes with taints the pod does not tolerate stop counting as domains (they count with the default Ignore).", key))
				policy = true
			}
			if sc.src.NodeAffinityPolicy != nil && *sc.src.NodeAffinityPolicy == corev1.NodeInclusionPolicyIgnore && strings.HasPrefix(why[blockedEmptiest[0]], "nodeSelector") {
				f.Fix = append(f.Fix, fmt.Sprintf("Set nodeAffinityPolicy: Honor on the %s constraint, so nodes the pod's node affinity excludes stop counting as domains.", key))
				policy = true
			}
			if !policy {
				f.Fix = append(f.Fix, fmt.Sprintf("Make the pod able to run in %s (see the node table), or the skew cannot be met.", joinLimited(blockedEmptiest, 3)))
			}
		} else {
			var open []string
			for _, dom := range emptiest {
				if !slices.Contains(blockedEmptiest, dom) {
					open = append(open, dom)
				}
			}
			f.Fix = append(f.Fix, fmt.Sprintf("Add capacity in the emptiest %s domains the pod can run in: %s.", key, joinLimited(open, 3)))
		}
		f.Fix = append(f.Fix, fmt.Sprintf("Or trade spread for placement: raise maxSkew (now %d) or use whenUnsatisfiable: ScheduleAnyway on the %s constraint.", sc.src.MaxSkew, key))
	}
}

// nonSpreadReasons returns node's reasons other than topology spread: what keeps the pod off it
// even where the skew allows it (a NotReady node counts: it runs no new pods).
func (v *schedulingView) nonSpreadReasons(node string) []NodeReason {
	var out []NodeReason
	for _, nv := range v.verdicts {
		if nv.Node != node {
			continue
		}
		for _, r := range nv.Reasons {
			if r.Code != CodeTopologySpreadUnsatisfiable {
				out = append(out, r)
			}
		}
	}
	return out
}

// spreadSelector renders the first topology spread constraint's selector for kubectl -l.
func (v *schedulingView) spreadSelector() string {
	for _, c := range v.pod.Spec.TopologySpreadConstraints {
		return selectorString(c.LabelSelector)
	}
	return ""
}

// describeSpread explains topologySpreadConstraints that rule nodes out, and which domains hold
// the skew down (describeSpreadDomains).
func (v *schedulingView) describeSpread(f *Finding) {
	nodes, reasons := v.nodesWith(f.Code)
	ns, pod := v.pod.Namespace, v.pod.Name
	f.Summary = fmt.Sprintf("The pod's topologySpreadConstraints (whenUnsatisfiable: DoNotSchedule) rule out %s.%s", v.ofNodes(len(nodes)), v.forExample(nodes, reasons))
	v.nodeEvidence(f, nodes, reasons, "spec.topologySpreadConstraints")
	f.Fix = []string{
		fmt.Sprintf("kubectl get pod -n %s %s -o jsonpath='{.spec.topologySpreadConstraints}'", shellQuote(ns), shellQuote(pod)),
		fmt.Sprintf("kubectl get pods -n %s -o wide -l %s", shellQuote(ns), shellQuote(v.spreadSelector())),
	}
	v.describeSpreadDomains(f)
}
