package triage

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// nodeLostReason is the status.reason the node controller sets on pods of an unresponsive
// node (kubectl shows them as Unknown).
const nodeLostReason = "NodeLost"

// evictedReason is the status.reason the kubelet sets when it evicts a pod under node pressure.
const evictedReason = "Evicted"

// evictedRules explains pods the kubelet evicted (evicted: node pressure, naming the resource
// and the node condition, or the pod's own ephemeral-storage limit; see parseEviction) and pods
// on a node the node controller gave up on (node-lost).
func evictedRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil {
		return nil
	}
	switch {
	case pod.Status.Reason == evictedReason:
		return []Finding{evictedFinding(s)}
	case pod.Status.Reason == nodeLostReason || pod.Status.Phase == corev1.PodUnknown:
		return []Finding{nodeLostFinding(s)}
	}
	return nil
}

// lostOrEvicted reports whether evictedRules explains the pod; its container states are then
// stale (NodeLost) or the result of the eviction, not causes of their own.
func lostOrEvicted(pod *corev1.Pod) bool {
	return pod.Status.Reason == evictedReason || pod.Status.Reason == nodeLostReason || pod.Status.Phase == corev1.PodUnknown
}

// evictionScope is whose limit an eviction enforced.
type evictionScope int

const (
	// evictionUnknown: the message names neither node pressure nor a limit.
	evictionUnknown evictionScope = iota
	// evictionNodePressure: the node ran low on a resource and the kubelet ranked this pod
	// first ("The node was low on resource: …").
	evictionNodePressure
	// evictionAdmission: the node had a pressure condition when the pod arrived ("The node had
	// condition: [DiskPressure]").
	evictionAdmission
	// evictionOwnLimit: the pod exceeded its own ephemeral-storage limit (the pod's total, a
	// container's, or an emptyDir's sizeLimit), whatever the node had free.
	evictionOwnLimit
)

// eviction is what the kubelet's eviction message says.
type eviction struct {
	scope evictionScope
	// resource is the resource the node ran low on: "memory", "ephemeral-storage", "pids",
	// "inodes", or an old kubelet's "nodefs"/"imagefs".
	resource string
	// condition is the node condition of that pressure: MemoryPressure, DiskPressure or
	// PIDPressure ("" when unknown).
	condition string
	// threshold and available are the eviction threshold and what was left ("" when not said).
	threshold, available string
	// usage lists the containers the message names with their usage and request.
	usage []containerUsage
	// limit and limitOf are, for evictionOwnLimit, the limit exceeded and whose it is ("the
	// pod's containers together", `container "app"`, `emptyDir volume "cache"`); container is
	// the container's name when the limit is one container's.
	limit, limitOf, container string
}

// containerUsage is one "Container app was using 5Gi, request is 0" clause.
type containerUsage struct{ name, used, request string }

var (
	// kubelet eviction manager (pkg/kubelet/eviction/helpers.go), all versions since 1.9.
	reNodeLow        = regexp.MustCompile(`The node was low on resource: \[?([A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)*)\]?`)
	reNodeCondition  = regexp.MustCompile(`The node had condition: \[?([\w, ]+?)\]?\.`)
	reThreshold      = regexp.MustCompile(`Threshold quantity: ([^,]+), available: (\S+?)\.?(?:\s|$)`)
	reUsage          = regexp.MustCompile(`Container (\S+) was using (\S+?),? (?:which exceeds its request of|request is) (\S+?)[.,]`)
	rePodStorage     = regexp.MustCompile(`Pod ephemeral local storage usage exceeds the total limit of containers (\S+?)\.?(?:\s|$)`)
	reContainerLimit = regexp.MustCompile(`Container (\S+) exceeded its local ephemeral storage limit "([^"]+)"`)
	reEmptyDirLimit  = regexp.MustCompile(`Usage of EmptyDir volume "([^"]+)" exceeds the limit "([^"]+)"`)
)

