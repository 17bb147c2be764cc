package bot

import (
	"fmt"
	"strings"
	"time"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// maxTableRows caps the node rows of the per-node table; the rest is counted ("and N more
// nodes"), one count row per group of nodes with the same reasons (triage.NodeRows).
const maxTableRows = 15

// DiagnosisMessage renders a diagnosis for a person reading at 3 a.m.: the cause first, then
// the per-node table, the evidence, the fix (its commands in code blocks, its prose steps as
// text: fixSections), and other findings last.
// Remediations the diagnosis offers (Finding.Actions) become plan buttons (chat.PlanButton), one
// per kind, making plans on cluster.
func DiagnosisMessage(d *triage.Diagnosis, cluster string) chat.Message {
	p := d.Primary()
	m := chat.Message{
		Title:    titleFor(d),
		Severity: severityFor(d),
		Footer:   fmt.Sprintf("code %s · collected %s", p.Code, d.CollectedAt.UTC().Format(time.RFC3339)),
	}
	cause := causeSection(p.Summary, d.Uncertain, p.Code)
	if d.State != "" {
		cause.Fields = append(cause.Fields, chat.Field{Name: "state", Value: d.State})
	}
	if d.Node != "" {
		cause.Fields = append(cause.Fields, chat.Field{Name: "node", Value: d.Node})
	}
	m.Sections = append(m.Sections, cause)

	if t := nodeTable(p.Nodes, p.Code); t != nil {
		m.Sections = append(m.Sections, chat.Section{Heading: "Why not here (per node)", Table: t})
	}
	if lines := evidenceLines(p, "Pod "+d.Pod.String(), d.CollectedAt); len(lines) > 0 {
		m.Sections = append(m.Sections, chat.Section{Heading: "Evidence", Lines: lines})
	}
	if len(p.Fix) > 0 {
		m.Sections = append(m.Sections, fixSections(p.Fix)...)
	}
	if len(d.Findings) > 1 {
		var also []string
		for _, f := range d.Findings[1:] {
			also = append(also, fmt.Sprintf("[%s] %s: %s", f.Severity, f.Code, f.Summary))
		}
		m.Sections = append(m.Sections, chat.Section{Heading: "Also found", Lines: also})
	}
	// The primary cause and a context finding often offer the same repair: the first offer,
	// the most specific, wins.
	buttons := &buttonSet{cluster: cluster}
	for _, f := range d.Findings {
		buttons.add(f.Actions)
	}
	m.Buttons = buttons.list
	return m
}

// causeSection is the "Cause" section: the summary (marked when uncertain) and the code.
func causeSection(summary string, uncertain bool, code triage.Code) chat.Section {
	s := chat.Section{Heading: "Cause", Text: summary, Fields: []chat.Field{{Name: "code", Value: string(code)}}}
	if uncertain {
		s.Text = "Uncertain: " + s.Text
	}
	return s
}

func titleFor(d *triage.Diagnosis) string {
	p := d.Primary()
	code := string(p.Code)
	if d.Uncertain {
		code += " (uncertain)"
	}
	switch {
	case p.Code == triage.CodePodNotFound:
		return fmt.Sprintf("%s: pod not found", d.Pod)
	case p.Code == triage.CodeNamespaceNotFound:
		return fmt.Sprintf("%s: namespace %s not found", d.Pod, d.Pod.Namespace)
	case d.State != "":
		return fmt.Sprintf("%s is %s: %s", d.Pod, d.State, code)
	default:
		return fmt.Sprintf("%s: %s", d.Pod, code)
	}
}

func severityFor(d *triage.Diagnosis) chat.Severity {
	p := d.Primary()
	if p.Code == triage.CodePodHealthy || p.Code == triage.CodePodCompleted {
		return chat.SeverityOK
	}
	return messageSeverity(p.Severity)
}

// messageSeverity is a finding's severity as a message's: triage's names ("blocker",
// "warning", "info") are chat's.
func messageSeverity(s triage.Severity) chat.Severity { return chat.Severity(s.String()) }

// nodeTable builds the "why not here" table: nodes that fit first, then every group of nodes
// with the same reasons (the primary code's first), each with its first nodes by name and a
// count of the rest (triage.NodeRows); every reason of a node in one cell.
func nodeTable(nodes []triage.NodeVerdict, primary triage.Code) *chat.Table {
	if len(nodes) == 0 {
		return nil
	}
	t := &chat.Table{Columns: []string{"NODE", "FITS", "WHY NOT"}}
	for _, row := range triage.NodeRows(nodes, primary, maxTableRows+1) {
		if row.More > 0 {
			why := "other reasons"
			if !row.Other {
				var codes []string
				for _, c := range row.Codes {
					codes = append(codes, string(c))
				}
				why = strings.Join(codes, ", ")
			}
			t.Rows = append(t.Rows, []string{fmt.Sprintf("and %d more %s", row.More, plural(row.More, "node", "nodes")), "", why})
			continue
		}
		v := row.Verdict
		fits := "no"
		if v.Fits {
			fits = "yes"
		}
		var reasons []string
		for _, r := range v.Reasons {
			reasons = append(reasons, r.Message)
		}
		t.Rows = append(t.Rows, []string{v.Node, fits, strings.Join(reasons, "; ")})
	}
	return t
}

// evidenceLines renders evidence like kubectl describe's events: reason, count, age, then
// where it was read (the object, unless it is the pod itself, and the field), then the
// message. When the finding carries a node table, per-node evidence is left to the table.
func evidenceLines(f triage.Finding, self string, now time.Time) []string {
	var lines []string
	for _, e := range f.Evidence {
		if len(f.Nodes) > 0 && strings.HasPrefix(e.Object, "Node ") && e.Reason == "" {
			continue
		}
		var head []string
		if e.Reason != "" {
			r := e.Reason
			if !e.LastSeen.IsZero() {
				age := triage.FormatAge(now.Sub(e.LastSeen))
				if e.Count > 1 {
					r += fmt.Sprintf(" (x%d, last %s ago)", e.Count, age)
				} else {
					r += fmt.Sprintf(" (%s ago)", age)
				}
			}
			head = append(head, r)
		}
		if e.Object != "" && e.Object != self {
			head = append(head, e.Object)
		}
		if e.Field != "" {
			head = append(head, e.Field)
		}
		line := strings.Join(head, " ")
		switch {
		case line == "":
			line = e.Message
		case e.Message != "":
			line += ": " + e.Message
		}
		lines = append(lines, line)
	}
	return lines
}
