// Package authz decides whether a person in the chat may see or change something, with
// Kubernetes RBAC as the source of truth. It maps a chat.Principal to a Kubernetes user and
// groups (Mapping: an explicit table of Slack or Discord user IDs, the verified email of a
// Slack profile, Slack user groups and Discord roles), then asks the API server of the cluster
// concerned, with a SubjectAccessReview (authorization.k8s.io/v1) for that user and those
// groups, whether they may do each Permission: a verb on a resource, in a namespace or
// cluster-wide. Decisions are cached for a short TTL (DefaultTTL) and counted (Metrics).
//
// It only ever asks: whatever is allowed, the bot still acts with its own ServiceAccount, so
// nobody can change what their RBAC does not allow and nobody is impersonated. RBAC only
// narrows what the bot's own rules (approver lists, the two-person rule, allowed channels)
// already allow. An answer is read with the bot's account, so it shows what the README's "What
// an answer shows" lists; of another namespace it names only what the person may read
// (Authorizer.Visible, which the triage collector turns into Snapshot.Readable).
//
// Authorizer.Allow is the one question every feature asks ("may this person do X in
// namespace N of cluster C"): the bot before an answer, a plan and an approval, and the
// Alertmanager silence and the watch's snooze. Mode says which Scope is checked: ModeOff
// nothing, ModeApprovals the Changes (repairs, approvals, silences, snoozes), ModeAll the
// Reads (answers) too. A refusal is a *Refusal whose Text tells the person exactly which verb,
// resource and namespace was denied (or what their mapping lacks) and nothing else; it is
// written to the log as an audit record.
package authz
