package triage

import "strings"

// FixStep is one entry of Finding.Fix as a person reads it: a shell line to paste, or a prose
// step. Renderers show prose as text and commands in code blocks, so copying a code block
// copies only shell lines (ParseFixStep decides which is which, for every renderer).
type FixStep struct {
	// Command is the shell line to paste, comments included ("kubectl describe node a   #
	// see Allocated resources"); "" for a prose step.
	Command string
	// Node is the node whose shell the command is for, from an entry "On NODE: COMMAND";
	// "" for the user's own shell (where kubectl reaches the cluster).
	Node string
	// Text is the prose step as written; "" for a command.
	Text string
}

// commandWords are the programs a fix entry may start with, alone or after "On NODE: ": the
// cluster's CLIs (kubectl, oc, calicoctl, whypending), image tools run where the image is
// built or published (crane, docker, kind, minikube, k3d), and the node's own commands the
// rules send a person to run on a node (the runtime's, systemd's, the shell's). A rule that
// starts an entry with another program adds it here, else the entry shows as prose
// (TestNodeStepsStartWithAKnownCommand checks the "On NODE: " entries of the rules' sources).
var commandWords = map[string]bool{
	"kubectl": true, "oc": true, "calicoctl": true, "whypending": true,
	"crane": true, "docker": true, "kind": true, "minikube": true, "k3d": true,
	"crictl": true, "ctr": true, "systemctl": true, "journalctl": true, "dmesg": true,
	"grep": true, "cat": true, "ls": true, "df": true, "ps": true, "ip": true, "iostat": true,
	"getent": true, "curl": true, "nc": true, "openssl": true, "showmount": true,
	"findmnt": true, "mount": true, "aa-status": true,
}

// ParseFixStep reads one Fix entry: an entry whose first word is a command (commandWords) is
// that command; "On NODE: COMMAND" is COMMAND to run on NODE; anything else ("On NODE: install
// the client tools …" too) is prose.
func ParseFixStep(entry string) FixStep {
	if startsWithCommand(entry) {
		return FixStep{Command: entry}
	}
	if rest, ok := strings.CutPrefix(entry, "On "); ok {
		if node, cmd, ok := strings.Cut(rest, ": "); ok && node != "" && !strings.ContainsAny(node, " \t") && startsWithCommand(cmd) {
			return FixStep{Command: cmd, Node: node}
		}
	}
	return FixStep{Text: entry}
}

// startsWithCommand reports whether s's first word is one of commandWords.
func startsWithCommand(s string) bool {
	word, _, _ := strings.Cut(s, " ")
	return commandWords[word]
}