// parseEviction reads a kubelet eviction message (status.message, the Evicted event, the
// DisruptionTarget condition): node pressure with the resource, threshold and the containers
// over their requests, or the pod's own ephemeral-storage limit, or the node's condition at
// admission.
func parseEviction(msg string) eviction {
	var e eviction
	switch {
	case rePodStorage.MatchString(msg):
		e.scope, e.resource, e.limitOf = evictionOwnLimit, "ephemeral-storage", "the pod's containers together"
		e.limit = rePodStorage.FindStringSubmatch(msg)[1]
	case reContainerLimit.MatchString(msg):
		m := reContainerLimit.FindStringSubmatch(msg)
		e.scope, e.resource, e.limitOf, e.limit, e.container = evictionOwnLimit, "ephemeral-storage", fmt.Sprintf("container %q", m[1]), m[2], m[1]
	case reEmptyDirLimit.MatchString(msg):
		m := reEmptyDirLimit.FindStringSubmatch(msg)
		e.scope, e.resource, e.limitOf, e.limit = evictionOwnLimit, "ephemeral-storage", fmt.Sprintf("emptyDir volume %q", m[1]), m[2]
	case reNodeLow.MatchString(msg):
		e.scope, e.resource = evictionNodePressure, reNodeLow.FindStringSubmatch(msg)[1]
	case reNodeCondition.MatchString(msg):
		e.scope, e.condition = evictionAdmission, strings.TrimSpace(reNodeCondition.FindStringSubmatch(msg)[1])
	}
	if m := reThreshold.FindStringSubmatch(msg); m != nil {
		e.threshold, e.available = strings.TrimSpace(m[1]), m[2]
	}
	for _, m := range reUsage.FindAllStringSubmatch(msg, -1) {
		e.usage = append(e.usage, containerUsage{name: m[1], used: m[2], request: m[3]})
	}
	if e.condition == "" {
		e.condition = pressureCondition(e.resource)
	}
	return e
}

// pressureCondition is the node condition the kubelet sets when it runs low on resource.
func pressureCondition(resource string) string {
	switch strings.ToLower(resource) {
	case "memory", "allocatablememory":
		return string(corev1.NodeMemoryPressure)
	case "ephemeral-storage", "nodefs", "imagefs", "containerfs", "inodes", "diskpressure":
		return string(corev1.NodeDiskPressure)
	case "pids":
		return string(corev1.NodePIDPressure)
	case "memorypressure":
		return string(corev1.NodeMemoryPressure)
	case "pidpressure":
		return string(corev1.NodePIDPressure)
	}
	return ""
}

// evictionMessage is the pod's eviction message: status.message, else the DisruptionTarget
// condition's, else the newest Evicted event's.
func evictionMessage(s *Snapshot) string {
	pod := s.Pod
	if m := strings.TrimSpace(pod.Status.Message); m != "" {
		return m
	}
	if c := podCondition(pod, corev1.DisruptionTarget); c != nil && c.Message != "" {
		return c.Message
	}
	for _, e := range eventsWithReason(s, "Evicted") {
		return e.Message
	}
	return ""
}

