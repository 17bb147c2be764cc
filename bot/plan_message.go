package bot

import (
	"fmt"
	"time"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/chat"
)

// PlanMessage renders an approval record as the message posted for approval and updated on
// every transition: what would change (or did), who asked, who decided, the expiry, and the
// Approve / Deny buttons while it is pending. lockNote says how the datastore lock is used.
func PlanMessage(a *approval.Record, now time.Time, policy approval.Policy, lockNote string) chat.Message {
	p := a.Plan
	m := chat.Message{Footer: planFooter(p)}
	facts := chat.Section{Fields: []chat.Field{
		{Name: "Cluster", Value: p.Cluster},
		{Name: "Action", Value: string(p.Kind)},
		{Name: "Requested by", Value: a.RequestedBy.Display()},
	}}
	decider := "nobody"
	if a.DecidedBy != nil {
		decider = a.DecidedBy.Display()
	}
	switch a.State {
	case approval.StatePending:
		m.Title = "Approval needed: " + p.Title()
		m.Severity = "warning"
		facts.Fields = append(facts.Fields, chat.Field{Name: "Expires", Value: fmt.Sprintf("%s (in %s)",
			p.ExpiresAt.UTC().Format("15:04:05Z"), roundDuration(p.ExpiresAt.Sub(now)))})
		m.Sections = append(m.Sections, facts, itemsSection(p, "What would change"))
		if p.Warning != "" {
			m.Sections = append(m.Sections, chat.Section{Heading: "Warning", Text: p.Warning})
		}
		how := "Approving re-checks every item and changes only those still eligible, then checks again."
		if lockNote != "" && p.Kind.Destructive() {
			how += " " + lockNote
		}
		if p.SecondApprover || policy.TwoPersonRule && p.Kind.Destructive() {
			how += " The requester cannot approve their own plan."
		}
		m.Sections = append(m.Sections, chat.Section{Text: how})
		m.Buttons = []chat.Button{
			{ActionID: chat.ActionApprove, Label: "Approve", Value: p.ID, Style: chat.StylePrimary, Confirm: &chat.Confirm{
				Title:   "Approve this plan?",
				Text:    fmt.Sprintf("This will %s. Only items still eligible when it runs are touched.", p.Title()),
				Confirm: "Approve",
				Deny:    "Cancel",
			}},
			{ActionID: chat.ActionDeny, Label: "Deny", Value: p.ID, Style: chat.StyleDanger},
		}
	case approval.StateRunning:
		m.Title = "Running: " + p.Title()
		m.Severity = "info"
		facts.Fields = append(facts.Fields, chat.Field{Name: "Approved by", Value: decider})
		m.Sections = append(m.Sections, facts, itemsSection(p, "Changing"))
	case approval.StateSucceeded, approval.StateFailed:
		facts.Fields = append(facts.Fields, chat.Field{Name: "Approved by", Value: decider})
		if a.State == approval.StateSucceeded {
			m.Title, m.Severity = "Done: "+doneTitle(p, a.Result), "ok"
		} else {
			m.Title, m.Severity = "Failed: "+p.Title(), "blocker"
		}
		m.Sections = append(m.Sections, facts)
		if a.State == approval.StateFailed {
			m.Sections = append(m.Sections, chat.Section{Text: failureText(a)})
		}
		if a.Result != nil {
			m.Sections = append(m.Sections, resultSections(p, *a.Result)...)
		}
	case approval.StateDenied:
		m.Title, m.Severity = "Denied: "+p.Title(), "info"
		facts.Fields = append(facts.Fields, chat.Field{Name: "Denied by", Value: decider})
		m.Sections = append(m.Sections, facts, chat.Section{Text: "Nothing was changed."})
	case approval.StateExpired:
		m.Title, m.Severity = "Expired: "+p.Title(), "info"
		m.Sections = append(m.Sections, facts, chat.Section{Text: fmt.Sprintf(
			"Nobody decided before %s; nothing was changed. Ask for a fresh plan.", p.ExpiresAt.UTC().Format("15:04:05Z"))})
	case approval.StateInterrupted:
		m.Title, m.Severity = "Interrupted: "+p.Title(), "blocker"
		facts.Fields = append(facts.Fields, chat.Field{Name: "Approved by", Value: decider})
		m.Sections = append(m.Sections, facts, interruptedSection(a))
		m.Buttons = []chat.Button{replanButton(p)}
	}
	return m
}

