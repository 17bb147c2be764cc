package chat

import (
	"fmt"
	"strings"
	"unicode"
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

// Cut shortens s to at most limit characters (runes), ending a cut with "…". It cuts after a
// word, never in one, unless that would drop more than half of the room (one long word).
func Cut(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	if limit <= 0 {
		return ""
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:wordEnd(r, limit-1)]), " ") + "…"
}

// wordEnd is the largest i <= n at which r can be cut after a whole word (r[i] is a space,
// or r[i-1] ends a word: a space or punctuation), if it keeps at least half of n; else n.
func wordEnd(r []rune, n int) int {
	for i := n; i >= max(1, n/2); i-- {
		if i == len(r) || unicode.IsSpace(r[i]) || isBreak(r[i-1]) {
			return i
		}
	}
	return n
}

// wordStart is the smallest j >= from at which r can be resumed at the start of a word, if
// that keeps at least half of the room from from to the end; else from.
func wordStart(r []rune, from int) int {
	for j := from; j <= from+(len(r)-from)/2; j++ {
		if j == 0 || unicode.IsSpace(r[j-1]) || isBreak(r[j-1]) {
			return j
		}
	}
	return from
}

// isBreak reports whether a word may end after c.
func isBreak(c rune) bool { return unicode.IsSpace(c) || strings.ContainsRune(",;:/)]", c) }

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
	h := wordEnd(r, head)
	t := wordStart(r, len(r)-tail)
	return strings.TrimRight(string(r[:h]), " ") + "…" + strings.TrimLeft(string(r[t:]), " ")
}

// OneLine turns line breaks and tabs into spaces.
func OneLine(s string) string { return oneLine.Replace(s) }

// oneLine is built once: a Replacer builds its lookup table on first use, and is safe for
// concurrent use.
var oneLine = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ")

// DefuseFences breaks every run of three or more backticks inside text with zero-width
// spaces between its backticks ("```" becomes "`\u200b`\u200b`"), so no "```" is left to close
// the code block the text is shown in early (Slack mrkdwn and Discord markdown both fence
// with "```"). Runs of one or two backticks are kept. Replacing "```" alone left one in a run
// of five: the third backtick of the replacement and the two after it.
func DefuseFences(s string) string {
	if !strings.Contains(s, "```") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/2)
	for i := 0; i < len(s); {
		if s[i] != '`' {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i < 3 {
			b.WriteString(s[i:j])
		} else {
			b.WriteString(strings.Repeat("`\u200b", j-i-1) + "`")
		}
		i = j
	}
	return b.String()
}

// TooLongCommand stands, in a code block, for a command of n characters too long for the
// platform to show whole: a shell comment, so pasting the block runs nothing in its place.
func TooLongCommand(n int) string {
	return fmt.Sprintf("# a command of %d characters is too long to show here: whypending why-pending on the command line shows it whole", n)
}
