package slack

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// fixDiagnosis is a diagnosis whose fix mixes commands, prose (with a mention in it) and a
// node's commands, one of them with a code fence in it.
func fixDiagnosis() *triage.Diagnosis {
	return &triage.Diagnosis{
		Pod: triage.PodRef{Namespace: "shop", Name: "web"}, State: "Pending",
		CollectedAt: time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC),
		Findings: []triage.Finding{{
			Code: triage.CodeInsufficientCPU, Severity: triage.SeverityBlocker, Summary: "No node has 500m cpu free.",
			Fix: []string{
				"kubectl describe node a   # see Allocated resources",
				"Lower the cpu request of <!channel>, or free room on node a:",
				"kubectl get pods -A -o wide --field-selector spec.nodeName=a",
				"On a: journalctl -u kubelet | grep '```' | tail",
			},
		}},
	}
}

// TestRenderFixShape: the Fix section is a heading, then for each run of commands a code
// block holding only them, each run's prose (escaped for mrkdwn) as text before it, and a
// node's commands after the line that names the node.
func TestRenderFixShape(t *testing.T) {
	blocks, _ := Render(bot.DiagnosisMessage(fixDiagnosis(), ""))
	var got []string
	in := false
	for _, b := range blocks {
		s, ok := b.(*slack.SectionBlock)
		if !ok {
			in = false
			continue
		}
		if s.Text.Text == "*Fix*" {
			in = true
		}
		if in {
			got = append(got, s.Text.Text)
		}
	}
	want := []string{
		"*Fix*",
		"```\nkubectl describe node a   # see Allocated resources\n```",
		"• Lower the cpu request of &lt;!channel&gt;, or free room on node a:",
		"```\nkubectl get pods -A -o wide --field-selector spec.nodeName=a\n```",
		"• On a:",
		"```\njournalctl -u kubelet | grep '`\u200b`\u200b`' | tail\n```",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Fix blocks (-want +got):\n%s", diff)
	}
}

// TestRenderFixNeverCutsACommand: a command longer than a section's text holds is replaced by
// a shell comment, never cut (a cut `kubectl delete pod` deletes fewer pods than the answer
// says); log lines and other code are still cut to fit.
func TestRenderFixNeverCutsACommand(t *testing.T) {
	cmd := "kubectl delete pod -n shop"
	for i := range 400 {
		cmd += fmt.Sprintf(" web-%03d", i) // 3,226 characters in all
	}
	d := fixDiagnosis()
	d.Findings[0].Fix = []string{"kubectl get pods -n shop", cmd}
	blocks, _ := Render(bot.DiagnosisMessage(d, ""))
	var code []string
	for _, b := range blocks {
		if s, ok := b.(*slack.SectionBlock); ok && s.Text != nil && strings.HasPrefix(s.Text.Text, "```\n") {
			code = append(code, s.Text.Text)
		}
	}
	want := []string{"```\nkubectl get pods -n shop\n```", "```\n" + chat.TooLongCommand(len(cmd)) + "\n```"}
	if diff := cmp.Diff(want, code); diff != "" {
		t.Errorf("Fix code blocks (-want +got):\n%s", diff)
	}
	if got := codeText(cmd, false); !strings.HasSuffix(got, "…\n```") || len(got) > maxSectionText {
		t.Errorf("codeText of a long log line = %.80q…, want it cut to fit", got)
	}
}
