package triage

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Action kinds triage offers; they match the actions package's Kind values (triage does not
// import actions: arrows point the other way; TestActionKindsAreRepairs compares them).
const (
	actionReleaseLeakedIPs   = "release-leaked-ips"
	actionReleaseEmptyBlocks = "release-empty-blocks"
	actionUnlockDatastore    = "unlock-datastore"
)

// networkRules explains a scheduled pod whose sandbox (network namespace) cannot be created:
// Calico IPAM exhausted or at the per-host block limit, the Calico datastore locked, the
// node's calico-node not ready, AWS VPC CNI out of IPs, no CNI config, or any other
// FailedCreatePodSandBox. It reads every sandbox event, not just the newest event, so a later
// Normal event (SandboxChanged, Pulled) cannot hide the cause.
func networkRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !awaitingSandbox(pod) {
		return nil
	}
	sandbox := currentEvents(s, eventsWithReason(s, "FailedCreatePodSandBox", "NetworkNotReady", "FailedCreatePodSandbox"))
	calicoNode, calicoReady := nodeCalicoPod(s, pod.Spec.NodeName)

	var primary *Finding
	if code, e, ok := classifySandbox(sandbox); ok {
		f := sandboxFinding(s, code, e, sandbox)
		primary = &f
	} else if node := s.Node(pod.Spec.NodeName); node != nil && nodeNetworkNotReady(node) {
		f := cniFromNodeFinding(s, node)
		primary = &f
	}
	var out []Finding
	if primary != nil {
		out = append(out, *primary)
	}
	// A crash-looping calico-node on the pod's node is a cause of its own (or the reason the
	// IPAM request fails); report it unless it is already the primary.
	if calicoNode != nil && !calicoReady && (primary == nil || primary.Code != CodeCalicoNodeNotReady) {
		out = append(out, calicoNodeFinding(s, calicoNode, sandbox))
	}
	return out
}

// awaitingSandbox reports whether the pod is scheduled but has no running sandbox now: Pending
// (or Running, for a pod whose node restarted it in place), its PodReadyToStartContainers
// condition not True, and no container running or terminated now (all waiting, usually in
// ContainerCreating or PodInitializing). Only the current state
// counts: a lastState.terminated from before a node reboot or a sandbox re-creation is
// history, and the sandbox the pod waits for now is what blocks it.
func awaitingSandbox(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodPending:
	case corev1.PodRunning:
		// A pod restarted in place (its node rebooted or was recreated) keeps phase Running
		// while the kubelet builds it a new sandbox: its containers wait in ContainerCreating
		// again, with the old run in lastState.
		if len(containerStatuses(pod)) == 0 {
			return false
		}
	default:
		return false
	}
	if c := podCondition(pod, corev1.PodReadyToStartContainers); c != nil && c.Status == corev1.ConditionTrue {
		return false
	}
	for _, c := range containerStatuses(pod) {
		if c.Status.State.Running != nil || c.Status.State.Terminated != nil {
			return false
		}
		if w := c.Status.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return false
		}
	}
	return true
}

var (
	// Calico's CNI/IPAM: "failed to request 1 IPv4 addresses. IPAM allocated only 0".
	reIPAMAllocatedOnly = regexp.MustCompile(`(?i)failed to request \d+ IPv[46] addresses\. IPAM allocated only \d+`)
	// Another CNI's IPAM with no address left for the node: host-local ("no IP addresses
	// available in range set"), Cilium's cluster-pool ("range is full"), multi-pool ("all CIDR
	// ranges are exhausted") and ENI/Azure modes ("No more IPs available"), Azure CNI ("No
	// available addresses"), whereabouts ("Could not allocate IP in range").
	reCNIRangeExhausted = regexp.MustCompile(`(?i)no IP addresses available|all CIDR ranges are exhausted|range is full|no more IPs available|no available addresses|could not allocate IP in range|ip(?:v4|v6)? pool (?:is )?exhausted`)
)

// classifySandbox picks the code of the most telling sandbox event: the newest event that names
// a specific cause, else the newest event as sandbox-creation-failed.
func classifySandbox(events []Event) (Code, Event, bool) {
	for _, e := range events {
		if c := sandboxCode(e.Message); c != CodeSandboxCreationFailed {
			return c, e, true
		}
	}
	for _, e := range events {
		if e.Reason != "NetworkNotReady" {
			return CodeSandboxCreationFailed, e, true
		}
	}
	return "", Event{}, false
}

