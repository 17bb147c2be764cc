package slack

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"

	"github.com/whypending/whypending/bot"
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
