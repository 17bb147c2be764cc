// Package discord will connect the bot to Discord: verify signed interactions (Ed25519, with a
// replay window), turn slash commands and button clicks into bot requests, and render
// bot.Message as embeds and buttons. It is not built yet; see shared/notes/chat-libs.md for the
// discordgo APIs and the offline test strategy it will follow.
package discord