// sandboxCode maps one FailedCreatePodSandBox (or NetworkNotReady) message to a code, matching
// the shapes Calico, the AWS VPC CNI, containerd and CRI-O write.
func sandboxCode(msg string) Code {
	switch {
	case containsAny(msg, "strict affinity should not be false for Windows", "strictaffinity") && containsAny(msg, "windows"):
		return CodeCalicoWindowsStrictAffinity
	case containsAny(msg, "per host block limit"):
		return CodeCalicoIPAMBlockLimit
	case reIPAMAllocatedOnly.MatchString(msg), containsAny(msg, "pools are likely exhausted", "no more free affine blocks", "no configured Calico pools", "IPAM allocated only 0"):
		return CodeCalicoIPAMExhausted
	case containsAny(msg, "Calico is currently not ready to process requests", "datastore is locked", "datastoreReady"):
		return CodeCalicoDatastoreLocked
	case containsAny(msg, "failed to assign an IP address to container", "InsufficientFreeAddressesInSubnet", "no available IP/Prefix addresses"):
		return CodeAWSVPCCNIIPExhausted
	case containsAny(msg, "cni config uninitialized", "cni plugin not initialized", "NetworkPluginNotReady", "no networks found in /etc/cni/net.d", "network plugin is not ready"):
		return CodeCNINotInitialized
	case containsAny(msg, "/var/lib/calico/nodename", "check that the calico/node container is running"):
		return CodeCalicoNodeNotReady
	case reCNIRangeExhausted.MatchString(msg):
		return CodeCNIIPRangeExhausted
	}
	return CodeSandboxCreationFailed
}

// sandboxFinding builds the finding for code from the sandbox event e (and all sandbox events,
// for context), correlating Calico codes with the IPAM state.
func sandboxFinding(s *Snapshot, code Code, e Event, all []Event) Finding {
	pod := s.Pod
	node := pod.Spec.NodeName
	f := Finding{Code: code, Severity: SeverityBlocker, Evidence: []Evidence{EventEvidence(pod, e)}}
	for _, other := range all {
		if other.Message != e.Message && len(f.Evidence) < 4 {
			f.Evidence = append(f.Evidence, EventEvidence(pod, other))
		}
	}
	seen := eventSeen(s, e)
	switch code {
	case CodeCalicoIPAMExhausted:
		f.Summary = fmt.Sprintf("Calico IPAM could not give the pod an IP address on %s (FailedCreatePodSandBox %s): IPAM believes the pool is used up.", node, seen)
		ipamExhaustedDetail(s, &f)
	case CodeCalicoIPAMBlockLimit:
		f.Summary = fmt.Sprintf("Calico IPAM cannot claim another address block for %s: the node is at the per-host block limit (FailedCreatePodSandBox %s).", node, seen)
		ipamBlockLimitDetail(s, &f)
	case CodeCalicoDatastoreLocked:
		f.Summary = fmt.Sprintf("The Calico datastore is locked (ClusterInformation default datastoreReady=false), so the CNI refuses every new pod network (FailedCreatePodSandBox %s).", seen)
		datastoreLockedDetail(s, &f)
	case CodeAWSVPCCNIIPExhausted:
		awsDetail(s, e, &f)
	case CodeCNINotInitialized:
		f.Summary = fmt.Sprintf("The container runtime on %s has no working CNI configuration, so no pod network can be set up (%s %s).", node, e.Reason, seen)
		f.Fix = []string{
			fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s | grep -Ei 'calico|cilium|flannel|aws-node|weave|kube-router'", shellQuote(node)),
			fmt.Sprintf("On %s: ls /etc/cni/net.d/ && journalctl -u containerd -u kubelet | grep -i cni | tail", shellQuote(node)),
			"Install the cluster's CNI plugin or fix its DaemonSet so it writes its config to /etc/cni/net.d on this node.",
		}
	case CodeCalicoNodeNotReady:
		f.Summary = fmt.Sprintf("Calico's CNI plugin on %s cannot reach a working calico-node (FailedCreatePodSandBox %s).", node, seen)
		if cn, _ := nodeCalicoPod(s, node); cn != nil {
			f.Evidence = append(f.Evidence, calicoPodEvidence(cn)...)
			f.Fix = calicoNodeFix(cn)
		} else {
			f.Fix = []string{fmt.Sprintf("kubectl get pods -A -l k8s-app=calico-node -o wide --field-selector spec.nodeName=%s", shellQuote(node))}
		}
	case CodeCNIIPRangeExhausted:
		rangeExhaustedDetail(s, e, &f)
	case CodeCalicoWindowsStrictAffinity:
		windowsStrictAffinityDetail(s, e, &f)
	default:
		// A CNI plugin's request to the Kubernetes API is read by cniAPIDetail; the table
		// reads the other messages that name their cause.
		if !reAPIURL.MatchString(e.Message) && explainSandbox(s, e, &f) {
			break
		}
		f.Summary = genericSandboxSummary(s, e)
		f.Fix = []string{
			fmt.Sprintf("kubectl describe pod %s %s", nsFlag(pod), shellQuote(pod.Name)),
			fmt.Sprintf("On %s: journalctl -u kubelet -u %s | grep -i sandbox | tail", shellQuote(node), runtimeUnit(s)),
		}
		cniAPIDetail(s, e, &f)
	}
	return f
}

