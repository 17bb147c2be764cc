// Package discord connects the bot to Discord with github.com/bwmarrin/discordgo: it
// registers the slash commands, verifies signed interactions (HTTP mode) or reads them from
// the gateway, turns slash commands and button clicks into bot requests, acknowledges within
// three seconds and renders chat.Message as embeds and buttons.
//
// HTTP mode mounts POST /discord/interactions on the bot's server. Every request's raw body
// is checked against X-Signature-Ed25519 (over X-Signature-Timestamp and the body) with the
// application's public key, and the timestamp must be within five minutes of the bot's
// clock; a refused request gets 401 and reaches no handler. PING gets PONG. Gateway mode
// opens a discordgo session instead and feeds the same handler; its initial responses go
// through the REST callback.
//
// A command is acknowledged with a deferred response (ephemeral for /whypending help, in the
// channel otherwise: Discord fixes visibility when deferring) and answered by a bounded
// worker pool, which edits the deferred response; a long answer continues in follow-ups. A
// plan awaiting approval is that edited response, and its reference ("discord:<channel>/
// <message>") is attached to the plan's record. A click is acknowledged with a deferred
// update; the outcome edits the clicked message and refusals go to the clicker only.
// Discord has no confirmation dialog, so a button with one (Approve) first answers with an
// ephemeral "are you sure?" whose go-ahead button carries the plan message's ID; the
// decision then edits the plan message with the bot token. Approvals, repair buttons and
// repair commands are refused in direct messages, where Discord sends no member and no
// roles; a refused Approve or Deny goes to the bot as such (chat.Click.Refusal), which records
// it in the plan's history like every refusal. Approvers are checked by the bot against the Discord list of the approval policy,
// with the member's roles (member.roles) as groups.
//
// Every text from the cluster or a user is escaped once, in Render, for Discord markdown,
// and every message is sent with allowed_mentions {parse: []}, so a pod name cannot mention
// @everyone, a role or a user. Long tables, lists and code are cut to Discord's limits (6,000
// characters and 25 fields per message, 1,024 per field, 5 buttons per row, 5 rows) with
// "… and N more". REST calls wait out HTTP 429 as retry_after asks (chat.Deliverer).
package discord
