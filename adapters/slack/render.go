package slack

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/whypending/whypending/chat"
)

// Block Kit limits (https://docs.slack.dev/reference/block-kit/blocks), in characters.
const (
	maxBlocks        = 50   // blocks per message
	maxHeaderText    = 150  // header block plain_text
	maxSectionText   = 3000 // section text
	maxFieldText     = 2000 // one section field
	maxFields        = 10   // fields per section
	maxContextText   = 2000 // our budget for a context element
	maxButtons       = 25   // elements per actions block
	maxButtonText    = 75   // button label
	maxButtonValue   = 2000 // button value
	maxActionID      = 255  // button action_id
	maxConfirmTitle  = 100  // confirm dialog title
	maxConfirmText   = 300  // confirm dialog text
	maxConfirmButton = 30   // confirm dialog confirm/deny labels
	maxFallbackText  = 3000 // our budget for the notification text
	// maxTableRows and maxLines keep long tables and evidence readable in a channel; the
	// rest is summarised as "… and N more".
	maxTableRows = 20
	maxLines     = 15
	maxCellRunes = 48
)

// severityMark prefixes titles so the severity shows without colour (Block Kit has none).
var severityMark = map[chat.Severity]string{
	"blocker": "\U0001F534 ", // red circle
	"warning": "\U0001F7E0 ", // orange circle
	"info":    "\u2139\ufe0f ",
	"ok":      "\u2705 ",
}

// Render turns a chat.Message into Block Kit blocks plus the notification fallback text.
// Every string from the message is escaped for mrkdwn (so "<!channel>", "<@U…>" and
// "<http://…|…>" in pod names or log lines show as text) and sent with verbatim set (no
// auto-linking or mention parsing); long tables, lists and code are cut to Slack's limits
// with "… and N more". Buttons always survive the block limit.
func Render(m chat.Message) (blocks []slack.Block, fallback string) {
	title := severityMark[m.Severity] + m.Title
	fallback = fitEscaped(title, maxFallbackText)
	switch {
	case m.Title != "" && utf8.RuneCountInString(title) <= maxHeaderText:
		blocks = append(blocks, slack.NewHeaderBlock(plain(title)))
	case m.Title != "":
		// A header block cuts at 150 characters, and a long title (a cluster's error, say)
		// ends with its cause: show it whole, in bold, in a section.
		blocks = append(blocks, slack.NewSectionBlock(mrkdwn("*"+fitEscaped(title, maxSectionText-2)+"*"), nil, nil))
	case len(m.Sections) > 0:
		fallback = fitEscaped(m.Sections[0].Text, maxFallbackText)
	}
	for _, s := range m.Sections {
		blocks = append(blocks, sectionBlocks(s)...)
	}
	var tail []slack.Block
	if len(m.Buttons) > 0 {
		tail = append(tail, actionsBlock(m.Buttons))
	}
	if m.Footer != "" {
		tail = append(tail, slack.NewContextBlock("", mrkdwn(fitEscaped(m.Footer, maxContextText))))
	}
	if room := maxBlocks - len(tail); len(blocks) > room {
		dropped := len(blocks) - (room - 1)
		blocks = append(blocks[:room-1], slack.NewContextBlock("",
			mrkdwn(fmt.Sprintf("_… and %d more blocks not shown_", dropped))))
	}
	return append(blocks, tail...), fallback
}

// sectionBlocks renders one chat.Section: heading and text, fields (10 per block), the table
// as a preformatted block, bullet lines and code.
func sectionBlocks(s chat.Section) []slack.Block {
	var out []slack.Block
	var text string
	if s.Heading != "" {
		text = "*" + escape(s.Heading) + "*"
	}
	if s.Text != "" {
		if text != "" {
			text += "\n"
		}
		text += fitEscaped(s.Text, maxSectionText-utf8.RuneCountInString(text))
	}
	for i := 0; i < len(s.Fields); i += maxFields {
		var fields []*slack.TextBlockObject
		for _, f := range s.Fields[i:min(i+maxFields, len(s.Fields))] {
			name := "*" + fitEscaped(f.Name, 100) + "*\n"
			fields = append(fields, mrkdwn(name+fitEscaped(nonEmpty(f.Value), maxFieldText-utf8.RuneCountInString(name))))
		}
		var t *slack.TextBlockObject
		if i == 0 && text != "" {
			t = mrkdwn(text)
			text = ""
		}
		out = append(out, slack.NewSectionBlock(t, fields, nil))
	}
	if text != "" {
		out = append(out, slack.NewSectionBlock(mrkdwn(text), nil, nil))
	}
	if s.Table != nil && len(s.Table.Rows) > 0 {
		out = append(out, slack.NewSectionBlock(mrkdwn(tableText(s.Table)), nil, nil))
	}
	if len(s.Lines) > 0 {
		out = append(out, slack.NewSectionBlock(mrkdwn(linesText(s.Lines)), nil, nil))
	}
	if s.Code != "" {
		out = append(out, slack.NewSectionBlock(mrkdwn(codeText(s.Code, s.Commands)), nil, nil))
	}
	return out
}

// tableText lays a table out as aligned, preformatted text: at most maxTableRows rows and
// maxSectionText characters, then "… and N more rows".
func tableText(t *chat.Table) string {
	lines := chat.TableLines(t, maxTableRows, maxCellRunes)
	line := escape
	const fence = "```"
	more := func(n int) string { return fmt.Sprintf("\n… and %d more rows", n) }
	var b strings.Builder
	b.WriteString(fence + "\n" + line(lines[0]))
	budget := maxSectionText - len(fence) - utf8.RuneCountInString(more(len(t.Rows))) - 1
	n := 0
	for ; n < len(lines)-1; n++ {
		l := "\n" + line(lines[n+1])
		if utf8.RuneCountInString(b.String())+utf8.RuneCountInString(l) > budget {
			break
		}
		b.WriteString(l)
	}
	b.WriteString("\n" + fence)
	if n < len(t.Rows) {
		b.WriteString(more(len(t.Rows) - n))
	}
	return b.String()
}

