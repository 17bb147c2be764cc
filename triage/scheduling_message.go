package triage

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// SchedulerMessage is the kube-scheduler's own verdict, parsed from a FailedScheduling event:
// "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu.
// preemption: 0/3 nodes are available: …". The scheduler counts each node once, under the
// first filter plugin that rejected it (FitError.Error in the scheduler's framework/types.go).
type SchedulerMessage struct {
	// Event is the FailedScheduling event the message came from.
	Event Event
	// Total is N in "0/N nodes are available"; -1 when the message has no such prefix.
	Total int
	// Reasons are the per-node reason counts, in the scheduler's (sorted) order.
	Reasons []SchedulerReason
	// PodLevel is the reason a PreFilter plugin gave for every node at once ("pod has unbound
	// immediate PersistentVolumeClaims", `persistentvolumeclaim "data" not found`), with Code
	// set when it maps to one.
	PodLevel *SchedulerReason
}

// SchedulerReason is one "<count> <reason>" entry, mapped to a code (empty when unknown).
type SchedulerReason struct {
	Count int
	Text  string
	Code  Code
}

var (
	availableRE = regexp.MustCompile(`^0/(\d+) nodes are available:?\s*(.*)$`)
	countRE     = regexp.MustCompile(`^(\d+) (.+)$`)
)

// ParseSchedulerMessage parses the message of a FailedScheduling event. ok is false when the
// message is not a "0/N nodes are available" or "no nodes available" line.
func ParseSchedulerMessage(e Event) (SchedulerMessage, bool) {
	msg := strings.TrimSpace(e.Message)
	m := SchedulerMessage{Event: e, Total: -1}
	if strings.HasPrefix(msg, "no nodes available to schedule pods") {
		m.Total = 0
		return m, true
	}
	// The reasons end with the first ". "; what follows is a post-script (preemption's own
	// counts, or a bare error such as "not found").
	if i := strings.Index(msg, ". "); i >= 0 {
		msg = msg[:i]
	}
	sm := availableRE.FindStringSubmatch(msg)
	if sm == nil {
		return m, false
	}
	m.Total, _ = strconv.Atoi(sm[1])
	body := strings.TrimSuffix(strings.TrimSpace(sm[2]), ".")
	if body == "" {
		return m, true
	}
	for _, part := range splitReasons(body) {
		if cm := countRE.FindStringSubmatch(part); cm != nil {
			n, _ := strconv.Atoi(cm[1])
			m.Reasons = append(m.Reasons, SchedulerReason{Count: n, Text: cm[2], Code: reasonCode(cm[2])})
			continue
		}
		// A PreFilter message applies to every node and carries no count.
		m.PodLevel = &SchedulerReason{Count: m.Total, Text: part, Code: reasonCode(part)}
	}
	return m, true
}

// splitReasons splits "1 a, 2 b {k: v}, that the pod didn't tolerate" at the ", " that start a
// new counted reason; other commas stay inside their reason.
func splitReasons(body string) []string {
	var out []string
	for _, piece := range strings.Split(body, ", ") {
		if len(out) > 0 && !countRE.MatchString(piece) {
			out[len(out)-1] += ", " + piece
			continue
		}
		out = append(out, piece)
	}
	return out
}

// Counts returns the scheduler's node count per code (a PreFilter reason counts for every node).
func (m SchedulerMessage) Counts() map[Code]int {
	out := map[Code]int{}
	for _, r := range m.Reasons {
		if r.Code != "" {
			out[r.Code] += r.Count
		}
	}
	if m.PodLevel != nil && m.PodLevel.Code != "" {
		out[m.PodLevel.Code] += max(m.Total, 1)
	}
	return out
}

// topCode is the code the scheduler counted on the most nodes (ties: scheduling order).
func (m SchedulerMessage) topCode() Code {
	counts := m.Counts()
	var codes []Code
	for c := range counts {
		codes = append(codes, c)
	}
	sort.Slice(codes, func(i, j int) bool {
		if counts[codes[i]] != counts[codes[j]] {
			return counts[codes[i]] > counts[codes[j]]
		}
		return codeRank(codes[i]) < codeRank(codes[j])
	})
	if len(codes) == 0 {
		return ""
	}
	return codes[0]
}

// ConditionSchedulerMessage parses the message of the pod's PodScheduled condition when it is
// False with reason Unschedulable: the scheduler writes the same "0/N nodes are available"
// line there as in its FailedScheduling event, and the condition can be read by anyone who may
// get the pod (events may be refused, or expired). The message's Event holds the condition's
// reason and message, with no times.
func ConditionSchedulerMessage(pod *corev1.Pod) (SchedulerMessage, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return ParseSchedulerMessage(Event{Type: corev1.EventTypeWarning, Reason: c.Reason, Message: c.Message})
		}
	}
	return SchedulerMessage{}, false
}

// LatestSchedulerMessage parses the newest parseable FailedScheduling event in events (sorted
// newest first, as Snapshot.Events is).
func LatestSchedulerMessage(events []Event) (SchedulerMessage, bool) {
	for _, e := range events { // newest first
		if e.Reason != "FailedScheduling" {
			continue
		}
		if m, ok := ParseSchedulerMessage(e); ok {
			return m, true
		}
	}
	return SchedulerMessage{}, false
}
