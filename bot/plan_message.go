package bot

import (
	"fmt"
	"time"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/triage"
)

// Action IDs of the buttons the bot puts on messages. Adapters pass them back in Click.
const (
	// ActionApprove approves the plan named by the button value.
	ActionApprove = "approve"
	// ActionDeny denies the plan named by the button value.
	ActionDeny = "deny"
	// ActionPlanPrefix starts the action ID of a "make a plan" button: "plan:<kind>", with the
	// cluster name as the button value.
	ActionPlanPrefix = "plan:"
)

// PlanMessage renders an approval record as the message posted for approval and updated on
// every transition: what would change (or did), who asked, who decided, the expiry, and the
// Approve / Deny buttons while it is pending. lockNote says how the datastore lock is used.
func PlanMessage(a *Approval, now time.Time, policy Policy, lockNote string) Message {
	p := a.Plan
	m := Message{Footer: planFooter(p)}
	facts := Section{Fields: []Field{
		{Name: "Cluster", Value: p.Cluster},
		{Name: "Action", Value: string(p.Kind)},
		{Name: "Requested by", Value: a.RequestedBy.Display()},
	}}
	decider := "nobody"
	if a.DecidedBy != nil {
		decider = a.DecidedBy.Display()
	}
	switch a.State {
	case StatePending:
		m.Title = "Approval needed: " + p.Title()
		m.Severity = "warning"
		facts.Fields = append(facts.Fields, Field{Name: "Expires", Value: fmt.Sprintf("%s (in %s)",
			p.ExpiresAt.UTC().Format("15:04:05Z"), roundDuration(p.ExpiresAt.Sub(now)))})
		m.Sections = append(m.Sections, facts, itemsSection(p, "What would change"))
		how := "Approving re-checks every item and changes only those still eligible, then checks again."
		if lockNote != "" && p.Kind.Destructive() {
			how += " " + lockNote
		}
		if policy.TwoPersonRule && p.Kind.Destructive() {
			how += " The requester cannot approve their own plan."
		}
		m.Sections = append(m.Sections, Section{Text: how})
		m.Buttons = []Button{
			{ActionID: ActionApprove, Label: "Approve", Value: p.ID, Style: "primary", Confirm: &Confirm{
				Title:   "Approve this plan?",
				Text:    fmt.Sprintf("This will %s. Only items still eligible when it runs are touched.", p.Title()),
				Confirm: "Approve",
				Deny:    "Cancel",
			}},
			{ActionID: ActionDeny, Label: "Deny", Value: p.ID, Style: "danger"},
		}
	case StateRunning:
		m.Title = "Running: " + p.Title()
		m.Severity = "info"
		facts.Fields = append(facts.Fields, Field{Name: "Approved by", Value: decider})
		m.Sections = append(m.Sections, facts, itemsSection(p, "Changing"))
	case StateSucceeded, StateFailed:
		facts.Fields = append(facts.Fields, Field{Name: "Approved by", Value: decider})
		if a.State == StateSucceeded {
			m.Title, m.Severity = "Done: "+doneTitle(p, a.Result), "ok"
		} else {
			m.Title, m.Severity = "Failed: "+p.Title(), "blocker"
		}
		m.Sections = append(m.Sections, facts)
		if a.State == StateFailed {
			m.Sections = append(m.Sections, Section{Text: failureText(a)})
		}
		if a.Result != nil {
			m.Sections = append(m.Sections, resultSections(p, *a.Result)...)
		}
	case StateDenied:
		m.Title, m.Severity = "Denied: "+p.Title(), "info"
		facts.Fields = append(facts.Fields, Field{Name: "Denied by", Value: decider})
		m.Sections = append(m.Sections, facts, Section{Text: "Nothing was changed."})
	case StateExpired:
		m.Title, m.Severity = "Expired: "+p.Title(), "info"
		m.Sections = append(m.Sections, facts, Section{Text: fmt.Sprintf(
			"Nobody decided before %s; nothing was changed. Ask for a fresh plan.", p.ExpiresAt.UTC().Format("15:04:05Z"))})
	case StateInterrupted:
		m.Title, m.Severity = "Interrupted: "+p.Title(), "blocker"
		facts.Fields = append(facts.Fields, Field{Name: "Approved by", Value: decider})
		m.Sections = append(m.Sections, facts, interruptedSection(a))
		m.Buttons = []Button{replanButton(p)}
	}
	return m
}

