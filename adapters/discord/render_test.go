package discord

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"
	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/chat"
)

// embedSize counts an embed's characters the way Discord's 6,000 limit does.
func embedSize(e *discordgo.MessageEmbed) int {
	n := size(e.Title) + size(e.Description)
	for _, f := range e.Fields {
		n += size(f.Name) + size(f.Value)
	}
	if e.Footer != nil {
		n += size(e.Footer.Text)
	}
	return n
}

// checkLimits fails t for anything in p beyond Discord's limits.
func checkLimits(t *testing.T, p Page) {
	t.Helper()
	e := p.Embed
	if n := embedSize(e); n > maxEmbedTotal {
		t.Errorf("embed has %d characters, limit %d", n, maxEmbedTotal)
	}
	if size(e.Title) > maxTitle || size(e.Description) > maxDescription || len(e.Fields) > maxFields {
		t.Errorf("title %d, description %d, fields %d: beyond Discord's limits", size(e.Title), size(e.Description), len(e.Fields))
	}
	if e.Footer != nil && size(e.Footer.Text) > maxFooter {
		t.Errorf("footer has %d characters", size(e.Footer.Text))
	}
	for _, f := range e.Fields {
		if size(f.Name) > maxFieldName || size(f.Value) > maxFieldValue || f.Name == "" || f.Value == "" {
			t.Errorf("field %q has name %d and value %d characters (empty or beyond 256/1024)", short(f.Name), size(f.Name), size(f.Value))
		}
		if strings.Count(f.Value, "```")%2 != 0 {
			t.Errorf("field %q leaves a code block open:\n%s", f.Name, f.Value)
		}
	}
	if len(p.Components) > maxButtonRows {
		t.Errorf("%d button rows, limit %d", len(p.Components), maxButtonRows)
	}
	for _, row := range p.Components {
		r := row.(discordgo.ActionsRow)
		if len(r.Components) > maxButtonsPerRow {
			t.Errorf("%d buttons in a row, limit %d", len(r.Components), maxButtonsPerRow)
		}
		for _, c := range r.Components {
			b := c.(discordgo.Button)
			if len(b.CustomID) > maxCustomID || size(b.Label) > maxButtonLabel {
				t.Errorf("button %q: custom_id %d, label %d characters", b.Label, len(b.CustomID), size(b.Label))
			}
		}
	}
}

// short shortens s for failure messages.
func short(s string) string { return chat.Cut(s, 40) }

// hugeMessage exceeds every limit: a 200-row table, 100 lines, long code, 40 fields and 30
// buttons, with multi-byte and astral characters.
func hugeMessage() chat.Message {
	tb := &chat.Table{Columns: []string{"IP", "Node", "Allocated to", "Handle"}}
	for i := range 200 {
		tb.Rows = append(tb.Rows, []string{fmt.Sprintf("172.16.%d.%d", i/250, i%250), "worker-ü-2", "shop/gone-" + strings.Repeat("x", 60), "k8s-pod-network.🚀" + fmt.Sprint(i)})
	}
	var lines []string
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("FailedCreatePodSandBox (x%d): %s", i, strings.Repeat("IPAM allocated only 0 ", 30)))
	}
	var fields []chat.Field
	for i := range 40 {
		fields = append(fields, chat.Field{Name: fmt.Sprintf("field %d", i), Value: strings.Repeat("v", 1500)})
	}
	var buttons []chat.Button
	for i := range 30 {
		buttons = append(buttons, chat.Button{ActionID: "plan:release-leaked-ips", Label: strings.Repeat("Release ", 20), Value: fmt.Sprintf("release-leaked-ips;cluster=c%d", i)})
	}
	return chat.Message{
		Title:    strings.Repeat("shop/web is Pending: insufficient-cpu ", 20),
		Severity: "blocker",
		Sections: []chat.Section{
			{Heading: "Cause", Text: strings.Repeat("No node has 500m cpu free. ", 200), Fields: fields},
			{Heading: "Why not here (per node)", Table: tb},
			{Heading: "Evidence", Lines: lines},
			{Heading: "Fix", Code: strings.Repeat("kubectl describe node node-1   # see Allocated resources\n", 200) + "```"},
		},
		Buttons: buttons,
		Footer:  strings.Repeat("plan rr-x · ", 300),
	}
}

