package console

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/whypending/whypending/chat"
)

func TestRenderEscapesControlSequences(t *testing.T) {
	m := chat.Message{
		Title:    "ns/pod\x1b[2J is Pending",
		Sections: []chat.Section{{Lines: []string{"log line \x1b]0;pwned\x07"}, Table: &chat.Table{Columns: []string{"NODE"}, Rows: [][]string{{"a\rb"}}}}},
	}
	var b bytes.Buffer
	if err := Render(&b, m); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("output keeps control characters: %q", out)
	}
	for _, want := range []string{`ns/pod\u001b[2J is Pending`, `\u001b]0;pwned\u0007`, `a\u000db`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRunAnswersEachLineAndSkipsComments(t *testing.T) {
	in := strings.NewReader("# a comment\n\n/why-pending a/b\n/why-pending c/d\n/quit\n/why-pending never/asked\n")
	var asked []string
	h := func(_ context.Context, line string) []chat.Message {
		asked = append(asked, line)
		return []chat.Message{{Title: "answer to " + line}}
	}
	var out bytes.Buffer
	if err := Run(context.Background(), in, &out, "", h, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(asked, "|"), "/why-pending a/b|/why-pending c/d"; got != want {
		t.Errorf("asked = %q, want %q", got, want)
	}
	if !strings.Contains(out.String(), "answer to /why-pending c/d") {
		t.Errorf("output lacks the second answer:\n%s", out.String())
	}
}

func TestRenderCapsLongTables(t *testing.T) {
	tb := &chat.Table{Columns: []string{"IP"}}
	for i := 0; i < 181; i++ {
		tb.Rows = append(tb.Rows, []string{"172.16.0." + strconv.Itoa(i)})
	}
	var b bytes.Buffer
	if err := Render(&b, chat.Message{Title: "plan", Sections: []chat.Section{{Table: tb}}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if got, want := strings.Count(out, "172.16.0."), maxTableRows-1; got != want {
		t.Errorf("rows shown = %d, want %d", got, want)
	}
	if want := "… and 142 more rows"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q", want)
	}
}

// TestRenderKeepsNamesInHeadings: a heading is written as it is: the pod name and the code in
// a workload group's heading are case-sensitive identifiers, never upper-cased.
func TestRenderKeepsNamesInHeadings(t *testing.T) {
	heading := "4 of 5 pods Pending: insufficient-cpu — pod checkout-7d9f8b6c4-x2xq"
	m := chat.Message{Title: "Deployment shop/checkout: insufficient-cpu", Sections: []chat.Section{
		{Heading: "Cause", Text: "No node has 1500m cpu free."},
		{Heading: heading, Text: "No node has 1500m cpu free."},
	}}
	var b bytes.Buffer
	if err := Render(&b, m); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(b.String(), "\n"); !slices.Contains(lines, heading) || !slices.Contains(lines, "Cause") {
		t.Errorf("output lacks the headings %q and %q as written:\n%s", "Cause", heading, b.String())
	}
}
