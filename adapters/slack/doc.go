// Package slack connects the bot to Slack: it verifies signed requests (HTTP mode) or reads
// Socket Mode envelopes, turns slash commands and button clicks into bot requests, acks within
// three seconds and renders chat.Message as Block Kit.
//
// HTTP mode mounts POST /slack/commands and POST /slack/interactions on the bot's server.
// Every request's raw body is checked against X-Slack-Signature with the signing secret and a
// five-minute timestamp window before anything is parsed; a refused request gets 401 and
// reaches no handler. A command is acknowledged at once with an ephemeral "Working on it…"
// and answered by a bounded worker pool through its response_url; a plan awaiting approval is
// posted to the channel with chat.postMessage so every decision can replace it with
// chat.update. A click is acknowledged with an empty 200; refusals go to the clicker only.
// Socket Mode feeds the same workers and acknowledges on the socket.
//
// Every text from the cluster or a user is escaped once, in Render: "&", "<" and ">" become
// entities and mrkdwn is sent verbatim, so pod names and log lines cannot mention
// @channel, a user or a group, or disguise a link. Long tables, lists and code are cut to
// Block Kit's limits with "… and N more". Web API and response_url calls wait out HTTP 429 as
// Retry-After asks.
package slack
