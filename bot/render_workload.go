package bot

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// AnswerMessage renders the answer to one why-pending question: a pod's diagnosis
// (DiagnosisMessage), a workload's (WorkloadMessage) or a namespace sweep (SweepMessage), with
// the answer's notes on how the question was read first. cluster, when set, is the cluster the
// answer is about: its plan buttons make plans there and the footer names it; "" leaves both
// cluster-neutral (the CLI, which shows no buttons).
func AnswerMessage(a *triage.Answer, cluster string) chat.Message {
	var m chat.Message
	switch {
	case a.Pod != nil:
		m = DiagnosisMessage(a.Pod, cluster)
	case a.Workload != nil:
		m = WorkloadMessage(a.Workload, cluster)
	default:
		m = SweepMessage(a.Namespace)
	}
	if len(a.Notes) > 0 {
		m.Sections = append([]chat.Section{{Heading: "Note", Text: strings.Join(a.Notes, " ")}}, m.Sections...)
	}
	if cluster != "" {
		m.Footer = joinFooter(m.Footer, "cluster "+cluster)
	}
	return m
}

// maxPodLines caps the one-line pods listed per group; the rest are counted.
const maxPodLines = 10

// WorkloadMessage renders a workload's diagnosis: the primary cause with its evidence and fix,
// a line per pod group, then each group: its representative pod's diagnosis in full and the
// group's other pods one line each; pods not diagnosed and other findings last. The sections
// come in that order so that a chat platform that must cut a long answer cuts the least
// important part. Remediations any diagnosis offers become buttons, one per kind, making plans
// on cluster.
func WorkloadMessage(d *triage.WorkloadDiagnosis, cluster string) chat.Message {
	p := d.Primary()
	m := chat.Message{
		Title:    fmt.Sprintf("%s: %s", d.Workload, p.Code),
		Severity: workloadSeverity(d),
		Footer:   fmt.Sprintf("code %s · collected %s", p.Code, d.CollectedAt.UTC().Format(time.RFC3339)),
	}
	cause := causeSection(d.Summary, d.Uncertain, p.Code)
	if d.Workload.UID != "" {
		ready := fmt.Sprintf("%d of %d pods", d.Ready, d.Pods)
		if d.Desired != nil {
			ready += fmt.Sprintf(" (wants %d)", *d.Desired)
		}
		cause.Fields = append(cause.Fields, chat.Field{Name: "ready", Value: ready})
	}
	m.Sections = append(m.Sections, cause)
	// When the primary cause is the largest group's, that group's representative below shows
	// its evidence and fix: say them once.
	restated := len(d.Groups) > 0 && d.Groups[0].Stuck() && d.Groups[0].Diagnosis != nil &&
		p.Code == d.Groups[0].Code && slices.Equal(p.Fix, d.Groups[0].Diagnosis.Primary().Fix)
	if t := nodeTable(p.Nodes, p.Code); t != nil {
		m.Sections = append(m.Sections, chat.Section{Heading: "Nodes without a pod", Table: t})
	}
	if lines := evidenceLines(p, d.Workload.String(), d.CollectedAt); len(lines) > 0 && !restated {
		m.Sections = append(m.Sections, chat.Section{Heading: "Evidence", Lines: lines})
	}
	if len(p.Fix) > 0 && !restated {
		m.Sections = append(m.Sections, fixSections(p.Fix)...)
	}
	if len(d.Groups) > 0 {
		var lines []string
		for _, g := range d.Groups {
			lines = append(lines, g.Label)
		}
		m.Sections = append(m.Sections, chat.Section{Heading: "Pods by cause", Lines: lines})
	}
	buttons := &buttonSet{cluster: cluster}
	buttons.add(p.Actions)
	for _, g := range d.Groups {
		if g.Diagnosis == nil {
			continue
		}
		rep := DiagnosisMessage(g.Diagnosis, cluster)
		for _, b := range rep.Buttons {
			buttons.addButton(b)
		}
		heading := fmt.Sprintf("%s — pod %s", g.Label, g.Pods[0].Name)
		if len(rep.Sections) > 0 {
			rep.Sections[0].Heading = heading
		}
		m.Sections = append(m.Sections, rep.Sections...)
		if len(g.Pods) > 1 {
			m.Sections = append(m.Sections, chat.Section{Heading: "The group's other pods", Lines: podLines(g.Pods[1:], g.Diagnosis.Summary)})
		}
	}
	if len(d.NotDiagnosed) > 0 {
		m.Sections = append(m.Sections, chat.Section{Heading: fmt.Sprintf("Not diagnosed (%d pods beyond the first %d)", len(d.NotDiagnosed), triage.MaxDiagnosedPods), Lines: podLines(d.NotDiagnosed, "")})
	}
	if len(d.Findings) > 1 {
		var also []string
		for _, f := range d.Findings[1:] {
			also = append(also, fmt.Sprintf("[%s] %s: %s", f.Severity, f.Code, f.Summary))
			buttons.add(f.Actions)
		}
		m.Sections = append(m.Sections, chat.Section{Heading: "Also found", Lines: also})
	}
	m.Buttons = buttons.list
	return m
}

