package collect_test

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/adapters/discord"
	slackadapter "github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
	"github.com/whypending/whypending/triage/collect"
)

// This file lives in triage/collect because the offline snapshots of the scenario folders are
// built here (offline_test.go); it is an external test package so it can render through bot and
// the adapters, which import collect. The rules' side of the same check is fixsteps_test.go.

// TestFixIsPasteableOnEveryPlatform renders the answer of every scenario folder that asks
// about a pod (evaluated offline, as TestFixStepsOfEveryRule reads them) as the bot's
// message, the console's text, Slack's blocks and Discord's embeds, and reads the Fix section
// back from each: every line in a code block there is a command (triage.ParseFixStep), every
// prose step is a bullet outside code blocks, and they come in the order of Finding.Fix, each
// command of a node's shell after an "On NODE:" line.
func TestFixIsPasteableOnEveryPlatform(t *testing.T) {
	mixed := 0
	for _, sc := range podScenarios(t) {
		t.Run(sc.Name, func(t *testing.T) {
			d := triage.Evaluate(collect.OfflineSnapshot(t, sc))
			fix := d.Primary().Fix
			if len(fix) == 0 {
				t.Skip("no fix")
			}
			for i := 1; i < len(fix); i++ {
				if (triage.ParseFixStep(fix[i]).Command == "") != (triage.ParseFixStep(fix[i-1]).Command == "") {
					mixed++
					break
				}
			}
			checkEveryPlatform(t, bot.AnswerMessage(&triage.Answer{Pod: d}, "prod"), fix)
		})
	}
	if mixed == 0 {
		t.Error("no scenario's fix mixes prose and commands: the test no longer checks their order")
	}
}

// checkEveryPlatform reads the Fix section back from m and from its console, Slack and
// Discord renderings, and checks each against fix (checkFixItems).
func checkEveryPlatform(t *testing.T, m chat.Message, fix []string) {
	t.Helper()
	checkFixItems(t, "message", messageFixItems(t, m), fix, false)
	var out bytes.Buffer
	if err := console.Render(&out, m); err != nil {
		t.Fatal(err)
	}
	checkFixItems(t, "console", consoleFixItems(out.String()), fix, false)
	blocks, _ := slackadapter.Render(m)
	checkFixItems(t, "slack", slackFixItems(t, blocks), fix, false)
	checkFixItems(t, "discord", discordFixItems(discord.Render(m)), fix, true)
}

// TestWorkloadFixIsPasteableOnEveryPlatform does what TestFixIsPasteableOnEveryPlatform does for
// the scenario folders that ask about a workload, whose answers need the workload reads: each
// is loaded into its own control plane (as TestScenarios loads it) and answered with the direct
// Collector. A workload answer shows the fix of its primary finding, unless the largest group's
// pod restates it, and each group's pod's fix: every one is checked, in its own Fix section.
func TestWorkloadFixIsPasteableOnEveryPlatform(t *testing.T) {
	for _, dir := range collect.ScenarioDirs(t) {
		sc, err := testenv.LoadScenarioDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Expected.Target == "" {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			exp := sc.Expected
			c := testcluster.Start(t, testenv.Options{Scheduler: !exp.SchedulerMustBeStopped})
			testcluster.Load(t, c, dir)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			if ns, name, ok := strings.Cut(exp.Pod, "/"); ok && exp.NeedsScheduler && !exp.SchedulerMustBeStopped {
				if err := c.WaitForScheduler(ctx, ns, name); err != nil {
					t.Fatal(err)
				}
			}
			target, err := triage.ParseTarget(exp.Target, exp.Namespace, false)
			if err != nil {
				t.Fatal(err)
			}
			a, err := collect.Answer(ctx, collect.New(c.Client).WithCalico(c.Config), target)
			if err != nil {
				t.Fatalf("Answer(%s): %v", exp.Target, err)
			}
			if a.Workload == nil {
				t.Fatalf("Answer(%s) is not a workload answer", exp.Target)
			}
			// The fixes in the order the message shows them, each its own Fix section.
			var fixes [][]string
			wd := a.Workload
			p := wd.Primary()
			restated := len(wd.Groups) > 0 && wd.Groups[0].Stuck() && wd.Groups[0].Diagnosis != nil &&
				p.Code == wd.Groups[0].Code && slices.Equal(p.Fix, wd.Groups[0].Diagnosis.Primary().Fix)
			if len(p.Fix) > 0 && !restated {
				fixes = append(fixes, p.Fix)
			}
			for _, g := range wd.Groups {
				if g.Diagnosis != nil && len(g.Diagnosis.Primary().Fix) > 0 {
					fixes = append(fixes, g.Diagnosis.Primary().Fix)
				}
			}
			if len(fixes) == 0 {
				t.Fatalf("Answer(%s) has no fix", exp.Target)
			}
			m := bot.AnswerMessage(a, "prod")
			if blocks, _ := slackadapter.Render(m); slackCut(blocks) {
				t.Errorf("Slack cuts the answer at %d blocks: a fix is lost", len(blocks))
			}
			// Each Fix section of the message on its own: cut the message before the next one.
			for i, fix := range fixes {
				part := nthFix(m, i)
				if len(part.Sections) == 0 {
					t.Errorf("Fix section %d of %d not found in the message", i+1, len(fixes))
					continue
				}
				checkEveryPlatform(t, part, fix)
			}
		})
	}
}

