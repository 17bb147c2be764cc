package triage

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// This file is the InterPodAffinity filter: the pod's required pod affinity needs a matching
// pod in the node's topology domain, its anti-affinity forbids one, and so may the
// anti-affinity of pods already running.

// interPodReasons judges n like the InterPodAffinity filter: the pod's required affinity terms
// need a matching pod in n's topology domain (unless no pod matches anywhere and the pod matches
// its own term, so the first replica can start), its required anti-affinity terms forbid one,
// and existing pods' required anti-affinity terms may forbid the pod.
func interPodReasons(d *demand, n *corev1.Node, c *cluster) []NodeReason {
	var out []NodeReason
	pod := d.pod
	aff := pod.Spec.Affinity
	if aff != nil && aff.PodAffinity != nil {
		for _, term := range aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			value, ok := n.Labels[term.TopologyKey]
			if ok && c.anyMatchingPod(pod, term, func(node *corev1.Node) bool { return node.Labels[term.TopologyKey] == value }) {
				continue
			}
			if !c.anyMatchingPod(pod, term, nil) && termMatches(pod, term, pod) {
				continue // self-affinity: the first pod of a group may go anywhere
			}
			out = append(out, NodeReason{
				Code:    CodePodAffinityUnsatisfiable,
				Message: fmt.Sprintf("pod affinity: no pod matching %s in this node's %s domain", selectorString(term.LabelSelector), term.TopologyKey),
			})
		}
	}
	if aff != nil && aff.PodAntiAffinity != nil {
		for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			value, ok := n.Labels[term.TopologyKey]
			if !ok {
				continue
			}
			if holder := c.firstMatchingPod(pod, term, func(node *corev1.Node) bool { return node.Labels[term.TopologyKey] == value }); holder != nil {
				out = append(out, NodeReason{
					Code: CodePodAntiAffinityUnsatisfiable,
					Message: fmt.Sprintf("pod anti-affinity: %s matches %s in the same %s=%s domain",
						c.snap.PodName(holder), selectorString(term.LabelSelector), term.TopologyKey, value),
				})
			}
		}
	}
	// Existing pods' anti-affinity towards this pod.
	for _, bp := range c.antiAffinity {
		p, other := bp.pod, bp.node
		for _, term := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			value, ok := n.Labels[term.TopologyKey]
			if !ok || other.Labels[term.TopologyKey] != value || !termMatches(p, term, pod) {
				continue
			}
			msg := fmt.Sprintf("existing pod %s/%s's anti-affinity rejects this pod in the %s=%s domain", p.Namespace, p.Name, term.TopologyKey, value)
			if !c.snap.MayName(p.Namespace) {
				msg = fmt.Sprintf("the anti-affinity of %s rejects this pod in the %s=%s domain", UnreadablePod, term.TopologyKey, value)
			}
			out = append(out, NodeReason{Code: CodePodAntiAffinityUnsatisfiable, Message: msg})
		}
	}
	return out
}

// anyMatchingPod reports whether a bound pod on a node accepted by inDomain (all nodes when
// nil) matches term as seen from owner.
func (c *cluster) anyMatchingPod(owner *corev1.Pod, term corev1.PodAffinityTerm, inDomain func(*corev1.Node) bool) bool {
	return c.firstMatchingPod(owner, term, inDomain) != nil
}

func (c *cluster) firstMatchingPod(owner *corev1.Pod, term corev1.PodAffinityTerm, inDomain func(*corev1.Node) bool) *corev1.Pod {
	for _, n := range c.nodes {
		if inDomain != nil && !inDomain(n) {
			continue
		}
		for _, p := range c.pods.On(n.Name) {
			if p.DeletionTimestamp == nil && termMatches(owner, term, p) {
				return p
			}
		}
	}
	return nil
}

// termMatches reports whether candidate matches owner's affinity term: its namespace is one the
// term covers and its labels match the term's selector. The term covers its namespaces list,
// all namespaces for an empty namespaceSelector, else owner's namespace. A non-empty
// namespaceSelector is matched against the kubernetes.io/metadata.name label only (the
// Snapshot holds no Namespace objects).
func termMatches(owner *corev1.Pod, term corev1.PodAffinityTerm, candidate *corev1.Pod) bool {
	nsOK := false
	switch {
	case len(term.Namespaces) == 0 && term.NamespaceSelector == nil:
		nsOK = candidate.Namespace == owner.Namespace
	default:
		nsOK = sets.New(term.Namespaces...).Has(candidate.Namespace)
		if !nsOK && term.NamespaceSelector != nil {
			if sel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector); err == nil {
				nsOK = sel.Empty() || sel.Matches(labels.Set{"kubernetes.io/metadata.name": candidate.Namespace})
			}
		}
	}
	if !nsOK {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(candidate.Labels))
}

// selectorString renders a label selector as kubectl's -l syntax.
func selectorString(ls *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || sel.Empty() {
		return "any labels"
	}
	return sel.String()
}

