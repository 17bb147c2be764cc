package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/whypending/whypending"
	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/adapters/slack"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

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
8 minutes on 2 cores; later runs start each cluster in about 3 seconds), and answers
/why-pending in a local console. Each demo scenario gets its own cluster, started when a
question first needs it and --parallel at a time in the background, so the prompt comes at
once; a question about a scenario whose cluster is still starting waits for it. Each
cluster's kubeconfig is printed when it is ready, and /kubeconfig SCENARIO gives it, for
kubectl, the CLI or serve. For a quick look: --only seed-frontend-cpu,seed-ipam-leaked.

With a terminal on stdin it prompts for commands:
  /why-pending [NAMESPACE/]POD     explain a pod (the namespace picks the scenario's cluster)
  /why-pending TYPE/NAME -n NS     explain a workload (deploy/checkout, ds/node-exporter, …)
  /why-pending --all -n NS         every stuck pod and failing workload of a namespace
  /help                            list the stuck pods
  /kubeconfig [SCENARIO]           a scenario cluster's kubeconfig (starting it if needed)
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
				if _, err := os.Stat(dir); err != nil {
					return fmt.Errorf("--scenarios %s: %w", dir, err)
				}
				fsys, root = os.DirFS(dir), "."
			}
			renderer, ok := demoRenderers[render]
			if !ok {
				return fmt.Errorf("--render %q: want text, discord or slack", render)
			}
			defer testenv.Shutdown() // the shared etcd and the temp dir
			err := runDemo(cmd.Context(), fsys, root, only, parallel, renderer, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "demo: interrupted; every cluster is stopped")
				return exitError{130}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "scenarios", "", "load scenarios from this folder instead of the embedded ones (each subfolder: manifests.yaml, expected.yaml)")
	cmd.Flags().StringSliceVar(&only, "only", nil, "load only these scenarios (folder names)")
	cmd.Flags().IntVar(&parallel, "parallel", 2, "how many clusters to start at once in the background")
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

// runDemo runs the demo; render shows each answer (nil: console.Render). The prompt (or the
// first scripted question) does not wait for the clusters: each starts on first use, and
// parallel at a time in the background; a question waits for its scenario's cluster.
func runDemo(ctx context.Context, fsys fs.FS, root string, only []string, parallel int, render console.Renderer, stdin io.Reader, stdout, stderr io.Writer) error {
	if render == nil {
		render = console.Render
	}
	scenarios, err := readScenarios(fsys, root, only)
	if err != nil {
		return err
	}
	terminal := false
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		terminal = true
	}
	fmt.Fprintf(stderr, "demo: %d scenario(s), each in its own local control plane (etcd + kube-apiserver + kube-scheduler), started on first use and %d at a time in the background\n", len(scenarios), max(parallel, 1))
	if len(only) == 0 && len(scenarios) > 3 {
		fmt.Fprintf(stderr, "demo: for a quick look, start a few: --only seed-frontend-cpu,seed-ipam-leaked\n")
	}
	if _, err := testenv.BinDir(ctx, stderr); err != nil {
		return fmt.Errorf("build the local control plane: %w", err)
	}
	clusters, err := newDemoFleet(ctx, scenarios, stderr, !terminal)
	if err != nil {
		return err
	}
	defer clusters.close()

	core := bot.New(bot.Options{
		Clusters: clusters.botClusters(),
		Policy:   approval.Policy{Approvers: map[string]approval.Approvers{"console": {Users: []string{demoRequester, demoApprover}}}, TwoPersonRule: true},
		LockNote: "The datastore is locked while the repair writes, and always unlocked after.",
		Log:      slog.New(slog.DiscardHandler),
	})
	session := console.NewSession(core, demoRequester)
	handle := func(ctx context.Context, line string) []chat.Message {
		return demoAnswer(ctx, clusters, session, line)
	}
	clusters.warm(parallel)
	if terminal {
		render(stdout, demoHelp(clusters))
		fmt.Fprintln(stdout)
		return runConsole(ctx, stdin, stdout, "whypending> ", handle, render)
	}
	var script []string
	for _, c := range clusters.clusters {
		script = append(script, demoQuestion(c.scenario))
	}
	script = append(script, repairScript(clusters)...)
	for _, line := range script {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(stdout, "%s> %s\n", session.User(), line)
		for _, m := range handle(ctx, line) {
			render(stdout, m)
			fmt.Fprintln(stdout)
		}
	}
	// Piped commands are echoed as the script's are, so each answer can be told apart.
	echo := func(ctx context.Context, line string) []chat.Message {
		fmt.Fprintf(stdout, "%s> %s\n", session.User(), line)
		return handle(ctx, line)
	}
	return runConsole(ctx, stdin, stdout, "", echo, render)
}

