// Package actions holds the gated operations the bot can run on a cluster. Each operation is
// planned first (a dry run with a preview and a fingerprint of the state it read) and executed
// only after approval: lock, re-verify, write with compare-and-set, unlock, verify. Recover
// cleans up after an execution whose process died, without running anything again.
package actions
