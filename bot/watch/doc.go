// Package watch tells a channel when a workload gets stuck, before anyone asks, with no noise.
// From the informer caches serve keeps (fleet's collector; no request per pod), it follows
// every pod in a watched state (Pending or ContainerCreating, ImagePullBackOff, CrashLoopBackOff,
// Terminating past its grace period) and every workload whose controller is (refused its pods:
// FailedCreate; a Deployment past its progress deadline) and, once one stays past its
// threshold, posts the
// /why-pending answer of its workload (its owner, or the bare pod) once per channel. The
// primary code is the post's state: a new code edits the root and adds one reply; recovery
// edits it to "Recovered after N min" and adds one line (a workload deleted or scaled to zero
// while stuck is said to be so, never recovered); a reminder is one reply per
// RemindAfter. An uncertain answer is never posted on its own. A workload opted out while its
// post is open (whypending.io/watch: "false" on its stuck pods, on it or on its namespace, or
// its namespace in ExcludeNamespaces) is "No longer watched": the root says where the opt-out
// is and what was last known, one line, no more reminders, and it leaves the roll-up (a
// snooze it had still holds); the opt-out removed and still stuck, the post is open again
// ("Watched again; still stuck").
//
// It follows the controller pattern: an informer event queues the owning workload's key, a
// reconcile reads the workload's cached object and pods, and a threshold not reached yet is a delayed
// re-queue. Only the holder of a Lease (internal/lease) watches and posts. The posts live in
// the ledger (one Notification per channel and workload, delivered by ledger/thread), so a
// failover or restart posts nothing twice; each term starts by looking at every cached pod
// and workload and every open post again, so it misses nothing that got stuck or recovered meanwhile.
package watch