// runConsole is console.Run that also ends when ctx is done (Ctrl-C), even while it waits for
// a line: stdin is copied through a pipe that ctx closes, so the caller can stop the clusters
// at once. The copy left waiting on stdin ends with the process.
func runConsole(ctx context.Context, stdin io.Reader, stdout io.Writer, prompt string, handle console.Handler, render console.Renderer) error {
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, stdin)
		pw.CloseWithError(err)
	}()
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	defer stop()
	err := console.Run(ctx, pr, stdout, prompt, handle, render)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readScenarios reads every scenario folder under root (sorted by name), or only those named.
func readScenarios(fsys fs.FS, root string, only []string) ([]*testenv.Scenario, error) {
	entries, err := fs.ReadDir(fsys, root)
	if err != nil {
		return nil, fmt.Errorf("read scenarios: %w", err)
	}
	want, found := map[string]bool{}, map[string]bool{}
	for _, o := range only {
		if o = strings.ToLower(strings.TrimSpace(o)); o != "" { // "--only a," names a; names are lower-case
			want[o] = true
		}
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
		var names []string
		for _, e := range entries {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
		msg := "no such scenario: " + strings.Join(missing, ", ")
		for _, m := range missing {
			if near := triage.ClosestNamespaceNames(strings.ToLower(m), names, 3); len(near) > 0 {
				msg += fmt.Sprintf("; for %s did you mean %s?", m, strings.Join(near, ", "))
			}
		}
		return nil, errors.New(msg + " (/help in the demo lists every scenario)")
	}
	return out, nil
}

// demoAnswer answers one console line through the bot core. Every scenario lives in its own
// namespace(s), so "/why-pending NS/POD" without --cluster goes to the cluster that has NS.
// A question waits for its scenario's cluster to be ready (starting it if needed) before the
// bot sees it; one for a cluster that failed to start gets that failure and its log.
func demoAnswer(ctx context.Context, f *demoFleet, session *console.Session, line string) []chat.Message {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil
	}
	switch fields[0] {
	case "/help":
		return []chat.Message{demoHelp(f)}
	case "/kubeconfig":
		return []chat.Message{demoKubeconfig(ctx, f, fields[1:])}
	}
	target := demoClusterFlag(fields)
	if fields[0] == "/why-pending" && target == "" && len(fields) >= 2 {
		if demoRefused(fields[1:]) {
			return session.Handle(ctx, line) // the bot says why, before it asks any cluster
		}
		ns := demoNamespace(fields[1:])
		if ns == "" {
			return []chat.Message{{Title: "which namespace? use /why-pending NAMESPACE/POD or /why-pending TYPE/NAME -n NAMESPACE", Severity: chat.SeverityWarning,
				Sections: []chat.Section{{Text: "Every demo scenario runs in its own cluster and namespace; /help lists them."}}}}
		}
		c := clusterFor(f, ns)
		if c == nil {
			return []chat.Message{{Title: fmt.Sprintf("no demo cluster has namespace %q", ns), Severity: chat.SeverityWarning,
				Sections: []chat.Section{{Text: "/help lists the demo's namespaces and stuck pods."}}}}
		}
		target = c.scenario.Name
		line += " --cluster " + target
	}
	if target == "" && (fields[0] == "/why-pending" || fields[0] == "/ipam") && len(f.clusters) > 0 {
		target = f.clusters[0].scenario.Name // the bot's default cluster
	}
	if c := f.byName(target); c != nil {
		if _, err := c.wait(ctx); err != nil {
			return []chat.Message{demoStartFailed(c, err)}
		}
	}
	return session.Handle(ctx, line)
}

// demoRefused reports whether the bot refuses the /why-pending arguments args whatever the
// namespace: more than one name, or a name no pod or workload can have ("Web_1", one longer
// than 253 characters; triage.ParseTarget's check). Which namespace it is in does not matter
// then, so the demo does not ask, nor look for a cluster that has it.
func demoRefused(args []string) bool {
	var names []string // the bot's positional arguments
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			names = append(names, a)
			continue
		}
		switch strings.TrimLeft(a, "-") {
		case "n", "namespace", "cluster":
			i++ // its value
		}
	}
	if len(names) != 1 {
		return len(names) > 1
	}
	_, err := triage.ParseTarget(names[0], "default", false)
	return err != nil
}

