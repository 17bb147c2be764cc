package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/user"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/whypending/whypending/calico"
)

// ipamFlags are the flags shared by the ipam subcommands, and the client they share.
type ipamFlags struct {
	kube   *kubeFlags
	owner  string
	client *calico.Client
}

// calico returns the command's Calico client, connecting on first use.
func (f *ipamFlags) calico(ctx context.Context) (*calico.Client, error) {
	if f.client != nil {
		return f.client, nil
	}
	cfg, err := f.kube.restConfig()
	if err != nil {
		return nil, err
	}
	cl, err := calico.NewClient(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Host, err)
	}
	f.client = cl
	return cl, nil
}

// defaultLockOwner names this user on this host: the CLI's lock owner, stable across runs so
// the next run can undo a lock a killed run left behind.
func defaultLockOwner() string {
	host, _ := os.Hostname()
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return "whypending-cli:" + name + "@" + host
}

// newIPAMCommand is `whypending ipam`: Calico IPAM check, usage and repair through the
// Kubernetes API (Calico KDD mode), the native replacement for the calicoctl procedure.
func newIPAMCommand(kube *kubeFlags) *cobra.Command {
	f := &ipamFlags{kube: kube}
	cmd := &cobra.Command{
		Use:   "ipam",
		Args:  cobra.NoArgs, // an unknown subcommand is an error, not a help page with exit 0
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		Short: "Check and repair Calico IPAM (leaked IPs, empty blocks, datastore lock)",
		Long: `Check and repair Calico IPAM through the Kubernetes API (Calico's Kubernetes datastore),
like calicoctl ipam check / show / release and calicoctl datastore migrate lock / unlock.

Destructive commands print their plan and change nothing without --yes. Every write is a
compare-and-set; addresses are re-verified against live pods and nodes right before each block
write. A datastore lock taken by this owner and left behind by a killed run (deadline passed or
process gone) is undone when any ipam command starts.`,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.HasParent() || cmd.Name() == "ipam" {
				return nil // "whypending ipam" alone only prints help
			}
			cl, err := f.calico(cmd.Context())
			if err != nil {
				return err
			}
			recovered, err := cl.RecoverLocks(cmd.Context(), f.owner)
			if err != nil {
				return err
			}
			if recovered {
				fmt.Fprintf(cmd.ErrOrStderr(), "Undid a datastore lock of %s left behind by an earlier run (datastoreReady is true again).\n", f.owner)
			}
			return nil
		},
	}
	cmd.PersistentFlags().StringVar(&f.owner, "owner", defaultLockOwner(), "lock owner recorded in the ClusterInformation marker")
	cmd.AddCommand(
		newIPAMCheckCommand(f),
		newIPAMShowCommand(f),
		newIPAMReleaseIPsCommand(f),
		newIPAMReleaseBlocksCommand(f),
		newIPAMLockCommand(f),
		newIPAMUnlockCommand(f),
	)
	return cmd
}

