// Package whypending ships the data the binary embeds: the demo scenarios (plain Kubernetes
// manifests with their expected diagnosis) and the CRDs it installs in the local control plane.
//
// # Organization
//
// The module's packages by role. Imports point down this list, never up, except that chat,
// the shared vocabulary, is imported from above it and imports nothing of the module
// (docs/DESIGN.md draws this; triage's TestArrowsPointOneWay checks it).
//
// The binary:
//   - cmd/whypending: the subcommands (serve, why-pending, ipam, digest, demo, version), the
//     config file (Config), and the wiring: one fleet.Cluster per configured cluster, one
//     bot.Cluster built from each, the adapters mounted on bot's server.
//
// Chat:
//   - adapters/slack, adapters/discord, adapters/console: one chat platform each: verify,
//     parse, acknowledge, answer through a chat.Core, render a chat.Message.
//   - bot: the router and its commands, the renderers, the HTTP server (/healthz, /readyz,
//     /metrics), and the Bot the adapters drive; bot/approval: the approval workflow of repair
//     plans, its store and audit; bot/digest: the IPAM digest, its schedule and leader
//     election. Both return state that bot renders. bot/alerts: the Alertmanager receiver
//     (POST /alertmanager): one ledger entry per group and channel, and what its thread
//     shows, each alert answered through Bot.Diagnose as /why-pending answers; its
//     Silence buttons make Alertmanager silences (Receiver.Silence, once, via the ledger).
//     election. Both return state that bot renders. bot/authz: per-user authorization, a
//     chat.Principal mapped to a Kubernetes user and groups and checked with
//     SubjectAccessReviews (cached for a TTL) before an answer, a plan, an approval, a silence
//     or a snooze.
//   - chat: the vocabulary the adapters and the bot speak (Message, Request, Principal,
//     Button and PlanButton, Reply, Click, Outcome, Core, Queue, Deliverer, Platforms).
//
// Clusters:
//   - fleet: the live connection to each cluster (its collector and caches, Calico client
//     and cache, actions runner), probed and reconnected in the background.
//   - ledger: what the bot posts unasked (alerts, watch), kept as Notification objects in
//     the cluster so that each post, reply and edit happens once; ledger/thread delivers one
//     entry's thread (root, replies, edits of the root) through a thread.Platform, which the
//     Slack and Discord adapters implement (their Threads).
//
// The engine, which knows no chat platform:
//   - triage: why a pod or a workload is stuck, as pure rules over a Snapshot; triage/collect
//     reads the Snapshot from the API server (directly or from informer caches).
//   - actions: repairs as plans (a dry run with a fingerprint) and their gated execution.
//   - calico: Calico IPAM in KDD mode: check, utilization, release, datastore lock.
//
// Support:
//   - internal/testenv: a real local control plane (etcd, kube-apiserver, kube-scheduler,
//     kube-controller-manager) for tests and whypending demo; internal/testcluster: its
//     go test helpers; internal/chattest: what the adapters' end-to-end tests share;
//     internal/amtest: the real Alertmanager for tests.
//   - internal/proc: process identity across hosts and restarts; internal/clock: a sleep
//     that a context cuts short.
package whypending

import "embed"

// Scenarios holds testdata/scenarios/<name>/{manifests.yaml,expected.yaml}: the demo's stuck
// pods, each reconstructed from a public bug report or troubleshooting guide.
//
//go:embed testdata/scenarios
var Scenarios embed.FS

// CalicoCRDs holds testdata/calico-crds/*.yaml: Calico v3.32.1's crd.projectcalico.org/v1
// IPAM CRDs, copied unedited.
//
//go:embed testdata/calico-crds
var CalicoCRDs embed.FS