// ipamExhaustedDetail adds pool usage, leaked allocations and the release action to an
// calico-ipam-exhausted finding.
func ipamExhaustedDetail(s *Snapshot, f *Finding) {
	ipam := s.IPAM
	if ipam == nil {
		f.Evidence = append(f.Evidence, ipamUnavailable(s))
	} else {
		f.Evidence = append(f.Evidence, poolEvidence(ipam)...)
		switch {
		case !ipam.LeaksChecked:
			// Unknown is not zero: never conclude "nothing is leaked" from a check that failed.
			msg := "the leak check did not run, so how many addresses are leaked is unknown"
			if s.IPAMErr != nil {
				msg = "the leak check failed, so how many addresses are leaked is unknown: " + s.IPAMErr.Error()
			}
			f.Evidence = append(f.Evidence, Evidence{Object: "Calico IPAM", Field: "allocations", Message: msg})
		case ipam.LeakedIPs > 0:
			f.Summary += fmt.Sprintf(" %d of the allocated %s used by no pod or node (leaked).", ipam.LeakedIPs, plural(ipam.LeakedIPs, "address is", "addresses are"))
			f.Evidence = append(f.Evidence, leakEvidence(ipam, s.Pod.Spec.NodeName))
			f.Actions = append(f.Actions, ActionRef{Kind: actionReleaseLeakedIPs, Label: fmt.Sprintf("Release %d leaked %s", ipam.LeakedIPs, plural(ipam.LeakedIPs, "IP", "IPs"))})
		}
		if n := ipam.NodeBlocks[s.Pod.Spec.NodeName]; n > 0 || len(ipam.NodeBlocks) > 0 {
			f.Evidence = append(f.Evidence, nodeBlockEvidence(s, ipam))
		}
		if free := freeAddresses(ipam); ipam.LeaksChecked && ipam.LeakedIPs == 0 && free > 0 {
			// The failure is history: the pools have room now (for example after a release).
			f.Summary += fmt.Sprintf(" The pools now have %d free %s and nothing is leaked, so the kubelet's next sandbox retry (with back-off) should succeed.",
				free, plural(free, "address", "addresses"))
			f.Fix = []string{
				fmt.Sprintf("kubectl get events %s --field-selector involvedObject.name=%s -w  # a new FailedCreatePodSandBox means the cause is elsewhere", nsFlag(s.Pod), shellQuote(s.Pod.Name)),
				retryAtOnce(s.Pod),
			}
			return
		}
	}
	f.Fix = []string{
		"whypending ipam check --show-problem-ips",
		releaseLeaksChoice,
		"whypending ipam release-ips --lock  # prints the plan; add --yes to lock the datastore, release the leaked addresses, unlock and check again",
		calicoctlReleaseLeaks,
		"If nothing is leaked, the pool really is full: add an IPPool, or remove finished pods that still hold addresses. With the new pool's manifest in ippool.yaml:",
		"calicoctl create -f ippool.yaml",
	}
}

