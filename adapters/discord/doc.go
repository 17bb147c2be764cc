// Package discord connects the bot to Discord: it verifies signed interactions, turns slash
// commands and button clicks into bot requests and renders bot.Message as embeds and buttons.
package discord