// evictedFinding reports evicted: node pressure (which resource, which node condition, the
// containers over their requests) or the pod's own ephemeral-storage limit, each with its fix.
func evictedFinding(s *Snapshot) Finding {
	pod := s.Pod
	node := orUnknown(pod.Spec.NodeName)
	e := parseEviction(evictionMessage(s))
	f := Finding{
		Code:     CodeEvicted,
		Severity: SeverityBlocker,
		Evidence: []Evidence{{Object: podObject(pod), Field: "status.reason", Reason: pod.Status.Reason, Message: strings.TrimSpace(pod.Status.Message)}},
	}
	if c := podCondition(pod, corev1.DisruptionTarget); c != nil {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "status.conditions[DisruptionTarget]", Reason: c.Reason, Message: c.Message, LastSeen: c.LastTransitionTime.Time})
	}
	for _, ev := range eventsWithReason(s, "Evicted") {
		f.Evidence = append(f.Evidence, EventEvidence(pod, ev))
	}
	f.Evidence = append(f.Evidence, pressureEvidence(s, e.condition)...)
	gone := " An evicted pod never restarts; its controller (if any) makes a new one."
	switch e.scope {
	case evictionOwnLimit:
		f.Summary = fmt.Sprintf("The kubelet on %s evicted the pod because it used more local ephemeral storage than its own limit (%s of %s). This is the pod's limit, not node pressure.", node, e.limit, e.limitOf) + gone
		f.Evidence = append(f.Evidence, storageLimitEvidence(pod)...)
		f.Fix = ownLimitFix(pod, e)
		if e.container == "" && !strings.HasPrefix(e.limitOf, "emptyDir") && !hasStorageLimit(pod) {
			// The message and the spec disagree: say so rather than name a limit that is not there.
			f.Uncertain = true
			f.Summary += " But no container in the spec read here sets limits.ephemeral-storage, so which limit applied is not known."
		}
	case evictionNodePressure:
		f.Summary = fmt.Sprintf("The kubelet on %s evicted the pod because the node ran low on %s%s%s.", node, e.resource, conditionClause(s, e.condition), thresholdClause(e))
		if u := usageClause(e); u != "" {
			f.Summary += " " + u
		}
		f.Summary += " This is node pressure, not a limit of the pod's own." + gone
		f.Fix = nodePressureFix(s, e)
	case evictionAdmission:
		f.Summary = fmt.Sprintf("The kubelet on %s rejected the pod when it arrived because the node had %s%s; the pod never ran there.", node, e.condition, conditionNow(s, firstCondition(e.condition))) + gone
		f.Fix = nodePressureFix(s, e)
	default:
		f.Summary = fmt.Sprintf("The kubelet on %s evicted the pod; its message does not say which resource ran short.", node) + gone
		f.Fix = []string{fmt.Sprintf("kubectl describe node %s | grep -A8 Conditions", shellQuote(pod.Spec.NodeName))}
	}
	f.Fix = append(f.Fix, fmt.Sprintf("kubectl delete pod %s %s  # evicted pods stay as records until deleted", nsFlag(pod), shellQuote(pod.Name)))
	return f
}

// firstCondition is the first of a comma-separated condition list ("DiskPressure, PIDPressure").
func firstCondition(c string) string {
	first, _, _ := strings.Cut(c, ",")
	return strings.TrimSpace(first)
}

// conditionClause is " (the DiskPressure condition, True now)" for the node's condition.
func conditionClause(s *Snapshot, condition string) string {
	if condition == "" {
		return ""
	}
	return fmt.Sprintf(" (the %s condition%s)", condition, conditionNow(s, condition))
}

// conditionNow says whether the node's condition is set now, from its status.conditions: ",
// True now", ", cleared 12m ago", or "" when the node was not read.
func conditionNow(s *Snapshot, condition string) string {
	n := s.Node(s.Pod.Spec.NodeName)
	if n == nil || condition == "" {
		return ""
	}
	for _, c := range n.Status.Conditions {
		if string(c.Type) != condition {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ", True now"
		}
		if !c.LastTransitionTime.IsZero() {
			return fmt.Sprintf(", cleared %s ago", FormatAge(age(s, c.LastTransitionTime.Time)))
		}
		return ", not set now"
	}
	return ""
}

// thresholdClause is "; threshold 10Gi, 2Gi available" when the message says.
func thresholdClause(e eviction) string {
	if e.threshold == "" {
		return ""
	}
	return fmt.Sprintf("; threshold %s, %s available", e.threshold, e.available)
}

// usageClause names the containers over their requests, which is why this pod went first.
func usageClause(e eviction) string {
	if len(e.usage) == 0 {
		return ""
	}
	var parts []string
	for _, u := range e.usage {
		parts = append(parts, fmt.Sprintf("container %q was using %s against a request of %s", u.name, u.used, u.request))
	}
	return capitalize(strings.Join(parts, "; ")) + ": pods using more than they request are evicted first."
}

