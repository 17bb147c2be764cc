package chat

import (
	"strings"
	"time"
)

// Action IDs of the buttons the bot puts on messages. Adapters pass them back in Click.
const (
	// ActionApprove approves the plan named by the button value.
	ActionApprove = "approve"
	// ActionDeny denies the plan named by the button value.
	ActionDeny = "deny"
	// ActionPlanPrefix starts the action ID of a "make a plan" button (see PlanButton).
	ActionPlanPrefix = "plan:"
)

// PlanButton is a "make a plan" button: a click plans a repair of Kind (an actions.Kind, e.g.
// "release-empty-blocks") on Cluster, narrowed to Node when it is set, and asks for its
// approval. This file is the one place its wire form is written and read: ActionID
// "plan:<kind>" and Value "<kind>[;cluster=C][;node=N]", the keys in that order.
type PlanButton struct {
	Kind    string
	Cluster string
	Node    string
}

// ActionID is the button's action ID, "plan:<kind>".
func (p PlanButton) ActionID() string { return ActionPlanPrefix + p.Kind }

// Value is the button's value, "<kind>[;cluster=C][;node=N]".
func (p PlanButton) Value() string {
	v := p.Kind
	if p.Cluster != "" {
		v += ";cluster=" + p.Cluster
	}
	if p.Node != "" {
		v += ";node=" + p.Node
	}
	return v
}

// Button is the button with label and style.
func (p PlanButton) Button(label string, style ButtonStyle) Button {
	return Button{ActionID: p.ActionID(), Label: label, Value: p.Value(), Style: style}
}

// ParsePlanButton reads a clicked button's action ID and value back into a PlanButton; false
// when the action ID is not a plan button's. The kind is the value's first part, else the
// action ID's ("plan:<kind>"), so an adapter that has no room for both may send the bare
// prefix "plan:" (Discord's custom IDs). Keys it does not know are ignored, in any order.
func ParsePlanButton(actionID, value string) (PlanButton, bool) {
	rest, ok := strings.CutPrefix(actionID, ActionPlanPrefix)
	if !ok {
		return PlanButton{}, false
	}
	parts := strings.Split(value, ";")
	p := PlanButton{Kind: parts[0]}
	if p.Kind == "" {
		p.Kind = rest
	}
	for _, kv := range parts[1:] {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "cluster":
			p.Cluster = v
		case "node":
			p.Node = v
		}
	}
	return p, p.Kind != ""
}

// ActionSilencePrefix starts the action ID of a Silence button (see SilenceButton);
// ActionUnsilence is the Unsilence button's.
const (
	ActionSilencePrefix = "silence:"
	ActionUnsilence     = "unsilence"
)

// SilenceButton silences an alert group's thread for a while (an Alertmanager silence), or
// ends it (Unsilence, For zero). This is the one place its wire form is written and read:
// ActionID "silence:<duration>" or "unsilence", Value the thread's Notification name.
type SilenceButton struct {
	// Thread is the Notification name of the group's thread in the channel.
	Thread string
	// For is how long the silence lasts; zero is Unsilence.
	For time.Duration
}

// Button is the button with label and style.
func (s SilenceButton) Button(label string, style ButtonStyle) Button {
	id := ActionUnsilence
	if s.For > 0 {
		id = ActionSilencePrefix + s.For.String()
	}
	return Button{ActionID: id, Label: label, Value: s.Thread, Style: style}
}

// ParseSilenceButton reads a clicked Silence or Unsilence button back; false when the action
// ID is neither.
func ParseSilenceButton(actionID, value string) (SilenceButton, bool) {
	if actionID == ActionUnsilence {
		return SilenceButton{Thread: value}, value != ""
	}
	d, ok := strings.CutPrefix(actionID, ActionSilencePrefix)
	if !ok {
		return SilenceButton{}, false
	}
	dur, err := time.ParseDuration(d)
	if err != nil || dur <= 0 {
		return SilenceButton{}, false
	}
	return SilenceButton{Thread: value, For: dur}, value != ""
}

// ActionSnoozePrefix starts the action ID of a Snooze button (see SnoozeButton).
const ActionSnoozePrefix = "snooze:"

// SnoozeButton snoozes a watched workload's post (bot/watch) for a while, or until the
// workload recovers (UntilRecovered). This is the one place its wire form is written and
// read: ActionID "snooze:<duration>" or "snooze:recovered", Value the post's Notification
// name.
type SnoozeButton struct {
	// Thread is the Notification name of the post in the channel.
	Thread string
	// For is how long the snooze lasts, unless UntilRecovered.
	For            time.Duration
	UntilRecovered bool
}

// Button is the button with label.
func (s SnoozeButton) Button(label string) Button {
	id := ActionSnoozePrefix + s.For.String()
	if s.UntilRecovered {
		id = ActionSnoozePrefix + "recovered"
	}
	return Button{ActionID: id, Label: label, Value: s.Thread}
}

// ParseSnoozeButton reads a clicked Snooze button back; false when the action ID is not one.
func ParseSnoozeButton(actionID, value string) (SnoozeButton, bool) {
	d, ok := strings.CutPrefix(actionID, ActionSnoozePrefix)
	if !ok || value == "" {
		return SnoozeButton{}, false
	}
	if d == "recovered" {
		return SnoozeButton{Thread: value, UntilRecovered: true}, true
	}
	dur, err := time.ParseDuration(d)
	if err != nil || dur <= 0 {
		return SnoozeButton{}, false
	}
	return SnoozeButton{Thread: value, For: dur}, true
}

// ActionFollowupPrefix starts the action ID of a follow-up button (see FollowupButton).
const ActionFollowupPrefix = "followup:"

// The follow-ups a watch post offers (FollowupButton.What).
const (
	// FollowupEvents posts the workload's events in the post's thread.
	FollowupEvents = "events"
	// FollowupNodes posts the per-node "why not here" table in the thread.
	FollowupNodes = "nodes"
	// FollowupLogs posts the previous container's log in the thread.
	FollowupLogs = "logs"
	// FollowupRecheck re-diagnoses the workload and edits the post if its cause changed.
	FollowupRecheck = "recheck"
)

// FollowupButton is a read-only follow-up button on a watched workload's post (bot/watch):
// Events, Nodes, Logs or Re-check now. This is the one place its wire form is written and
// read: ActionID "followup:<what>", Value the post's Notification name.
type FollowupButton struct {
	// Thread is the Notification name of the post in the channel.
	Thread string
	// What is one of FollowupEvents, FollowupNodes, FollowupLogs, FollowupRecheck.
	What string
}

// Button is the button with label.
func (f FollowupButton) Button(label string) Button {
	return Button{ActionID: ActionFollowupPrefix + f.What, Label: label, Value: f.Thread}
}

// ParseFollowupButton reads a clicked follow-up button back; false when the action ID is not
// one, or names a follow-up this version does not know.
func ParseFollowupButton(actionID, value string) (FollowupButton, bool) {
	what, ok := strings.CutPrefix(actionID, ActionFollowupPrefix)
	if !ok || value == "" {
		return FollowupButton{}, false
	}
	switch what {
	case FollowupEvents, FollowupNodes, FollowupLogs, FollowupRecheck:
		return FollowupButton{Thread: value, What: what}, true
	}
	return FollowupButton{}, false
}