func TestRenderKeepsWithinLimits(t *testing.T) {
	pages := Render(hugeMessage())
	if len(pages) != maxPages {
		t.Errorf("pages = %d, want %d (the cap)", len(pages), maxPages)
	}
	for i, p := range pages {
		checkLimits(t, p)
		if i > 0 && len(p.Components) > 0 {
			t.Errorf("page %d has buttons, want them on the first page only", i)
		}
	}
	last := pages[len(pages)-1].Embed.Fields
	if f := last[len(last)-1]; f.Name != "Not shown" || !strings.Contains(f.Value, "more parts") {
		t.Errorf("last field = %q %q, want the note on what was not shown", f.Name, f.Value)
	}
	if got := len(pages[0].Components); got != maxButtonRows {
		t.Errorf("button rows = %d, want %d", got, maxButtonRows)
	}
	one := RenderOne(hugeMessage())
	checkLimits(t, one)
	if one.Embed.Color != severityColor["blocker"] {
		t.Errorf("colour = %#x, want the blocker red", one.Embed.Color)
	}
}

func TestRenderSplitsLongAnswersAcrossPages(t *testing.T) {
	tb := &chat.Table{Columns: []string{"IP", "Node", "Allocated to", "Handle", "Block"}}
	for i := range 39 {
		tb.Rows = append(tb.Rows, []string{fmt.Sprintf("172.16.0.%d", i), "ip-10-0-12-34.eu-west-1.compute.internal",
			"shop/web-7f9c-" + fmt.Sprint(i), fmt.Sprintf("k8s-pod-network.%064d", i), "172.16.0.0/26"})
	}
	m := chat.Message{Title: "Approval needed: release 39 leaked IPs on test", Severity: "warning",
		Sections: []chat.Section{{Heading: "What would change", Table: tb}},
		Buttons:  []chat.Button{{ActionID: chat.ActionApprove, Label: "Approve", Value: "rr-abc", Confirm: &chat.Confirm{Title: "Approve?"}}},
		Footer:   "plan rr-abc"}
	pages := Render(m)
	if len(pages) < 2 {
		t.Fatalf("pages = %d, want the 39 rows split over follow-ups", len(pages))
	}
	rows := 0
	for i, p := range pages {
		checkLimits(t, p)
		for _, f := range p.Embed.Fields {
			if !strings.HasPrefix(f.Value, "```\nIP") {
				t.Errorf("page %d field %q is not a code block with the header", i, f.Name)
			}
			rows += strings.Count(f.Value, "\n172.16.0.")
		}
	}
	if rows != 39 {
		t.Errorf("rows shown = %d, want all 39", rows)
	}
	if p := pages[0]; p.Embed.Footer == nil || p.Embed.Footer.Text != "plan rr-abc" || len(p.Components) != 1 {
		t.Errorf("first page footer %v, %d button rows: want the footer and the buttons there", p.Embed.Footer, len(p.Components))
	}
	if !strings.HasSuffix(pages[1].Embed.Title, "(continued)") {
		t.Errorf("second page title = %q, want … (continued)", pages[1].Embed.Title)
	}
}

func TestRenderEscapesUserText(t *testing.T) {
	m := chat.Message{
		Title:    `/why-pending: "@everyone <@&1700000000000000001>" is not a pod name`,
		Severity: "info",
		Sections: []chat.Section{
			{Heading: "Evidence", Lines: []string{
				"Failed: <@1600000000000000001> **bold** [click](https://evil.example) @here",
				"`code` ~~strike~~ ||spoiler|| > quote",
			}},
			{Text: "# not a heading\n- not a list\n12. not a list either"},
			{Fields: []chat.Field{{Name: "pod", Value: "<#1300000000000000001>"}}},
			{Heading: "Fix", Code: "kubectl logs web ```\n@everyone"},
		},
	}
	p := RenderOne(m)
	var text []string
	text = append(text, p.Embed.Title, p.Embed.Description)
	for _, f := range p.Embed.Fields {
		text = append(text, f.Name, f.Value)
	}
	all := strings.Join(text, "\n")
	outsideCode := all[:strings.Index(all, "```")]
	if m := regexp.MustCompile(`(^|[^\\])(<[@#]|\[click\]|\*\*|~~|\|\||\n# |\n- |\n12\. )`).FindString(outsideCode); m != "" {
		t.Errorf("rendered text keeps %q unescaped:\n%s", m, all)
	}
	for _, mention := range []string{"@everyone", "@here"} {
		if strings.Contains(strings.ReplaceAll(outsideCode, `\@`, ""), mention) {
			t.Errorf("rendered text keeps %s unescaped:\n%s", mention, all)
		}
	}
	for _, want := range []string{`\@everyone \<\@&1700000000000000001\>`, `\[click\](https://evil.example)`, `\# not a heading`, `\- not a list`, `12\. not a list either`} {
		if !strings.Contains(all, want) {
			t.Errorf("rendered text lacks %q:\n%s", want, all)
		}
	}
	if code := p.Embed.Fields[len(p.Embed.Fields)-1].Value; strings.Count(code, "```") != 2 || !strings.Contains(code, "@everyone") {
		t.Errorf("code field = %q, want one closed code block with its text as it is", code)
	}
}

