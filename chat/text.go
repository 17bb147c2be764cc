package chat

import (
	"strings"
	"unicode/utf8"
)

// Text helpers the chat renderers share. Every renderer escapes for its own platform; these
// only lay text out.

// TableLines lays t out as aligned plain-text lines for a fixed-width font, header first:
// each cell on one line (OneLine) and cut to maxCell characters (Cut), columns two spaces
// apart, trailing spaces trimmed, and at most maxRows rows; the caller reports the rows left
// out (len(t.Rows) - (len(lines)-1)). The last column, which nothing is aligned after (a node
// table's "why not"), may take twice maxCell and is cut in the middle (CutMiddle), so that its
// end ("… (200m free)") survives.
func TableLines(t *Table, maxRows, maxCell int) []string {
	cell := func(row []string, i int) string {
		switch {
		case i >= len(row):
			return ""
		case i == len(t.Columns)-1:
			return CutMiddle(OneLine(row[i]), 2*maxCell)
		default:
			return Cut(OneLine(row[i]), maxCell)
		}
	}
	rows := t.Rows[:min(len(t.Rows), maxRows)]
	widths := make([]int, len(t.Columns))
	for i := range t.Columns {
		widths[i] = utf8.RuneCountInString(cell(t.Columns, i))
		for _, r := range rows {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell(r, i)))
		}
	}
	line := func(row []string) string {
		var b strings.Builder
		for i, w := range widths {
			c := cell(row, i)
			b.WriteString(c)
			if i < len(widths)-1 {
				b.WriteString(strings.Repeat(" ", w-utf8.RuneCountInString(c)+2))
			}
		}
		return strings.TrimRight(b.String(), " ")
	}
	out := []string{line(t.Columns)}
	for _, r := range rows {
		out = append(out, line(r))
	}
	return out
}

// Cut shortens s to at most limit characters (runes), ending a cut with "…".
func Cut(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	if limit <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:limit-1]) + "…"
}

// CutMiddle shortens s to at most limit characters (runes) by replacing its middle with "…",
// keeping about two thirds of the room for the start and the rest for the end.
func CutMiddle(s string, limit int) string {
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	if limit < 3 {
		return Cut(s, limit)
	}
	tail := (limit - 1) / 3
	head := limit - 1 - tail
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// OneLine turns line breaks and tabs into spaces.
func OneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
}

// DefuseFences breaks "```" inside text, with zero-width spaces, so it cannot close the code
// block it is shown in early (Slack mrkdwn and Discord markdown both fence with "```").
func DefuseFences(s string) string {
	return strings.ReplaceAll(s, "```", "`\u200b`\u200b`")
}
