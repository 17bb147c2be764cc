// Package actions holds the gated operations the bot and the CLI run on a cluster. Each
// operation is planned first (a dry run with a preview and a fingerprint of the state it read)
// and executed only after approval: lock, re-verify, write with compare-and-set, unlock,
// verify. Recover cleans up after an execution whose process died, without running anything
// again.
//
// Each kind is one type in its own file (release_ips.go, release_blocks.go,
// release_handles.go, unlock.go) that implements repair (repair.go), listed once in registry:
// its name and verb, whether it takes the datastore lock, and how it reads the cluster (a
// view: what a plan would change, whether a planned item is still as planned, and the
// write). The Runner (runner.go) does the rest the same way for every kind; ExecuteAll runs
// several plans as one execution, as the CLI's `ipam release-ips` runs leaked IPs and leaked
// handles.
package actions
