// Package lease elects one leader among the bot's replicas with a coordination.k8s.io Lease
// (client-go's leaderelection): the features that post unasked (the digest, the watch) run
// only on the Lease holder. Run campaigns, calls lead while this replica holds the Lease
// (cancelling its context when it loses it) and campaigns again, until its context ends.
package lease

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Leader election timing defaults, client-go's usual values.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Elector campaigns for one Lease.
type Elector struct {
	// Leases reaches the Lease (the store cluster's CoordinationV1 client).
	Leases coordinationv1client.LeasesGetter
	// Namespace and Name name the Lease; What names the feature in log lines ("digest").
	Namespace, Name, What string
	// Identity names this replica in the Lease (default Identity()).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's timings (defaults 15s,
	// 10s, 2s; LeaseDuration > RenewDeadline > RetryPeriod*1.2).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Log (nil: slog.Default()); the leader election library logs through it too.
	Log *slog.Logger
}

// Run campaigns for the Lease and calls lead while holding it, until ctx is done. lead must
// return soon after its context ends; Run returns only after it did. The error is for a bad
// election configuration.
func (el *Elector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	log := el.Log
	if log == nil {
		log = slog.Default()
	}
	id := el.Identity
	if id == "" {
		id = Identity()
	}
	log = log.With(slog.String("lease", el.Namespace+"/"+el.Name), slog.String("identity", id))
	lec := leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: el.Namespace, Name: el.Name},
			Client:     el.Leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration:   durationOr(el.LeaseDuration, DefaultLeaseDuration),
		RenewDeadline:   durationOr(el.RenewDeadline, DefaultRenewDeadline),
		RetryPeriod:     durationOr(el.RetryPeriod, DefaultRetryPeriod),
		ReleaseOnCancel: true,
		Name:            el.Name,
	}
	ectx := klog.NewContext(ctx, logr.FromSlogHandler(log.Handler()))
	for {
		// OnStartedLeading runs in a goroutine the elector does not wait for; hand its
		// context over so lead runs here and Run returns only after it stopped.
		leading := make(chan context.Context, 1)
		lec.Callbacks = leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) { leading <- lctx },
			OnStoppedLeading: func() {},
			OnNewLeader: func(holder string) {
				log.InfoContext(ctx, el.What+" leader elected", slog.String("leader", holder))
			},
		}
		le, err := leaderelection.NewLeaderElector(lec)
		if err != nil {
			return fmt.Errorf("%s leader election: %w", el.What, err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			le.Run(ectx)
		}()
		select {
		case lctx := <-leading:
			log.InfoContext(ctx, "leading the "+el.What)
			lead(lctx)
			<-done
		case <-done:
		}
		if ctx.Err() != nil {
			return nil
		}
		log.WarnContext(ctx, "lost the "+el.What+" lease; campaigning again")
	}
}

// Identity names this replica: "<hostname>_<pid>".
func Identity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + "_" + strconv.Itoa(os.Getpid())
}

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
