// Package approval is the approval workflow of repair plans: Workflow stores a plan as
// pending, enforces the Policy (who may approve, expiry, the two-person rule), claims an
// approved plan for execution by compare-and-set so it runs at most once across clicks and
// replicas, executes it through the cluster's Executor with a heartbeat, and recovers plans
// whose executing process died (Recoverer). Every transition is a Record's AuditRecord, logged
// by the Auditor. Records live in a Store: MemoryStore (one replica) or CRDStore
// (RemediationRequests in the cluster).
//
// The workflow returns records and notices, never messages: bot renders a Record as the plan
// message (bot.PlanMessage).
package approval
