// Package digest runs the daily digest: Collect reads one cluster's Calico IPAM check and
// utilization into a Report, Job runs one round over every cluster, adds the stuck workloads
// the watch did not post because their answer is not sure (from its ledger), and posts each
// Report as its Render (bot.RenderDigest) shows it, and Scheduler runs Job rounds on a cron schedule,
// with one poster elected among the bot's replicas by a coordination.k8s.io Lease.
package digest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
)

// defaultTimeout bounds reading one cluster's IPAM when Job.Timeout is zero.
const defaultTimeout = 5 * time.Minute

// IPAM is the read side of Calico IPAM a digest needs (bot.IPAM; fleet.Cluster, *calico.Client
// and *calico.Cache implement it).
type IPAM interface {
	Check(ctx context.Context, opts calico.CheckOptions) (*calico.CheckResult, error)
	Utilization(ctx context.Context) (*calico.Utilization, error)
}

// Cluster is one configured cluster as the digest sees it.
type Cluster struct {
	Name string
	// IPAM reads the cluster's Calico IPAM; nil (Calico not installed) skips the cluster
	// silently.
	IPAM IPAM
	// Health, when set, returns nil while the cluster can be used, else why not (see
	// bot.Cluster.Health); an unavailable cluster is not read.
	Health func() error
}

// Report is one cluster's digest, for Render.
type Report struct {
	// Cluster is the cluster's name; At is when the digest was attempted.
	Cluster string
	At      time.Time
	// Check and Utilization are what was read (nil when Unavailable or Failed).
	Check       *calico.CheckResult
	Utilization *calico.Utilization
	// Unavailable, when set, is why the cluster was skipped (its Health): one line naming
	// the API server and its error, usually a *chat.UnavailableError.
	Unavailable error
	// Failed says reading the cluster's IPAM failed; the error is in Job.Run's result and
	// the log, never in the message.
	Failed bool
	// NoCalico says the cluster has no Calico IPAM to report on (its report is posted for
	// Unclear alone).
	NoCalico bool
	// Unclear are the cluster's stuck workloads the watch did not post on their own because
	// their answer is uncertain or unknown (Job.Unclear); UnclearFailed says they could not be
	// read.
	Unclear       []watch.Item
	UnclearFailed bool
}

// Collect reads one cluster's IPAM check and utilization through ipam into a Report; at is
// the collection time shown in the footer.
func Collect(ctx context.Context, cluster string, ipam IPAM, at time.Time) (Report, error) {
	check, err := ipam.Check(ctx, calico.CheckOptions{})
	if err != nil {
		return Report{}, fmt.Errorf("check calico ipam: %w", err)
	}
	util, err := ipam.Utilization(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("read calico ipam utilization: %w", err)
	}
	return Report{Cluster: cluster, At: at, Check: check, Utilization: util}, nil
}

// Job posts every cluster's IPAM digest to the digest channels (config channels.digest).
// Scheduler runs it on a schedule; Run runs one round.
type Job struct {
	// Clusters are the configured clusters; those without IPAM (Calico not installed) are
	// skipped silently, unavailable ones (Cluster.Health) with a post that says so.
	Clusters []Cluster
	// Channels are the channel IDs every digest is posted to.
	Channels []string
	// Poster posts to a channel (required).
	Poster chat.ChannelPoster
	// Render turns a Report into the message posted (required: bot.RenderDigest).
	Render func(Report) chat.Message
	// Timeout bounds reading one cluster's IPAM (default 5 min), so a cluster that hangs
	// does not hold up the others.
	Timeout time.Duration
	// Unclear, when set, returns the stuck workloads of every cluster whose answer is
	// uncertain or unknown, from the watch's ledger (watch.Watcher.Unclear): each cluster's
	// report lists its own, and a cluster without Calico gets a report for them alone.
	Unclear func(ctx context.Context) ([]watch.Item, error)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Run runs one digest round: for each cluster in order it reads the IPAM check and
// utilization and posts the rendered Report to every channel. An unavailable cluster (see
// Cluster.Health) is not read: its report says it was skipped, naming the API server's error.
// A cluster that cannot be read gets a Failed report instead (no error text), and the round
// goes on with the next cluster; a failed post does not stop the other posts either. The
// error joins one error per skipped or failed cluster and failed post, each naming the
// cluster (and channel); it is nil when everything was posted.
func (j *Job) Run(ctx context.Context) error {
	now := time.Now
	if j.Now != nil {
		now = j.Now
	}
	timeout := j.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	var errs []error
	var unclear []watch.Item
	unclearFailed := false
	if j.Unclear != nil {
		var err error
		if unclear, err = j.Unclear(ctx); err != nil {
			errs = append(errs, fmt.Errorf("digest: the watch's stuck workloads: %w", err))
			unclearFailed = true
		}
	}
	for _, c := range j.Clusters {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		at := now()
		var mine []watch.Item
		for _, it := range unclear {
			if it.Workload.Cluster == c.Name {
				mine = append(mine, it)
			}
		}
		r := Report{Cluster: c.Name, At: at}
		switch herr := health(c); {
		case c.IPAM == nil:
			r.NoCalico = true
		case herr != nil:
			errs = append(errs, fmt.Errorf("digest of cluster %s skipped: %w", c.Name, herr))
			r.Unavailable = herr
		default:
			cctx, cancel := context.WithTimeout(ctx, timeout)
			var err error
			r, err = Collect(cctx, c.Name, c.IPAM, at)
			cancel()
			switch {
			case errors.Is(err, calico.ErrCalicoNotInstalled):
				r = Report{Cluster: c.Name, At: at, NoCalico: true}
			case err != nil:
				errs = append(errs, fmt.Errorf("digest of cluster %s: %w", c.Name, err))
				r = Report{Cluster: c.Name, At: at, Failed: true}
			}
		}
		r.Unclear, r.UnclearFailed = mine, unclearFailed
		if r.NoCalico && len(mine) == 0 {
			continue // nothing to report: no IPAM, nothing stuck without a clear cause
		}
		m := j.Render(r)
		for _, ch := range j.Channels {
			if err := j.Poster.PostMessage(ctx, ch, m); err != nil {
				errs = append(errs, fmt.Errorf("post digest of cluster %s to channel %s: %w", c.Name, ch, err))
			}
		}
	}
	return errors.Join(errs...)
}

// health is c.Health(), or nil when c has none.
func health(c Cluster) error {
	if c.Health == nil {
		return nil
	}
	return c.Health()
}
