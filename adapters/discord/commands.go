package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/chat"
)

// maxChoices is how many choices Discord allows on an option.
const maxChoices = 25

// Commands returns the application commands whypending registers, the Discord form of the
// bot's commands: /why-pending pod:<pod, TYPE/NAME or --all> [cluster] [namespace], /ipam with the subcommands
// check, blocks, release-ips, release-blocks, release-handles and unlock, and /whypending
// help. clusters are
// the configured cluster names; up to 25 become the cluster option's choices (with more it
// is free text, checked by the bot).
func Commands(clusters []string) []*discordgo.ApplicationCommand {
	cluster := &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: "cluster",
		Description: "the cluster to ask (default: the first configured)"}
	if len(clusters) <= maxChoices {
		for _, c := range clusters {
			cluster.Choices = append(cluster.Choices, &discordgo.ApplicationCommandOptionChoice{Name: c, Value: c})
		}
	}
	node := &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: "node",
		Description: "only items on this node"}
	sub := func(name, desc string, opts ...*discordgo.ApplicationCommandOption) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: name,
			Description: desc, Options: opts}
	}
	return []*discordgo.ApplicationCommand{
		{
			Name:        "why-pending",
			Description: "Explain why a pod or workload is stuck, or what is stuck in a namespace",
			Options: []*discordgo.ApplicationCommandOption{
				{Type: discordgo.ApplicationCommandOptionString, Name: "pod", Required: true, MaxLength: 317,
					Description: "pod, ns/pod, TYPE/NAME (deploy/web, sts/db, job/x, …) or --all; may add -n NS"},
				cluster,
				{Type: discordgo.ApplicationCommandOptionString, Name: "namespace", MaxLength: 63,
					Description: "the namespace (default: the channel's, else the cluster's)"},
			},
		},
		{
			Name:        "ipam",
			Description: "Check Calico IPAM, or plan a repair that an approver runs",
			Options: []*discordgo.ApplicationCommandOption{
				sub("check", "find leaked IPs and other IPAM problems (like calicoctl ipam check)", cluster),
				sub("blocks", "show IPAM blocks, pools and empty blocks (like calicoctl ipam show --show-blocks)", cluster),
				sub("release-ips", "plan the release of leaked IPs, for an approver", cluster, node),
				sub("release-blocks", "plan the release of empty IPAM blocks, for an approver", cluster, node),
				sub("release-handles", "plan deleting leaked IPAM handles, for an approver", cluster),
				sub("unlock", "plan unlocking the Calico datastore, for an approver", cluster),
			},
		},
		{
			Name:        "whypending",
			Description: "whypending's help",
			Options:     []*discordgo.ApplicationCommandOption{sub("help", "show what whypending can do")},
		},
	}
}

// Register overwrites the application's commands with Commands: in each configured guild,
// or globally when none is configured (Bulk Overwrite, PUT …/commands). Overwriting with the
// same definitions changes nothing, so it runs at every start.
func (a *Adapter) Register(ctx context.Context) error {
	cmds := Commands(a.clusters)
	guilds := a.guilds
	if len(guilds) == 0 {
		guilds = []string{""}
	}
	for _, g := range guilds {
		err := a.deliver.Do(ctx, "register commands", func() error {
			_, err := a.session.ApplicationCommandBulkOverwrite(a.appID, g, cmds, discordgo.WithContext(ctx))
			return err
		})
		if err != nil {
			where := "globally"
			if g != "" {
				where = "in guild " + g
			}
			return fmt.Errorf("register discord commands %s: %w%s", where, err, registerHint(err, a.appID, g))
		}
	}
	return nil
}

// registerHint says which setting a failed registration points at, from Discord's HTTP
// status: 401 the bot token, 404 the application ID, 403 the guild (the application is not in
// it, or was added without the applications.commands scope). Empty for other errors.
func registerHint(err error, appID, guild string) string {
	var rest *discordgo.RESTError
	if !errors.As(err, &rest) || rest.Response == nil {
		return ""
	}
	switch rest.Response.StatusCode {
	case http.StatusUnauthorized:
		return "\nThe bot token was refused: check discord.botToken (default {env: DISCORD_BOT_TOKEN}); it is on the application's Bot page, not the client secret."
	case http.StatusNotFound:
		return fmt.Sprintf("\nDiscord knows no application %s for this token: check discord.applicationID (General Information → Application ID) and that the token is this application's bot token.", appID)
	case http.StatusForbidden:
		if guild == "" {
			return "\nThe bot may not register global commands: invite it again with the scopes bot and applications.commands."
		}
		return fmt.Sprintf("\nThe application is not in guild %s, or was added without the applications.commands scope: check discord.guilds, and invite it with the scopes bot and applications.commands.", guild)
	}
	return ""
}

// requestFor turns a slash command interaction into a chat.Request: "pod" is the positional
// argument, every other option becomes "--name value", and a subcommand is the first word
// (/ipam check cluster:prod is "ipam check --cluster prod"). ephemeral says whether the
// answer is for the asker only (help); plans whether the command makes a plan.
func requestFor(i *discordgo.Interaction) (req chat.Request, ephemeral, plans bool) {
	data := i.ApplicationCommandData()
	req = chat.Request{Principal: principalOf(i), Channel: i.ChannelID, Command: data.Name, Args: argsOf(data.Options)}
	ephemeral = data.Name == "whypending"
	plans = data.Name == "ipam" && len(req.Args) > 0 && slices.Contains(bot.IPAMRepairs(), req.Args[0])
	return req, ephemeral, plans
}

// argsOf lists subcommand names and the words of "pod" first, then "--option value" pairs.
func argsOf(opts []*discordgo.ApplicationCommandInteractionDataOption) []string {
	var words, flags []string
	for _, o := range opts {
		switch o.Type {
		case discordgo.ApplicationCommandOptionSubCommand, discordgo.ApplicationCommandOptionSubCommandGroup:
			words = append(words, o.Name)
			words = append(words, argsOf(o.Options)...)
		default:
			v := fmt.Sprint(o.Value)
			if o.Name == "pod" {
				// The pod option takes what Slack's /why-pending takes after the command
				// ("ds/agent -n dsns", "--all"), so the usage the bot shows works on both.
				words = append(words, strings.Fields(v)...)
			} else {
				flags = append(flags, "--"+o.Name, v)
			}
		}
	}
	return append(words, flags...)
}
