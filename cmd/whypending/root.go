package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// exitError carries a process exit code through cobra without printing a stack of errors.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// run executes the CLI with args and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
type kubeFlags struct {
	kubeconfig string
	context    string
	namespace  string
}

func (f *kubeFlags) addFlags(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, in-cluster config, ~/.kube/config)")
	pf.StringVar(&f.context, "context", "", "the kubeconfig context to use")
	pf.StringVarP(&f.namespace, "namespace", "n", "", "the namespace (default: the context's namespace, else \"default\")")
}

// clientConfig is the kubeconfig loader with kubectl's rules plus our overrides. A missing
// kubeconfig falls back to the in-cluster config inside a pod.
func (f *kubeFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// restConfig returns the REST config for the selected cluster.
func (f *kubeFlags) restConfig() (*rest.Config, error) {
	cfg, err := f.clientConfig().ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or run inside a pod")
	}
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
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