// pressureEvidence is the node's pressure conditions that are True now, and the condition the
// eviction names even when it has cleared.
func pressureEvidence(s *Snapshot, condition string) []Evidence {
	n := s.Node(s.Pod.Spec.NodeName)
	if n == nil {
		return nil
	}
	var ev []Evidence
	for _, c := range n.Status.Conditions {
		named := condition != "" && strings.Contains(condition, string(c.Type))
		if c.Status == corev1.ConditionTrue && strings.HasSuffix(string(c.Type), "Pressure") || named {
			ev = append(ev, Evidence{Object: nodeObject(n.Name), Field: "status.conditions[" + string(c.Type) + "]", Reason: c.Reason,
				Message: fmt.Sprintf("%s since %s ago: %s", c.Status, FormatAge(age(s, c.LastTransitionTime.Time)), c.Message), LastSeen: c.LastTransitionTime.Time})
		}
	}
	return ev
}

// storageLimitEvidence lists the pod's ephemeral-storage limits and emptyDir size limits.
func storageLimitEvidence(pod *corev1.Pod) []Evidence {
	var ev []Evidence
	for _, c := range containerStatuses(pod) {
		if c.Spec == nil {
			continue
		}
		msg := "no ephemeral-storage limit"
		if q, ok := c.Spec.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			msg = "limit " + q.String()
		}
		if q, ok := c.Spec.Resources.Requests[corev1.ResourceEphemeralStorage]; ok {
			msg += ", request " + q.String()
		}
		ev = append(ev, Evidence{Object: podObject(pod), Field: c.specField("resources"), Message: "ephemeral-storage: " + msg})
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			ev = append(ev, Evidence{Object: podObject(pod), Field: "spec.volumes[" + v.Name + "].emptyDir.sizeLimit", Message: v.EmptyDir.SizeLimit.String()})
		}
	}
	return ev
}

// runtimeDataDir is where the container runtime of systemd unit keeps images and writable layers.
func runtimeDataDir(unit string) string {
	switch unit {
	case "crio":
		return "/var/lib/containers"
	case "docker":
		return "/var/lib/docker"
	}
	return "/var/lib/containerd"
}