// slackCut reports whether Slack's rendering dropped blocks past its limit of 50.
func slackCut(blocks []slack.Block) bool {
	for _, b := range blocks {
		if c, ok := b.(*slack.ContextBlock); ok {
			for _, e := range c.ContextElements.Elements {
				if t, ok := e.(*slack.TextBlockObject); ok && strings.Contains(t.Text, "more blocks not shown") {
					return true
				}
			}
		}
	}
	return false
}

// nthFix is m with only its i-th Fix section (counted from 0) and what follows up to the next
// heading, or no sections when m has fewer.
func nthFix(m chat.Message, i int) chat.Message {
	out := chat.Message{Title: m.Title, Severity: m.Severity, Footer: m.Footer}
	n, in := -1, false
	for _, s := range m.Sections {
		if s.Heading != "" {
			in = false
			if s.Heading == "Fix" {
				n++
				in = n == i
			}
		}
		if in {
			out.Sections = append(out.Sections, s)
		}
	}
	return out
}

// podScenarios loads the scenario folders that ask about a pod (a workload's answer needs the
// workload reads: TestScenarios).
func podScenarios(t *testing.T) []*testenv.Scenario {
	t.Helper()
	var out []*testenv.Scenario
	for _, dir := range collect.ScenarioDirs(t) {
		sc, err := testenv.LoadScenarioDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Expected.Target == "" {
			out = append(out, sc)
		}
	}
	return out
}

// fixItem is one line read back from a rendered Fix section: a line of a code block, or a line
// of text outside code blocks.
type fixItem struct {
	code bool
	line string
	// block numbers the code blocks of the rendering (from 1), 0 when the platform shows none
	// (the console indents code lines) or for text.
	block int
}

// checkFixItems checks the lines read back from a platform's Fix section against fix: each
// code line is the command of the next entry (cut lines, as Discord cuts code lines at 300
// characters, when cut is set, end in "…" and begin the command), in the shell the last
// "On NODE:" line named since prose (or the user's own, after the line that says so); each
// text line is "• " and the next prose entry, or "• On NODE:" before a node's commands;
// nothing is left over.
func checkFixItems(t *testing.T, platform string, items []fixItem, fix []string, cut bool) {
	t.Helper()
	if len(items) == 0 {
		t.Errorf("%s: no Fix section read back", platform)
		return
	}
	i, node := 0, ""
	for _, it := range items {
		if it.code {
			if s := triage.ParseFixStep(it.line); s.Command == "" || s.Node != "" {
				t.Errorf("%s: line %q in a Fix code block is not a command", platform, it.line)
			}
		}
		if i == len(fix) {
			t.Errorf("%s: %+v after the last fix entry", platform, it)
			continue
		}
		want := triage.ParseFixStep(fix[i])
		switch {
		case it.code && want.Command != "" && want.Node == node:
			got, ok := it.line, it.line == want.Command
			if !ok && cut {
				ok = strings.HasSuffix(got, "…") && strings.HasPrefix(want.Command, strings.TrimSuffix(got, "…"))
			}
			if !ok {
				t.Errorf("%s: code line %q, want %q (fix entry %d)", platform, got, want.Command, i)
			}
			i++
		case !it.code && want.Command == "" && it.line == "• "+want.Text:
			node = ""
			i++
		case !it.code && want.Node != "" && it.line == "• On "+want.Node+":":
			node = want.Node
		case !it.code && want.Command != "" && want.Node == "" && node != "" && it.line == "• In your own shell (where kubectl reaches the cluster):":
			node = ""
		default:
			t.Errorf("%s: read %+v, want fix entry %d %q (as %+v, in the shell of %q)", platform, it, i, fix[i], want, node)
			return
		}
	}
	if i < len(fix) {
		t.Errorf("%s: fix entries from %d (%q) not shown", platform, i, fix[i])
	}
	checkChangesAlone(t, platform, items)
}

