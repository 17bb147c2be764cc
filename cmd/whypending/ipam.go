package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
)

// ipamFlags are the flags shared by the ipam subcommands, and the client they share.
type ipamFlags struct {
	kube   *kubeFlags
	owner  string
	client *calico.Client
	cfg    *rest.Config       // the API server the client talks to
	host   string             // cfg.Host
	cancel context.CancelFunc // ends the command's context (--timeout)
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
	f.cfg, f.host = cfg, cfg.Host
	cl, err := calico.NewClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	f.client = cl
	return cl, nil
}

// explain turns a failed call to the API server into the one line naming the server
// (commandError); other errors, and exit codes, stay as they are.
func (f *ipamFlags) explain(ctx context.Context, err error) error {
	var ee exitError
	var urlErr *url.Error
	var timeout *fleet.TimeoutError
	var status apierrors.APIStatus
	var d *deadlineError
	switch {
	case err == nil || errors.As(err, &ee) || f.cfg == nil:
		return err
	case errors.As(err, &urlErr), errors.As(err, &timeout), errors.As(err, &status), errors.As(context.Cause(ctx), &d):
		return commandError(ctx, f.cfg, err)
	}
	return err
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
		Args:  subcommandArgs, // an unknown subcommand is an error, not a help page with exit 0
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
			ctx, cancel := kube.withDeadline(cmd.Context())
			f.cancel = cancel // the context lives as long as the command
			cmd.SetContext(ctx)
			cl, err := slowStep(ctx, cmd.ErrOrStderr(), "connecting", kube.server(), f.calico)
			if err != nil {
				return f.explain(ctx, err)
			}
			recovered, err := cl.RecoverLocks(ctx, f.owner)
			if err != nil {
				return f.explain(ctx, err)
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
		newIPAMReleaseHandlesCommand(f),
		newIPAMLockCommand(f),
		newIPAMUnlockCommand(f),
	)
	for _, sub := range cmd.Commands() {
		run := sub.RunE
		sub.RunE = func(cmd *cobra.Command, args []string) error {
			return f.explain(cmd.Context(), run(cmd, args))
		}
	}
	return cmd
}

