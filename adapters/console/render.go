package console

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/whypending/whypending/chat"
)

// maxTableRows is how many table rows a terminal answer shows; the rest are counted.
const maxTableRows = 40

// Render writes m as plain text for a terminal. Every string from the cluster or the user goes
// through Escape, so object text cannot inject terminal control sequences.
func Render(w io.Writer, m chat.Message) error {
	var b strings.Builder
	marker := map[chat.Severity]string{"blocker": "✖", "warning": "!", "info": "i", "ok": "✔"}[m.Severity]
	if marker == "" {
		marker = "•"
	}
	fmt.Fprintf(&b, "%s %s\n", marker, Escape(m.Title))
	for _, s := range m.Sections {
		b.WriteString("\n")
		if s.Heading != "" {
			// As written: headings carry names (a pod's, a container's, a code), which are
			// case-sensitive; the indented body below sets the heading apart.
			fmt.Fprintf(&b, "%s\n", Escape(s.Heading))
		}
		if s.Text != "" {
			for _, line := range strings.Split(Escape(s.Text), "\n") {
				fmt.Fprintf(&b, "  %s\n", line)
			}
		}
		if len(s.Fields) > 0 {
			var parts []string
			for _, f := range s.Fields {
				parts = append(parts, Escape(f.Name)+": "+Escape(f.Value))
			}
			fmt.Fprintf(&b, "  %s\n", strings.Join(parts, "   "))
		}
		if s.Table != nil {
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			cells := make([]string, len(s.Table.Columns))
			for i, c := range s.Table.Columns {
				cells[i] = Escape(c)
			}
			fmt.Fprintf(tw, "  %s\n", strings.Join(cells, "\t"))
			rows := s.Table.Rows
			if len(rows) > maxTableRows {
				rows = rows[:maxTableRows-1]
			}
			for _, row := range rows {
				cells = cells[:0]
				for _, c := range row {
					cells = append(cells, Escape(c))
				}
				fmt.Fprintf(tw, "  %s\n", strings.Join(cells, "\t"))
			}
			tw.Flush()
			if n := len(s.Table.Rows) - len(rows); n > 0 {
				fmt.Fprintf(&b, "  … and %d more rows\n", n)
			}
		}
		for _, l := range s.Lines {
			fmt.Fprintf(&b, "  - %s\n", Escape(l))
		}
		if s.Code != "" {
			for _, line := range strings.Split(Escape(s.Code), "\n") {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		}
	}
	if len(m.Buttons) > 0 {
		b.WriteString("\nActions\n")
		for i, btn := range m.Buttons {
			fmt.Fprintf(&b, "  [%d] %s\n", i+1, Escape(btn.Label))
		}
	}
	if m.Footer != "" {
		fmt.Fprintf(&b, "\n%s\n", Escape(m.Footer))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Escape replaces control characters (other than newline and tab) with visible \uXXXX
// escapes, like kubectl's terminal escaping.
func Escape(s string) string {
	if strings.IndexFunc(s, needsEscape) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if needsEscape(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return r != '\n' && r != '\t' && (unicode.IsControl(r) || r == unicode.ReplacementChar)
}