func newIPAMCheckCommand(f *ipamFlags) *cobra.Command {
	var output string
	var showProblems, showAll bool
	cmd := &cobra.Command{
		Use:   "check [-o report.json]",
		Short: "Find leaked IPs, in-use IPs with no allocation, and leaked or missing handles",
		Long: `Compare IPAM allocations with what pods, nodes (tunnel addresses) and LoadBalancer
services use, like calicoctl ipam check. -o writes calicoctl's report schema, which both
"whypending ipam release-ips --from-report" and "calicoctl ipam release --from-report" accept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := f.calico(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.Check(cmd.Context(), calico.CheckOptions{})
			if err != nil {
				return err
			}
			if err := res.WriteText(cmd.OutOrStdout(), detail(showProblems, showAll)); err != nil {
				return err
			}
			if output != "" {
				return writeReportFile(output, res)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the calicoctl-schema JSON report to this file")
	cmd.Flags().BoolVar(&showProblems, "show-problem-ips", false, "print every leaked or unallocated address")
	cmd.Flags().BoolVar(&showAll, "show-all-ips", false, "print every allocation")
	return cmd
}

func detail(problems, all bool) calico.Detail {
	switch {
	case all:
		return calico.AllIPs
	case problems:
		return calico.ProblemIPs
	}
	return calico.Summary
}

func writeReportFile(path string, res *calico.CheckResult) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := res.WriteReport(f); err != nil {
		f.Close()
		return fmt.Errorf("write report %s: %w", path, err)
	}
	return f.Close()
}

func newIPAMShowCommand(f *ipamFlags) *cobra.Command {
	var showBlocks bool
	cmd := &cobra.Command{
		Use:   "show [--show-blocks]",
		Short: "Show IP usage per pool and block, block owners and empty blocks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := f.calico(cmd.Context())
			if err != nil {
				return err
			}
			u, err := cl.Utilization(cmd.Context())
			if err != nil {
				return err
			}
			return u.WriteText(cmd.OutOrStdout(), showBlocks)
		},
	}
	cmd.Flags().BoolVar(&showBlocks, "show-blocks", false, "also show each block, its node and the node's block count against maxBlocksPerHost")
	return cmd
}

// lockedFlags are the flags of commands that may lock the datastore.
type lockedFlags struct {
	yes  bool
	lock bool
	ttl  time.Duration
}

func (l *lockedFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&l.yes, "yes", false, "make the changes (without it, only the plan is printed)")
	cmd.Flags().BoolVar(&l.lock, "lock", false, "lock the datastore (no pod starts meanwhile) for check + release, unlock, and check again")
	cmd.Flags().DurationVar(&l.ttl, "lock-ttl", 5*time.Minute, "longest time the datastore stays locked")
}

// withLock runs fn while holding the datastore lock. fn's context ends before the lock's
// deadline; the lock is released on every return path, Ctrl-C included.
func withLock(ctx context.Context, cl *calico.Client, owner, op string, ttl time.Duration, w io.Writer, fn func(context.Context) error) (err error) {
	if err := checkLockTTL(ttl); err != nil {
		return err
	}
	l, err := cl.Lock(ctx, calico.LockOptions{Owner: owner, Operation: op, TTL: ttl})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Locked the Calico datastore (owner %s, until %s). New pods cannot start until it is unlocked.\n",
		owner, l.Marker().Deadline.Local().Format(time.TimeOnly))
	defer func() {
		if uerr := l.Unlock(ctx); uerr != nil {
			err = errors.Join(err, uerr)
			return
		}
		fmt.Fprintln(w, "Unlocked the Calico datastore.")
	}()
	wctx, cancel := context.WithDeadline(ctx, l.Marker().Deadline.Add(-5*time.Second))
	defer cancel()
	return fn(wctx)
}

func newIPAMReleaseIPsCommand(f *ipamFlags) *cobra.Command {
	var lf lockedFlags
	var fromReport string
	cmd := &cobra.Command{
		Use:   "release-ips [--yes] [--lock] [--from-report report.json]",
		Short: "Release leaked IPs and leaked handles",
		Long: `Release the addresses a check finds leaked (allocated, used by no pod, node or service),
then decrement or delete their handles, and delete leaked handles. Without --from-report a
fresh check decides; with it, the report's leaked addresses (calicoctl schema) are the
candidates. Either way each address must still carry the handle and sequence number the
check saw, all addresses of a handle go together or not at all, and each is re-verified
against live pods and nodes right before its block is written (one compare-and-set write per
block, one per handle).

--lock locks the datastore, checks, releases, unlocks and checks again, as calicoctl's
documented procedure does.`,
		Example: `  whypending ipam release-ips                 # print the plan
  whypending ipam release-ips --lock --yes    # lock, check, release, unlock, check again`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			cl, err := f.calico(ctx)
			if err != nil {
				return err
			}
			plan := func(ctx context.Context) ([]calico.Allocation, []calico.HandleInfo, error) {
				if fromReport != "" {
					return reportPlan(ctx, cl, fromReport, out)
				}
				res, err := cl.Check(ctx, calico.CheckOptions{})
				if err != nil {
					return nil, nil, err
				}
				fmt.Fprintf(out, "Check: %d allocations, %d leaked IPs, %d leaked handles, %d problems.\n",
					len(res.Allocations), len(res.LeakedIPs), len(res.LeakedHandles), res.Problems)
				return res.LeakedIPs, res.LeakedHandles, nil
			}
			release := func(ctx context.Context) error {
				ips, handles, err := plan(ctx)
				if err != nil {
					return err
				}
				printReleasePlan(out, ips, handles)
				if !lf.yes {
					fmt.Fprintln(out, "Dry run: nothing changed. Re-run with --yes to release.")
					return nil
				}
				if len(ips) == 0 && len(handles) == 0 {
					return nil
				}
				rel, err := cl.ReleaseIPs(ctx, ips, calico.ReleaseOptions{Handles: handles})
				if err != nil {
					return err
				}
				printReleaseResult(out, rel)
				return nil
			}
			if !lf.lock || !lf.yes {
				return release(ctx)
			}
			if err := withLock(ctx, cl, f.owner, "release-ips", lf.ttl, out, release); err != nil {
				return err
			}
			res, err := cl.Check(ctx, calico.CheckOptions{})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Check complete; found %d problems.\n", res.Problems)
			return nil
		},
	}
	lf.add(cmd)
	cmd.Flags().StringVar(&fromReport, "from-report", "", "release the leaked addresses of this report (ipam check -o, or calicoctl ipam check -o)")
	return cmd
}

