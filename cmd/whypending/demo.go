package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/whypending/whypending"
	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
	"github.com/whypending/whypending/triage/collect"
)

// demoCluster is one scenario loaded into its own local control plane, wired into the bot
// as a cluster named after the scenario.
type demoCluster struct {
	scenario *testenv.Scenario
	cluster  *testenv.Cluster
	bot      *bot.Cluster
}

// Demo users: alice asks, bob approves (the two-person rule is on, as in production).
const (
	demoRequester = "alice"
	demoApprover  = "bob"
)

func newDemoCommand() *cobra.Command {
	var dir, render string
	var only []string
	var parallel int
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a local control plane with the demo scenarios and answer /why-pending in a console",
		Long: `demo starts a real local control plane (etcd, kube-apiserver, kube-scheduler and
kube-controller-manager v1.37.2, built from the Go module proxy on first run, which takes about
8 minutes on 2 cores; later runs start in seconds), loads every demo scenario into its own
cluster, waits for the real scheduler, and answers /why-pending in a local console.

With a terminal on stdin it prompts for commands:
  /why-pending [NAMESPACE/]POD     explain a pod (the namespace picks the scenario's cluster)
  /why-pending TYPE/NAME -n NS     explain a workload (deploy/checkout, ds/node-exporter, …)
  /why-pending --all -n NS         every stuck pod and failing workload of a namespace
  /help                            list the stuck pods
  /quit
Without a terminal it answers every scenario's stuck pod, plays the approval flow on the
leaked-IP scenario (alice plans the release, cannot approve it herself, bob approves, a check
shows 0 leaked), then answers any commands piped on stdin, and exits.

--render discord prints each answer as the JSON Discord receives (the edit of the deferred
response, then any follow-ups: embeds, buttons, allowed_mentions); --render slack prints the
Block Kit message.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var fsys fs.FS = whypending.Scenarios
			root := "testdata/scenarios"
			if dir != "" {
				fsys, root = os.DirFS(dir), "."
			}
			renderer, ok := demoRenderers[render]
			if !ok {
				return fmt.Errorf("--render %q: want text, discord or slack", render)
			}
			defer testenv.Shutdown() // the shared etcd and the temp dir
			return runDemo(cmd.Context(), fsys, root, only, parallel, renderer, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&dir, "scenarios", "", "load scenarios from this folder instead of the embedded ones (each subfolder: manifests.yaml, expected.yaml)")
	cmd.Flags().StringSliceVar(&only, "only", nil, "load only these scenarios (folder names)")
	cmd.Flags().IntVar(&parallel, "parallel", 2, "how many clusters to start at once")
	cmd.Flags().StringVar(&render, "render", "text", "show answers as text, or as the JSON a chat platform receives: discord (embeds and buttons), slack (Block Kit)")
	return cmd
}

// demoRenderers are the forms --render shows answers in.
var demoRenderers = map[string]console.Renderer{
	"text":    console.Render,
	"discord": discord.WriteJSON,
	"slack": func(w io.Writer, m chat.Message) error {
		blocks, text := slack.Render(m)
		b, err := json.MarshalIndent(map[string]any{"text": text, "blocks": blocks}, "", "  ")
		if err != nil {
			return fmt.Errorf("encode slack message: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	},
}

// runDemo runs the demo; render shows each answer (nil: console.Render).
func runDemo(ctx context.Context, fsys fs.FS, root string, only []string, parallel int, render console.Renderer, stdin io.Reader, stdout, stderr io.Writer) error {
	if render == nil {
		render = console.Render
	}
	scenarios, err := readScenarios(fsys, root, only)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "demo: %d scenario(s), each in its own local control plane (etcd + kube-apiserver + kube-scheduler)\n", len(scenarios))
	if len(only) == 0 && len(scenarios) > 3 {
		fmt.Fprintf(stderr, "demo: for a quick look, start a few: --only seed-frontend-cpu,seed-ipam-leaked\n")
	}
	if _, err := testenv.BinDir(ctx, stderr); err != nil {
		return fmt.Errorf("build the local control plane: %w", err)
	}
	start := time.Now()
	clusters, err := startDemoClusters(ctx, scenarios, parallel, stderr)
	defer func() {
		for _, c := range clusters {
			c.cluster.Stop()
		}
	}()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "demo: %d clusters ready in %s\n\n", len(clusters), time.Since(start).Round(100*time.Millisecond))

	var botClusters []*bot.Cluster
	for _, c := range clusters {
		botClusters = append(botClusters, c.bot)
	}
	core := bot.New(bot.Options{
		Clusters: botClusters,
		Policy:   approval.Policy{Approvers: map[string]approval.Approvers{"console": {Users: []string{demoRequester, demoApprover}}}, TwoPersonRule: true},
		LockNote: "The datastore is locked while the repair writes, and always unlocked after.",
		Log:      slog.New(slog.DiscardHandler),
	})
	session := console.NewSession(core, demoRequester)
	handle := func(ctx context.Context, line string) []chat.Message {
		return demoAnswer(ctx, clusters, session, line)
	}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		render(stdout, demoHelp(clusters))
		fmt.Fprintln(stdout)
		return console.Run(ctx, stdin, stdout, "whypending> ", handle, render)
	}
	var script []string
	for _, c := range clusters {
		script = append(script, demoQuestion(c.scenario))
	}
	script = append(script, repairScript(clusters)...)
	for _, line := range script {
		fmt.Fprintf(stdout, "%s> %s\n", session.User(), line)
		for _, m := range handle(ctx, line) {
			render(stdout, m)
			fmt.Fprintln(stdout)
		}
	}
	return console.Run(ctx, stdin, stdout, "", handle, render)
}

// readScenarios reads every scenario folder under root (sorted by name), or only those named.
func readScenarios(fsys fs.FS, root string, only []string) ([]*testenv.Scenario, error) {
	entries, err := fs.ReadDir(fsys, root)
	if err != nil {
		return nil, fmt.Errorf("read scenarios: %w", err)
	}
	want, found := map[string]bool{}, map[string]bool{}
	for _, o := range only {
		want[o] = true
	}
	var out []*testenv.Scenario
	for _, e := range entries {
		if !e.IsDir() || (len(want) > 0 && !want[e.Name()]) {
			continue
		}
		s, err := testenv.ReadScenario(fsys, path.Join(root, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", e.Name(), err)
		}
		out = append(out, s)
		found[e.Name()] = true
	}
	var missing []string
	for n := range want {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("no such scenario: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// startDemoClusters starts one cluster per scenario, at most parallel at a time, loads the
// scenario and waits for the scheduler where the scenario needs it. The result is in scenario
// order and holds every cluster started, even on error, so the caller can stop them.
func startDemoClusters(ctx context.Context, scenarios []*testenv.Scenario, parallel int, progress io.Writer) ([]*demoCluster, error) {
	if parallel < 1 {
		parallel = 1
	}
	out := make([]*demoCluster, len(scenarios))
	errs := make([]error, len(scenarios))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, s := range scenarios {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t0 := time.Now()
			c, err := testenv.Start(ctx, testenv.Options{Scheduler: !s.Expected.SchedulerMustBeStopped})
			if err != nil {
				errs[i] = fmt.Errorf("start cluster for %s: %w", s.Name, err)
				return
			}
			dc := &demoCluster{scenario: s, cluster: c}
			mu.Lock()
			out[i] = dc
			mu.Unlock()
			if err := c.Load(ctx, s); err != nil {
				errs[i] = fmt.Errorf("load %s: %w", s.Name, err)
				return
			}
			if s.Expected.NeedsScheduler {
				ns, name, _ := strings.Cut(s.Expected.Pod, "/")
				if err := c.WaitForScheduler(ctx, ns, name); err != nil {
					errs[i] = fmt.Errorf("wait for the scheduler in %s: %w", s.Name, err)
					return
				}
			}
			lock := fleet.Lock{Policy: actions.LockAlways, TTL: 2 * time.Minute, Owner: "whypending-demo"}
			fc, err := fleet.Wire(ctx, s.Name, c.Config, collect.New(c.Client), lock, slog.New(slog.DiscardHandler))
			if err != nil {
				errs[i] = fmt.Errorf("wire %s into the bot: %w", s.Name, err)
				return
			}
			dc.bot = botCluster(fc, scenarioNamespace(s))
			mu.Lock()
			fmt.Fprintf(progress, "demo: %-26s ready (%s)  KUBECONFIG=%s\n", s.Name, time.Since(t0).Round(100*time.Millisecond), c.KubeconfigPath)
			mu.Unlock()
		}()
	}
	wg.Wait()
	var started []*demoCluster
	for _, c := range out {
		if c != nil {
			started = append(started, c)
		}
	}
	for _, err := range errs {
		if err != nil {
			return started, err
		}
	}
	return started, nil
}

// demoAnswer answers one console line through the bot core. Every scenario lives in its own
// namespace(s), so "/why-pending NS/POD" without --cluster goes to the cluster that has NS.
func demoAnswer(ctx context.Context, clusters []*demoCluster, session *console.Session, line string) []chat.Message {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil
	}
	if fields[0] == "/help" {
		return []chat.Message{demoHelp(clusters)}
	}
	if fields[0] == "/kubeconfig" {
		return []chat.Message{demoKubeconfig(clusters, fields[1:])}
	}
	if fields[0] == "/why-pending" && !strings.Contains(line, "--cluster") && len(fields) >= 2 {
		ns := demoNamespace(fields[1:])
		if ns == "" {
			return []chat.Message{{Title: "which namespace? use /why-pending NAMESPACE/POD or /why-pending TYPE/NAME -n NAMESPACE", Severity: chat.SeverityWarning,
				Sections: []chat.Section{{Text: "Every demo scenario runs in its own cluster and namespace; /help lists them."}}}}
		}
		c := clusterFor(clusters, ns)
		if c == nil {
			return []chat.Message{{Title: fmt.Sprintf("no demo cluster has namespace %q", ns), Severity: chat.SeverityWarning,
				Sections: []chat.Section{{Text: "/help lists the demo's namespaces and stuck pods."}}}}
		}
		line += " --cluster " + c.scenario.Name
	}
	return session.Handle(ctx, line)
}

// repairScript is the approval flow the demo plays without a terminal, when the leaked-IP
// scenario is loaded: alice plans the release, cannot approve her own plan, bob approves it,
// and a check afterwards shows no leaked IPs.
func repairScript(clusters []*demoCluster) []string {
	const leaked = "seed-ipam-leaked"
	if clusterFor(clusters, leaked) == nil {
		return nil
	}
	return []string{
		"/ipam check --cluster " + leaked,
		"/ipam release-ips --cluster " + leaked,
		"/click 1 confirm",
		"/as " + demoApprover,
		"/click 1 confirm",
		"/ipam check --cluster " + leaked,
	}
}

func clusterFor(clusters []*demoCluster, ns string) *demoCluster {
	for _, c := range clusters {
		for _, o := range c.scenario.Objects {
			if o.GetNamespace() == ns || (o.GetKind() == "Namespace" && o.GetName() == ns) {
				return c
			}
		}
	}
	return nil
}

// demoKubeconfig answers "/kubeconfig SCENARIO": the scenario cluster's kubeconfig path, so
// the CLI (whypending why-pending, ipam), kubectl or serve can be pointed at it while the demo
// runs; without an argument, every scenario's.
func demoKubeconfig(clusters []*demoCluster, args []string) chat.Message {
	t := &chat.Table{Columns: []string{"SCENARIO", "KUBECONFIG"}}
	for _, c := range clusters {
		if len(args) == 0 || args[0] == c.scenario.Name {
			t.Rows = append(t.Rows, []string{c.scenario.Name, c.cluster.KubeconfigPath})
		}
	}
	if len(t.Rows) == 0 {
		return chat.Message{Title: fmt.Sprintf("no demo scenario %q", args[0]), Severity: chat.SeverityWarning,
			Sections: []chat.Section{{Text: "/kubeconfig alone lists every scenario's."}}}
	}
	if len(t.Rows) == 1 {
		return chat.Message{Title: "KUBECONFIG=" + t.Rows[0][1], Severity: chat.SeverityInfo,
			Sections: []chat.Section{{Text: "Valid while the demo runs, e.g. KUBECONFIG=" + t.Rows[0][1] + " whypending ipam check"}}}
	}
	return chat.Message{Title: "The demo clusters' kubeconfigs (valid while the demo runs)", Severity: chat.SeverityInfo, Sections: []chat.Section{{Table: t}}}
}

func demoHelp(clusters []*demoCluster) chat.Message {
	t := &chat.Table{Columns: []string{"TRY", "EXPECTED"}}
	for _, c := range clusters {
		t.Rows = append(t.Rows, []string{demoQuestion(c.scenario), c.scenario.Expected.Code})
	}
	return chat.Message{
		Title:    "whypending demo: local clusters with stuck pods",
		Severity: chat.SeverityInfo,
		Sections: []chat.Section{
			{Text: "Each scenario runs in its own local control plane. Ask about any pod; /quit leaves."},
			{Table: t},
			{Heading: "Repairs behind approval", Lines: []string{
				"/ipam check --cluster seed-ipam-leaked       like calicoctl ipam check",
				"/ipam release-ips --cluster seed-ipam-leaked plan the release; the plan has Approve/Deny buttons",
				"/click N [confirm]                            press button N of the last message",
				"/as bob                                       switch user: alice asks, bob approves (two-person rule)",
				"/kubeconfig SCENARIO                          the scenario cluster's kubeconfig, for the CLI, kubectl or serve",
				"/whypending help                              the bot's own help",
			}},
		},
	}
}

// scenarioNamespace is the scenario's first namespace (the default for "/why-pending POD").
func scenarioNamespace(s *testenv.Scenario) string {
	if s.Expected.Namespace != "" {
		return s.Expected.Namespace
	}
	if ns, _, ok := strings.Cut(s.Expected.Pod, "/"); ok {
		return ns
	}
	return "default"
}

// demoQuestion is the /why-pending line that asks about the scenario: its pod, or its
// workload target in its namespace.
func demoQuestion(s *testenv.Scenario) string {
	if s.Expected.Target != "" {
		return "/why-pending " + s.Expected.Target + " -n " + s.Expected.Namespace
	}
	return "/why-pending " + s.Expected.Pod
}

// demoNamespace finds the namespace a /why-pending question names: -n NS (or --namespace), else
// the NAMESPACE of NAMESPACE/POD; "" when it names none.
func demoNamespace(args []string) string {
	for i, a := range args {
		if (a == "-n" || a == "--namespace") && i+1 < len(args) {
			return args[i+1]
		}
	}
	if before, _, ok := strings.Cut(args[0], "/"); ok {
		if _, isKind := triage.KindFor(before); !isKind {
			return before
		}
	}
	return ""
}
