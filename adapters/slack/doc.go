// Package slack connects the bot to Slack: it verifies signed requests (HTTP mode) or reads
// Socket Mode envelopes, turns slash commands and button clicks into bot requests, acks within
// three seconds and renders bot.Message as Block Kit.
package slack
