package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/triage"
	"github.com/whypending/whypending/triage/collect"
)

// exitPodNotFound is the exit code when the pod does not exist.
const exitPodNotFound = 2

func newWhyPendingCommand(kube *kubeFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "why-pending [-n NAMESPACE] POD",
		Short: "Explain why a pod is stuck (Pending, ContainerCreating, CrashLoopBackOff, Terminating, …)",
		Long: `Explain why a pod is stuck: the cause first, then the per-node "why not here" table,
the evidence (events, container states) and the fix as commands to paste.

POD may be given as NAME or NAMESPACE/NAME. Exit codes: 0 answered, 1 error (e.g. the API
server cannot be reached), 2 no such pod (the answer lists the closest names).`,
		Example: `  whypending why-pending -n shop web-7f9c
  whypending why-pending shop/web-7f9c -o json | jq -r '.findings[0].code'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("unknown output format %q: use text or json", output)
			}
			ns, name := kube.resolvedNamespace(), args[0]
			if i := strings.IndexByte(name, '/'); i >= 0 {
				ns, name = name[:i], name[i+1:]
			}
			if err := triage.CheckPodRef(ns, name); err != nil {
				return err
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("create client for %s: %w", cfg.Host, err)
			}
			d, err := collect.Diagnose(cmd.Context(), collect.New(client).WithCalico(cfg), ns, name)
			if err != nil {
				return apiError(cfg.Host, err)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(d); err != nil {
					return err
				}
			} else {
				m := bot.DiagnosisMessage(d)
				m.Buttons = nil // nothing to press in a shell; the fix lists the whypending ipam commands
				if err := console.Render(cmd.OutOrStdout(), m); err != nil {
					return err
				}
			}
			if d.Primary().Code == triage.CodePodNotFound {
				return exitError{code: exitPodNotFound}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (the Diagnosis; findings[0].code is the primary cause)")
	return cmd
}

// apiError turns a failed API call into one line naming the server, without a stack of
// wrapped errors: "cannot reach the Kubernetes API server at https://…: connection refused".
func apiError(host string, err error) error {
	var urlErr *url.Error
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr):
		cause := opErr.Err.Error()
		if i := strings.LastIndex(cause, ": "); i >= 0 {
			cause = cause[i+2:]
		}
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %s", host, cause)
	case errors.As(err, &urlErr):
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %v", host, urlErr.Err)
	default:
		return fmt.Errorf("ask the Kubernetes API server at %s: %w", host, err)
	}
}
