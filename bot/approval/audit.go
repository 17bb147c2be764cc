package approval

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/whypending/whypending/bot/authz"
)

// AuditEvent names a transition of an approval record.
type AuditEvent string

const (
	// AuditRequested: a plan was made and posted for approval.
	AuditRequested AuditEvent = "requested"
	// AuditApproved: an allowed approver approved the plan (and this replica claimed it).
	AuditApproved AuditEvent = "approved"
	// AuditDenied: an approver denied the plan, or its requester withdrew it.
	AuditDenied AuditEvent = "denied"
	// AuditExpired: the plan passed its expiry undecided.
	AuditExpired AuditEvent = "expired"
	// AuditStarted: execution began.
	AuditStarted AuditEvent = "started"
	// AuditFinished: execution completed; Detail carries the counts.
	AuditFinished AuditEvent = "finished"
	// AuditFailed: execution stopped on an error; Detail carries the error.
	AuditFailed AuditEvent = "failed"
	// AuditRefused: a click was refused and changed nothing (self-approval under the
	// two-person rule, a click by someone who is not an approver, a click on an expired
	// plan); Actor is who clicked, Detail what they asked and why it was refused.
	AuditRefused AuditEvent = "refused"
	// AuditInterrupted: the bot process executing the plan died; another start found it,
	// released its datastore lock and counted what was done (Detail).
	AuditInterrupted AuditEvent = "interrupted"
)

// AuditRecord is one transition.
type AuditRecord struct {
	// Time is when the transition was recorded (bot clock, UTC).
	Time time.Time `json:"time"`
	// Event is the transition.
	Event AuditEvent `json:"event"`
	// Actor is the principal string of who caused it: platform, workspace or guild, and user
	// ("slack:T1/U2", "discord:<guild>/<user>"); "" for the bot itself (expiry, execution).
	Actor string `json:"actor,omitempty"`
	// Detail is how the approver qualified for approved ("approver by user", "approver by
	// group S0614TZR7"), counts for finished ("done=179 skipped=2 new=0 remaining=0"), the
	// error for failed, what was asked and why it was refused for refused ("approve refused:
	// not an approver"), the dead process and what it had done for interrupted; empty
	// otherwise.
	Detail string `json:"detail,omitempty"`
	// As is the Kubernetes identity the actor was checked as (requested, approved, denied,
	// and a refusal by Kubernetes RBAC); nil when per-user authorization is off.
	As *authz.Identity `json:"as,omitempty"`
	// Denied is the permission Kubernetes RBAC denied the actor, on a refusal for that
	// reason: the verb, the resource and its group, and the namespace ("" cluster-wide).
	Denied *authorizationv1.ResourceAttributes `json:"denied,omitempty"`
}

// Auditor appends audit records to approval records and writes each to the log with the
// attribute audit=true (refusals and interruptions at Warn, the rest at Info), so the log is
// a second, append-only trail.
type Auditor struct {
	log         *slog.Logger
	transitions *prometheus.CounterVec
}

// NewAuditor returns an Auditor writing to log (slog.Default() if nil) and counting each
// event in transitions by its name (the bot's whypending_approval_transitions_total; nil: not
// counted).
func NewAuditor(log *slog.Logger, transitions *prometheus.CounterVec) *Auditor {
	if log == nil {
		log = slog.Default()
	}
	return &Auditor{log: log, transitions: transitions}
}

// emit logs records that were just committed to the store (never before: a record whose
// compare-and-set lost never happened).
func (au *Auditor) emit(ctx context.Context, a *Record, recs []AuditRecord) {
	for _, rec := range recs {
		level := slog.LevelInfo
		if rec.Event == AuditRefused || rec.Event == AuditInterrupted {
			level = slog.LevelWarn
		}
		au.log.Log(ctx, level, "approval "+string(rec.Event),
			slog.Bool("audit", true),
			slog.String("plan", a.Plan.ID),
			slog.String("kind", string(a.Plan.Kind)),
			slog.String("cluster", a.Plan.Cluster),
			slog.String("fingerprint", a.Plan.Fingerprint),
			slog.String("actor", rec.Actor),
			slog.Time("at", rec.Time),
			slog.String("detail", rec.Detail),
			slog.Any("as", rec.As),
		)
		if au.transitions != nil {
			au.transitions.WithLabelValues(string(rec.Event)).Inc()
		}
	}
}