// hasStorageLimit reports whether any container of the pod sets limits.ephemeral-storage.
func hasStorageLimit(pod *corev1.Pod) bool {
	for _, c := range containerStatuses(pod) {
		if c.Spec != nil {
			if _, ok := c.Spec.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	return false
}

// ownLimitFix raises the limit the pod exceeded, where it is set, or makes it write less.
func ownLimitFix(pod *corev1.Pod, e eviction) []string {
	var limited []string
	for _, c := range containerStatuses(pod) {
		if c.Spec != nil {
			if _, ok := c.Spec.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
				limited = append(limited, c.Status.Name)
			}
		}
	}
	var fix []string
	switch {
	case strings.HasPrefix(e.limitOf, "emptyDir"):
		fix = append(fix, fmt.Sprintf("Raise the sizeLimit of %s (now %s), or write less there; data that must outgrow it belongs on a PersistentVolumeClaim.", e.limitOf, e.limit))
	case len(limited) == 0:
		fix = append(fix, fmt.Sprintf("kubectl get pod %s %s -o jsonpath='{range .spec.containers[*]}{.name}: {.resources.limits}{\"\\n\"}{end}'  # the spec read here sets no ephemeral-storage limit, which the message contradicts", shellQuote(pod.Name), nsFlag(pod)),
			fmt.Sprintf("kubectl get limitrange %s  # a LimitRange default sets limits at admission", nsFlag(pod)))
	default:
		target, container := "the containers' limits.ephemeral-storage", limited[0]
		if e.container != "" {
			target, container = "limits.ephemeral-storage of "+e.limitOf, e.container
		}
		fix = append(fix, fmt.Sprintf("Raise %s (the limit was %s; set on %s), or write less to the container filesystem, logs and emptyDir volumes.", target, e.limit, strings.Join(limited, ", ")))
		if more := doubled(e.limit); more != "" {
			fix = append(fix, setResourcesFix(pod, container, "--limits=ephemeral-storage="+more, "limits.ephemeral-storage (twice the "+e.limit+" it exceeded)"))
		}
	}
	return fix
}

// nodePressureFix relieves the node and sets the pod's requests so it is not ranked first.
func nodePressureFix(s *Snapshot, e eviction) []string {
	pod := s.Pod
	node := shellQuote(pod.Spec.NodeName)
	fix := []string{fmt.Sprintf("kubectl describe node %s | grep -A8 Conditions", node)}
	containers := "the containers"
	if len(e.usage) > 0 {
		var names []string
		for _, u := range e.usage {
			names = append(names, u.name)
		}
		containers = strings.Join(names, ", ")
	}
	switch {
	case strings.Contains(e.condition, "DiskPressure"):
		fix = append(fix,
			fmt.Sprintf("On %s: df -h /var/lib/kubelet %s /var/log   # which filesystem is full", node, runtimeDataDir(runtimeUnit(s))),
			fmt.Sprintf("On %s: crictl rmi --prune  # free the node's disk (unused images, logs) or give it a larger one", node),
			fmt.Sprintf("Set resources.requests.ephemeral-storage on %s to what they really write: a pod using more than it requests is evicted first, and with a request the scheduler places it where the disk fits.", containers))
	case strings.Contains(e.condition, "MemoryPressure"):
		fix = append(fix,
			fmt.Sprintf("kubectl top pod -A --sort-by=memory | head  # who uses the memory of %s (needs metrics-server)", node),
			fmt.Sprintf("Set memory requests of %s close to real usage (pods using more than they request are evicted first), or add memory to the node.", containers))
	case strings.Contains(e.condition, "PIDPressure"):
		fix = append(fix, "Find the process that forks without bound; cap it with the kubelet's podPidsLimit.")
	}
	return fix
}

// nodeLostFinding reports node-lost: the node controller marked the pod Unknown/NodeLost because
// its node stopped reporting.
func nodeLostFinding(s *Snapshot) Finding {
	pod := s.Pod
	f := Finding{
		Code:     CodeNodeLost,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("The pod's node %s stopped responding, so the node controller marked the pod %s; nothing about it can change until the node returns or the pod is force-deleted.", orUnknown(pod.Spec.NodeName), PodState(pod)),
		Evidence: []Evidence{{Object: podObject(pod), Field: "status.reason", Reason: pod.Status.Reason, Message: strings.TrimSpace(pod.Status.Message)}},
	}
	if pod.DeletionTimestamp != nil {
		del := deletionOf(s)
		f.Summary = fmt.Sprintf("The pod's node %s stopped responding (NodeLost); the pod was %s, but only that node's kubelet could confirm it, so it stays until the node returns or the pod is force-deleted.", orUnknown(pod.Spec.NodeName), del.describe(s))
		f.Evidence = append(f.Evidence, del.evidence(s))
	}
	if node := s.Node(pod.Spec.NodeName); node != nil {
		if c := nodeReadyCondition(node); c != nil {
			f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node.Name), Field: "status.conditions[Ready]", Reason: c.Reason,
				Message: fmt.Sprintf("status %s: %s (last heartbeat %s ago)", c.Status, c.Message, FormatAge(age(s, c.LastHeartbeatTime.Time))), LastSeen: c.LastHeartbeatTime.Time})
		}
	} else if pod.Spec.NodeName != "" {
		f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(pod.Spec.NodeName), Message: "the node object no longer exists"})
	}
	for _, e := range eventsWithReason(s, "NodeNotReady", "NodeLost") {
		f.Evidence = append(f.Evidence, EventEvidence(pod, e))
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl describe node %s", shellQuote(pod.Spec.NodeName)),
		fmt.Sprintf("kubectl delete pod %s %s --grace-period=0 --force  # once you know the node is down: %s", nsFlag(pod), shellQuote(pod.Name), replacement(pod)),
		fmt.Sprintf("kubectl delete node %s  # if the machine is gone for good", shellQuote(pod.Spec.NodeName)),
	}
	return f
}

// orUnknown returns s, or "(unknown node)" when it is empty.
func orUnknown(s string) string {
	if s == "" {
		return "(unknown node)"
	}
	return s
}
