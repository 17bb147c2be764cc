package discord

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/whypending/whypending/chat"
)

// Discord's message limits (developer docs: Embed Limits, Message Components), in characters
// as Discord counts them (UTF-16 code units).
const (
	maxEmbedTotal    = 6000 // title, description, field names and values and footer of one message
	maxTitle         = 256
	maxDescription   = 4096
	maxFieldName     = 256
	maxFieldValue    = 1024
	maxFields        = 25
	maxFooter        = 2048
	maxButtonsPerRow = 5
	maxButtonRows    = 5
	maxButtonLabel   = 80
	maxCustomID      = 100
)

// Our own limits, so a long answer stays readable in a channel: the rest is summarised as
// "… and N more".
const (
	maxPages     = 4   // messages per answer: the edited response and up to 3 follow-ups
	maxTableRows = 40  // rows of one table
	maxLines     = 30  // bullet lines of one section
	maxCellRunes = 120 // characters of one table cell: the reason column is the answer
	maxLineRunes = 300
	// maxCodeLine is the longest command line shown (chat.Section.Commands): what one field's
	// code block holds.
	maxCodeLine = maxFieldValue - len("```\n") - len("\n```")
	// pageReserve keeps room on every page for the note that says what did not fit.
	pageReserve = 120
)

// severityColor is the embed's side colour per chat.Message severity.
var severityColor = map[chat.Severity]int{
	"blocker": 0xED4245, // red
	"warning": 0xE67E22, // orange
	"info":    0x5865F2, // blurple
	"ok":      0x57F287, // green
}

// Page is one Discord message of an answer: an embed and, on the first page, the buttons.
// Every page is sent with allowed_mentions {parse: []} (see noMentions).
type Page struct {
	Embed      *discordgo.MessageEmbed
	Components []discordgo.MessageComponent
}

// noMentions is the allowed_mentions object sent with every message: nothing in it may
// mention anyone, whatever text from the cluster or from users it carries.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// field is one embed field before packing.
type field struct {
	name, value string
	inline      bool
}

// Render turns a chat.Message into Discord messages: the first carries the title, the
// severity colour, the buttons and the footer; what does not fit Discord's limits (6,000
// characters and 25 fields per message, 1,024 per field) continues on follow-up pages, at
// most 4, and anything beyond is summarised as "… not shown". Tables and code go in code
// blocks; every other string from the message is escaped for Discord markdown (Escape).
func Render(m chat.Message) []Page {
	return pack(m, maxPages)
}

// RenderOne renders m as a single message, for updates of a message already posted (a plan
// that changed state): what does not fit is summarised as "… not shown".
func RenderOne(m chat.Message) Page {
	return pack(m, 1)[0]
}

// pack lays m out on at most pages pages.
func pack(m chat.Message, pages int) []Page {
	title := escape(chat.OneLine(m.Title))
	desc, fields := layout(m.Sections)
	footer := chat.Cut(m.Footer, maxFooter)
	first := &discordgo.MessageEmbed{Title: cut(title, maxTitle), Color: severityColor[m.Severity]}
	if footer != "" {
		first.Footer = &discordgo.MessageEmbedFooter{Text: footer}
	}
	components, unavailable := buttons(m.Buttons)
	if unavailable != nil {
		fields = append(fields, *unavailable)
	}
	out := []Page{{Embed: first, Components: components}}
	used := size(first.Title) + size(footer)
	if desc != "" {
		d := cut(desc, min(maxDescription, maxEmbedTotal-pageReserve-used))
		first.Description = d
		used += size(d)
	}
	cont := cut(title, 200) + " (continued)"
	for i, f := range fields {
		cur := out[len(out)-1].Embed
		n := size(f.name) + size(f.value)
		if len(cur.Fields) < maxFields-1 && used+n <= maxEmbedTotal-pageReserve {
			cur.Fields = append(cur.Fields, &discordgo.MessageEmbedField{Name: f.name, Value: f.value, Inline: f.inline})
			used += n
			continue
		}
		if len(out) == pages {
			cur.Fields = append(cur.Fields, &discordgo.MessageEmbedField{Name: "Not shown",
				Value: fmt.Sprintf("… and %d more parts: Discord's message limits.", len(fields)-i)})
			break
		}
		next := &discordgo.MessageEmbed{Title: cont, Color: first.Color,
			Fields: []*discordgo.MessageEmbedField{{Name: f.name, Value: f.value, Inline: f.inline}}}
		out = append(out, Page{Embed: next})
		used = size(cont) + n
	}
	if first.Title == "" && first.Description == "" && len(first.Fields) == 0 {
		first.Description = "\u200b" // Discord refuses an empty embed
	}
	return out
}