// demoClusterFlag is the value of --cluster (or --cluster=NAME) in a command's fields.
func demoClusterFlag(fields []string) string {
	for i, a := range fields {
		if a == "--cluster" && i+1 < len(fields) {
			return fields[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--cluster="); ok {
			return v
		}
	}
	return ""
}

// demoStartFailed answers a question whose scenario cluster could not be started (or was
// still starting when the question was cut short).
func demoStartFailed(c *demoCluster, err error) chat.Message {
	if c.state() == "starting" || c.state() == "not started" {
		return chat.Message{Title: firstLine(err.Error()), Severity: chat.SeverityWarning}
	}
	return chat.Message{Title: fmt.Sprintf("scenario %s's cluster failed to start", c.scenario.Name), Severity: chat.SeverityBlocker,
		Sections: []chat.Section{{Text: firstLine(c.err.Error())}, {Text: "Its log: " + c.logPath + " (kept after the demo exits)."}}}
}

// repairScript is the approval flow the demo plays without a terminal, when the leaked-IP
// scenario is loaded: alice plans the release, cannot approve her own plan, bob approves it,
// and a check afterwards shows no leaked IPs.
func repairScript(f *demoFleet) []string {
	const leaked = "seed-ipam-leaked"
	if f.byName(leaked) == nil {
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

func clusterFor(f *demoFleet, ns string) *demoCluster {
	for _, c := range f.clusters {
		for _, o := range c.scenario.Objects {
			if o.GetNamespace() == ns || (o.GetKind() == "Namespace" && o.GetName() == ns) {
				return c
			}
		}
	}
	return nil
}

// demoKubeconfig answers "/kubeconfig SCENARIO": the scenario cluster's kubeconfig path
// (starting the cluster and waiting for it if needed), so the CLI (whypending why-pending,
// ipam), kubectl or serve can be pointed at it while the demo runs; without an argument,
// every started scenario's, and the state of the others.
func demoKubeconfig(ctx context.Context, f *demoFleet, args []string) chat.Message {
	if len(args) > 0 {
		c := f.byName(args[0])
		if c == nil {
			return chat.Message{Title: fmt.Sprintf("no demo scenario %q", args[0]), Severity: chat.SeverityWarning,
				Sections: []chat.Section{{Text: "/kubeconfig alone lists every scenario's."}}}
		}
		if _, err := c.wait(ctx); err != nil {
			return demoStartFailed(c, err)
		}
		path := c.cluster.KubeconfigPath
		return chat.Message{Title: "KUBECONFIG=" + path, Severity: chat.SeverityInfo,
			Sections: []chat.Section{{Text: "Valid while the demo runs, e.g. KUBECONFIG=" + path + " kubectl get pods -A, or KUBECONFIG=" + path + " whypending ipam check"}}}
	}
	t := &chat.Table{Columns: []string{"SCENARIO", "KUBECONFIG"}}
	for _, c := range f.clusters {
		v := c.state()
		if v == "ready" {
			v = c.cluster.KubeconfigPath
		}
		t.Rows = append(t.Rows, []string{c.scenario.Name, v})
	}
	return chat.Message{Title: "The demo clusters' kubeconfigs (valid while the demo runs)", Severity: chat.SeverityInfo,
		Sections: []chat.Section{{Table: t}, {Text: "/kubeconfig SCENARIO starts a scenario's cluster if needed and gives its kubeconfig."}}}
}

func demoHelp(f *demoFleet) chat.Message {
	t := &chat.Table{Columns: []string{"TRY", "EXPECTED"}}
	for _, c := range f.clusters {
		t.Rows = append(t.Rows, []string{demoQuestion(c.scenario), c.scenario.Expected.Code})
	}
	intro := "Each scenario runs in its own local control plane, started when you first ask about it (and a few at a time in the background). Ask about any pod; /quit leaves."
	if len(f.clusters) > 3 {
		intro += " For a quick look with less load, run a few: whypending demo --only seed-frontend-cpu,seed-ipam-leaked"
	}
	return chat.Message{
		Title:    "whypending demo: local clusters with stuck pods",
		Severity: chat.SeverityInfo,
		Sections: []chat.Section{
			{Text: intro},
			{Table: t},
			{Heading: "Repairs behind approval", Lines: []string{
				"/ipam check --cluster seed-ipam-leaked       like calicoctl ipam check",
				"/ipam release-ips --cluster seed-ipam-leaked plan the release; the plan has Approve/Deny buttons",
				"/click N [confirm]                            press button N of the last message",
				"/as bob                                       switch user: alice asks, bob approves (two-person rule)",
				"/kubeconfig SCENARIO                          the scenario cluster's kubeconfig, for kubectl, the CLI or serve",
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
