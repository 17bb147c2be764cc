package chat

// Message is a platform-neutral answer. Adapters render it: Slack as Block Kit, Discord as an
// embed plus components, the console as text. Every string in a Message is plain text taken
// from the cluster or the user: renderers escape it for their platform, once.
type Message struct {
	// Title is the headline, e.g. "shop/web-7f9c is Pending: Insufficient cpu".
	Title string
	// Severity colours the message.
	Severity Severity
	// Sections are paragraphs in order.
	Sections []Section
	// Buttons are actions under the message (approve, deny, start a remediation).
	Buttons []Button
	// Footer is small print, e.g. "collected 12:00:03Z · cluster prod-eu".
	Footer string
}

// Severity colours a message: Slack's attachment colour, Discord's embed colour, the console's
// marker.
type Severity string

// Severities, from the most to the least urgent.
const (
	// SeverityBlocker: something is stuck and will not recover by itself.
	SeverityBlocker Severity = "blocker"
	// SeverityWarning: something needs attention.
	SeverityWarning Severity = "warning"
	// SeverityInfo: nothing to act on.
	SeverityInfo Severity = "info"
	// SeverityOK: healthy, or a repair succeeded.
	SeverityOK Severity = "ok"
)

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
	// Commands says Code holds shell commands to paste (a Fix): a renderer shows each line
	// whole or not at all, never cut, since a cut command runs something else (fewer pods
	// deleted, a label half written); a line too long for the platform is replaced by
	// TooLongCommand.
	Commands bool
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
	// Style is how prominent the button is.
	Style ButtonStyle
	// Confirm, when set, asks the user before the click counts.
	Confirm *Confirm
}

// ButtonStyle is how prominent a button is; renderers map it to their platform's styles.
type ButtonStyle string

// Button styles.
const (
	// StyleDefault is a plain button.
	StyleDefault ButtonStyle = ""
	// StylePrimary is the action the message suggests (make a plan, approve).
	StylePrimary ButtonStyle = "primary"
	// StyleDanger is an action that changes or refuses something (deny, a destructive repair).
	StyleDanger ButtonStyle = "danger"
)

// Confirm is a confirmation dialog shown before a button's action.
type Confirm struct {
	Title   string
	Text    string
	Confirm string
	Deny    string
}
