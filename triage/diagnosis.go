package triage

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Diagnosis is the answer to "why is this pod stuck?".
type Diagnosis struct {
	// Pod names the pod diagnosed (from the pod's metadata; UID is empty for pod-not-found).
	Pod PodRef `json:"pod"`
	// Phase is status.phase of the pod ("" for pod-not-found).
	Phase corev1.PodPhase `json:"phase,omitempty"`
	// State is what `kubectl get pod` shows in its STATUS column: "Pending",
	// "ContainerCreating", "CrashLoopBackOff", "Init:0/1", "Terminating", "Evicted", ….
	State string `json:"state,omitempty"`
	// Node is spec.nodeName ("" when unscheduled).
	Node string `json:"node,omitempty"`
	// Summary is one sentence for a person: the primary cause in words.
	Summary string `json:"summary"`
	// Uncertain is true when the primary cause is not sure: no rule found a blocker
	// (Findings[0] is then CodeUnknown), or the primary finding is itself Uncertain (the
	// evidence conflicts, or the blocking reason is one the rules do not model). Summary then
	// says so, and the evidence shows what the cluster says.
	Uncertain bool `json:"uncertain,omitempty"`
	// Findings holds the primary cause first, then context findings. Never empty.
	Findings []Finding `json:"findings"`
	// Partial is true when the API server refused some reads (Refused): the answer rests on
	// what could be read, and the primary finding lists the refused reads.
	Partial bool `json:"partial,omitempty"`
	// Refused are the reads the API server refused (403 Forbidden), in the order they were made.
	Refused []RefusedRead `json:"refused,omitempty"`
	// Events are all of the pod's events, newest first (see Event.LastSeen).
	Events []Event `json:"events,omitempty"`
	// CollectedAt is when the Snapshot behind this diagnosis was taken.
	CollectedAt time.Time `json:"collectedAt"`
}

// Primary returns the primary finding (Findings[0]).
func (d *Diagnosis) Primary() Finding { return primary(d.Findings) }

// primary is findings[0], or an info-level unknown when there are none.
func primary(findings []Finding) Finding {
	if len(findings) == 0 {
		return Finding{Code: CodeUnknown, Severity: SeverityInfo}
	}
	return findings[0]
}

// PodRef identifies a pod.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// Finding is one cause (or one piece of context) with its evidence and fix.
type Finding struct {
	// Code is the stable slug from docs/triage-codes.md.
	Code Code `json:"code"`
	// Severity tells how much this finding blocks the pod.
	Severity Severity `json:"severity"`
	// Summary is one sentence rendered from the evidence. An Uncertain finding's Summary says
	// what is not known.
	Summary string `json:"summary"`
	// Uncertain is true when the rule is not sure of this cause: the evidence conflicts, two
	// readings fit it equally (each is then its own finding), or the blocking reason is one the
	// rules do not model. A sure finding never has it set.
	Uncertain bool `json:"uncertain,omitempty"`
	// Evidence is what the finding rests on: events, container states, fields.
	Evidence []Evidence `json:"evidence,omitempty"`
	// Fix holds steps for the operator, in order; entries that start with a command (kubectl,
	// calicoctl, whypending, …), or "On NODE: " and a command to run on that node, can be
	// pasted into a shell, and the rest are prose, never with a command run into a sentence.
	// ParseFixStep tells them apart. A person pastes them top to bottom, so they come in the
	// order look (read-only commands that confirm the cause), decide (prose that says which case
	// applies), change, verify; two changes that are alternatives say so ("Either … Or …")
	// before the first. A fix with a read-only command starts with one (TestFixLooksBeforeItActs
	// in triage/collect checks it, with the rules allowed otherwise and why).
	Fix []string `json:"fix,omitempty"`
	// Actions are remediations the bot can run behind an approval.
	Actions []ActionRef `json:"actions,omitempty"`
	// Nodes is the per-node "why not here" table (scheduling findings only), one row per node,
	// sorted by node name.
	Nodes []NodeVerdict `json:"nodes,omitempty"`
}

