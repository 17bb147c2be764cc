package bot

import (
	"strings"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// fixBullet marks a prose step of the Fix section, as the platforms mark bullet lines.
const fixBullet = "• "

// localShell introduces commands for the user's own shell that follow commands for a node's,
// with no prose between to say the shell changed.
const localShell = "In your own shell (where kubectl reaches the cluster):"

// fixSections renders a finding's Fix in order as sections whose code blocks hold only shell
// lines (triage.ParseFixStep tells commands from prose): each run of prose steps is bulleted
// text, and each run of commands for the same shell is one code block after the prose that
// introduces it, as long as every command of the block only reads (FixStep.ReadOnly): a
// command that changes something gets a block of its own, so copying a block to look around
// never runs a change with it. A block for a node's shell is introduced by "On NODE:", and one
// for the user's shell right after one for a node's by localShell. Only the first section
// carries the heading "Fix"; nil when fix is empty. A command that runs until it is
// interrupted (FixStep.Follows: kubectl get -w, logs -f) ends its block: a line pasted after
// it would never run.
func fixSections(fix []string) []chat.Section {
	var out []chat.Section
	var text, code []string
	node := ""        // the shell of the last code block since the last prose step
	readOnly := false // whether every command of code only reads
	follows := false  // whether code's last command runs until interrupted
	flush := func() {
		if len(text) == 0 && len(code) == 0 {
			return
		}
		s := chat.Section{Text: strings.Join(text, "\n"), Code: strings.Join(code, "\n"), Commands: len(code) > 0}
		if len(out) == 0 {
			s.Heading = "Fix"
		}
		out = append(out, s)
		text, code = nil, nil
	}
	for _, entry := range fix {
		step := triage.ParseFixStep(entry)
		switch {
		case step.Command == "":
			if len(code) > 0 {
				flush()
			}
			text = append(text, fixBullet+step.Text)
			node = ""
		case len(code) > 0 && step.Node == node && readOnly && step.ReadOnly() && !follows:
			code = append(code, step.Command)
			follows = step.Follows()
		default:
			if len(code) > 0 {
				flush()
			}
			switch {
			case step.Node != "":
				text = append(text, fixBullet+"On "+step.Node+":")
			case node != "":
				text = append(text, fixBullet+localShell)
			}
			node, readOnly, follows = step.Node, step.ReadOnly(), step.Follows()
			code = append(code, step.Command)
		}
	}
	flush()
	return out
}