// reportPlan reads a calicoctl-schema report and returns its leaked addresses and handles. The
// report must come from this cluster (same clusterGUID).
func reportPlan(ctx context.Context, cl *calico.Client, path string, out io.Writer) ([]calico.Allocation, []calico.HandleInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read report: %w", err)
	}
	defer f.Close()
	rep, err := calico.ReadReport(f)
	if err != nil {
		return nil, nil, fmt.Errorf("read report %s: %w", path, err)
	}
	s, err := cl.ClusterInfo(ctx)
	if err != nil {
		return nil, nil, err
	}
	if rep.ClusterGUID != s.ClusterGUID {
		return nil, nil, fmt.Errorf("report %s is from cluster %q, this is %q", path, rep.ClusterGUID, s.ClusterGUID)
	}
	if rep.ClusterInfoRevision != s.Revision {
		fmt.Fprintf(out, "Note: ClusterInformation changed since the report (revision %s, now %s); every address is checked again before it is released.\n",
			rep.ClusterInfoRevision, s.Revision)
	}
	return rep.Leaked(), rep.LeakedHandles, nil
}

func printReleasePlan(w io.Writer, ips []calico.Allocation, handles []calico.HandleInfo) {
	blocks := map[string]int{}
	for _, a := range ips {
		blocks[a.Block]++
	}
	fmt.Fprintf(w, "Plan: release %d IPs", len(ips))
	if len(blocks) > 1 || blocks[""] == 0 {
		fmt.Fprintf(w, " in %d blocks", len(blocks))
	}
	fmt.Fprintf(w, " and delete %d leaked handles.\n", len(handles))
	const show = 50
	for i, a := range ips {
		if i == show {
			fmt.Fprintf(w, "  ... and %d more\n", len(ips)-show)
			break
		}
		owner := a.Type
		if a.Pod != "" {
			owner = "pod " + a.Namespace + "/" + a.Pod
		}
		fmt.Fprintf(w, "  %s  node %s  %s  handle %s\n", a.IP, a.Node, owner, a.Handle)
	}
	for _, h := range handles {
		fmt.Fprintf(w, "  handle %s\n", h.ID)
	}
}

func printReleaseResult(w io.Writer, r *calico.ReleaseResult) {
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  kept %s: %s\n", s.IP, s.Reason)
	}
	for _, s := range r.SkippedHandles {
		fmt.Fprintf(w, "  kept handle %s: %s\n", s.ID, s.Reason)
	}
	for _, s := range r.HandleErrors {
		fmt.Fprintf(w, "  handle %s not updated: %s (the next check reports it as leaked)\n", s.ID, s.Reason)
	}
	fmt.Fprintf(w, "Released %d IPs (kept %d) with %d block writes; %d handles deleted, %d decremented (%d handle writes); %s.\n",
		len(r.Released), len(r.Skipped), r.BlockWrites, r.HandlesDeleted, r.HandlesUpdated, r.HandleWrites, r.Took.Round(time.Millisecond))
}