// linesText renders bullet lines: at most maxLines and maxSectionText characters.
func linesText(lines []string) string {
	var b strings.Builder
	n := 0
	budget := maxSectionText - 40
	for ; n < len(lines) && n < maxLines; n++ {
		l := "• " + fitEscaped(chat.OneLine(lines[n]), 500)
		if n > 0 {
			l = "\n" + l
		}
		if utf8.RuneCountInString(b.String())+utf8.RuneCountInString(l) > budget {
			break
		}
		b.WriteString(l)
	}
	if n < len(lines) {
		fmt.Fprintf(&b, "\n… and %d more", len(lines)-n)
	}
	return b.String()
}

// codeText renders preformatted text, keeping whole lines up to maxSectionText characters.
func codeText(code string, commands bool) string {
	const fence = "```"
	lines := strings.Split(strings.TrimRight(code, "\n"), "\n")
	var b strings.Builder
	budget := maxSectionText - 2*len(fence) - 40
	n := 0
	for ; n < len(lines); n++ {
		l := escape(lines[n])
		if n > 0 {
			l = "\n" + l
		}
		if utf8.RuneCountInString(b.String())+utf8.RuneCountInString(l) > budget {
			if n == 0 { // one huge line: cut it, or a command stands as a comment (never cut)
				if commands {
					b.WriteString(escape(chat.TooLongCommand(utf8.RuneCountInString(lines[0]))))
				} else {
					b.WriteString(fitEscaped(lines[0], budget))
				}
				n = 1
			}
			break
		}
		b.WriteString(l)
	}
	out := fence + "\n" + b.String() + "\n" + fence
	if n < len(lines) {
		out += fmt.Sprintf("\n… and %d more lines", len(lines)-n)
	}
	return out
}

// actionsBlock renders buttons. Duplicate action IDs get a "#n" suffix (Slack requires them
// unique); ParseActionID strips it.
func actionsBlock(buttons []chat.Button) *slack.ActionBlock {
	var elems []slack.BlockElement
	seen := map[string]int{}
	for i, btn := range buttons {
		if i >= maxButtons {
			break
		}
		id := btn.ActionID
		if n := seen[id]; n > 0 {
			id = fmt.Sprintf("%s#%d", id, n)
		}
		seen[btn.ActionID]++
		e := slack.NewButtonBlockElement(chat.Cut(id, maxActionID), chat.Cut(btn.Value, maxButtonValue),
			plain(chat.Cut(btn.Label, maxButtonText)))
		switch btn.Style {
		case chat.StylePrimary:
			e.Style = slack.StylePrimary
		case chat.StyleDanger:
			e.Style = slack.StyleDanger
		}
		if c := btn.Confirm; c != nil {
			e.Confirm = slack.NewConfirmationBlockObject(
				plain(chat.Cut(c.Title, maxConfirmTitle)),
				plain(chat.Cut(c.Text, maxConfirmText)),
				plain(chat.Cut(nonEmptyOr(c.Confirm, "Confirm"), maxConfirmButton)),
				plain(chat.Cut(nonEmptyOr(c.Deny, "Cancel"), maxConfirmButton)))
			if btn.Style == chat.StyleDanger {
				e.Confirm.Style = slack.StyleDanger
			}
		}
		elems = append(elems, e)
	}
	return slack.NewActionBlock("", elems...)
}

// ParseActionID undoes the "#n" suffix actionsBlock adds to duplicate action IDs.
func ParseActionID(id string) string {
	if i := strings.LastIndex(id, "#"); i > 0 {
		return id[:i]
	}
	return id
}

// escape makes text safe for mrkdwn: Slack reads "<…>" as links and mentions and "&" as the
// start of an entity, so exactly these three are replaced (Slack's documented escaping), and
// a run of three or more backticks is broken (chat.DefuseFences): in a code block it would
// close the block early, and in any other text (a container's termination message quoted as
// evidence) it would open one, showing the cluster's text as if it were a command to paste.
func escape(s string) string { return mrkdwnEscaper.Replace(chat.DefuseFences(s)) }

// mrkdwnEscaper is built once (a Replacer builds its table on first use; it is safe for
// concurrent use), not per escaped string.
var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// fitEscaped escapes s and cuts it so the escaped text has at most limit characters,
// never splitting an entity; a cut ends with "…".
func fitEscaped(s string, limit int) string {
	s = chat.DefuseFences(s) // before the cut: one rune at a time shows no run
	e := mrkdwnEscaper.Replace(s)
	if utf8.RuneCountInString(e) <= limit {
		return e
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		piece := mrkdwnEscaper.Replace(string(r))
		if n+utf8.RuneCountInString(piece) > limit-1 {
			break
		}
		b.WriteString(piece)
		n += utf8.RuneCountInString(piece)
	}
	return b.String() + "…"
}

func nonEmpty(s string) string { return nonEmptyOr(s, "-") }

func nonEmptyOr(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, nonEmpty(s), false, false)
}

// mrkdwn builds an mrkdwn text object with verbatim set: already-escaped text, no
// auto-linking of URLs or channel names, no mention parsing.
func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, nonEmpty(s), false, true)
}
