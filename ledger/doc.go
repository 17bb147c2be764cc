// Package ledger keeps what the bot posts on its own, without being asked, as Notification
// objects in the cluster, so that each post, reply and edit happens once across Alertmanager's
// retries, bot replicas and restarts, and none is lost.
//
// One Notification holds one thread: a root message in one chat channel and its replies. It is
// named from its source, platform, channel and subject (an Alertmanager groupKey, a watched
// workload), so every replica that handles the same group or workload finds the same object.
// The features that post (the Alertmanager receiver, the watch) own what the thread says; this
// package owns how it is delivered:
//
//   - Update creates or changes an entry with a compare-and-set on metadata.resourceVersion,
//     retried on conflict, and keeps the fields and labels it does not know.
//   - UpdateCached is Update for the Alertmanager receiver's acknowledgements: it reads the
//     entry from an informer's copy (Follow), so a new group costs one create and a retry
//     that another replica recorded costs no request; a stale copy fails the compare-and-set
//     and falls back to Update. Only for a monotone fn (see UpdateCached).
//   - UpdateFromCopy is the same for any fn (the watch's posts and roll-ups): an ErrUnchanged
//     on the copy is checked on a live read, so a change is never skipped because the copy is
//     behind. GetCached reads the copy when it holds the entry (a NotFound is always the API
//     server's); Copy reads it with no request, for when to look again only.
//   - Every step of a delivery starts from the entry the step before wrote: the worker from
//     the entry just written (Worker.Offer), each Send and Edit of thread.Deliver from the one
//     before (SendFrom, EditFrom), the pending mark from Deliver's last (UpdateFrom). A post or
//     an edit is two requests, its claim and its record; an entry that is behind fails the
//     compare-and-set and that step reads.
//   - Send posts one message under a key (the root, or a reply) at most once: it claims the key
//     in the entry before posting and records the posted message's reference after. A claim
//     left by a process that died (on this host, or older than the claim TTL) is resolved by
//     asking the chat platform whether the post was made (Poster.Find), so a crash between a
//     post and its record neither loses the post nor makes it twice.
//     SendRevision records which revision of the entry a message (a root) was rendered from.
//   - Edit applies a new version of a posted message once: the entry records the version each
//     message shows, and an edit is claimed like a post, so two replicas never race each other
//     to an older text.
//   - Worker runs a feature's reconcile for entries that have work outstanding (the label
//     whypending.io/pending=true), from an in-process queue and from a periodic resync, so any
//     replica finishes what another left.
//
// The RBAC this needs in the store namespace: get, list, watch (Follow), create and update on
// notifications.whypending.io (charts/whypending/crds/whypending.io_notifications.yaml).
package ledger
