package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/chat"
)

// newDiscord builds the Discord adapter the config describes. Its commands are registered by
// registerDiscord, which serve retries until Discord answers.
func newDiscord(cfg *Config, secrets DiscordSecrets, core chat.Core, metrics *bot.Metrics, log *slog.Logger) (*discord.Adapter, error) {
	session, err := discord.NewSession(secrets.BotToken, cfg.Discord.APIURL, nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range cfg.Clusters {
		names = append(names, c.Name)
	}
	return discord.New(discord.Options{
		Core: core, Session: session, ApplicationID: cfg.Discord.ApplicationID, PublicKey: secrets.PublicKey,
		Guilds: cfg.Discord.Guilds, Clusters: names, Metrics: metrics.Adapters, Log: log,
	}), nil
}

// registerDiscord registers the adapter's commands (per configured guild, or globally),
// within a minute; its error names the configured discord.apiURL, where the requests went.
func registerDiscord(ctx context.Context, a *discord.Adapter, apiURL string) error {
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return discordURLError(a.Register(rctx), apiURL)
}

// discordURLError rewrites the Discord URLs in err to apiURL when one is configured: the
// session sends every request there, but client errors name the URL discordgo built
// ("https://discord.com/api/v9/…").
func discordURLError(err error, apiURL string) error {
	if err == nil || apiURL == "" {
		return err
	}
	msg := err.Error()
	if !strings.Contains(msg, discordBase) {
		return err
	}
	return &rewrittenError{msg: strings.ReplaceAll(msg, discordBase, strings.TrimSuffix(apiURL, "/")+"/"), err: err}
}

// discordBase is Discord's API base URL as discordgo builds it.
const discordBase = "https://discord.com/"

// rewrittenError is an error with its message rewritten, wrapping the original.
type rewrittenError struct {
	msg string
	err error
}

func (e *rewrittenError) Error() string { return e.msg }
func (e *rewrittenError) Unwrap() error { return e.err }

// platformMode is how a chat platform is served, for the start-up log line.
func platformMode(enabled bool, mode string) string {
	if !enabled {
		return "off"
	}
	return mode
}