// describeInterPod explains required pod affinity or anti-affinity that rules nodes out.
func (v *schedulingView) describeInterPod(f *Finding) {
	nodes, reasons := v.nodesWith(f.Code)
	ns, pod := v.pod.Namespace, v.pod.Name
	example := v.forExample(nodes, reasons)
	switch f.Code {
	case CodePodAntiAffinityUnsatisfiable:
		f.Summary = fmt.Sprintf("Required pod anti-affinity rules out %s.%s", v.ofNodes(len(nodes)), example)
		v.nodeEvidence(f, nodes, reasons, "spec.affinity.podAntiAffinity")
		f.Fix = append([]string{fmt.Sprintf("kubectl get pod -n %s %s -o jsonpath='{.spec.affinity.podAntiAffinity}'", shellQuote(ns), shellQuote(pod))},
			v.antiAffinityFixes(nodes, reasons)...)
	case CodePodAffinityUnsatisfiable:
		f.Summary = fmt.Sprintf("Required pod affinity rules out %s: no pod it must run next to is in their topology domain.%s", v.ofNodes(len(nodes)), example)
		v.nodeEvidence(f, nodes, reasons, "spec.affinity.podAffinity")
		f.Fix = []string{
			fmt.Sprintf("kubectl get pod -n %s %s -o jsonpath='{.spec.affinity.podAffinity}'", shellQuote(ns), shellQuote(pod)),
			"Start the pods it must run next to first, or relax the rule to preferredDuringSchedulingIgnoredDuringExecution.",
		}
	}
}

// narrowerTopologyKeys maps a topology key to the narrower well-known keys, narrowest last
// (kubernetes.io/hostname, a single node, has none).
var narrowerTopologyKeys = map[string][]string{
	corev1.LabelTopologyRegion:          {corev1.LabelTopologyZone, corev1.LabelHostname},
	corev1.LabelFailureDomainBetaRegion: {corev1.LabelTopologyZone, corev1.LabelHostname},
	corev1.LabelTopologyZone:            {corev1.LabelHostname},
	corev1.LabelFailureDomainBetaZone:   {corev1.LabelHostname},
}

// antiAffinityFixes says what to change about the anti-affinity that rules nodes out, by the
// topologyKey in use, never suggesting that same key: a narrower well-known key when there is
// one (a zone rule can become a per-node rule); for kubernetes.io/hostname, the narrowest, how
// many of the nodes the pod may use already hold a matching pod, and that the rule must become
// preferred, or the replicas fewer, or the nodes more. Existing pods' rules are named as theirs.
func (v *schedulingView) antiAffinityFixes(nodes []string, reasons map[string][]NodeReason) []string {
	var out []string
	aff := v.pod.Spec.Affinity
	var keys []string
	if aff != nil && aff.PodAntiAffinity != nil {
		for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if !slices.Contains(keys, term.TopologyKey) {
				keys = append(keys, term.TopologyKey)
			}
		}
	}
	cands, _ := v.candidates()
	for _, key := range keys {
		taken := 0
		for _, nv := range cands {
			if slices.ContainsFunc(nv.Reasons, func(r NodeReason) bool {
				return r.Code == CodePodAntiAffinityUnsatisfiable && strings.HasPrefix(r.Message, "pod anti-affinity:") && strings.Contains(r.Message, " same "+key+"=")
			}) {
				taken++
			}
		}
		if narrower := narrowerTopologyKeys[key]; len(narrower) > 0 {
			out = append(out, fmt.Sprintf("The rule keeps matching pods apart per %s: if apart per node is enough, use topologyKey %s; or make it preferredDuringSchedulingIgnoredDuringExecution, run fewer replicas, or add %s domains.",
				key, strings.Join(narrower, " or "), key))
			continue
		}
		if key == corev1.LabelHostname {
			out = append(out, fmt.Sprintf("%s already keeps one matching pod per node, the narrowest there is, and %d of the %d %s the pod may use already hold one: make the rule preferredDuringSchedulingIgnoredDuringExecution, run fewer replicas, or add nodes.",
				key, taken, len(cands), plural(len(cands), "node", "nodes")))
			continue
		}
		out = append(out, fmt.Sprintf("The rule keeps matching pods apart per %s: use a narrower key (%s) if that is enough, make it preferredDuringSchedulingIgnoredDuringExecution, run fewer replicas, or add %s domains.",
			key, corev1.LabelHostname, key))
	}
	var holders []string
	for _, n := range nodes {
		for _, r := range reasons[n] {
			if name, ok := strings.CutPrefix(r.Message, "existing pod "); ok {
				if name, _, ok = strings.Cut(name, "'s anti-affinity"); ok && !slices.Contains(holders, name) {
					holders = append(holders, name)
				}
			}
		}
	}
	hidden := false
	for _, n := range nodes {
		for _, r := range reasons[n] {
			hidden = hidden || strings.HasPrefix(r.Message, "the anti-affinity of "+UnreadablePod)
		}
	}
	if hidden {
		out = append(out, "The anti-affinity of a running pod in a namespace you cannot read rejects this pod: ask that namespace's owners or the cluster's admins, or run this pod where it does not run.")
	}
	if len(holders) > 0 {
		out = append(out, fmt.Sprintf("The anti-affinity of %s (running pods) rejects this pod: change their rule (their workload's podAntiAffinity), or run this pod where they do not run.", joinLimited(holders, 3)))
	}
	return out
}
