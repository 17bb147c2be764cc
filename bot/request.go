package bot

import (
	"fmt"
	"slices"
	"strings"
)

// Principal is who sent a command or clicked a button, as the chat platform identifies them.
// Authorisation uses Platform, ID and Groups only; Team is recorded for the audit and Name is
// for display.
type Principal struct {
	// Platform is the adapter's name: "slack", "discord", "console". Approvers are looked up
	// in this platform's list only (Policy.Approvers).
	Platform string `json:"platform"`
	// Team is the workspace or guild ID (Slack team_id, Discord guild_id), "" when there is
	// none (the console, a Discord DM).
	Team string `json:"team,omitempty"`
	// ID is the platform's user ID (Slack user_id "U024BE7LH", Discord user snowflake).
	ID string `json:"id"`
	// Name is the display name the platform sent (Slack user_name, Discord nick or user
	// name); never trusted.
	Name string `json:"name,omitempty"`
	// Groups are group or role IDs the platform vouched for in this signed request (Discord
	// member.roles). Empty where membership is looked up through a Directory instead (Slack
	// user groups). Point-in-time facts: never stored.
	Groups []string `json:"-"`
}

// String returns "platform:team/id", the form stored in plans and audit records.
func (p Principal) String() string {
	return fmt.Sprintf("%s:%s/%s", p.Platform, p.Team, p.ID)
}

// Display returns the name for messages: Name if set, else ID.
func (p Principal) Display() string {
	if p.Name != "" {
		return p.Name
	}
	return p.ID
}

// Same reports whether p and q are the same user on the same platform. Team is ignored on
// purpose: Slack and Discord user IDs are unique across workspaces and guilds (Enterprise
// Grid "W…" IDs appear in several), so one person acting from two of them is still one
// person for the two-person rule. The same person on two platforms has two unrelated IDs;
// approver lists are per platform for that reason.
func (p Principal) Same(q Principal) bool {
	return p.Platform == q.Platform && p.ID == q.ID
}

// Request is one command from a chat platform, already verified by the adapter.
type Request struct {
	// Principal is who typed the command.
	Principal Principal
	// Channel is the platform's channel ID the command was typed in.
	Channel string
	// Command is the command name without its slash: "why-pending", "ipam", "whypending".
	Command string
	// Args are the whitespace-separated words after the command, with typographic dashes
	// (chat clients turn "--" into "—") already turned back into "--".
	Args []string
}

// ParseCommand builds the Command and Args of a Request from a slash command ("/ipam") and
// its text ("check --cluster prod").
func ParseCommand(command, text string) (name string, args []string) {
	name = strings.TrimPrefix(strings.TrimSpace(command), "/")
	for _, w := range strings.Fields(text) {
		args = append(args, normaliseDashes(w))
	}
	return name, args
}

// normaliseDashes undoes chat clients' smart punctuation on a leading flag: "—cluster" and
// "–cluster" become "--cluster".
func normaliseDashes(w string) string {
	for _, dash := range []string{"\u2014", "\u2013"} {
		if rest, ok := strings.CutPrefix(w, dash); ok {
			return "--" + strings.TrimLeft(rest, "-")
		}
	}
	return w
}

// flags is the parsed form of a command's arguments: positional words, --name value pairs and
// boolean --name switches.
type flags struct {
	positional []string
	values     map[string]string
	switches   map[string]bool
}

// parseFlags splits args into positional words and the flags named in allowed ("--cluster C"
// or "--cluster=C"). An unknown flag or a flag without a value is a UserError.
func parseFlags(args []string, allowed ...string) (flags, error) {
	return parseFlagsAndSwitches(args, nil, allowed...)
}

// parseFlagsAndSwitches is parseFlags that also accepts the boolean switches named in switches
// ("--all"), which take no value.
func parseFlagsAndSwitches(args []string, switches []string, allowed ...string) (flags, error) {
	f := flags{values: map[string]string{}, switches: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			f.positional = append(f.positional, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if slices.Contains(switches, name) && !hasValue {
			f.switches[name] = true
			continue
		}
		known := false
		for _, n := range allowed {
			known = known || n == name
		}
		if !known {
			return flags{}, userErrorf("unknown flag %q (flags: %s)", a, flagList(append(append([]string(nil), allowed...), switches...)))
		}
		if !hasValue {
			if i+1 >= len(args) {
				return flags{}, userErrorf("flag %s needs a value", flagName(name))
			}
			i++
			value = args[i]
		}
		f.values[name] = value
	}
	return f, nil
}

func flagList(names []string) string {
	var out []string
	for _, n := range names {
		out = append(out, flagName(n))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// flagName is how a flag is typed: "-n" for a one-letter name, else "--cluster".
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// UserError is an error whose text is meant for the person who typed the command (a usage
// problem, an unknown pod, a refusal). Any other error a handler returns is shown as a
// generic failure with a reference to the bot's log.
type UserError struct {
	// Text is one or more sentences shown to the user as they are.
	Text string
}

// Error returns Text.
func (e *UserError) Error() string { return e.Text }

func userErrorf(format string, args ...any) error {
	return &UserError{Text: fmt.Sprintf(format, args...)}
}
