package slack

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/triage"
)

// bigWorkloadAnswer is a workload answer far beyond one Slack message: 8 groups of 60 pods,
// each representative with a 40-node table, long evidence and fixes, and 100 pods not
// diagnosed.
func bigWorkloadAnswer() *triage.Answer {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	wd := &triage.WorkloadDiagnosis{
		Workload: triage.WorkloadRef{Kind: triage.KindDeployment, Namespace: "shop", Name: "checkout", UID: "uid"},
		Summary:  strings.Repeat("A very long summary of many pod groups. ", 120),
		Pods:     580, Ready: 0, CollectedAt: now,
	}
	codes := []triage.Code{triage.CodeInsufficientCPU, triage.CodeAppError, triage.CodeImageNotFound, triage.CodeOOMKilled,
		triage.CodeUntoleratedTaint, triage.CodeSecretNotFound, triage.CodeLivenessProbeFailed, triage.CodeCalicoIPAMExhausted}
	for gi, code := range codes {
		f := triage.Finding{Code: code, Severity: triage.SeverityBlocker, Summary: strings.Repeat(string(code)+" explained at length. ", 60),
			Actions: []triage.ActionRef{{Kind: "release-leaked-ips", Label: "Release 181 leaked IPs"}}}
		for n := range 40 {
			f.Nodes = append(f.Nodes, triage.NodeVerdict{Node: fmt.Sprintf("node-%03d", n), Reasons: []triage.NodeReason{{Code: code, Message: strings.Repeat("reason ", 12)}}})
		}
		for e := range 20 {
			f.Evidence = append(f.Evidence, triage.Evidence{Object: "Pod shop/x", Reason: "FailedScheduling", Message: strings.Repeat("<!channel> evidence ", 20), Count: int32(e + 1), LastSeen: now})
		}
		for x := range 10 {
			f.Fix = append(f.Fix, fmt.Sprintf("kubectl describe node node-%03d   # %s", x, strings.Repeat("see ", 30)))
		}
		g := triage.PodGroup{Code: code, Label: fmt.Sprintf("60 of 580 pods Pending: %s", code),
			Diagnosis: &triage.Diagnosis{Pod: triage.PodRef{Namespace: "shop", Name: fmt.Sprintf("checkout-%d-0", gi)}, State: "Pending", Summary: f.Summary, Findings: []triage.Finding{f}, CollectedAt: now}}
		for p := range 60 {
			g.Pods = append(g.Pods, triage.PodLine{Name: fmt.Sprintf("checkout-%d-%d", gi, p), State: "Pending", Summary: f.Summary})
		}
		wd.Groups = append(wd.Groups, g)
	}
	wd.Findings = []triage.Finding{wd.Groups[0].Diagnosis.Findings[0]}
	for p := range 100 {
		wd.NotDiagnosed = append(wd.NotDiagnosed, triage.PodLine{Name: fmt.Sprintf("checkout-x-%d", p), State: "Pending"})
	}
	return &triage.Answer{Workload: wd, Notes: []string{strings.Repeat("A note on how the question was read. ", 100)}}
}

// TestRenderWorkloadAnswerFitsBlockKit checks a huge workload answer against Slack's limits:
// at most 50 blocks, at most 3,000 characters in a section, 150 in the header, 2,000 in a
// field; what does not fit is cut with a count ("… and N more"), never silently dropped; the
// answer's head (cause, the line per group) and the buttons survive.
func TestRenderWorkloadAnswerFitsBlockKit(t *testing.T) {
	blocks, fallback := Render(bot.AnswerMessage(bigWorkloadAnswer(), ""))
	if len(blocks) > maxBlocks {
		t.Errorf("blocks = %d, want at most %d", len(blocks), maxBlocks)
	}
	if utf8.RuneCountInString(fallback) > maxFallbackText {
		t.Errorf("fallback text of %d characters", utf8.RuneCountInString(fallback))
	}
	for _, b := range blocks {
		switch b := b.(type) {
		case *slack.HeaderBlock:
			if n := utf8.RuneCountInString(b.Text.Text); n > maxHeaderText {
				t.Errorf("header of %d characters, want at most %d", n, maxHeaderText)
			}
		case *slack.SectionBlock:
			if b.Text != nil && utf8.RuneCountInString(b.Text.Text) > maxSectionText {
				t.Errorf("section of %d characters, want at most %d: %.60q…", utf8.RuneCountInString(b.Text.Text), maxSectionText, b.Text.Text)
			}
			for _, f := range b.Fields {
				if utf8.RuneCountInString(f.Text) > maxFieldText {
					t.Errorf("field of %d characters, want at most %d", utf8.RuneCountInString(f.Text), maxFieldText)
				}
			}
		}
	}
	out := rawJSON(t, blocks)
	for _, want := range []string{
		"Deployment shop/checkout: insufficient-cpu", // the title
		"*Pods by cause*", // one line per group, near the top
		"60 of 580 pods Pending: calico-ipam-exhausted",
		"more blocks not shown", // the cut, with its count
		"and 25 more nodes",     // the node table, cut with a count
		"Release 181 leaked IPs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered workload answer lacks %q", want)
		}
	}
	if strings.Contains(out, "<!channel>") {
		t.Error("cluster text reached Slack unescaped")
	}
	if _, ok := blocks[len(blocks)-2].(*slack.ActionBlock); !ok {
		t.Errorf("block before the footer is %T, want the buttons", blocks[len(blocks)-2])
	}
}