func newIPAMReleaseBlocksCommand(f *ipamFlags) *cobra.Command {
	var lf lockedFlags
	var allEmpty, allowLast bool
	cmd := &cobra.Command{
		Use:   "release-blocks [CIDR...] [--all-empty] [--yes] [--lock]",
		Short: "Release empty affine blocks (and their BlockAffinities)",
		Long: `Release empty blocks with Calico's own procedure: the BlockAffinity goes to
pendingDeletion, the IPAMBlock is soft-deleted and deleted, then the BlockAffinity. A block with
any allocation (other than Windows-reserved addresses), whose address a pod or node uses, or that
is its node's last affine block (unless --allow-last-block) is kept.`,
		Example: `  whypending ipam release-blocks --all-empty          # print the plan
  whypending ipam release-blocks 172.24.10.64/26 --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if len(args) == 0 && !allEmpty {
				return errors.New("name the blocks (CIDRs) or use --all-empty")
			}
			var cidrs []netip.Prefix
			for _, a := range args {
				p, err := netip.ParsePrefix(a)
				if err != nil {
					return fmt.Errorf("bad block CIDR %q: %w", a, err)
				}
				cidrs = append(cidrs, p)
			}
			cl, err := f.calico(ctx)
			if err != nil {
				return err
			}
			release := func(ctx context.Context) error {
				u, err := cl.Utilization(ctx)
				if err != nil {
					return err
				}
				blocks := map[netip.Prefix]calico.BlockUsage{}
				for _, p := range u.Pools {
					for _, b := range p.Blocks {
						blocks[b.CIDR] = b
					}
				}
				// The plan holds only what the release would really take: the same checks as
				// ReleaseEmptyBlocks (which checks again, live, before it writes).
				var targets []netip.Prefix
				consider := func(c netip.Prefix) {
					b, ok := blocks[c]
					switch {
					case slices.Contains(targets, c):
					case !ok:
						fmt.Fprintf(out, "  skipping %s: no such block\n", c)
					case b.Node == "":
						fmt.Fprintf(out, "  skipping %s: not affine to a node (%s)\n", c, cmp.Or(b.Affinity, "no affinity"))
					case !b.Empty:
						fmt.Fprintf(out, "  skipping %s: %d of its %d addresses are allocated\n", c, b.InUse, b.Total)
					case b.LastAffineBlock && !allowLast:
						fmt.Fprintf(out, "  skipping %s: the last affine block of %s (--allow-last-block releases it)\n", c, b.Node)
					default:
						targets = append(targets, c)
					}
				}
				for _, c := range cidrs {
					consider(c)
				}
				if allEmpty {
					for _, b := range u.EmptyBlocks {
						consider(b.CIDR)
					}
				}
				fmt.Fprintf(out, "Plan: release %d blocks.\n", len(targets))
				for _, p := range targets {
					fmt.Fprintf(out, "  %s\n", p)
				}
				if !lf.yes {
					fmt.Fprintln(out, "Dry run: nothing changed. Re-run with --yes to release.")
					return nil
				}
				if len(targets) == 0 {
					return nil
				}
				res, err := cl.ReleaseEmptyBlocks(ctx, targets, calico.BlockReleaseOptions{AllowLastBlock: allowLast})
				if err != nil {
					return err
				}
				for _, s := range res.Skipped {
					fmt.Fprintf(out, "  kept %s: %s\n", s.CIDR, s.Reason)
				}
				fmt.Fprintf(out, "Released %d blocks (kept %d) with %d writes.\n", len(res.Released), len(res.Skipped), res.Writes)
				return nil
			}
			if !lf.lock || !lf.yes {
				return release(ctx)
			}
			return withLock(ctx, cl, f.owner, "release-blocks", lf.ttl, out, release)
		},
	}
	lf.add(cmd)
	cmd.Flags().BoolVar(&allEmpty, "all-empty", false, "release every empty affine block")
	cmd.Flags().BoolVar(&allowLast, "allow-last-block", false, "also release a node's last affine block")
	return cmd
}

func newIPAMLockCommand(f *ipamFlags) *cobra.Command {
	var ttl time.Duration
	var op string
	cmd := &cobra.Command{
		Use:   "lock [--ttl 30m]",
		Short: "Lock the Calico datastore (ClusterInformation datastoreReady=false)",
		Long: `Lock the Calico datastore like calicoctl datastore migrate lock, with a marker naming the
owner and a deadline. No pod can start or stop networking while it is locked. The lock stays
after this command exits: run "whypending ipam unlock". After the deadline, the next
whypending ipam command of the same owner unlocks it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := f.calico(cmd.Context())
			if err != nil {
				return err
			}
			if err := checkLockTTL(ttl); err != nil {
				return err
			}
			l, err := cl.Lock(cmd.Context(), calico.LockOptions{Owner: f.owner, Operation: op, TTL: ttl, Detached: true})
			if err != nil {
				return err
			}
			m := l.Marker()
			fmt.Fprintf(cmd.OutOrStdout(), "Locked the Calico datastore (owner %s, until %s). Run \"whypending ipam unlock\" when done.\n",
				m.Owner, m.Deadline.UTC().Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Minute, "how long the lock may be held")
	cmd.Flags().StringVar(&op, "operation", "manual", "what the lock is for (recorded in the marker)")
	return cmd
}

// checkLockTTL refuses a datastore lock lifetime outside 1s to 30m (the bot's
// lock.maxDuration has the same ceiling): no pod can start or stop networking while the
// datastore is locked.
func checkLockTTL(ttl time.Duration) error {
	if ttl < time.Second || ttl > 30*time.Minute {
		return fmt.Errorf("lock TTL %s is out of range: the datastore may be locked for 1s to 30m (no pod can start or stop networking while it is)", ttl)
	}
	return nil
}

func newIPAMUnlockCommand(f *ipamFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "unlock [--force]",
		Short: "Unlock the Calico datastore locked by this owner (--force: whoever locked it)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			cl, err := f.calico(ctx)
			if err != nil {
				return err
			}
			if force {
				if err := cl.ForceUnlock(ctx); err != nil {
					return err
				}
			} else {
				unlocked, err := cl.UnlockOwner(ctx, f.owner)
				if errors.Is(err, calico.ErrDatastoreLocked) {
					return fmt.Errorf("%w (use --force to unlock it anyway)", err)
				}
				if err != nil {
					return err
				}
				if !unlocked {
					fmt.Fprintln(out, "The Calico datastore is not locked.")
					return nil
				}
			}
			fmt.Fprintln(out, "Unlocked the Calico datastore.")
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "unlock whoever locked it")
	return cmd
}
