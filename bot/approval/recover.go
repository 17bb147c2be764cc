package approval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/chat"
)

// RecoverInterrupted finds Running plans whose executing bot process died, and marks each
// Interrupted. A process is dead when it ran on this host and has exited (found at once, at
// the next start), or when its heartbeat is older than StaleAfter (another replica, a lost
// node). Before marking a plan, its cluster's Recoverer releases the datastore lock the dead
// run took and counts what it had done (Record.Recovery); a plan whose cluster is
// unavailable now is left Running for a later call. Nothing is executed again. It returns the
// records it marked, so the caller can update their messages; the error joins one error per
// plan it could not recover.
func (ap *Workflow) RecoverInterrupted(ctx context.Context) ([]*Record, error) {
	running, err := ap.store.List(ctx, StateRunning)
	if err != nil {
		return nil, fmt.Errorf("list running plans: %w", err)
	}
	var out []*Record
	var errs []error
	for _, r := range running {
		why, dead := ap.dead(r)
		if !dead {
			continue
		}
		rec, note, err := ap.recoverRun(ctx, r.Plan)
		if errors.Is(err, errRetryLater) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seen := r.Heartbeat
		a, err := ap.mutate(ctx, r.Plan.ID, func(a *Record) error {
			if a.State != StateRunning || !sameHeartbeat(a.Heartbeat, seen) {
				return &errStop{} // finished, or renewed meanwhile: alive after all
			}
			now := ap.now().UTC()
			a.State, a.Recovery = StateInterrupted, rec
			a.History = append(a.History, AuditRecord{Time: now, Event: AuditInterrupted, Detail: interruptedDetail(why, rec, note)})
			return nil
		})
		if _, stopped := stopOutcome(err); stopped {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("mark plan %s interrupted: %w", r.Plan.ID, err))
			continue
		}
		out = append(out, a)
	}
	return out, errors.Join(errs...)
}

// errRetryLater says a dead plan's cluster cannot be reached now: recover it later.
var errRetryLater = errors.New("retry later")

// dead reports whether the process executing the Running plan a is gone, and why.
func (ap *Workflow) dead(a *Record) (why string, dead bool) {
	now := ap.now().UTC()
	hb := a.Heartbeat
	if hb == nil {
		// Claimed by a bot without heartbeats: judge by the approval time.
		if now.Sub(a.DecidedAt) > ap.staleAfter {
			return "no heartbeat since the approval at " + a.DecidedAt.UTC().Format(time.RFC3339), true
		}
		return "", false
	}
	p := hb.Process
	switch {
	case p.Same(ap.process):
		return "", false // this process runs it
	case p.Gone():
		return fmt.Sprintf("bot process %d on %s is gone (last heartbeat %s)", p.PID, p.Host, hb.Time.UTC().Format(time.RFC3339)), true
	case now.Sub(hb.Time) > ap.staleAfter:
		return fmt.Sprintf("no heartbeat from bot process %d on %s since %s", p.PID, p.Host, hb.Time.UTC().Format(time.RFC3339)), true
	}
	return "", false
}

// recoverRun asks the plan's cluster to clean up after the dead run. It returns
// errRetryLater while the cluster is unavailable; a plan for a cluster this bot does not know
// (or cannot recover) gets a note instead of a Recovery.
func (ap *Workflow) recoverRun(ctx context.Context, p actions.Plan) (*actions.Recovery, string, error) {
	exec, ok := ap.executors[p.Cluster]
	if !ok {
		return nil, fmt.Sprintf("cluster %s is not configured on this bot: the datastore lock and what was done were not checked", p.Cluster), nil
	}
	rc, ok := exec.(Recoverer)
	if !ok {
		return nil, "this bot cannot check the datastore lock or what was done", nil
	}
	if ap.clusterHealth(p.Cluster) != nil {
		return nil, "", errRetryLater
	}
	rec, err := rc.Recover(ctx, p)
	var ue *chat.UnavailableError
	if errors.As(err, &ue) {
		return nil, "", errRetryLater
	}
	if err != nil {
		return nil, "", fmt.Errorf("recover plan %s: %w", p.ID, err)
	}
	return &rec, "", nil
}

// sameHeartbeat reports whether two heartbeats are the same renewal.
func sameHeartbeat(a, b *Heartbeat) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Process.Same(b.Process) && a.Time.Equal(b.Time)
}

// interruptedDetail is the audit detail of an interruption: the dead process, what was done
// and the datastore lock.
func interruptedDetail(why string, rec *actions.Recovery, note string) string {
	d := why
	if rec != nil {
		d += fmt.Sprintf("; done=%d remaining=%d of %d planned", rec.Done(), rec.Remaining, rec.Planned)
		switch {
		case rec.Unlocked:
			d += "; released its datastore lock"
		case rec.LockedBy != "":
			d += "; datastore still locked by " + rec.LockedBy
		default:
			d += "; datastore unlocked"
		}
	}
	if note != "" {
		d += "; " + note
	}
	return d + "; not re-run"
}