// checkChangesAlone checks that a code block holding more than one command holds only commands
// that read (FixStep.ReadOnly): copying a block must not run a change with another command.
func checkChangesAlone(t *testing.T, platform string, items []fixItem) {
	t.Helper()
	blocks := map[int][]string{}
	for _, it := range items {
		if it.code && it.block > 0 {
			blocks[it.block] = append(blocks[it.block], it.line)
		}
	}
	for _, lines := range blocks {
		if len(lines) < 2 {
			continue
		}
		for _, l := range lines {
			if !triage.ParseFixStep(strings.TrimSuffix(l, "…")).ReadOnly() {
				t.Errorf("%s: a code block holds %q with other commands: %q", platform, l, lines)
			}
		}
	}
}

// messageFixItems reads the Fix sections of m: from the section headed "Fix" to the next
// heading; they hold only text (bullets) and code.
func messageFixItems(t *testing.T, m chat.Message) []fixItem {
	var out []fixItem
	in, block := false, 0
	for _, s := range m.Sections {
		if s.Heading != "" {
			in = s.Heading == "Fix"
		}
		if !in {
			continue
		}
		if len(s.Fields) > 0 || s.Table != nil || len(s.Lines) > 0 {
			t.Errorf("message: a Fix section holds more than text and code: %+v", s)
		}
		out = append(out, splitItems(s.Text, 0)...)
		if s.Code != "" {
			block++
			out = append(out, splitItems(s.Code, block)...)
		}
	}
	return out
}

// splitItems is s's lines: text when block is 0, else lines of code block number block.
func splitItems(s string, block int) []fixItem {
	var out []fixItem
	if s == "" {
		return nil
	}
	for _, l := range strings.Split(s, "\n") {
		out = append(out, fixItem{code: block > 0, line: l, block: block})
	}
	return out
}

// consoleFixItems reads the console's Fix section: the lines after "Fix" up to the next
// heading (a line not indented), text indented by two spaces, code by four.
func consoleFixItems(text string) []fixItem {
	var out []fixItem
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case l == "Fix":
			in = true
		case !in || l == "":
		case strings.HasPrefix(l, "    "):
			out = append(out, fixItem{code: true, line: l[4:]})
		case strings.HasPrefix(l, "  "):
			out = append(out, fixItem{line: l[2:]})
		default:
			in = false
		}
	}
	return out
}

// slackFixItems reads Slack's Fix section: from the section block whose text starts "*Fix*"
// to the next block that starts with a heading; fenced text is code, the rest text, both
// unescaped from mrkdwn.
func slackFixItems(t *testing.T, blocks []slack.Block) []fixItem {
	unescape := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")
	var out []fixItem
	in, block := false, 0
	for _, b := range blocks {
		s, ok := b.(*slack.SectionBlock)
		if !ok || s.Text == nil {
			in = false
			continue
		}
		text := s.Text.Text
		switch {
		case strings.HasPrefix(text, "*Fix*"):
			in = true
			text = strings.TrimPrefix(strings.TrimPrefix(text, "*Fix*"), "\n")
		case strings.HasPrefix(text, "*"):
			in = false
		}
		if !in || text == "" {
			continue
		}
		code := false
		for _, l := range strings.Split(text, "\n") {
			if l == "```" {
				if code = !code; code {
					block++
				}
				continue
			}
			it := fixItem{code: code, line: unescape.Replace(l)}
			if code {
				it.block = block
			}
			out = append(out, it)
		}
		if code {
			t.Errorf("slack: unterminated code block in %q", text)
		}
	}
	return out
}

// discordFixItems reads Discord's Fix section: the embed field named "Fix" and the unnamed
// ("\u200b") fields after it, on every page; fenced text is code, the rest text unescaped
// from Discord markdown.
func discordFixItems(pages []discord.Page) []fixItem {
	var out []fixItem
	in, block := false, 0
	for _, p := range pages {
		for _, f := range p.Embed.Fields {
			switch f.Name {
			case "Fix":
				in = true
			case "\u200b":
			default:
				in = false
			}
			if !in {
				continue
			}
			code := false
			for _, l := range strings.Split(f.Value, "\n") {
				if l == "```" {
					if code = !code; code {
						block++
					}
					continue
				}
				it := fixItem{code: code, line: l}
				if code {
					it.block = block
				} else {
					it.line = reMarkdownEscape.ReplaceAllString(l, "$1")
				}
				out = append(out, it)
			}
		}
	}
	return out
}

// reMarkdownEscape undoes Discord's escaping: a backslash before any character.
var reMarkdownEscape = regexp.MustCompile(`\\(.)`)