func newIPAMCheckCommand(f *ipamFlags) *cobra.Command {
	var output, report string
	var showProblems, showAll bool
	cmd := &cobra.Command{
		Use:   "check [-o text|json] [--report report.json]",
		Short: "Find leaked IPs, in-use IPs with no allocation, and leaked or missing handles",
		Long: `Compare IPAM allocations with what pods, nodes (tunnel addresses) and LoadBalancer
services use, like calicoctl ipam check. -o json prints the report as JSON on stdout instead
of the text, in calicoctl's report schema; --report FILE also writes it to FILE (what
calicoctl's -o does). Both "whypending ipam release-ips --from-report" and "calicoctl ipam
release --from-report" accept the report.`,
		Example: `  whypending ipam check
  whypending ipam check -o json | jq '.leakedIPs | length'
  whypending ipam check --report report.json`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("unknown output format %q: use -o text or -o json (the report on stdout); --report %s writes the report to a file, as calicoctl's -o does", output, output)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := f.check(cmd)
			if err != nil {
				return err
			}
			if output == "json" {
				if err := res.WriteReport(cmd.OutOrStdout()); err != nil {
					return err
				}
				f.mentionLock(cmd.Context(), cmd.ErrOrStderr())
			} else {
				if err := res.WriteText(cmd.OutOrStdout(), detail(showProblems, showAll)); err != nil {
					return err
				}
				f.mentionLock(cmd.Context(), cmd.OutOrStdout())
			}
			if report != "" {
				return writeReportFile(report, res)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, or json (the calicoctl-schema report on stdout)")
	cmd.Flags().StringVar(&report, "report", "", "also write the calicoctl-schema JSON report to this file (calicoctl ipam check -o FILE)")
	cmd.Flags().BoolVar(&showProblems, "show-problem-ips", false, "print every leaked or unallocated address")
	cmd.Flags().BoolVar(&showAll, "show-all-ips", false, "print every allocation")
	return cmd
}

// mentionLock prints the lock's LockStatus.Notice when the datastore is locked. A failed read
// prints nothing: the command's own reads already answered.
func (f *ipamFlags) mentionLock(ctx context.Context, w io.Writer) {
	if s, err := f.client.LockStatus(ctx); err == nil && !s.Ready {
		fmt.Fprintln(w, s.Notice())
	}
}

// check is the IPAM check, with progress lines while it runs.
func (f *ipamFlags) check(cmd *cobra.Command) (*calico.CheckResult, error) {
	if _, err := f.calico(cmd.Context()); err != nil {
		return nil, err
	}
	return slowStep(cmd.Context(), cmd.ErrOrStderr(), "checking Calico IPAM (blocks, handles, pods, nodes, services)", f.host,
		func(ctx context.Context) (*calico.CheckResult, error) {
			return f.client.Check(ctx, calico.CheckOptions{})
		})
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
			u, err := slowStep(cmd.Context(), cmd.ErrOrStderr(), "reading Calico IPAM blocks and pools", f.host, cl.Utilization)
			if err != nil {
				return err
			}
			if err := u.WriteText(cmd.OutOrStdout(), showBlocks); err != nil {
				return err
			}
			f.mentionLock(cmd.Context(), cmd.OutOrStdout())
			return nil
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
	cmd.Flags().BoolVar(&l.lock, "lock", false, "lock the datastore (no pod starts meanwhile) for the re-check and the release, unlock, and check again")
	cmd.Flags().DurationVar(&l.ttl, "lock-ttl", 5*time.Minute, "longest time the datastore stays locked")
}

// check refuses a --lock-ttl out of range before anything is read, when the run will lock.
func (l *lockedFlags) check() error {
	if l.lock && l.yes {
		return checkLockTTL(l.ttl)
	}
	return nil
}

// runner is the actions.Runner a repair command plans and executes through, the one the bot's
// approvals use: the CLI's lock owner and lock flags, with the lock steps printed as they
// happen (a retried unlock on stderr).
func (f *ipamFlags) runner(cl *calico.Client, lf lockedFlags, cmd *cobra.Command) *actions.Runner {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var deadline time.Time
	var retries int
	r := &actions.Runner{Cluster: f.kube.clusterName(f.host), IPAM: cl, LockPolicy: actions.LockNever, LockTTL: lf.ttl, LockOwner: f.owner,
		OnLock: func(m calico.LockMarker) {
			deadline = m.Deadline
			fmt.Fprintf(out, "Locked the Calico datastore (owner %s, until %s). New pods cannot start until it is unlocked.\n",
				m.Owner, m.Deadline.Local().Format(time.TimeOnly))
		},
		OnUnlockRetry: func(err error, wait time.Duration) {
			// The first failure, then one line every few attempts (about every 30 s).
			if retries++; retries == 1 || retries%4 == 0 {
				fmt.Fprintf(errOut, "whypending: the unlock failed (%v); trying again until %s, the lock's deadline\n",
					fleet.APIError(f.host, err), deadline.Local().Format(time.TimeOnly))
			}
		},
		OnUnlock: func() {
			if retries > 0 {
				fmt.Fprintf(out, "Unlocked the Calico datastore (after %d failed attempts).\n", retries)
				return
			}
			fmt.Fprintln(out, "Unlocked the Calico datastore.")
		},
	}
	if lf.lock {
		r.LockPolicy = actions.LockAlways
	}
	return r
}

// planRepairs plans each kind through r with opts, as requested by the CLI's user.
func planRepairs(ctx context.Context, r *actions.Runner, opts actions.PlanOptions, kinds ...actions.Kind) ([]actions.Plan, error) {
	plans := make([]actions.Plan, 0, len(kinds))
	for _, k := range kinds {
		p, err := r.Plan(ctx, k, opts)
		if err != nil {
			return nil, err
		}
		p.RequestedBy = cliPrincipal()
		plans = append(plans, p)
	}
	return plans, nil
}

// printPlans prints the first plan, and every other that changes or leaves out something,
// with the chat's plan renderer (bot.PlanPreview through the console adapter).
func printPlans(w io.Writer, plans []actions.Plan) error {
	for i, p := range plans {
		if i > 0 && len(p.Items) == 0 && len(p.Excluded) == 0 {
			continue
		}
		fmt.Fprintln(w)
		if err := console.Render(w, bot.PlanPreview(p)); err != nil {
			return err
		}
	}
	return nil
}

// runPlans prints plans and, with --yes, runs them (step names the progress line, verb the
// dry run's hint). ran is false for a dry run, for plans that change nothing, and for a
// failure before anything was read or changed (err says why); otherwise the caller prints the
// results, and when is " before the failure" if err is set.
func (f *ipamFlags) runPlans(cmd *cobra.Command, r *actions.Runner, lf lockedFlags, plans []actions.Plan, step, verb string) (results []actions.Result, when string, ran bool, err error) {
	out := cmd.OutOrStdout()
	if err := printPlans(out, plans); err != nil {
		return nil, "", false, err
	}
	if !lf.yes {
		fmt.Fprintf(out, "Dry run: nothing changed. Re-run with --yes to %s.\n", verb)
		return nil, "", false, nil
	}
	results, err = slowStep(cmd.Context(), cmd.ErrOrStderr(), step, f.host, func(ctx context.Context) ([]actions.Result, error) {
		return executeRepairs(ctx, r, plans)
	})
	if results == nil || err != nil && !touched(results, err) {
		return nil, "", false, err
	}
	if err != nil {
		when = " before the failure"
	}
	return results, when, true, err
}

// executeRepairs runs the plans as one execution of r (one datastore lock with --lock, one
// re-check, one check afterwards), approved by the CLI's user with --yes, unless none of them
// changes anything (nil results).
func executeRepairs(ctx context.Context, r *actions.Runner, plans []actions.Plan) ([]actions.Result, error) {
	aps := make([]actions.Approved, 0, len(plans))
	work := false
	for _, p := range plans {
		aps = append(aps, actions.Approved{Plan: p, By: cliPrincipal(), At: time.Now()})
		work = work || len(p.Items) > 0
	}
	if !work {
		return nil, nil
	}
	return r.ExecuteAll(ctx, aps...)
}

// touched reports whether an execution that failed had read or changed anything before it
// stopped, or left the datastore locked: what it did is printed before the error.
func touched(results []actions.Result, err error) bool {
	if errors.Is(err, actions.ErrLeftLocked) {
		return true
	}
	for _, r := range results {
		if r.Done > 0 || len(r.Skipped) > 0 || r.Writes != (actions.Writes{}) {
			return true
		}
	}
	return false
}

// failed ends a repair that stopped part way, after what it did was printed: the error in one
// line naming the server, then what a check finds now (when the API server answers again),
// and, when the datastore lock could not be released, a last line in capitals that says so
// and gives the command that unlocks it.
func (f *ipamFlags) failed(cmd *cobra.Command, err error, checkAfter func(ctx context.Context) error) error {
	ctx, errOut := cmd.Context(), cmd.ErrOrStderr()
	fmt.Fprintf(errOut, "error: the repair stopped part way: %v\n", chat.JoinLines(commandError(ctx, f.cfg, err).Error()))
	if errors.Is(err, actions.ErrLeftLocked) {
		fmt.Fprintf(errOut, "THE CALICO DATASTORE IS STILL LOCKED: no pod can get an IP address until it is unlocked. Unlock it with: %s\n", f.unlockCommand())
		return exitError{code: 1}
	}
	// The check runs even when --timeout has passed: it only reads, each request bounded by
	// --request-timeout.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if cerr := checkAfter(cctx); cerr != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "Check afterwards could not run: %v\n", fleet.APIError(f.host, cerr))
	}
	return exitError{code: 1}
}

// unlockCommand is the command that unlocks the datastore lock this run took: ipam unlock
// with this run's kubeconfig, context and owner.
func (f *ipamFlags) unlockCommand() string {
	args := []string{"whypending", "ipam", "unlock"}
	if f.kube.kubeconfig != "" {
		args = append(args, "--kubeconfig", shellWord(f.kube.kubeconfig))
	}
	if f.kube.context != "" {
		args = append(args, "--context", shellWord(f.kube.context))
	}
	if f.owner != defaultLockOwner() {
		args = append(args, "--owner", shellWord(f.owner))
	}
	return strings.Join(args, " ")
}

// shellWord quotes s for a POSIX shell when it holds anything but letters, digits and
// -_./:@=,+.
func shellWord(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@=,+", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// cliPrincipal names the CLI's user as a plan's requester and approver.
func cliPrincipal() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return "cli:" + name
}

// maxLeftLines caps the "left" lines printSkips prints: a control plane that stops mid-repair
// leaves one per handle, all with the same cause.
const maxLeftLines = 5

// printSkips prints what an execution left alone (kept) or behind (left), what is new since the
// plan and untouched, with noun naming the kind's items.
func printSkips(w io.Writer, res actions.Result, prefix, noun string) {
	for _, s := range res.Skipped {
		fmt.Fprintf(w, "  kept %s%s: %s\n", prefix, s.Target, s.Reason)
	}
	for i, s := range res.Leftovers {
		if i == maxLeftLines && len(res.Leftovers) > maxLeftLines+1 {
			fmt.Fprintf(w, "  … and %d more left the same way or alike (the next check lists them)\n", len(res.Leftovers)-i)
			break
		}
		fmt.Fprintf(w, "  left %s: %s\n", s.Target, s.Reason)
	}
	if res.NewSince > 0 {
		fmt.Fprintf(w, "  %d more %s appeared after the plan was made; they were not touched (run the command again).\n", res.NewSince, noun)
	}
}

// count is n and the noun in the form n takes: "1 IP", "181 IPs".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// remaining says what the check afterwards found: n, or that it could not run.
func remaining(n int) string {
	if n < 0 {
		return "unknown (the check could not run)"
	}
	return fmt.Sprint(n)
}

func newIPAMReleaseIPsCommand(f *ipamFlags) *cobra.Command {
	var lf lockedFlags
	var fromReport string
	cmd := &cobra.Command{
		Use:   "release-ips [--yes] [--lock] [--from-report report.json]",
		Short: "Release leaked IPs and leaked handles",
		Long: `Release the addresses a check finds leaked (allocated, used by no pod, node or service),
then decrement or delete their handles, and delete leaked handles (older than a minute: a
younger one may be an allocation in flight). Without --from-report a fresh check decides;
with it, the report's leaked addresses and handles (calicoctl schema) are the candidates.

The plan is printed as the bot shows it in chat. With --yes it runs as the bot runs an
approved plan: the cluster is read again and only the planned addresses that are still
leaked with the handle and sequence number of the plan are released, all addresses of a
handle together or not at all, each re-verified against live pods and nodes right before its
block is written (one compare-and-set write per block, one per handle); then a check counts
what remains.

--lock locks the datastore for the re-check and the release, unlocks, and checks again, as
calicoctl's documented procedure does.`,
		Example: `  whypending ipam release-ips                 # print the plan
  whypending ipam release-ips --lock --yes    # plan, lock, re-check, release, unlock, check again`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if err := lf.check(); err != nil {
				return err
			}
			cl, err := f.calico(ctx)
			if err != nil {
				return err
			}
			opts := actions.PlanOptions{Limit: -1}
			if fromReport != "" {
				if opts.Report, err = readReport(ctx, cl, fromReport, out); err != nil {
					return err
				}
			} else {
				if opts.Check, err = f.check(cmd); err != nil {
					return err
				}
				res := opts.Check
				fmt.Fprintf(out, "Check: %d allocations, %d leaked IPs, %d leaked handles, %d problems.\n",
					len(res.Allocations), len(res.LeakedIPs), len(res.LeakedHandles), res.Problems)
			}
			r := f.runner(cl, lf, cmd)
			plans, err := planRepairs(ctx, r, opts, actions.KindReleaseLeakedIPs, actions.KindReleaseLeakedHandles)
			if err != nil {
				return err
			}
			ips, handles := plans[0], plans[1]
			fmt.Fprintf(out, "Plan: release %s%s and delete %s.\n", count(len(ips.Items), "IP", "IPs"), inBlocks(ips.Items), count(len(handles.Items), "leaked handle", "leaked handles"))
			results, when, ran, err := f.runPlans(cmd, r, lf, plans, "releasing", "release")
			if !ran {
				return err
			}
			ipRes, hRes := results[0], results[1]
			printSkips(out, ipRes, "", "leaked IPs")
			printSkips(out, hRes, "handle ", "leaked handles")
			w := ipRes.Writes
			w.Blocks += hRes.Writes.Blocks
			w.Handles += hRes.Writes.Handles
			w.HandlesDeleted += hRes.Writes.HandlesDeleted
			w.HandlesDecremented += hRes.Writes.HandlesDecremented
			fmt.Fprintf(out, "Released %s (kept %d) with %d block writes%s; %d handles deleted, %d decremented (%d handle writes); %s.\n",
				count(ipRes.Done, "IP", "IPs"), len(ipRes.Skipped), w.Blocks, when, w.HandlesDeleted, w.HandlesDecremented, w.Handles,
				ipRes.FinishedAt.Sub(ipRes.StartedAt).Round(time.Millisecond))
			if n := ipRes.Unconfirmed; n > 0 {
				fmt.Fprintf(out, "  %s more were in block writes whose answer never came back: whether they were released, a check tells.\n", count(n, "IP", "IPs"))
			}
			if err != nil {
				return f.failed(cmd, err, func(ctx context.Context) error {
					res, err := cl.Check(ctx, calico.CheckOptions{})
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "Check afterwards: %d leaked IPs and %d leaked handles remain (%d IPs were planned); run the command again to release them.\n",
						len(res.LeakedIPs), len(res.LeakedHandles), len(ips.Items))
					return nil
				})
			}
			fmt.Fprintf(out, "Check afterwards: %s leaked IPs and %s leaked handles remain.\n", remaining(ipRes.Remaining), remaining(hRes.Remaining))
			if !lf.lock {
				return nil
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
	cmd.Flags().StringVar(&fromReport, "from-report", "", "release the leaked addresses and handles of this report (ipam check --report or -o json, or calicoctl ipam check -o)")
	return cmd
}

// inBlocks is " in N blocks" for the planned IPs, or "" when their blocks are unknown (a
// report does not say).
func inBlocks(items []actions.Item) string {
	blocks := map[string]bool{}
	for _, it := range items {
		blocks[it.Block] = true
	}
	if blocks[""] && len(blocks) == 1 {
		return ""
	}
	return fmt.Sprintf(" in %d blocks", len(blocks))
}

// readReport reads a calicoctl-schema report, and refuses one from another cluster (another
// clusterGUID).
func readReport(ctx context.Context, cl *calico.Client, path string, out io.Writer) (*calico.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	defer f.Close()
	rep, err := calico.ReadReport(f)
	if err != nil {
		return nil, fmt.Errorf("read report %s: %w", path, err)
	}
	s, err := cl.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	if rep.ClusterGUID != s.ClusterGUID {
		return nil, fmt.Errorf("report %s is from cluster %q, this is %q", path, rep.ClusterGUID, s.ClusterGUID)
	}
	if rep.ClusterInfoRevision != s.Revision {
		fmt.Fprintf(out, "Note: ClusterInformation changed since the report (revision %s, now %s); every address is checked again before it is released.\n",
			rep.ClusterInfoRevision, s.Revision)
	}
	return rep, nil
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
is its node's last affine block (unless --allow-last-block) is kept; when every block of a node
is empty, one of them is kept.

The plan is printed as the bot shows it in chat; --yes runs it as the bot runs an approved
plan (read again, release the planned blocks still empty, check what remains).`,
		Example: `  whypending ipam release-blocks --all-empty          # print the plan
  whypending ipam release-blocks 172.24.10.64/26 --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if len(args) == 0 && !allEmpty {
				return errors.New("name the blocks (CIDRs) or use --all-empty")
			}
			opts := actions.PlanOptions{AllowLastBlock: allowLast, Limit: -1}
			for _, a := range args {
				p, err := netip.ParsePrefix(a)
				if err != nil {
					return fmt.Errorf("bad block CIDR %q: %w", a, err)
				}
				if !allEmpty {
					opts.Blocks = append(opts.Blocks, p)
				}
			}
			if err := lf.check(); err != nil {
				return err
			}
			cl, err := f.calico(ctx)
			if err != nil {
				return err
			}
			r := f.runner(cl, lf, cmd)
			plans, err := planRepairs(ctx, r, opts, actions.KindReleaseEmptyBlocks)
			if err != nil {
				return err
			}
			results, when, ran, err := f.runPlans(cmd, r, lf, plans, "releasing", "release")
			if !ran {
				return err
			}
			res := results[0]
			printSkips(out, res, "", "releasable empty blocks")
			fmt.Fprintf(out, "Released %s (kept %d) with %d writes%s.\n", count(res.Done, "block", "blocks"), len(res.Skipped), res.Writes.Blocks, when)
			if err != nil {
				return f.failed(cmd, err, func(ctx context.Context) error {
					u, err := cl.Utilization(ctx)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "Check afterwards: %d empty blocks in the cluster; run the command again to release the rest of the plan.\n", len(u.EmptyBlocks))
					return nil
				})
			}
			fmt.Fprintf(out, "Check afterwards: %s releasable empty blocks remain in the plan's scope.\n", remaining(res.Remaining))
			return nil
		},
	}
	lf.add(cmd)
	cmd.Flags().BoolVar(&allEmpty, "all-empty", false, "release every empty affine block")
	cmd.Flags().BoolVar(&allowLast, "allow-last-block", false, "also release a node's last affine block")
	return cmd
}