// PlanPreview renders a plan that no approval record holds, for a shell: what it would change
// and what it leaves alone (Plan.Excluded). `whypending ipam release-*` prints it, through the
// console renderer, before it runs the plan with --yes.
func PlanPreview(p actions.Plan) Message {
	m := Message{Title: "Plan: " + p.Title(), Severity: "info", Footer: planFooter(p)}
	if p.Kind.Destructive() && len(p.Items) > 0 {
		m.Severity = "warning"
	}
	facts := Section{Fields: []Field{{Name: "Cluster", Value: p.Cluster}, {Name: "Action", Value: string(p.Kind)}}}
	if p.RequestedBy != "" {
		facts.Fields = append(facts.Fields, Field{Name: "Requested by", Value: p.RequestedBy})
	}
	m.Sections = append(m.Sections, facts, itemsSection(p, "What would change"))
	if len(p.Excluded) > 0 {
		left := Section{Heading: "Left alone"}
		for _, x := range p.Excluded {
			left.Lines = append(left.Lines, x.Target+": "+x.Reason)
		}
		m.Sections = append(m.Sections, left)
	}
	return m
}

// planFooter names the plan, its fingerprint and the state it was read from.
func planFooter(p actions.Plan) string {
	f := fmt.Sprintf("plan %s · fingerprint %s", p.ID, p.Fingerprint)
	if p.Basis != "" {
		f += " · " + p.Basis
	}
	return f
}

// interruptedSection says that the bot stopped while running the plan, what had been done,
// what became of the datastore lock, and that a fresh plan finishes the job.
func interruptedSection(a *Approval) Section {
	s := Section{Text: "The bot process running this plan stopped before it finished; nothing is re-run automatically."}
	for _, r := range a.History {
		if r.Event == AuditInterrupted {
			s.Lines = []string{"Found: " + r.Detail}
		}
	}
	if rec := a.Recovery; rec != nil {
		s.Lines = append(s.Lines, fmt.Sprintf("%d of %d planned items were done before it stopped (or changed since); %d are still to do.",
			rec.Done(), rec.Planned, rec.Remaining))
		switch {
		case rec.Unlocked:
			s.Lines = append(s.Lines, "The datastore lock it held has been released.")
		case rec.LockedBy != "":
			s.Lines = append(s.Lines, "The Calico datastore is still locked by "+rec.LockedBy+" (not this plan's lock; left alone).")
		default:
			s.Lines = append(s.Lines, "The Calico datastore is unlocked.")
		}
	}
	s.Lines = append(s.Lines, fmt.Sprintf("Re-plan to finish the job: %s (or the button), then approve the fresh plan.", replanCommand(a.Plan)))
	return s
}

// replanCommand is the command that makes a fresh plan of p's kind, cluster and node.
func replanCommand(p actions.Plan) string {
	for sub, kind := range ipamSubcommands {
		if kind == p.Kind {
			cmd := "/ipam " + sub + " --cluster " + p.Cluster
			if p.Node != "" {
				cmd += " --node " + p.Node
			}
			return cmd
		}
	}
	return "/ipam check --cluster " + p.Cluster
}

// replanButton makes a fresh plan of p's kind, cluster and node (the Bot.Click plan path).
func replanButton(p actions.Plan) Button {
	args := map[string]string{"cluster": p.Cluster}
	if p.Node != "" {
		args["node"] = p.Node
	}
	ref := triage.ActionRef{Kind: string(p.Kind), Label: "Make a fresh plan", Args: args}
	return Button{ActionID: ActionPlanPrefix + ref.Kind, Label: ref.Label, Value: ActionValue(ref), Style: "primary"}
}

