package alerts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/whypending/whypending/chat"
)

// maxListed bounds the alerts the root lists; the rest are counted.
const maxListed = 20

// rootMessage is the group's root: the alert name and status, the count, the alerts, the
// links; "last seen" and, once resolved, how long the group fired.
func rootMessage(g *group, thread string, now time.Time) chat.Message {
	names := map[string]bool{}
	for _, a := range g.Alerts {
		if !a.Hidden {
			names[a.Labels["alertname"]] = true
		}
	}
	title := strings.Join(slices.Sorted(maps.Keys(names)), ", ")
	if title == "" {
		title = "Alert group"
	}
	m := chat.Message{Severity: chat.SeverityBlocker}
	hidden, unmapped := 0, 0
	var lines []string
	for _, a := range g.Alerts {
		switch {
		case a.Hidden:
			hidden++
			continue
		case a.Object == nil:
			unmapped++
		}
		if len(lines) == maxListed {
			continue
		}
		line := a.Labels["alertname"]
		if a.Object != nil {
			line += " " + a.Object.String()
			if c := a.Labels["container"]; c != "" {
				// KubePodCrashLooping and KubeContainerWaiting fire per container.
				line += " (container " + c + ")"
			}
		} else {
			line += " (names no Kubernetes object: not diagnosed)"
		}
		if a.Gone {
			line += ": no longer in the group's notifications"
		} else if a.Status == "resolved" {
			line += ": resolved after " + since(a.StartsAt, a.EndsAt, g.LastSeen)
		} else {
			line += ": firing since " + a.StartsAt.Format("15:04Z")
		}
		if a.Summary != "" {
			line += " · " + chat.Cut(chat.OneLine(a.Summary), 160)
		}
		lines = append(lines, line)
	}
	if shown := len(g.Alerts) - hidden; shown > len(lines) {
		lines = append(lines, fmt.Sprintf("… and %d more", shown-len(lines)))
	}
	firing := g.firing() + g.Untracked
	if g.Status == "resolved" {
		m.Severity = chat.SeverityOK
		m.Title = fmt.Sprintf("Resolved: %s (fired for %s)", title, g.fired(g.LastSeen))
	} else {
		m.Title = fmt.Sprintf("Firing: %s (%d %s)", title, firing, plural(firing, "alert"))
	}
	fields := []chat.Field{{Name: "Status", Value: statusLine(g, firing)}, {Name: "Receiver", Value: g.Receiver}}
	if len(g.GroupLabels) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(g.GroupLabels)) {
			kv = append(kv, k+"="+g.GroupLabels[k])
		}
		fields = append(fields, chat.Field{Name: "Group", Value: strings.Join(kv, ", ")})
	}
	m.Sections = append(m.Sections, chat.Section{Fields: fields, Lines: lines})
	var notes []string
	if unmapped > 0 {
		notes = append(notes, fmt.Sprintf("%d %s no Kubernetes object (no namespace with pod, deployment, statefulset, daemonset, job_name or cronjob label).", unmapped, plural2(unmapped, "alert names", "alerts name")))
	}
	if hidden > 0 {
		notes = append(notes, fmt.Sprintf("%d %s for a namespace this channel does not answer for (channels.namespaces) and %s not shown here.", hidden, plural2(hidden, "alert is", "alerts are"), plural2(hidden, "is", "are")))
	}
	if g.Untracked > 0 {
		notes = append(notes, fmt.Sprintf("%d more firing %s counted, not tracked one by one (over %d in the group).", g.Untracked, plural2(g.Untracked, "alert is", "alerts are"), maxTracked))
	}
	if g.Truncated > 0 {
		notes = append(notes, fmt.Sprintf("Alertmanager left out %d more %s (max_alerts).", g.Truncated, plural(g.Truncated, "alert")))
	}
	var links []string
	if g.ExternalURL != "" {
		links = append(links, "Alertmanager: "+g.ExternalURL)
	}
	for _, a := range g.Alerts {
		if a.GeneratorURL != "" && !a.Hidden {
			links = append(links, "Source: "+a.GeneratorURL)
			break
		}
	}
	if len(notes) > 0 || len(links) > 0 {
		m.Sections = append(m.Sections, chat.Section{Text: strings.Join(notes, " "), Lines: links})
	}
	if sl := g.Silence; sl != nil && sl.State == "active" && sl.Until.After(now) {
		from := ""
		if sl.Channel != "" {
			from = " from channel " + sl.Channel
		}
		m.Sections = append(m.Sections, chat.Section{Text: fmt.Sprintf("Silenced in Alertmanager until %s by %s%s (silence %s).",
			until(sl.Until), sl.By, from, sl.ID)})
	}
	m.Footer = "first seen " + g.FirstAt.Format(time.RFC3339) + " · last seen " + g.LastSeen.Format(time.RFC3339) + " · whypending"
	return m
}

// until is when a silence ends, with its date: it may not be today.
func until(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }

// silenceButtons are the root's: Unsilence while its silence lasts, else Silence for each of
// SilenceDurations while the group fires; none in a channel, answered for channelNS, that
// may not silence the group (group.silenceable).
func silenceButtons(g *group, thread, channelNS string, now time.Time) []chat.Button {
	if !g.silenceable(channelNS) {
		return nil
	}
	if sl := g.Silence; sl != nil && sl.State == "active" && sl.Until.After(now) {
		return []chat.Button{chat.SilenceButton{Thread: thread}.Button("Unsilence", chat.StyleDefault)}
	}
	if g.Status != "firing" {
		return nil
	}
	var out []chat.Button
	for _, d := range SilenceDurations {
		out = append(out, chat.SilenceButton{Thread: thread, For: d}.Button("Silence "+shortDuration(d), chat.StyleDefault))
	}
	return out
}

func statusLine(g *group, firing int) string {
	resolved, gone := 0, 0
	for _, a := range g.Alerts {
		if a.Status == "resolved" {
			resolved++
		}
		if a.Gone {
			gone++
		}
	}
	s := fmt.Sprintf("%d firing", firing)
	if resolved > 0 {
		s += fmt.Sprintf(", %d resolved", resolved)
	}
	if gone > 0 {
		s += fmt.Sprintf(" (%d no longer in the notifications)", gone)
	}
	return s
}

// changeMessage is a reply saying what changed in the group: its first line as the title,
// the others below.
func changeMessage(text string) chat.Message {
	first, rest, _ := strings.Cut(text, "\n")
	m := chat.Message{Title: first, Severity: chat.SeverityInfo}
	if strings.HasPrefix(first, "All resolved") {
		m.Severity = chat.SeverityOK
	}
	if rest != "" {
		m.Sections = []chat.Section{{Lines: strings.Split(rest, "\n")}}
	}
	return m
}

// diagnosisTitle prefixes the diagnosis of alert a with what it is about.
func diagnosisTitle(a *alertState, m chat.Message) chat.Message {
	m.Title = a.Labels["alertname"] + " · " + m.Title
	return m
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func plural2(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
