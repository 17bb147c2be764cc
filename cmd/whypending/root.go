package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/whypending/whypending/fleet"
)

// exitError carries a process exit code through cobra without printing a stack of errors.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// run executes the CLI with args and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// client-go logs through klog to the process's stderr ("E1201 … request.go:1198]
	// Unexpected error …"); every failure it logs is also returned to us and reported in one
	// line, so its own lines are noise in a shell. serve sends them to its JSON log instead.
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	kube := &kubeFlags{}
	root := &cobra.Command{
		Use:           "whypending",
		Short:         "Explain why a Kubernetes pod is stuck, and repair Calico IPAM leaks safely",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	kube.addFlags(root)
	root.AddCommand(
		newWhyPendingCommand(kube),
		newDemoCommand(),
		newServeCommand(),
		newIPAMCommand(kube),
		newDigestCommand(kube),
		newVersionCommand(),
	)
	return root
}

// kubeFlags are kubectl's connection flags. Precedence follows kubectl: --kubeconfig, then
// $KUBECONFIG, then in-cluster config, then ~/.kube/config; --context picks a context.
// --request-timeout bounds each request and --timeout the whole command, so that no command
// waits forever on an API server that accepts connections and never answers.
type kubeFlags struct {
	kubeconfig     string
	context        string
	namespace      string
	requestTimeout string
	timeout        time.Duration
}

func (f *kubeFlags) addFlags(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, in-cluster config, ~/.kube/config)")
	pf.StringVar(&f.context, "context", "", "the kubeconfig context to use")
	pf.StringVarP(&f.namespace, "namespace", "n", "", "the namespace (default: the context's namespace, else \"default\")")
	pf.StringVar(&f.requestTimeout, "request-timeout", fleet.DefaultRequestTimeout.String(),
		"how long to wait for the API server to answer one request (and between the parts of a long list) before giving up, as kubectl's flag: 1s, 2m, or a number of seconds; 0 waits forever")
	pf.DurationVar(&f.timeout, "timeout", defaultCommandTimeout, "the longest a command that talks to a cluster may take in all (0: no limit)")
}

// defaultCommandTimeout is --timeout's default: far above what a check of a 100,000-pod
// cluster takes (calico/BENCHMARKS.md), so it only ends a command that is stuck.
const defaultCommandTimeout = 10 * time.Minute

// parseRequestTimeout reads --request-timeout as kubectl does: a duration with its unit, or a
// bare number of seconds; 0 means no timeout.
func parseRequestTimeout(s string) (time.Duration, error) {
	if s == "" {
		return fleet.DefaultRequestTimeout, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("--request-timeout %q: want a duration such as 30s or 2m, or a number of seconds (0: no timeout)", s)
	}
	return d, nil
}

// withDeadline returns ctx bounded by --timeout (see commandError).
func (f *kubeFlags) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if f.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, f.timeout, &deadlineError{after: f.timeout})
}

// deadlineError is the cause of a command's context when --timeout ran out.
type deadlineError struct{ after time.Duration }

func (e *deadlineError) Error() string {
	return fmt.Sprintf("did not finish within %s (--timeout)", e.after)
}

// commandError is the one line a failed call to the API server of cfg prints: that the
// command ran out of --timeout, else fleet.Explain's line naming the server that failed (the
// API server, or etcd behind it).
func commandError(ctx context.Context, cfg *rest.Config, err error) error {
	var d *deadlineError
	if errors.As(context.Cause(ctx), &d) {
		return fmt.Errorf("%v while waiting for the Kubernetes API server at %s", d, cfg.Host)
	}
	return fleet.Explain(ctx, cfg, err)
}

// clientConfig is the kubeconfig loader with kubectl's rules plus our overrides. A missing
// kubeconfig falls back to the in-cluster config inside a pod.
func (f *kubeFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// missingKubeconfigs lists the files $KUBECONFIG names that do not exist, when no
// --kubeconfig is given (client-go skips them silently).
func missingKubeconfigs(explicit string) []string {
	if explicit != "" {
		return nil
	}
	var missing []string
	for _, p := range filepath.SplitList(os.Getenv("KUBECONFIG")) {
		if _, err := os.Stat(p); p != "" && errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	return missing
}

// subcommandArgs is the Args of a command that only groups subcommands: an unknown one is an
// error with cobra's "Did you mean this?" suggestions (cobra gives them only at the root).
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only at the root
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return errors.New(msg)
}

// restConfig returns the REST config for the selected cluster.
func (f *kubeFlags) restConfig() (*rest.Config, error) {
	cfg, err := f.clientConfig().ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		if missing := missingKubeconfigs(f.kubeconfig); len(missing) > 0 {
			return nil, fmt.Errorf("no kubeconfig found: KUBECONFIG names %s, which does not exist (kubectl skips it too)", strings.Join(missing, ", "))
		}
		return nil, errors.New("no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or run inside a pod")
	}
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	fleet.RateLimit(cfg)
	d, err := parseRequestTimeout(f.requestTimeout)
	if err != nil {
		return nil, err
	}
	fleet.RequestTimeout(cfg, d)
	return cfg, nil
}

// server is the API server URL of the selected cluster, for progress lines ("(unknown)"
// when the kubeconfig does not load).
func (f *kubeFlags) server() string {
	if cfg, err := f.clientConfig().ClientConfig(); err == nil {
		return cfg.Host
	}
	return "(unknown)"
}

// resolvedNamespace returns -n, else the context's namespace, else "default".
func (f *kubeFlags) resolvedNamespace() string {
	if f.namespace != "" {
		return f.namespace
	}
	if ns, _, err := f.clientConfig().Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}