// itemsSection is the table of what the plan changes.
func itemsSection(p actions.Plan, heading string) Section {
	s := Section{Heading: heading}
	switch p.Kind {
	case actions.KindReleaseLeakedIPs:
		s.Table = &Table{Columns: []string{"IP", "Node", "Allocated to", "Handle"}}
		for _, it := range p.Items {
			s.Table.Rows = append(s.Table.Rows, []string{it.Target, dash(it.Node), dash(it.Owner), dash(it.Handle)})
		}
	case actions.KindReleaseEmptyBlocks:
		s.Table = &Table{Columns: []string{"Block", "Node"}}
		for _, it := range p.Items {
			s.Table.Rows = append(s.Table.Rows, []string{it.Target, dash(it.Node)})
		}
	case actions.KindReleaseLeakedHandles:
		s.Table = &Table{Columns: []string{"IPAMHandle", "resourceVersion"}}
		for _, it := range p.Items {
			s.Table.Rows = append(s.Table.Rows, []string{it.Target, dash(it.Revision)})
		}
	default:
		for _, it := range p.Items {
			s.Lines = append(s.Lines, it.Target)
		}
	}
	if len(p.Items) == 0 {
		s.Table = nil
		s.Text = "Nothing: the check found no eligible items."
	}
	if p.Total > len(p.Items) {
		s.Text = fmt.Sprintf("This plan covers the first %d of %d eligible items; make another plan for the rest.", len(p.Items), p.Total)
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// doneTitle says what was done, e.g. "released 179 of 181 leaked IPs on prod-eu".
func doneTitle(p actions.Plan, r *actions.Result) string {
	if r == nil {
		return p.Title()
	}
	switch p.Kind {
	case actions.KindReleaseLeakedIPs:
		return fmt.Sprintf("released %d of %d leaked IPs on %s", r.Done, r.Planned, p.Cluster)
	case actions.KindReleaseEmptyBlocks:
		return fmt.Sprintf("released %d of %d empty IPAM blocks on %s", r.Done, r.Planned, p.Cluster)
	case actions.KindUnlockDatastore:
		return "unlocked the Calico datastore on " + p.Cluster
	case actions.KindReleaseLeakedHandles:
		return fmt.Sprintf("deleted %d of %d leaked IPAM handles on %s", r.Done, r.Planned, p.Cluster)
	}
	return p.Title()
}

// resultSections say what changed since approval and what the check afterwards found.
func resultSections(p actions.Plan, r actions.Result) []Section {
	var out []Section
	if r.Changed() {
		s := Section{Heading: "Changed since approval"}
		for _, sk := range r.Skipped {
			s.Lines = append(s.Lines, sk.Target+": "+sk.Reason+" (left alone)")
		}
		if r.NewSince > 0 {
			s.Lines = append(s.Lines, fmt.Sprintf("%d eligible items appeared after the plan was made; they were not touched.", r.NewSince))
		}
		out = append(out, s)
	} else {
		out = append(out, Section{Text: "Nothing changed between approval and execution."})
	}
	verify := Section{Heading: "Check afterwards"}
	switch {
	case r.Remaining < 0:
		verify.Text = "The check after the repair could not run; run /ipam check."
	case p.Kind == actions.KindReleaseLeakedIPs:
		verify.Text = fmt.Sprintf("%d leaked IPs remain.", r.Remaining)
	case p.Kind == actions.KindReleaseEmptyBlocks:
		verify.Text = fmt.Sprintf("%d releasable empty blocks remain.", r.Remaining)
	case p.Kind == actions.KindReleaseLeakedHandles:
		verify.Text = fmt.Sprintf("%d leaked IPAM handles remain.", r.Remaining)
	case p.Kind == actions.KindUnlockDatastore:
		verify.Text = "The datastore is unlocked."
		if r.Remaining > 0 {
			verify.Text = "The datastore is still locked."
		}
	}
	if r.Locked {
		verify.Text += fmt.Sprintf(" The datastore was locked for %s and is unlocked again.", roundDuration(r.FinishedAt.Sub(r.StartedAt)))
	}
	return append(out, verify)
}

// failureText explains a failed execution without raw error text.
func failureText(a *Approval) string {
	switch a.FailureCode {
	case "datastore-locked":
		return "The Calico datastore was locked by someone else, so nothing was changed. Try again later or run /ipam unlock if the lock is stale."
	case "approval-expired":
		return "The approval came after the plan expired, so nothing was changed. Ask for a fresh plan."
	case "cluster-unavailable":
		return fmt.Sprintf("Cluster %s became unavailable during the repair. What was changed before stays changed; the bot releases the datastore lock once the cluster is back. Run /ipam check --cluster %s then, and re-plan.", a.Plan.Cluster, a.Plan.Cluster)
	}
	return fmt.Sprintf("The repair stopped on an error; see RemediationRequest %s (status.error) or the bot's log.", a.Plan.ID)
}

// roundDuration rounds d for display: seconds under a minute, else minutes.
func roundDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}
