package discord

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// TestRenderFixShape: the Fix section is the field named Fix and unnamed fields after it, in
// the fix's order: each run of commands a code block holding only them, each run's prose
// (escaped for Discord markdown) as text before it, a node's commands after the line that
// names the node.
func TestRenderFixShape(t *testing.T) {
	d := &triage.Diagnosis{
		Pod: triage.PodRef{Namespace: "shop", Name: "web"}, State: "Pending",
		CollectedAt: time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC),
		Findings: []triage.Finding{{
			Code: triage.CodeInsufficientCPU, Severity: triage.SeverityBlocker, Summary: "No node has 500m cpu free.",
			Fix: []string{
				"kubectl describe node a   # see Allocated resources",
				"Lower the cpu request of @everyone, or free room on node a:",
				"kubectl get pods -A -o wide --field-selector spec.nodeName=a",
				"On a: journalctl -u kubelet | grep '```' | tail",
			},
		}},
	}
	p := RenderOne(bot.DiagnosisMessage(d, ""))
	type field struct{ Name, Value string }
	var got []field
	in := false
	for _, f := range p.Embed.Fields {
		if f.Name == "Fix" {
			in = true
		} else if f.Name != "\u200b" {
			in = false
		}
		if in {
			got = append(got, field{f.Name, f.Value})
		}
	}
	want := []field{
		{"Fix", "```\nkubectl describe node a   # see Allocated resources\n```"},
		{"\u200b", `• Lower the cpu request of \@everyone, or free room on node a:`},
		{"\u200b", "```\nkubectl get pods -A -o wide --field-selector spec.nodeName=a\n```"},
		{"\u200b", "• On a:"},
		{"\u200b", "```\njournalctl -u kubelet | grep '`\u200b`\u200b`' | tail\n```"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Fix fields (-want +got):\n%s", diff)
	}
}

// TestRenderFixNeverCutsACommand: a command longer than a bullet line may be (maxLineRunes)
// is shown whole; one longer than a field's code block holds is replaced by a shell comment,
// never cut (a cut `kubectl delete pod` deletes fewer pods than the answer says).
func TestRenderFixNeverCutsACommand(t *testing.T) {
	pods := func(n int) string {
		cmd := "kubectl delete pod -n shop"
		for i := range n {
			cmd += fmt.Sprintf(" web-%03d", i)
		}
		return cmd
	}
	long, tooLong := pods(60), pods(200) // 506 and 1,626 characters
	d := &triage.Diagnosis{
		Pod: triage.PodRef{Namespace: "shop", Name: "web"}, State: "Terminating",
		Findings: []triage.Finding{{Code: triage.CodeNodeUnreachableTerminating, Severity: triage.SeverityBlocker, Summary: "Stuck.",
			Fix: []string{long, "Or, for every pod at once:", tooLong}}},
	}
	var code []string
	for _, pg := range Render(bot.DiagnosisMessage(d, "")) {
		for _, f := range pg.Embed.Fields {
			if strings.HasPrefix(f.Value, "```\n") {
				code = append(code, strings.TrimSuffix(strings.TrimPrefix(f.Value, "```\n"), "\n```"))
			}
		}
	}
	want := []string{long, chat.TooLongCommand(len(tooLong))}
	if diff := cmp.Diff(want, code); diff != "" {
		t.Errorf("Fix code blocks (-want +got):\n%s", diff)
	}
}