func TestCustomIDRoundTrip(t *testing.T) {
	tests := []struct {
		button chat.Button
		id     string
	}{
		{chat.Button{ActionID: chat.ActionDeny, Value: "rr-abcdefghijklm"}, "deny|rr-abcdefghijklm"},
		{chat.Button{ActionID: chat.ActionApprove, Value: "rr-abcdefghijklm", Confirm: &chat.Confirm{}}, "?approve|rr-abcdefghijklm"},
		{chat.Button{ActionID: "plan:release-empty-blocks", Value: "release-empty-blocks;cluster=prod;node=worker-2"}, "plan:|release-empty-blocks;cluster=prod;node=worker-2"},
	}
	for _, tt := range tests {
		if got := encodeCustomID(tt.button); got != tt.id {
			t.Errorf("encodeCustomID(%+v) = %q, want %q", tt.button, got, tt.id)
		}
		c, ok := decodeCustomID(tt.id)
		if !ok || c.action != tt.button.ActionID || c.value != tt.button.Value || c.ask != (tt.button.Confirm != nil) {
			t.Errorf("decodeCustomID(%q) = %+v %v, want %s %s", tt.id, c, ok, tt.button.ActionID, tt.button.Value)
		}
	}
	c, ok := decodeCustomID("!approve|rr-abcdefghijklm|1400000000000000777")
	if want := (customID{confirmed: true, action: "approve", value: "rr-abcdefghijklm", message: "1400000000000000777"}); !ok || c != want {
		t.Errorf("decode go-ahead = %+v %v, want %+v", c, ok, want)
	}
	for _, bad := range []string{"", "approve", "|x", "!approve"} {
		if _, ok := decodeCustomID(bad); ok {
			t.Errorf("decodeCustomID(%q) accepted", bad)
		}
	}
	// A button whose data does not fit Discord's 100 characters is shown disabled, with a note.
	long := chat.Button{ActionID: "plan:release-empty-blocks", Label: "Release 3 empty blocks", Value: "release-empty-blocks;cluster=prod;node=" + strings.Repeat("n", 90)}
	p := RenderOne(chat.Message{Title: "t", Buttons: []chat.Button{long}})
	b := p.Components[0].(discordgo.ActionsRow).Components[0].(discordgo.Button)
	if !b.Disabled || len(b.CustomID) > maxCustomID || !strings.Contains(p.Embed.Fields[0].Value, "Release 3 empty blocks") {
		t.Errorf("long button = %+v, note %+v; want it disabled and named in a note", b, p.Embed.Fields)
	}
}

func TestWriteJSONIsTheWireFormat(t *testing.T) {
	var buf bytes.Buffer
	m := chat.Message{Title: "shop/web is Pending: insufficient-cpu", Severity: "warning",
		Sections: []chat.Section{{Heading: "Cause", Text: "No node has 500m cpu free."}},
		Buttons:  []chat.Button{{ActionID: "plan:release-leaked-ips", Label: "Release 3 leaked IPs", Value: "release-leaked-ips;cluster=test", Style: "primary"}}}
	if err := WriteJSON(&buf, m); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, buf.String())
	}
	want := []map[string]any{{
		"embeds": []any{map[string]any{
			"type": nil, "title": "shop/web is Pending: insufficient-cpu", "color": float64(severityColor["warning"]),
			"fields": []any{map[string]any{"name": "Cause", "value": "No node has 500m cpu free."}},
		}},
		"components": []any{map[string]any{"type": float64(1), "components": []any{map[string]any{
			"type": float64(2), "label": "Release 3 leaked IPs", "style": float64(1), "disabled": false,
			"custom_id": "plan:|release-leaked-ips;cluster=test",
		}}}},
		"allowed_mentions": map[string]any{"parse": []any{}, "replied_user": false},
	}}
	delete(got[0]["embeds"].([]any)[0].(map[string]any), "type")
	delete(want[0]["embeds"].([]any)[0].(map[string]any), "type")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}

// TestCommandsCoverTheBotsRepairs keeps the registered /ipam subcommands in step with the
// bot's repairs.
func TestCommandsCoverTheBotsRepairs(t *testing.T) {
	var ipam *discordgo.ApplicationCommand
	for _, c := range Commands([]string{"prod"}) {
		if c.Name == "ipam" {
			ipam = c
		}
	}
	subs := map[string]bool{}
	for _, o := range ipam.Options {
		subs[o.Name] = true
	}
	for _, want := range append([]string{"check", "blocks"}, bot.IPAMRepairs()...) {
		if !subs[want] {
			t.Errorf("/ipam has no subcommand %s", want)
		}
	}
}
