package chat

// Message is a platform-neutral answer. Adapters render it: Slack as Block Kit, Discord as an
// embed plus components, the console as text. Every string in a Message is plain text taken
// from the cluster or the user: renderers escape it for their platform, once.
type Message struct {
	// Title is the headline, e.g. "shop/web-7f9c is Pending: Insufficient cpu".
	Title string
	// Severity colours the message: "blocker", "warning", "info" or "ok".
	Severity string
	// Sections are paragraphs in order.
	Sections []Section
	// Buttons are actions under the message (approve, deny, start a remediation).
	Buttons []Button
	// Footer is small print, e.g. "collected 12:00:03Z · cluster prod-eu".
	Footer string
}

// Section is one block of a message: an optional heading, then any of text, key/value fields,
// a table, a list of lines and a code block, in that order.
type Section struct {
	Heading string
	Text    string
	Fields  []Field
	Table   *Table
	// Lines are bullet lines (evidence).
	Lines []string
	// Code is preformatted text (commands to paste, log lines).
	Code string
}

// Field is a short key/value pair.
type Field struct {
	Name  string
	Value string
}

// Table is a small grid, e.g. the per-node "why not here" table.
type Table struct {
	Columns []string
	Rows    [][]string
}

// Button is an action. Value is opaque to renderers (e.g. a plan ID).
type Button struct {
	// ActionID names the action, e.g. "approve", "deny", "plan:release-leaked-ips".
	ActionID string
	// Label is the button text.
	Label string
	// Value is passed back on click (e.g. the plan ID).
	Value string
	// Style is "primary", "danger" or "".
	Style string
	// Confirm, when set, asks the user before the click counts.
	Confirm *Confirm
}

// Confirm is a confirmation dialog shown before a button's action.
type Confirm struct {
	Title   string
	Text    string
	Confirm string
	Deny    string
}
