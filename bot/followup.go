package bot

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// maxLogLineRunes cuts each previous-log line a Logs follow-up shows.
const maxLogLineRunes = 500

// followup handles a follow-up click on a watch post (chat.FollowupButton): read-only, so
// anyone in a channel the bot answers in may click, in a channel the workload's namespace is
// posted to, with the same per-user read check as /why-pending (allowAnswer). The workload is
// diagnosed again through the same Answerer; Events, Nodes and Logs are answered in the post's
// thread, Re-check now through the watch's ledger entry (WatchPosts.Recheck).
func (b *Bot) followup(ctx context.Context, c chat.Click, f chat.FollowupButton) chat.Outcome {
	wl, notice := b.watchSubject(ctx, f.Thread)
	if notice != "" {
		return chat.Outcome{Notice: notice}
	}
	if err := b.mayFollowUp(c.Principal, c.Channel, wl); err != nil {
		return chat.Outcome{Notice: b.errorNotice(ctx, "follow up "+wl.String(), err)}
	}
	cl, err := b.cluster(wl.Cluster)
	if err != nil {
		return chat.Outcome{Notice: b.errorNotice(ctx, "read "+wl.String(), err)}
	}
	t, as, err := b.allowAnswer(ctx, c.Principal, cl, wl.Target())
	if err != nil {
		b.log.InfoContext(ctx, "follow-up refused", slog.String("user", c.Principal.ID), slog.String("platform", c.Principal.Platform),
			slog.String("channel", c.Channel), slog.String("thread", f.Thread), slog.String("what", f.What), slog.Any("why", err))
		return chat.Outcome{Notice: b.errorNotice(ctx, "read "+wl.String(), err)}
	}
	if f.What == chat.FollowupRecheck {
		// The post is the channel's, so the re-check diagnoses as the watch does (as the bot),
		// once the person was allowed to read it.
		res, err := b.DiagnoseResult(ctx, cl.Name, t)
		if err != nil {
			return chat.Outcome{Notice: b.errorNotice(ctx, "re-check "+wl.String(), err)}
		}
		return b.watch.Recheck(ctx, c.Principal, f.Thread, res)
	}
	who := ""
	if as != nil {
		who = as.String()
	}
	a, err := b.answer(ctx, cl, t, who)
	if err != nil {
		return chat.Outcome{Notice: b.errorNotice(ctx, "read "+wl.String(), err)}
	}
	m := FollowupMessage(a, f.What, wl.String())
	m.Footer = joinFooter(m.Footer, fmt.Sprintf("asked by %s · cluster %s", c.Principal.Display(), cl.Name))
	return chat.Outcome{Post: &chat.Reply{Message: m, Public: true}, InThread: true}
}

// mayFollowUp is the one decision of where a follow-up may be asked: a channel the bot answers
// in (channels.allowed) and, when the channel is limited to one namespace
// (channels.namespaces), the workload's.
func (b *Bot) mayFollowUp(who chat.Principal, channel string, wl watch.Workload) error {
	if allowed := b.allowedChannels[who.Platform]; len(allowed) > 0 && !slices.Contains(allowed, channel) {
		return userErrorf("Follow-ups are asked from the channels the bot answers in; nothing was done.")
	}
	if ns := b.channelNS[channel]; ns != "" && ns != wl.Namespace {
		return userErrorf("This channel follows namespace %s, not %s; nothing was done.", ns, wl.Namespace)
	}
	return nil
}