// ipamBlockLimitDetail adds the node's block count against maxBlocksPerHost, its empty blocks
// and the block release action to a calico-ipam-block-limit finding.
func ipamBlockLimitDetail(s *Snapshot, f *Finding) {
	node := s.Pod.Spec.NodeName
	ipam := s.IPAM
	if ipam == nil {
		f.Evidence = append(f.Evidence, ipamUnavailable(s))
	} else {
		f.Evidence = append(f.Evidence, nodeBlockEvidence(s, ipam), Evidence{
			Object: "IPAMConfig default", Field: "spec",
			Message: fmt.Sprintf("maxBlocksPerHost %d (effective), strictAffinity %t", effectiveMaxBlocks(ipam), ipam.StrictAffinity),
		})
		for _, p := range ipam.Pools {
			if p.BlockSize >= 30 && !strings.Contains(p.CIDR, ":") {
				f.Evidence = append(f.Evidence, Evidence{Object: "IPPool " + p.Name, Field: "spec.blockSize",
					Message: fmt.Sprintf("/%d blocks hold only %d %s each, so %d blocks per host allow only about %d pods", p.BlockSize, blockAddrs(p.BlockSize), plural(blockAddrs(p.BlockSize), "address", "addresses"), effectiveMaxBlocks(ipam), effectiveMaxBlocks(ipam)*blockAddrs(p.BlockSize))})
			}
		}
		if n := ipam.EmptyBlocksByNode[node]; n > 0 {
			f.Summary += fmt.Sprintf(" %d of its blocks %s empty and can be released.", n, plural(n, "is", "are"))
			f.Actions = append(f.Actions, ActionRef{Kind: actionReleaseEmptyBlocks, Label: fmt.Sprintf("Release %d empty %s on %s", n, plural(n, "block", "blocks"), node), Args: map[string]string{"node": node}})
		}
		if n := ipam.LeakedIPsByNode[node]; n > 0 {
			f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node), Message: fmt.Sprintf("%d leaked %s in blocks affine to %s keep those blocks from being reused", n, plural(n, "allocation", "allocations"), node)})
			f.Actions = append(f.Actions, ActionRef{Kind: actionReleaseLeakedIPs, Label: fmt.Sprintf("Release %d leaked %s", ipam.LeakedIPs, plural(ipam.LeakedIPs, "IP", "IPs"))})
		}
	}
	limit := 20
	if ipam != nil {
		limit = effectiveMaxBlocks(ipam)
	}
	f.Fix = []string{"whypending ipam show --show-blocks  # or: calicoctl ipam show --show-blocks"}
	released := false
	if ipam != nil && len(ipam.EmptyBlockCIDRs[node]) > 0 {
		f.Fix = append(f.Fix, fmt.Sprintf("whypending ipam release-blocks %s  # prints the plan; add --yes to release", strings.Join(ipam.EmptyBlockCIDRs[node], " ")))
		released = true
	}
	if ipam != nil && ipam.LeakedIPsByNode[node] > 0 {
		f.Fix = append(f.Fix, "whypending ipam release-ips --lock  # prints the plan; add --yes to release the leaked addresses")
		released = true
	}
	if released {
		// Raising the limit is the other way out, for when releasing frees no block.
		f.Fix = append(f.Fix, fmt.Sprintf("If releasing frees no block of %s (every block the show lists holds addresses in use), raise the limit instead:", node))
	}
	f.Fix = append(f.Fix,
		fmt.Sprintf("kubectl patch ipamconfigs.crd.projectcalico.org default --type=merge -p '{\"spec\":{\"maxBlocksPerHost\":%d}}'  # raise the limit (or use a larger blockSize for the pool)", 2*limit))
}

// datastoreLockedDetail adds ClusterInformation's datastoreReady and the unlock action.
func datastoreLockedDetail(s *Snapshot, f *Finding) {
	if s.IPAM != nil && s.IPAM.DatastoreReady != nil {
		f.Evidence = append(f.Evidence, Evidence{Object: "ClusterInformation default", Field: "spec.datastoreReady", Message: fmt.Sprintf("%t", *s.IPAM.DatastoreReady)})
		if *s.IPAM.DatastoreReady {
			// Read the object the message is about: the lock is gone now, so unlocking is no fix.
			f.Summary = fmt.Sprintf("Calico's CNI refused the pod network while the Calico datastore was locked (FailedCreatePodSandBox %s), but ClusterInformation default now says datastoreReady true: the lock is lifted, so the kubelet's next sandbox retry (with back-off) should succeed.", eventSeen(s, s.newestSandboxEvent()))
			f.Fix = []string{
				fmt.Sprintf("kubectl get events %s --field-selector involvedObject.name=%s -w   # a new FailedCreatePodSandBox means the cause is elsewhere", nsFlag(s.Pod), shellQuote(s.Pod.Name)),
				"If it keeps failing with the same words, restart calico-node on the pod's node: it caches the datastore state.",
			}
			return
		}
	} else if s.IPAM == nil {
		f.Evidence = append(f.Evidence, ipamUnavailable(s))
	}
	f.Actions = append(f.Actions, ActionRef{Kind: actionUnlockDatastore, Label: "Unlock the Calico datastore"})
	f.Fix = []string{
		"kubectl get clusterinformations.crd.projectcalico.org default -o jsonpath='{.spec.datastoreReady}'",
		"If it prints false, make sure no IPAM repair or upgrade migration is still running, then unlock it, either with whypending or with calicoctl (one of the two):",
		"whypending ipam unlock",
		"calicoctl datastore migrate unlock",
	}
}