func newIPAMReleaseHandlesCommand(f *ipamFlags) *cobra.Command {
	var lf lockedFlags
	cmd := &cobra.Command{
		Use:   "release-handles [--yes] [--lock]",
		Short: "Delete leaked IPAM handles (no block holds an address for them), like the bot's /ipam release-handles",
		Long: `Delete the IPAMHandle objects that no block allocation refers to (leaked handles), older
than a minute: a handle younger than that may belong to a CNI ADD still in flight. Each
handle is deleted only if its resourceVersion is unchanged since the plan.

The plan is printed as the bot shows it in chat; --yes runs it as the bot runs an approved
plan (read again, delete the planned handles still leaked, check what remains).`,
		Example: `  whypending ipam release-handles          # print the plan
  whypending ipam release-handles --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if err := lf.check(); err != nil {
				return err
			}
			cl, err := f.calico(ctx)
			if err != nil {
				return err
			}
			r := f.runner(cl, lf, cmd)
			plans, err := planRepairs(ctx, r, actions.PlanOptions{Limit: -1}, actions.KindReleaseLeakedHandles)
			if err != nil {
				return err
			}
			results, when, ran, err := f.runPlans(cmd, r, lf, plans, "deleting leaked handles", "delete")
			if !ran {
				return err
			}
			res := results[0]
			printSkips(out, res, "", "leaked handles")
			fmt.Fprintf(out, "Deleted %s (kept %d) with %d handle writes%s.\n", count(res.Done, "leaked handle", "leaked handles"), len(res.Skipped), res.Writes.Handles, when)
			if err != nil {
				return f.failed(cmd, err, func(ctx context.Context) error {
					res, err := cl.Check(ctx, calico.CheckOptions{})
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "Check afterwards: %d leaked handles remain; run the command again to delete them.\n", len(res.LeakedHandles))
					return nil
				})
			}
			fmt.Fprintf(out, "Check afterwards: %s leaked handles remain.\n", remaining(res.Remaining))
			return nil
		},
	}
	lf.add(cmd)
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
			fmt.Fprintf(cmd.OutOrStdout(), "Locked the Calico datastore (owner %s, until %s). No pod can get or release an IP address until it is unlocked: run \"whypending ipam unlock\" as soon as you are done.\n",
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