// podLines renders pods one line each, "name (state on node, ReplicaSet x): summary", at most
// maxPodLines and then a count; a summary equal to same (the representative's) is left out.
func podLines(pods []triage.PodLine, same string) []string {
	var out []string
	for i, p := range pods {
		if i == maxPodLines {
			out = append(out, fmt.Sprintf("and %d more pods", len(pods)-maxPodLines))
			break
		}
		where := p.State
		if p.Node != "" {
			where += " on " + p.Node
		}
		if p.Owner != "" {
			where += ", " + p.Owner
		}
		line := fmt.Sprintf("%s (%s)", p.Name, where)
		switch {
		case p.Summary != "" && p.Summary == same:
			line += ": the same cause"
		case p.Summary != "":
			line += ": " + p.Summary
		}
		out = append(out, line)
	}
	return out
}

// workloadSeverity colours a workload answer: ok when healthy, else the primary's severity.
func workloadSeverity(d *triage.WorkloadDiagnosis) chat.Severity {
	if p := d.Primary(); p.Code == triage.CodeWorkloadHealthy {
		return chat.SeverityOK
	}
	return messageSeverity(d.Primary().Severity)
}

// buttonSet collects remediation buttons making plans on cluster, one per action kind, first
// offer wins.
type buttonSet struct {
	cluster string
	list    []chat.Button
	seen    map[string]bool
}

func (s *buttonSet) add(actions []triage.ActionRef) {
	for _, a := range actions {
		p := chat.PlanButton{Kind: a.Kind, Cluster: s.cluster, Node: a.Args["node"]}
		s.addButton(p.Button(a.Label, chat.StylePrimary))
	}
}

func (s *buttonSet) addButton(b chat.Button) {
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	if s.seen[b.ActionID] {
		return
	}
	s.seen[b.ActionID] = true
	s.list = append(s.list, b)
}

// maxSweepItems caps the items listed per cause; the rest are counted.
const maxSweepItems = 12

// SweepMessage renders a namespace sweep: the summary, then one section per cause (most pods
// first) listing each workload or bare pod with that cause in one line.
func SweepMessage(d *triage.NamespaceDiagnosis) chat.Message {
	m := chat.Message{
		Title:    fmt.Sprintf("Namespace %s: nothing is stuck", d.Namespace),
		Severity: chat.SeverityOK,
		Footer: fmt.Sprintf("%d %s, %d %s · collected %s", d.Pods, plural(d.Pods, "pod", "pods"), d.Workloads, plural(d.Workloads, "workload", "workloads"),
			d.CollectedAt.UTC().Format(time.RFC3339)),
	}
	if len(d.Causes) > 0 {
		m.Title = fmt.Sprintf("Namespace %s: %d stuck %s", d.Namespace, d.Stuck, plural(d.Stuck, "pod", "pods"))
		if d.Missing > 0 {
			m.Title += fmt.Sprintf(" and %d not created", d.Missing)
		}
		m.Title += fmt.Sprintf(", %d %s", len(d.Causes), plural(len(d.Causes), "cause", "causes"))
		m.Severity = "blocker"
	}
	// Not an all-clear: a namespace that does not exist, is empty, or has nothing stuck while
	// others do (the summary names them).
	switch {
	case d.NotFound:
		m.Title, m.Severity = fmt.Sprintf("Namespace %s does not exist", d.Namespace), chat.SeverityBlocker
	case d.Empty:
		m.Title, m.Severity = fmt.Sprintf("Namespace %s is empty", d.Namespace), chat.SeverityInfo
	case len(d.Causes) == 0 && len(d.StuckElsewhere) > 0:
		m.Title, m.Severity = fmt.Sprintf("Namespace %s: nothing is stuck here, but pods are stuck in %d other %s", d.Namespace,
			len(d.StuckElsewhere), plural(len(d.StuckElsewhere), "namespace", "namespaces")), chat.SeverityInfo
	}
	m.Sections = append(m.Sections, chat.Section{Heading: "Summary", Text: d.Summary})
	for _, c := range d.Causes {
		var lines []string
		for i, it := range c.Items {
			if i == maxSweepItems {
				lines = append(lines, fmt.Sprintf("and %d more", len(c.Items)-maxSweepItems))
				break
			}
			lines = append(lines, sweepLine(it))
		}
		heading := fmt.Sprintf("%s: %d %s", c.Code, c.Pods, plural(c.Pods, "pod", "pods"))
		if c.Pods == 0 {
			heading = fmt.Sprintf("%s: %d %s, no pods", c.Code, len(c.Items), plural(len(c.Items), "workload", "workloads"))
		}
		m.Sections = append(m.Sections, chat.Section{Heading: heading, Lines: lines})
	}
	if len(d.Causes) > 0 {
		m.Sections = append(m.Sections, chat.Section{Text: fmt.Sprintf("These causes come from a quick read (no container logs, no Calico IPAM). For the full answer ask about one workload: why-pending -n %s deploy/NAME (or sts/, ds/, job/, cj/, rs/, or a pod).", d.Namespace)})
	}
	return m
}

// sweepLine renders one sweep item: "Deployment checkout: 4 pods Pending (a, b, …): summary".
func sweepLine(it triage.SweepItem) string {
	head := fmt.Sprintf("%s %s", it.Kind, it.Name)
	if it.Kind == triage.KindPod {
		head = "Pod " + it.Name
		if it.State != "" {
			head += " (" + it.State + ")"
		}
	} else if len(it.Pods) > 0 {
		state := ""
		if it.State != "" {
			state = " " + it.State
		}
		head += fmt.Sprintf(": %d %s%s (%s)", len(it.Pods), plural(len(it.Pods), "pod", "pods"), state, joinNames(it.Pods, 3))
	}
	summary := it.Summary
	if it.Uncertain {
		summary = "uncertain: " + summary
	}
	return head + " — " + summary
}

// joinNames joins up to n names and counts the rest.
func joinNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
