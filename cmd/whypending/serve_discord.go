package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/chat"
)

// startDiscord builds the Discord adapter the config describes and registers its commands
// (per configured guild, or globally), so a wrong token or application ID stops serve at
// start-up with the reason.
func startDiscord(ctx context.Context, cfg *Config, secrets DiscordSecrets, core chat.Core, metrics *bot.Metrics, log *slog.Logger) (*discord.Adapter, error) {
	session, err := discord.NewSession(secrets.BotToken, cfg.Discord.APIURL, nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range cfg.Clusters {
		names = append(names, c.Name)
	}
	a := discord.New(discord.Options{
		Core: core, Session: session, ApplicationID: cfg.Discord.ApplicationID, PublicKey: secrets.PublicKey,
		Guilds: cfg.Discord.Guilds, Clusters: names, Metrics: metrics.Adapters, Log: log,
	})
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := a.Register(rctx); err != nil {
		return nil, err
	}
	return a, nil
}

// platformMode is how a chat platform is served, for the start-up log line.
func platformMode(enabled bool, mode string) string {
	if !enabled {
		return "off"
	}
	return mode
}
