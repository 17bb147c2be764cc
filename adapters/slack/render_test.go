package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/whypending/whypending/chat"
)

// rawJSON marshals v without HTML escaping, so "<" shows as it would reach Slack.
func rawJSON(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// texts collects every text object in the blocks.
func texts(blocks []slack.Block) []*slack.TextBlockObject {
	var out []*slack.TextBlockObject
	for _, b := range blocks {
		switch b := b.(type) {
		case *slack.HeaderBlock:
			out = append(out, b.Text)
		case *slack.SectionBlock:
			if b.Text != nil {
				out = append(out, b.Text)
			}
			out = append(out, b.Fields...)
		case *slack.ContextBlock:
			for _, e := range b.ContextElements.Elements {
				if tx, ok := e.(*slack.TextBlockObject); ok {
					out = append(out, tx)
				}
			}
		case *slack.ActionBlock:
			for _, e := range b.Elements.ElementSet {
				if btn, ok := e.(*slack.ButtonBlockElement); ok {
					out = append(out, btn.Text)
				}
			}
		}
	}
	return out
}

func TestRenderEscapesUserText(t *testing.T) {
	evil := []string{"<!channel>", "<!here>", "<@U024BE7LH>", "<http://evil.example|click me>", "<#C123>"}
	m := chat.Message{
		Title:    "shop/<!channel> is Pending",
		Severity: "blocker",
		Sections: []chat.Section{{
			Heading: "<@U024BE7LH>",
			Text:    "log says <http://evil.example|click me> & more ```\nkubectl delete ns prod\n```",
			Fields:  []chat.Field{{Name: "pod", Value: "<!here>"}},
			Table:   &chat.Table{Columns: []string{"Node", "Why"}, Rows: [][]string{{"<#C123>", "<!channel>"}}},
			Lines:   []string{"event: <@U024BE7LH> did it", "message: ````` opens a block"},
			Code:    "panic: <!channel>\n``` escaped fence <!here>\n````` five, and eight: ````````",
		}},
		Footer: "collected by <!subteam^S123> ```",
	}
	blocks, fallback := Render(m)
	// plain_text (the header, button labels) is never parsed by Slack; every mrkdwn text
	// and the notification fallback are.
	out := fallback
	for _, tx := range texts(blocks) {
		if tx.Type == slack.MarkdownType {
			out += "\n" + tx.Text
		}
	}
	for _, s := range append(evil, "<!subteam^S123>") {
		if strings.Contains(out, s) {
			t.Errorf("rendered message contains %q unescaped", s)
		}
	}
	if !strings.Contains(out, "&lt;!channel&gt;") {
		t.Errorf("rendered message lost the escaped text &lt;!channel&gt;:\n%s", out)
	}
	if strings.Count(out, "```") != 4 { // one fenced table, one fenced code block
		t.Errorf("code fences = %d, want 4 (a fence in the log line must not close the block, one in the text, lines or footer must not open one)", strings.Count(out, "```"))
	}
	for _, tx := range texts(blocks) {
		if tx.Type == slack.MarkdownType && !tx.Verbatim {
			t.Errorf("mrkdwn text %q is not verbatim (Slack would parse mentions and links)", tx.Text)
		}
	}
}

func TestRenderKeepsWithinLimits(t *testing.T) {
	table := &chat.Table{Columns: []string{"IP", "Node", "Allocated to"}}
	for i := range 181 {
		table.Rows = append(table.Rows, []string{fmt.Sprintf("172.16.0.%d", i), "worker-2", fmt.Sprintf("shop/web-%d", i)})
	}
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("event %d: %s", i, strings.Repeat("x", 50)))
	}
	m := chat.Message{
		Title:    strings.Repeat("very long title ", 20),
		Sections: []chat.Section{{Heading: "Leaked IPs", Table: table}, {Heading: "Evidence", Lines: lines}, {Code: strings.Repeat("log line\n", 2000)}},
	}
	for i := range 60 {
		m.Sections = append(m.Sections, chat.Section{Text: fmt.Sprintf("extra %d", i)})
	}
	for i := range 30 {
		m.Buttons = append(m.Buttons, chat.Button{ActionID: "plan:x", Label: strings.Repeat("label ", 20), Value: fmt.Sprint(i),
			Confirm: &chat.Confirm{Title: strings.Repeat("t", 200), Text: strings.Repeat("c", 500), Confirm: strings.Repeat("y", 40)}})
	}
	m.Footer = "footer"
	blocks, _ := Render(m)
	if len(blocks) > maxBlocks {
		t.Errorf("blocks = %d, want at most %d", len(blocks), maxBlocks)
	}
	for _, tx := range texts(blocks) {
		if n := utf8.RuneCountInString(tx.Text); n > maxSectionText {
			t.Errorf("text of %d characters, want at most %d: %.60q…", n, maxSectionText, tx.Text)
		}
	}
	out := rawJSON(t, blocks)
	for _, want := range []string{"… and 161 more rows", "… and 25 more", "more lines", "more blocks not shown"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered message lacks %q", want)
		}
	}
	actions, ok := blocks[len(blocks)-2].(*slack.ActionBlock)
	if !ok {
		t.Fatalf("block before the footer is %T, want the buttons (they must survive the block limit)", blocks[len(blocks)-2])
	}
	if n := len(actions.Elements.ElementSet); n != maxButtons {
		t.Errorf("buttons = %d, want %d", n, maxButtons)
	}
	btn := actions.Elements.ElementSet[1].(*slack.ButtonBlockElement)
	if utf8.RuneCountInString(btn.Text.Text) > maxButtonText || utf8.RuneCountInString(btn.Confirm.Title.Text) > maxConfirmTitle ||
		utf8.RuneCountInString(btn.Confirm.Text.Text) > maxConfirmText || utf8.RuneCountInString(btn.Confirm.Confirm.Text) > maxConfirmButton {
		t.Errorf("button texts exceed Slack's limits: %q / %q", btn.Text.Text, btn.Confirm.Title.Text)
	}
	if btn.ActionID != "plan:x#1" || ParseActionID(btn.ActionID) != "plan:x" {
		t.Errorf("duplicate action ID = %q (parsed %q), want plan:x#1 (parsed plan:x)", btn.ActionID, ParseActionID(btn.ActionID))
	}
}