// layout turns sections into the embed's description (a first section that is only text)
// and fields, each within Discord's limits.
func layout(sections []chat.Section) (desc string, fields []field) {
	for i, s := range sections {
		if i == 0 && s.Heading == "" && s.Text != "" && len(s.Fields) == 0 && s.Table == nil && len(s.Lines) == 0 && s.Code == "" {
			desc = escape(s.Text)
			continue
		}
		fields = append(fields, sectionFields(s)...)
	}
	return desc, fields
}

// sectionFields renders one section: its heading names the first field; text, the table
// (a code block), bullet lines and code follow, split into fields of at most 1,024
// characters; key/value fields are inline.
func sectionFields(s chat.Section) []field {
	var out []field
	heading := cut(escape(chat.OneLine(s.Heading)), maxFieldName)
	add := func(values []string) {
		for _, v := range values {
			name := "\u200b"
			if heading != "" {
				name, heading = heading, ""
			}
			out = append(out, field{name: name, value: v})
		}
	}
	if s.Text != "" {
		add(chunk(strings.Split(escape(s.Text), "\n"), "", ""))
	}
	if heading != "" && len(s.Fields) > 0 {
		add([]string{"\u200b"})
	}
	for _, f := range s.Fields {
		out = append(out, field{
			name:   cut(escape(chat.OneLine(nonEmpty(f.Name))), maxFieldName),
			value:  cut(escape(nonEmpty(f.Value)), maxFieldValue),
			inline: true,
		})
	}
	if s.Table != nil && len(s.Table.Rows) > 0 {
		add(tableFields(s.Table))
	}
	if len(s.Lines) > 0 {
		var lines []string
		for _, l := range s.Lines[:min(len(s.Lines), maxLines)] {
			lines = append(lines, "• "+escape(chat.Cut(chat.OneLine(l), maxLineRunes)))
		}
		if n := len(s.Lines) - maxLines; n > 0 {
			lines = append(lines, fmt.Sprintf("… and %d more", n))
		}
		add(chunk(lines, "", ""))
	}
	if s.Code != "" {
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(s.Code, "\n"), "\n") {
			if s.Commands {
				// Whole, as long as one field's code block can hold it: never cut.
				if l = chat.DefuseFences(l); size(l) > maxCodeLine {
					l = chat.TooLongCommand(utf8.RuneCountInString(l))
				}
				lines = append(lines, l)
				continue
			}
			lines = append(lines, chat.DefuseFences(chat.Cut(l, maxLineRunes)))
		}
		add(chunk(lines, "```\n", "\n```"))
	}
	return out
}

// tableFields lays a table out in code blocks, repeating the header in each block.
func tableFields(t *chat.Table) []string {
	lines := chat.TableLines(t, maxTableRows, maxCellRunes)
	for i := range lines {
		lines[i] = chat.DefuseFences(lines[i])
	}
	header := lines[0]
	out := chunk(lines[1:], "```\n"+header+"\n", "\n```")
	if n := len(t.Rows) - (len(lines) - 1); n > 0 {
		more := fmt.Sprintf("\n… and %d more rows", n)
		if last := out[len(out)-1]; size(last)+size(more) <= maxFieldValue {
			out[len(out)-1] = last + more
		} else {
			out = append(out, strings.TrimPrefix(more, "\n"))
		}
	}
	return out
}

// chunk joins lines with newlines into field values of at most maxFieldValue characters
// each, every value wrapped in prefix and suffix (a code fence); a single line too long for
// a value is cut.
func chunk(lines []string, prefix, suffix string) []string {
	room := maxFieldValue - size(prefix) - size(suffix)
	var out []string
	var cur []string
	curSize := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, prefix+strings.Join(cur, "\n")+suffix)
			cur, curSize = nil, 0
		}
	}
	for _, l := range lines {
		l = cut(l, room)
		n := size(l)
		if len(cur) > 0 {
			n++ // the newline
		}
		if curSize+n > room {
			flush()
			n = size(l)
		}
		cur = append(cur, l)
		curSize += n
	}
	flush()
	if len(out) == 0 {
		out = append(out, prefix+"\u200b"+suffix)
	}
	return out
}

