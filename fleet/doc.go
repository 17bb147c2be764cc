// Package fleet is the bot's live connection to each configured cluster. A Cluster owns, per
// connection, the triage collector with its informer caches, the Calico IPAM client and cache,
// and the actions runner; it connects in the background, probes the API server, reconnects
// after an outage without a restart, and answers the bot's calls (Answer, Check, Utilization,
// Plan, Execute, Recover) through the current connection, or with a chat.UnavailableError
// naming the API server while there is none. Wire makes a Cluster that is connected once and
// never probed (whypending demo, tests).
//
// fleet knows no chat platform and does not import bot: cmd/whypending builds one bot.Cluster
// from each Cluster, whose methods satisfy bot's interfaces.
package fleet
