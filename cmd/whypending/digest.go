package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/digest"
	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
)

// newDigestCommand is `whypending digest`: one cluster's IPAM digest on stdout, the message
// the bot posts on its schedule.
func newDigestCommand(kube *kubeFlags) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "digest [--name NAME]",
		Short: "Print the Calico IPAM digest of a cluster (leaked IPs, empty blocks, pool usage, datastore lock)",
		Long: `Print the Calico IPAM digest of the cluster selected by --kubeconfig and --context: the
message "whypending serve" posts to channels.digest on digest.schedule. It reads the IPAM check
(like calicoctl ipam check) and utilization (like calicoctl ipam show --show-blocks) and
changes nothing. Useful by hand or from a CronJob; exit code 0 means the digest was read, not
that the cluster is clean.`,
		Example: `  whypending digest --context prod-eu
  whypending digest --kubeconfig ~/.kube/prod --name prod-eu`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			ctx, cancel := kube.withDeadline(cmd.Context())
			defer cancel()
			cl, err := calico.NewClient(ctx, cfg)
			if err != nil {
				return commandError(ctx, cfg, err)
			}
			if name == "" {
				name = kube.clusterName(cfg.Host)
			}
			r, err := slowStep(ctx, cmd.ErrOrStderr(), "reading Calico IPAM", cfg.Host, func(ctx context.Context) (digest.Report, error) {
				return digest.Collect(ctx, name, cl, time.Now())
			})
			if err != nil {
				return commandError(ctx, cfg, err)
			}
			return console.Render(cmd.OutOrStdout(), bot.RenderDigest(r))
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the cluster name shown in the digest (default: the kubeconfig context, else the server)")
	return cmd
}

// clusterName names the selected cluster for display: --context, else the kubeconfig's
// current context, else host.
func (f *kubeFlags) clusterName(host string) string {
	if f.context != "" {
		return f.context
	}
	if raw, err := f.clientConfig().RawConfig(); err == nil && raw.CurrentContext != "" {
		return raw.CurrentContext
	}
	return host
}

// runDigestSchedule posts the digest of clusters to cfg.Channels.Digest through poster on
// cfg.Digest's schedule until ctx is done: their IPAM and, when the watch runs (w not nil), the
// stuck workloads it did not post because their answer is not sure. With the kubernetes store, one poster is elected
// among the replicas with a Lease in the store namespace of storeCluster (it waits until that
// cluster's kubeconfig loads; while its API server is down no replica can lead, so no digest
// is posted). With the memory store (one replica) there is no election.
func runDigestSchedule(ctx context.Context, cfg *Config, clusters []*bot.Cluster, poster chat.ChannelPoster, w *watch.Watcher,
	storeCluster *fleet.Cluster, log *slog.Logger) error {
	job := &digest.Job{Channels: cfg.Channels.Digest, Poster: poster, Render: bot.RenderDigest}
	if w != nil {
		job.Unclear = w.Unclear
	}
	for _, c := range clusters {
		dc := digest.Cluster{Name: c.Name, Health: c.Health}
		if c.IPAM != nil {
			dc.IPAM = c.IPAM
		}
		job.Clusters = append(job.Clusters, dc)
	}
	s := &digest.Scheduler{
		Job:       job,
		Schedule:  cfg.Digest.Schedule,
		Timezone:  cfg.Digest.Timezone,
		Namespace: cfg.Store.Namespace,
		Log:       log,
	}
	if storeCluster != nil {
		restCfg, err := storeCluster.WaitConfig(ctx)
		if err != nil {
			return nil // ctx done
		}
		client, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			return fmt.Errorf("digest lease cluster %s: %w", storeCluster.Name(), err)
		}
		s.Leases = client.CoordinationV1()
	}
	return s.Run(ctx)
}