// PlanPreview renders a plan that no approval record holds, for a shell: what it would change
// and what it leaves alone (Plan.Excluded). `whypending ipam release-*` prints it, through the
// console renderer, before it runs the plan with --yes.
func PlanPreview(p actions.Plan) chat.Message {
	m := chat.Message{Title: "Plan: " + p.Title(), Severity: chat.SeverityInfo, Footer: planFooter(p)}
	if p.Kind.Destructive() && len(p.Items) > 0 {
		m.Severity = chat.SeverityWarning
	}
	facts := chat.Section{Fields: []chat.Field{{Name: "Cluster", Value: p.Cluster}, {Name: "Action", Value: string(p.Kind)}}}
	if p.RequestedBy != "" {
		facts.Fields = append(facts.Fields, chat.Field{Name: "Requested by", Value: p.RequestedBy})
	}
	m.Sections = append(m.Sections, facts, itemsSection(p, "What would change"))
	if p.Warning != "" {
		m.Sections = append(m.Sections, chat.Section{Heading: "Warning", Text: p.Warning})
	}
	if len(p.Excluded) > 0 {
		left := chat.Section{Heading: "Left alone"}
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
func interruptedSection(a *approval.Record) chat.Section {
	s := chat.Section{Text: "The bot process running this plan stopped before it finished; nothing is re-run automatically."}
	for _, r := range a.History {
		if r.Event == approval.AuditInterrupted {
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
func replanButton(p actions.Plan) chat.Button {
	return chat.PlanButton{Kind: string(p.Kind), Cluster: p.Cluster, Node: p.Node}.Button("Make a fresh plan", chat.StylePrimary)
}

// itemsSection is the table of what the plan changes.
func itemsSection(p actions.Plan, heading string) chat.Section {
	s := chat.Section{Heading: heading}
	switch p.Kind {
	case actions.KindReleaseLeakedIPs:
		s.Table = &chat.Table{Columns: []string{"IP", "Node", "Allocated to", "Handle"}}
		for _, it := range p.Items {
			s.Table.Rows = append(s.Table.Rows, []string{it.Target, dash(it.Node), dash(it.Owner), dash(it.Handle)})
		}
	case actions.KindReleaseEmptyBlocks:
		s.Table = &chat.Table{Columns: []string{"Block", "Node"}}
		for _, it := range p.Items {
			s.Table.Rows = append(s.Table.Rows, []string{it.Target, dash(it.Node)})
		}
	case actions.KindReleaseLeakedHandles:
		s.Table = &chat.Table{Columns: []string{"IPAMHandle", "resourceVersion"}}
		for _, it := range p.Items {
			s.Table.Rows = append(s.Table.Rows, []string{it.Target, dash(it.Revision)})
		}
	case actions.KindUnlockDatastore:
		s.Table = &chat.Table{Columns: []string{"Lock", "Held by"}}
		for _, it := range p.Items {
			s.Table.Rows = append(s.Table.Rows, []string{it.Target, dash(it.Owner)})
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
func resultSections(p actions.Plan, r actions.Result) []chat.Section {
	var out []chat.Section
	if r.Changed() {
		s := chat.Section{Heading: "Changed since approval"}
		for _, sk := range r.Skipped {
			s.Lines = append(s.Lines, sk.Target+": "+sk.Reason+" (left alone)")
		}
		if r.NewSince > 0 {
			s.Lines = append(s.Lines, fmt.Sprintf("%d eligible items appeared after the plan was made; they were not touched.", r.NewSince))
		}
		out = append(out, s)
	} else {
		out = append(out, chat.Section{Text: "Nothing changed between approval and execution."})
	}
	verify := chat.Section{Heading: "Check afterwards"}
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
func failureText(a *approval.Record) string {
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