// cniFromNodeFinding reports cni-not-initialized from the node's Ready condition when the pod
// has no sandbox event yet.
func cniFromNodeFinding(s *Snapshot, node *corev1.Node) Finding {
	c := nodeReadyCondition(node)
	f := Finding{
		Code:     CodeCNINotInitialized,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("The container runtime on %s reports that its network plugin is not ready (no CNI configuration), so no pod sandbox can be created there.", node.Name),
		Evidence: []Evidence{{Object: nodeObject(node.Name), Field: "status.conditions[Ready]", Reason: c.Reason, Message: c.Message}},
		Fix: []string{
			fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s", shellQuote(node.Name)),
			fmt.Sprintf("On %s: ls /etc/cni/net.d/", shellQuote(node.Name)),
		},
	}
	return f
}

// nodeNetworkNotReady reports whether the node's Ready condition blames the network plugin.
func nodeNetworkNotReady(n *corev1.Node) bool {
	c := nodeReadyCondition(n)
	return c != nil && c.Status != corev1.ConditionTrue && containsAny(c.Message, "NetworkPluginNotReady", "cni plugin not initialized", "cni config uninitialized")
}

// nodeCalicoPod returns the calico-node pod running on node (from calico-system, where the
// Tigera operator installs it, or kube-system, where manifest installs put it) and whether it
// is ready. It returns nil when Calico does not run there.
func nodeCalicoPod(s *Snapshot, node string) (*corev1.Pod, bool) {
	var found *corev1.Pod
	for _, p := range s.CalicoNodePods {
		if p == nil || p.Spec.NodeName != node || p.DeletionTimestamp != nil {
			continue
		}
		// Prefer calico-system (operator installs) when both exist, e.g. mid-migration.
		if found == nil || p.Namespace == "calico-system" {
			found = p
		}
	}
	if found == nil {
		return nil, false
	}
	ready := found.Status.Phase == corev1.PodRunning
	if c := podCondition(found, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		ready = false
	}
	for _, c := range found.Status.ContainerStatuses {
		if !c.Ready {
			ready = false
		}
	}
	return found, ready
}

// calicoPodEvidence describes the calico-node pod's containers that are not ready.
func calicoPodEvidence(cn *corev1.Pod) []Evidence {
	var ev []Evidence
	for _, c := range containerStatuses(cn) {
		if c.Status.Ready && c.Status.State.Running != nil {
			continue
		}
		if w := c.Status.State.Waiting; w != nil {
			e := waitingEvidence(cn, c)
			e.Message = strings.TrimSpace(fmt.Sprintf("%s (restarted %d times)", e.Message, c.Status.RestartCount))
			ev = append(ev, e)
		}
		if t := c.Status.LastTerminationState.Terminated; t != nil {
			ev = append(ev, terminatedEvidence(cn, c.field("lastState.terminated"), t))
		}
		if c.Status.State.Running != nil && !c.Status.Ready {
			ev = append(ev, Evidence{Object: podObject(cn), Field: c.field("ready"), Message: "running but not ready"})
		}
	}
	if len(ev) == 0 {
		if c := podCondition(cn, corev1.PodReady); c != nil {
			ev = append(ev, Evidence{Object: podObject(cn), Field: "status.conditions[Ready]", Reason: c.Reason, Message: c.Message})
		}
	}
	return ev
}