// buttons lays buttons out in action rows (5 per row, 5 rows). A button whose custom ID
// would exceed Discord's 100 characters is shown disabled, and the returned field says so.
func buttons(bs []chat.Button) ([]discordgo.MessageComponent, *field) {
	var rows []discordgo.MessageComponent
	var row []discordgo.MessageComponent
	var unavailable []string
	seen := map[string]bool{}
	for i, b := range bs {
		if i >= maxButtonsPerRow*maxButtonRows {
			break
		}
		id := encodeCustomID(b)
		btn := discordgo.Button{Label: cut(nonEmpty(b.Label), maxButtonLabel), Style: buttonStyle(b.Style), CustomID: id}
		if len(id) > maxCustomID || seen[id] {
			btn.CustomID, btn.Disabled = fmt.Sprintf("unavailable#%d", i), true
			unavailable = append(unavailable, b.Label)
		}
		seen[id] = true
		row = append(row, btn)
		if len(row) == maxButtonsPerRow {
			rows = append(rows, discordgo.ActionsRow{Components: row})
			row = nil
		}
	}
	if len(row) > 0 {
		rows = append(rows, discordgo.ActionsRow{Components: row})
	}
	if len(unavailable) == 0 {
		return rows, nil
	}
	return rows, &field{name: "Buttons not available here", value: cut(escape(
		"Discord cannot carry the data of "+strings.Join(unavailable, ", ")+"; use the /ipam command instead."), maxFieldValue)}
}

func buttonStyle(s chat.ButtonStyle) discordgo.ButtonStyle {
	switch s {
	case chat.StylePrimary:
		return discordgo.PrimaryButton
	case chat.StyleDanger:
		return discordgo.DangerButton
	}
	return discordgo.SecondaryButton
}

// Custom IDs of the buttons the adapter renders (Discord allows 100 characters):
//
//	"<action>|<value>"             a button; the click goes to the bot
//	"?<action>|<value>"            a button with a confirmation (chat.Button.Confirm): the
//	                               click first shows an ephemeral "are you sure?"
//	"!<action>|<value>|<message>"  that confirmation's go-ahead; <message> is the ID of the
//	                               message with the original button, which the outcome updates
//	"cancel"                       that confirmation's Cancel
//
// A plan button's action "plan:<kind>" is written "plan:": its value starts with the kind
// (chat.PlanButton).
const (
	askPrefix     = "?"
	confirmPrefix = "!"
	cancelID      = "cancel"
)

// encodeCustomID writes a button's custom ID.
func encodeCustomID(b chat.Button) string {
	action := b.ActionID
	if p, ok := chat.ParsePlanButton(b.ActionID, b.Value); ok && p.ActionID() == b.ActionID && p.Value() == b.Value {
		action = chat.ActionPlanPrefix // the value carries the kind
	}
	id := action + "|" + b.Value
	if b.Confirm != nil {
		id = askPrefix + id
	}
	return id
}

// customID is a decoded custom ID.
type customID struct {
	// ask: the button asks for confirmation first; confirmed: this is the go-ahead.
	ask, confirmed bool
	action, value  string
	// message is the ID of the message the confirmed outcome updates.
	message string
}

// decodeCustomID reads a custom ID written by encodeCustomID or confirmButtons.
func decodeCustomID(id string) (customID, bool) {
	var c customID
	switch {
	case strings.HasPrefix(id, askPrefix):
		c.ask, id = true, id[len(askPrefix):]
	case strings.HasPrefix(id, confirmPrefix):
		c.confirmed, id = true, id[len(confirmPrefix):]
		i := strings.LastIndex(id, "|")
		if i < 0 {
			return c, false
		}
		id, c.message = id[:i], id[i+1:]
	}
	action, value, ok := strings.Cut(id, "|")
	if !ok || action == "" {
		return c, false
	}
	if p, ok := chat.ParsePlanButton(action, value); ok && action == chat.ActionPlanPrefix {
		action = p.ActionID()
	}
	c.action, c.value = action, value
	return c, true
}

// confirmPage is the ephemeral "are you sure?" a button with a confirmation shows: about, the
// title of the message the button was on (markdown the adapter rendered, as Discord returns
// it: already escaped), and the go-ahead (labelled like the button) and Cancel buttons. The
// go-ahead's custom ID names the original message, so the outcome updates it; if that would
// not fit, the outcome updates this confirmation instead.
func confirmPage(c customID, label, about, messageID string) Page {
	goID := confirmPrefix + strings.TrimPrefix(encodeCustomID(chat.Button{ActionID: c.action, Value: c.value}), askPrefix) + "|" + messageID
	if len(goID) > maxCustomID {
		goID = confirmPrefix + encodeCustomID(chat.Button{ActionID: c.action, Value: c.value}) + "|"
	}
	e := &discordgo.MessageEmbed{
		Title:       cut(escape(chat.OneLine(nonEmpty(label)))+": are you sure?", maxTitle),
		Description: cut(about, maxTitle) + "\n\nOnly you see this. Nothing happens until you press " + escape(nonEmpty(label)) + ".",
		Color:       severityColor["warning"],
	}
	return Page{Embed: e, Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
		discordgo.Button{Label: cut(nonEmpty(label), maxButtonLabel), Style: discordgo.DangerButton, CustomID: goID},
		discordgo.Button{Label: "Cancel", Style: discordgo.SecondaryButton, CustomID: cancelID},
	}}}}
}