// Evidence is one observed fact. Object and Field say where it was read.
type Evidence struct {
	// Object is "Kind namespace/name" or "Kind name" of the object the fact was read from.
	Object string `json:"object,omitempty"`
	// Field is the field path read, e.g. "status.containerStatuses[app].lastState.terminated".
	Field string `json:"field,omitempty"`
	// Reason is the event reason or the waiting/terminated reason, e.g. "FailedScheduling".
	Reason string `json:"reason,omitempty"`
	// Message is the event message or the state message, verbatim.
	Message string `json:"message,omitempty"`
	// Count is how many times an event was seen (0 when not an event).
	Count int32 `json:"count,omitempty"`
	// LastSeen is when an event was last seen (zero when not an event).
	LastSeen time.Time `json:"lastSeen,omitzero"`
}

// ActionRef offers a remediation the bot can plan and run behind an approval.
type ActionRef struct {
	// Kind is the actions package's name for the operation: "release-leaked-ips",
	// "release-empty-blocks".
	Kind string `json:"kind"`
	// Label is the button text, e.g. "Release 181 leaked IPs".
	Label string `json:"label"`
	// Args narrow the action (e.g. "node": "worker-2"); empty means cluster-wide.
	Args map[string]string `json:"args,omitempty"`
}

// NodeVerdict says whether the pod fits one node and, if not, every reason why not.
type NodeVerdict struct {
	Node    string       `json:"node"`
	Fits    bool         `json:"fits"`
	Reasons []NodeReason `json:"reasons,omitempty"`
}

// NodeReason is one reason a node rejects the pod. For resources, Requested, Used and
// Allocatable are in the resource's base unit (millicores for cpu, bytes for memory and
// ephemeral-storage, a count for pods and extended resources).
type NodeReason struct {
	// Code is the scheduling code this reason maps to (insufficient-cpu, untolerated-taint, …).
	Code Code `json:"code"`
	// Message is the short human reason, e.g. "taint node-role.kubernetes.io/control-plane:NoSchedule".
	Message string `json:"message"`
	// Resource is the resource name for resource shortfalls ("cpu", "nvidia.com/gpu"), or the
	// CSI driver for volume-attach-limit ("ebs.csi.aws.com").
	Resource string `json:"resource,omitempty"`
	// Requested is what the pod requests (base unit).
	Requested int64 `json:"requested,omitempty"`
	// Used is what pods already bound to the node request (base unit).
	Used int64 `json:"used,omitempty"`
	// Allocatable is status.allocatable of the node (base unit); for volume-attach-limit, the
	// CSINode's allocatable count for the driver named in Resource.
	Allocatable int64 `json:"allocatable,omitempty"`
	// FromScheduler is true when the reason is the kube-scheduler's own verdict that the rules
	// do not reproduce: the scheduler's latest FailedScheduling message counts a rejection the
	// model found no reason for, so it is given to this node verbatim (Code is the reason's
	// code, or unknown when the rules do not model that reason). Such a node never counts as
	// fitting.
	FromScheduler bool `json:"fromScheduler,omitempty"`
}

// Severity ranks findings. It marshals to JSON by name.
type Severity int

const (
	// SeverityBlocker means the pod cannot make progress until this is fixed.
	SeverityBlocker Severity = iota
	// SeverityWarning means this likely hurts the pod or will soon.
	SeverityWarning
	// SeverityInfo is context only.
	SeverityInfo
)

var severityNames = []string{"blocker", "warning", "info"}

func (s Severity) String() string {
	if int(s) < len(severityNames) {
		return severityNames[s]
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// MarshalJSON writes the severity's name.
func (s Severity) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a severity's name.
func (s *Severity) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		return err
	}
	for i, n := range severityNames {
		if n == name {
			*s = Severity(i)
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q", name)
}
