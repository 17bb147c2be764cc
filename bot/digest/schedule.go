package digest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/whypending/whypending/internal/lease"
)

// LeaseName is the default name of the coordination.k8s.io Lease the bot's replicas
// elect the digest poster with.
const LeaseName = "whypending-digest"

// ParseSchedule parses config digest.schedule, a 5-field cron expression (minute, hour,
// day of month, month, day of week; descriptors such as "@daily" too), to be read in the
// IANA time zone tz ("" means UTC). A "CRON_TZ=" prefix in expr overrides tz, as in
// robfig/cron.
func ParseSchedule(expr, tz string) (cron.Schedule, *time.Location, error) {
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, nil, fmt.Errorf("digest timezone %q: %w", tz, err)
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, nil, fmt.Errorf("digest schedule %q: %w", expr, err)
	}
	return s, loc, nil
}

// Scheduler runs Job rounds on a cron schedule. With several replicas only the
// holder of a coordination.k8s.io Lease posts: each replica campaigns for the Lease, the
// leader runs the cron, and a replica that loses the Lease stops its cron (cancelling a
// round in progress) and campaigns again. A round starts at the scheduled times only, never
// on winning the Lease, so a failover does not post twice; a round due while no replica
// leads (about LeaseDuration after the leader dies) is skipped.
type Scheduler struct {
	// Job runs one round (required).
	Job *Job
	// Schedule and Timezone are config digest.schedule and digest.timezone (see
	// ParseSchedule).
	Schedule, Timezone string
	// Leases reaches the Lease: the store cluster's CoordinationV1 client. Nil runs without
	// leader election, which is only safe with one replica.
	Leases coordinationv1client.LeasesGetter
	// Namespace holds the Lease (config store.namespace); LeaseName names it (default
	// LeaseName).
	Namespace, LeaseName string
	// Identity names this replica in the Lease (default "<hostname>_<pid>").
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader election timings
	// (defaults 15s, 10s, 2s; LeaseDuration > RenewDeadline > RetryPeriod*1.2).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Log is the operational log (nil: slog.Default()); the leader election library logs
	// through it too.
	Log *slog.Logger

	// schedule, when set, replaces the parsed Schedule (tests use cron.Every).
	schedule cron.Schedule
}

// Run campaigns for the Lease and runs the cron while leading, until ctx is done. It returns
// an error only for a bad schedule, time zone or election configuration; round failures are
// logged, one line per cluster or post.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.Job == nil || s.Job.Poster == nil {
		return errors.New("digest scheduler has no digest poster")
	}
	sched, loc, err := ParseSchedule(s.Schedule, s.Timezone)
	if s.schedule != nil {
		sched, loc, err = s.schedule, time.UTC, nil
	}
	if err != nil {
		return err
	}
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	if s.Leases == nil {
		log.WarnContext(ctx, "digest runs without leader election: run one replica only")
		s.lead(ctx, sched, loc, log)
		return nil
	}
	name := s.LeaseName
	if name == "" {
		name = LeaseName
	}
	el := &lease.Elector{Leases: s.Leases, Namespace: s.Namespace, Name: name, What: "digest", Identity: s.Identity,
		LeaseDuration: s.LeaseDuration, RenewDeadline: s.RenewDeadline, RetryPeriod: s.RetryPeriod, Log: log}
	return el.Run(ctx, func(lctx context.Context) { s.lead(lctx, sched, loc, log) })
}

// lead runs the cron until ctx is done, then stops it and waits for a round in progress
// (cancelled with ctx) to end. Rounds do not overlap: a round still running at the next
// scheduled time makes that time skipped.
func (s *Scheduler) lead(ctx context.Context, sched cron.Schedule, loc *time.Location, log *slog.Logger) {
	cl := cronLogger{log: log}
	c := cron.New(cron.WithLocation(loc), cron.WithLogger(cl),
		cron.WithChain(cron.Recover(cl), cron.SkipIfStillRunning(cl)))
	c.Schedule(sched, cron.FuncJob(func() { s.round(ctx, log) }))
	c.Start()
	log.InfoContext(ctx, "digest scheduled", slog.Time("next", sched.Next(time.Now().In(loc))))
	<-ctx.Done()
	<-c.Stop().Done()
}

// round runs one digest round and logs its outcome: one line per failure, else one line
// saying it was posted.
func (s *Scheduler) round(ctx context.Context, log *slog.Logger) {
	start := time.Now()
	err := s.Job.Run(ctx)
	if err == nil {
		log.InfoContext(ctx, "digest posted", slog.Int("channels", len(s.Job.Channels)),
			slog.Duration("took", time.Since(start)))
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		log.ErrorContext(ctx, "digest round", slog.Any("err", e))
	}
}

// cronLogger sends robfig/cron's log lines to slog: its chatter at debug level, a
// recovered panic or other error at error level.
type cronLogger struct{ log *slog.Logger }

// Info logs at debug level: cron's "start", "wake" and "skip" lines.
func (l cronLogger) Info(msg string, keysAndValues ...any) {
	l.log.Debug("cron: "+msg, keysAndValues...)
}

// Error logs err at error level.
func (l cronLogger) Error(err error, msg string, keysAndValues ...any) {
	l.log.Error("cron: "+msg, append(keysAndValues, slog.Any("err", err))...)
}

var _ cron.Logger = cronLogger{}