// textPage is a message of one paragraph (notices, refusals).
func textPage(text string) Page {
	return Page{Embed: &discordgo.MessageEmbed{Description: cut(escape(text), maxDescription), Color: severityColor["info"]}}
}

// markdownEscaper backslash-escapes what Discord markdown would read as formatting, a
// mention (<@…>, <@&…>, <#…>, @everyone, @here), a masked link ([…](…)), a custom emoji or
// a timestamp (<…>), or a quote (>).
var markdownEscaper = strings.NewReplacer(
	`\`, `\\`, "*", `\*`, "_", `\_`, "~", `\~`, "`", "\\`", "|", `\|`,
	"<", `\<`, ">", `\>`, "@", `\@`, "[", `\[`, "]", `\]`,
)

// Escape makes text from the cluster or from users safe to show in Discord markdown: it
// renders as the same characters and can neither format, nor link, nor mention anyone
// (allowed_mentions {parse: []} on every message keeps even a missed mention silent).
// Headings and list markers at the start of a line (#, -, +, "1.") are escaped too.
func Escape(s string) string { return escape(s) }

func escape(s string) string {
	lines := strings.Split(markdownEscaper.Replace(s), "\n")
	for i, l := range lines {
		body := strings.TrimLeft(l, " \t")
		indent := l[:len(l)-len(body)]
		switch {
		case strings.HasPrefix(body, "#"), strings.HasPrefix(body, "-"), strings.HasPrefix(body, "+"):
			lines[i] = indent + `\` + body
		default:
			j := 0
			for j < len(body) && body[j] >= '0' && body[j] <= '9' {
				j++
			}
			if j > 0 && j < len(body) && body[j] == '.' {
				lines[i] = indent + body[:j] + `\` + body[j:]
			}
		}
	}
	return strings.Join(lines, "\n")
}

// size counts characters as Discord does (UTF-16 code units).
func size(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// cut shortens already-escaped text to limit characters (size), ending with "…", without
// leaving a lone escaping backslash at the end.
func cut(s string, limit int) string {
	if size(s) <= limit {
		return s
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n+utf16.RuneLen(r) > limit-1 {
			break
		}
		b.WriteRune(r)
		n += utf16.RuneLen(r)
	}
	out := b.String()
	if trailing := len(out) - len(strings.TrimRight(out, `\`)); trailing%2 == 1 {
		out = out[:len(out)-1]
	}
	return out + "…"
}

func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// WriteJSON writes the request bodies that carry m to Discord, as a JSON array: the edit of
// the deferred response (PATCH …/messages/@original) followed by the follow-ups (POST
// /webhooks/…), exactly as the adapter sends them. `whypending demo --render discord` shows
// answers this way.
func WriteJSON(w io.Writer, m chat.Message) error {
	var bodies []any
	for i, p := range Render(m) {
		if i == 0 {
			bodies = append(bodies, editOf(p))
			continue
		}
		bodies = append(bodies, paramsOf(p, false))
	}
	b, err := json.MarshalIndent(bodies, "", "  ")
	if err != nil {
		return fmt.Errorf("encode discord message: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// editOf is the body that replaces a message with p (webhook and interaction edits).
func editOf(p Page) *discordgo.WebhookEdit {
	components := p.Components
	if components == nil {
		components = []discordgo.MessageComponent{} // [] removes the buttons; absent keeps them
	}
	return &discordgo.WebhookEdit{
		Embeds: &[]*discordgo.MessageEmbed{p.Embed}, Components: &components, AllowedMentions: noMentions(),
	}
}

// paramsOf is the body of a follow-up message with p.
func paramsOf(p Page, ephemeral bool) *discordgo.WebhookParams {
	wp := &discordgo.WebhookParams{Embeds: []*discordgo.MessageEmbed{p.Embed}, Components: p.Components, AllowedMentions: noMentions()}
	if wp.Components == nil {
		wp.Components = []discordgo.MessageComponent{}
	}
	if ephemeral {
		wp.Flags = discordgo.MessageFlagsEphemeral
	}
	return wp
}