// calicoNodeFix is what to run about a broken calico-node pod.
func calicoNodeFix(cn *corev1.Pod) []string {
	return []string{
		fmt.Sprintf("kubectl logs -n %s %s -c calico-node --previous | tail -20", shellQuote(cn.Namespace), shellQuote(cn.Name)),
		fmt.Sprintf("kubectl describe pod -n %s %s", shellQuote(cn.Namespace), shellQuote(cn.Name)),
		"If its log says the pools are exhausted, check them:",
		"whypending ipam check",
	}
}

// calicoNodeFinding reports calico-node-not-ready for the pod's node.
func calicoNodeFinding(s *Snapshot, cn *corev1.Pod, sandbox []Event) Finding {
	f := Finding{
		Code:     CodeCalicoNodeNotReady,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("calico-node on %s (%s/%s) is not ready, so Calico cannot wire up new pods there.", cn.Spec.NodeName, cn.Namespace, cn.Name),
		Evidence: calicoPodEvidence(cn),
		Fix:      calicoNodeFix(cn),
	}
	for _, c := range cn.Status.ContainerStatuses {
		if t := c.LastTerminationState.Terminated; t != nil && containsAny(t.Message, "pools are likely exhausted") {
			f.Summary += " Its last crash says the IP pools are exhausted (it cannot get a tunnel address)."
		}
	}
	if len(sandbox) > 0 && len(f.Evidence) < 4 {
		f.Evidence = append(f.Evidence, EventEvidence(s.Pod, sandbox[0]))
	}
	return f
}

// ipamUnavailable is the evidence that IPAM state could not be read.
func ipamUnavailable(s *Snapshot) Evidence {
	msg := "Calico IPAM state was not read"
	if s.IPAMErr != nil {
		msg = "Calico IPAM state could not be read: " + s.IPAMErr.Error()
	}
	return Evidence{Object: "Calico IPAM", Message: msg}
}

// poolEvidence is one line per enabled IPPool with its usage.
func poolEvidence(ipam *IPAMState) []Evidence {
	var ev []Evidence
	for _, p := range ipam.Pools {
		if p.Total == 0 {
			continue
		}
		msg := fmt.Sprintf("%s: %d of %d addresses allocated (%d%%)", p.CIDR, p.InUse, p.Total, 100*p.InUse/p.Total)
		if p.Disabled {
			msg += "; disabled"
		}
		ev = append(ev, Evidence{Object: "IPPool " + p.Name, Message: msg})
	}
	return ev
}

// maxLeakNodes is how many nodes leakEvidence names; a large cluster leaks on hundreds.
const maxLeakNodes = 10

// leakEvidence counts leaked allocations cluster-wide and by node, largest first: the first
// maxLeakNodes nodes, podNode (the asked-about pod's node) when it leaks and is not among
// them, then how many more.
func leakEvidence(ipam *IPAMState, podNode string) Evidence {
	type kv struct {
		node string
		n    int
	}
	var byNode []kv
	for n, c := range ipam.LeakedIPsByNode {
		if c > 0 {
			byNode = append(byNode, kv{n, c})
		}
	}
	sort.Slice(byNode, func(i, j int) bool {
		if byNode[i].n != byNode[j].n {
			return byNode[i].n > byNode[j].n
		}
		return byNode[i].node < byNode[j].node
	})
	var parts []string
	shown := byNode[:min(len(byNode), maxLeakNodes)]
	for _, b := range shown {
		parts = append(parts, fmt.Sprintf("%s %d", b.node, b.n))
	}
	more := len(byNode) - len(shown)
	if n := ipam.LeakedIPsByNode[podNode]; n > 0 && !slices.ContainsFunc(shown, func(b kv) bool { return b.node == podNode }) {
		parts = append(parts, fmt.Sprintf("%s (the pod's node) %d", podNode, n))
		more--
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more %s (whypending ipam check --show-problem-ips lists every address)", more, plural(more, "node", "nodes")))
	}
	msg := fmt.Sprintf("%d %s allocated in IPAM but not in use by any pod or node", ipam.LeakedIPs, plural(ipam.LeakedIPs, "address", "addresses"))
	if len(parts) > 0 {
		msg += " (by block affinity: " + strings.Join(parts, ", ") + ")"
	}
	return Evidence{Object: "Calico IPAM", Field: "allocations", Message: msg}
}

