package bot

import (
	"context"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// help answers "/whypending help" with every command's usage, visible only to the asker.
func (b *Bot) help(_ context.Context, req chat.Request) (chat.Reply, error) {
	f, err := parseFlags(req.Args)
	if err != nil {
		return chat.Reply{}, err
	}
	if len(f.positional) > 1 || (len(f.positional) == 1 && f.positional[0] != "help") {
		return chat.Reply{}, userErrorf("unknown subcommand %q", f.positional[0])
	}
	var names []string
	for _, c := range b.clusters {
		names = append(names, c.Name)
	}
	m := chat.Message{
		Title:    "whypending: why is my pod stuck, and safe Calico IPAM repairs",
		Severity: chat.SeverityInfo,
		Sections: []chat.Section{
			{Heading: "Commands", Lines: b.router.usageLines()},
			{Heading: "What /why-pending asks about", Code: triage.TargetSyntax + "\nWithout -n: the channel's namespace, else the cluster's."},
			{Heading: "Repairs", Text: "/ipam release-ips, release-blocks, release-handles and unlock post a plan (a dry run) with Approve / Deny buttons. Only configured approvers can approve; plans expire; a plan runs at most once, re-checks every item and touches only what is still eligible."},
		},
	}
	if len(names) > 0 {
		m.Sections = append(m.Sections, chat.Section{Heading: "Clusters", Text: "default " + names[0], Lines: names})
	}
	return chat.Reply{Message: m}, nil
}