// FollowupMessage is a watch post's follow-up answer about a (subject names the workload):
// its events (chat.FollowupEvents), its per-node table (FollowupNodes) or its previous
// container's log (FollowupLogs), rendered as /why-pending renders them (evidenceLines,
// nodeTable). An answer without them says so.
func FollowupMessage(a *triage.Answer, what, subject string) chat.Message {
	diags := diagnosesOf(a)
	m := chat.Message{Severity: chat.SeverityInfo, Footer: "code " + string(a.Code())}
	switch what {
	case chat.FollowupEvents:
		m.Title = "Events of " + subject
		if a.Workload != nil {
			if lines := eventEvidenceLines(a.Workload.Primary(), a.Workload.Workload.String(), a.Workload.CollectedAt); len(lines) > 0 {
				m.Sections = append(m.Sections, chat.Section{Heading: a.Workload.Workload.String(), Lines: lines})
			}
		}
		for _, d := range diags {
			f := triage.Finding{}
			for _, e := range d.Events {
				f.Evidence = append(f.Evidence, triage.Evidence{Field: e.FieldPath, Reason: e.Type + " " + e.Reason, Message: e.Message, Count: e.Count, LastSeen: e.LastSeen})
			}
			if lines := evidenceLines(f, "", d.CollectedAt); len(lines) > 0 {
				m.Sections = append(m.Sections, chat.Section{Heading: "Pod " + d.Pod.String(), Lines: lines})
			}
		}
		if len(m.Sections) == 0 {
			m.Sections = []chat.Section{{Text: "No events: Kubernetes keeps events for an hour by default, and none are left about it."}}
		}
	case chat.FollowupNodes:
		m.Title = "Why not here (per node): " + subject
		if p := nodesOf(a); len(p.Nodes) > 0 {
			m.Sections = append(m.Sections, chat.Section{Table: nodeTable(p.Nodes, p.Code)})
		} else {
			m.Sections = []chat.Section{{Text: "The answer now has no per-node table: no pod of it waits to be scheduled."}}
		}
	case chat.FollowupLogs:
		m.Title = "Previous container's log: " + subject
		for _, l := range previousLogsOf(a) {
			var lines []string
			for _, line := range strings.Split(l.text, "\n") {
				lines = append(lines, chat.Cut(line, maxLogLineRunes))
			}
			m.Sections = append(m.Sections, chat.Section{Heading: fmt.Sprintf("Pod %s, container %s (previous)", l.pod, l.container),
				Code: strings.Join(lines, "\n")})
		}
		if len(m.Sections) == 0 {
			m.Sections = []chat.Section{{Text: "The answer now has no previous container's log: no container of it crashed or was restarted lately."}}
		}
	}
	return m
}

// eventEvidenceLines are the lines of f's evidence read from events of other objects than
// pods (a controller's FailedCreate, say; the pods' own events are listed per pod), rendered
// as evidenceLines does.
func eventEvidenceLines(f triage.Finding, self string, now time.Time) []string {
	var events triage.Finding
	for _, e := range f.Evidence {
		if !e.LastSeen.IsZero() && !strings.HasPrefix(e.Object, "Pod ") {
			events.Evidence = append(events.Evidence, e)
		}
	}
	return evidenceLines(events, self, now)
}

// nodesOf is the finding of a that carries the per-node table: the workload's primary, else the
// first pod diagnosis's primary that has one (zero when none has).
func nodesOf(a *triage.Answer) triage.Finding {
	if a.Workload != nil && len(a.Workload.Primary().Nodes) > 0 {
		return a.Workload.Primary()
	}
	for _, d := range diagnosesOf(a) {
		if p := d.Primary(); len(p.Nodes) > 0 {
			return p
		}
	}
	return triage.Finding{}
}

// previousLog is one container's previous log as a diagnosis shows it (the evidence named by
// triage.PreviousLogField): its last lines, or why they could not be read.
type previousLog struct {
	pod       triage.PodRef
	container string
	text      string
}

// previousLogsOf are the previous logs the pod diagnoses of a read.
func previousLogsOf(a *triage.Answer) []previousLog {
	var out []previousLog
	for _, d := range diagnosesOf(a) {
		for _, f := range d.Findings {
			for _, e := range f.Evidence {
				c, ok := triage.PreviousLogContainer(e.Field)
				if ok && !slices.ContainsFunc(out, func(l previousLog) bool { return l.pod == d.Pod && l.container == c }) {
					out = append(out, previousLog{pod: d.Pod, container: c, text: e.Message})
				}
			}
		}
	}
	return out
}

// diagnosesOf are the pod diagnoses of a: the pod's, or each pod group's representative.
func diagnosesOf(a *triage.Answer) []*triage.Diagnosis {
	switch {
	case a.Pod != nil:
		return []*triage.Diagnosis{a.Pod}
	case a.Workload != nil:
		var out []*triage.Diagnosis
		for _, g := range a.Workload.Groups {
			if g.Diagnosis != nil {
				out = append(out, g.Diagnosis)
			}
		}
		return out
	}
	return nil
}
