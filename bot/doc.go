// Package bot is the platform-neutral core of the chat bot: the Router that maps a command to
// a handler (/why-pending, /ipam, /whypending help), the renderers that turn triage answers,
// Calico IPAM checks, plans and digests into chat.Messages, the HTTP server that serves
// /healthz, /readyz and /metrics, and the Bot that adapters drive through chat.Core.
//
// Its subpackages decide and return state for it to render: bot/approval runs the approval
// workflow of repair plans (policy, store, expiry, two-person rule, heartbeats, recovery,
// audit) and returns records, which bot shows as plan messages (PlanMessage); bot/digest runs
// the IPAM digest on its schedule with leader election and returns one Report per cluster,
// which bot shows with RenderDigest. A cluster is a Cluster of small interfaces (Answerer,
// IPAM, Planner, approval.Executor) that fleet.Cluster implements.
package bot