func TestFitEscaped(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"a<b", 10, "a&lt;b"},
		{"a<b", 5, "a…"}, // never "a&lt…"
		{"abcdef", 4, "abc…"},
		{"ünïcödé", 4, "ünï…"},
	}
	for _, tt := range tests {
		if got := fitEscaped(tt.in, tt.limit); got != tt.want {
			t.Errorf("fitEscaped(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
	}
}

// TestLongTitleIsNotCut: a title longer than a header block allows (a cluster's error ends with
// its cause) is shown whole in a section, not cut at 150 characters.
func TestLongTitleIsNotCut(t *testing.T) {
	title := "Cluster prod-eu is unavailable: cannot reach the Kubernetes API server at https://127.0.0.1:1/k8s/clusters/c-m-7x9k2p4q: connection refused (since 12:03:04Z). Nothing was done."
	blocks, _ := Render(chat.Message{Title: title, Severity: "warning"})
	s, ok := blocks[0].(*slack.SectionBlock)
	if !ok {
		t.Fatalf("first block = %T, want a section for a %d-character title", blocks[0], len(title))
	}
	if !strings.Contains(s.Text.Text, "connection refused (since 12:03:04Z). Nothing was done.") {
		t.Errorf("title cut: %q", s.Text.Text)
	}
	if blocks, _ := Render(chat.Message{Title: "shop/web is Pending: insufficient-cpu"}); blocks[0].BlockType() != slack.MBTHeader {
		t.Errorf("a short title is a %s block, want a header", blocks[0].BlockType())
	}
}

// TestRenderNodeTableKeepsTheFreeAmount: a long "why not" cell is cut in the middle, so the
// node's free amount at its end still shows in the channel.
func TestRenderNodeTableKeepsTheFreeAmount(t *testing.T) {
	why := "Insufficient memory: the pod requests 1536Mi, 7.5Gi of 7.8Gi allocatable already requested (300Mi free)"
	table := &chat.Table{Columns: []string{"NODE", "FITS", "WHY NOT"}, Rows: [][]string{{"ip-10-0-1-23.eu-west-1.compute.internal", "no", why}}}
	blocks, _ := Render(chat.Message{Title: "shop/api is Pending", Sections: []chat.Section{{Heading: "Why not here", Table: table}}})
	var text string
	for _, b := range blocks {
		if s, ok := b.(*slack.SectionBlock); ok && s.Text != nil && strings.Contains(s.Text.Text, "NODE") {
			text = s.Text.Text
		}
	}
	for _, want := range []string{"Insufficient memory: the pod requests 1536Mi", "(300Mi free)", "ip-10-0-1-23.eu-west-1.compute.inte"} {
		if !strings.Contains(text, want) {
			t.Errorf("node table lacks %q:\n%s", want, text)
		}
	}
	for _, l := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(l); n > maxCellRunes*4 {
			t.Errorf("line of %d characters, want at most %d: %q", n, maxCellRunes*4, l)
		}
	}
}
