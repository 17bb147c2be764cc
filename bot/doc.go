// Package bot is the platform-neutral core of the chat bot: the Router that maps a command to a
// handler, the Request and Message model, approvals (policy, store, expiry, two-person rule,
// heartbeats and the recovery of plans whose bot process died), the audit trail (including
// refused clicks), the daily digest (cron plus leader election) and the HTTP server that
// serves /healthz, /readyz and /metrics. Adapters translate a chat platform to and from it.
package bot