// nodeBlockEvidence is the pod's node's affine block count against the limit.
func nodeBlockEvidence(s *Snapshot, ipam *IPAMState) Evidence {
	node := s.Pod.Spec.NodeName
	n := ipam.NodeBlocks[node]
	msg := fmt.Sprintf("%d affine %s (maxBlocksPerHost %d)", n, plural(n, "block", "blocks"), effectiveMaxBlocks(ipam))
	if e := ipam.EmptyBlocksByNode[node]; e > 0 {
		msg += fmt.Sprintf(", %d of them empty", e)
	}
	return Evidence{Object: nodeObject(node), Field: "BlockAffinity", Message: msg}
}

// calicoDefaultMaxBlocksPerHost is Calico's limit when IPAMConfig leaves maxBlocksPerHost at 0
// (calico.DefaultMaxBlocksPerHost; rules do not import package calico).
const calicoDefaultMaxBlocksPerHost = 20

// effectiveMaxBlocks is IPAMState.MaxBlocksPerHost, or Calico's default when unset.
func effectiveMaxBlocks(ipam *IPAMState) int {
	if ipam.MaxBlocksPerHost > 0 {
		return ipam.MaxBlocksPerHost
	}
	return calicoDefaultMaxBlocksPerHost
}

// blockAddrs is the number of addresses in an IPv4 block of the given prefix length.
func blockAddrs(prefix int) int {
	if prefix < 0 || prefix > 32 {
		return 0
	}
	return 1 << (32 - prefix)
}

// freeAddresses counts the unallocated addresses of the enabled pools.
func freeAddresses(ipam *IPAMState) int {
	free := 0
	for _, p := range ipam.Pools {
		if !p.Disabled && p.Total > p.InUse {
			free += p.Total - p.InUse
		}
	}
	return free
}

// windowsStrictAffinityDetail explains calico-windows-strict-affinity: Calico's IPAM hands a
// Windows node addresses only from blocks affine to it, so strictAffinity must be true. It
// reads IPAMConfig default (IPAMState.StrictAffinity) to say whether that is still so.
func windowsStrictAffinityDetail(s *Snapshot, e Event, f *Finding) {
	node := s.Pod.Spec.NodeName
	f.Summary = fmt.Sprintf("Calico's CNI on Windows node %s refuses to set up the pod network because IPAM strictAffinity is false (%s %s): Windows nodes may only use address blocks affine to them, so Calico requires strictAffinity true in IPAMConfig default.", node, e.Reason, eventSeen(s, e))
	switch {
	case s.IPAM == nil:
		f.Evidence = append(f.Evidence, ipamUnavailable(s))
	case s.IPAM.StrictAffinity:
		f.Summary += " IPAMConfig default now says strictAffinity true, so the setting was changed since: the kubelet's next sandbox retry should succeed (restart calico-node on the node if it does not)."
		f.Evidence = append(f.Evidence, Evidence{Object: "IPAMConfig default", Field: "spec.strictAffinity", Message: "true"})
	default:
		f.Evidence = append(f.Evidence, Evidence{Object: "IPAMConfig default", Field: "spec.strictAffinity", Message: "false"})
	}
	if n := s.Node(node); n != nil {
		f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node), Field: "status.nodeInfo.operatingSystem", Message: orUnknown(n.Status.NodeInfo.OperatingSystem)})
	}
	// Where the setting lives (the Tigera operator's resources, or IPAMConfig itself) decides
	// how to change it: the look comes first.
	f.Fix = []string{
		"kubectl get installations.operator.tigera.io   # found: the Tigera operator manages Calico",
		"Either, with the Tigera operator, set strictAffinity where the operator keeps it (Installation spec.calicoNetwork, or the IPAMConfiguration resource), or it is set back; or, without it, set it in IPAMConfig default:",
		"kubectl patch ipamconfigs.crd.projectcalico.org default --type=merge -p '{\"spec\":{\"strictAffinity\":true}}'   # or: calicoctl ipam configure --strictaffinity=true",
		fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s | grep -i calico   # restart calico-node on the Windows node if the retry still fails", shellQuote(node)),
	}
}

// newestSandboxEvent is the newest FailedCreatePodSandBox event of the pod (zero when none).
func (s *Snapshot) newestSandboxEvent() Event {
	for _, e := range eventsWithReason(s, "FailedCreatePodSandBox", "FailedCreatePodSandbox") {
		return e
	}
	return Event{}
}
