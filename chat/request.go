package chat

import (
	"fmt"
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

// Attribution is how a message or a record says who did something: "alice (U0ALICE)", the
// display name for people and the ID that stays true when the name is not; the ID alone
// when the platform sent no name.
func (p Principal) Attribution() string {
	if p.Name != "" {
		return p.Name + " (" + p.ID + ")"
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
