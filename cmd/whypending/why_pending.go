package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/triage"
	"github.com/whypending/whypending/triage/collect"
)

// Exit codes of why-pending besides 0 (answered) and 1 (error).
const (
	// exitPodNotFound: the pod, workload or namespace does not exist.
	exitPodNotFound = 2
	// exitPartial: an answer, but some of its reads were refused (RBAC), timed out or failed,
	// so it rests on what could be read; the answer lists those reads and why.
	exitPartial = 3
)

// questionTimeout is why-pending's --timeout when none is given: a question's reads, each
// within --request-timeout, end together within it, so an API server that does not answer
// costs at most this long whatever the question reads. A variable for the tests.
var questionTimeout = time.Minute

func newWhyPendingCommand(kube *kubeFlags) *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:   "why-pending [-n NAMESPACE] (POD | TYPE/NAME | NAMESPACE/POD | NAME | --all)",
		Short: "Explain why a pod, a workload's pods or anything in a namespace is stuck",
		Long: `Explain why a pod is stuck: the cause first, then the per-node "why not here" table,
the evidence (events, container states) and the fix as commands to paste.

For a workload (deploy/NAME, sts/NAME, ds/NAME, job/NAME, cj/NAME, rs/NAME) its current pods
are grouped by cause ("4 of 5 pods Pending: insufficient-cpu; 1 Running and Ready"), with one
pod of each group diagnosed in full, and the controller's own trouble comes first: a ResourceQuota,
Pod Security, an admission webhook, a missing ServiceAccount or a LimitRange that refuses its
pods (FailedCreate), a stalled rollout, a Job at its backoffLimit, a DaemonSet that misses nodes.
--all lists every stuck pod and failing workload of the namespace, grouped by cause.

` + triage.TargetSyntax + `

Exit codes: 0 answered, 1 error (e.g. the API server cannot be reached), 2 no such pod,
workload or namespace (the answer lists the closest names), 3 a partial answer: whypending
read the pod but not everything the answer needs (events, nodes, …): your access refused it, or
the read timed out or failed; the answer rests on what could be read and lists each such read,
why, and the permission or the retry that completes it.

--timeout defaults to 1m here: the question's reads end together within it.`,
		Example: `  whypending why-pending -n shop web-7f9c
  whypending why-pending shop/web-7f9c -o json | jq -r '.findings[0].code'
  whypending why-pending -n shop deploy/checkout
  whypending why-pending -n shop checkout          # no pod is named checkout: the Deployment
  whypending why-pending -n shop --all`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("unknown output format %q: use text or json", output)
			}
			arg := ""
			if len(args) == 1 {
				arg = args[0]
			}
			t, err := triage.ParseTarget(arg, kube.resolvedNamespace(), all)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("namespace") {
				if t, err = t.Given(kube.resolvedNamespace()); err != nil {
					return err
				}
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("create client for %s: %w", cfg.Host, err)
			}
			if !cmd.Flags().Changed("timeout") {
				kube.timeout = questionTimeout
			}
			ctx, cancel := kube.withDeadline(cmd.Context())
			defer cancel()
			a, err := slowStep(ctx, cmd.ErrOrStderr(), "reading what the answer needs", cfg.Host, func(ctx context.Context) (*triage.Answer, error) {
				return collect.Answer(ctx, collect.New(client).WithCalico(cfg), t)
			})
			var two *triage.TwoNamespacesError
			switch {
			case errors.As(err, &two):
				return err // the asker's, like Given's: nothing to say about the server
			case err != nil:
				return commandError(ctx, cfg, err)
			}
			if cl, err := calico.NewClient(ctx, cfg); err == nil {
				if s, err := cl.LockStatus(ctx); err == nil && !s.Ready {
					a.Notes = append(a.Notes, s.Notice())
				}
			}
			if output == "json" {
				for _, n := range a.Notes {
					fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(a); err != nil {
					return err
				}
			} else {
				m := bot.AnswerMessage(a, "")
				m.Buttons = nil // nothing to press in a shell; the fix lists the whypending ipam commands
				if err := console.Render(cmd.OutOrStdout(), m); err != nil {
					return err
				}
			}
			switch {
			case a.NotFound():
				return exitError{code: exitPodNotFound}
			case a.Partial():
				return exitError{code: exitPartial}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (a pod's Diagnosis, a workload's WorkloadDiagnosis or a namespace's NamespaceDiagnosis; findings[0].code is the primary cause)")
	cmd.Flags().BoolVar(&all, "all", false, "every stuck pod and failing workload of the namespace, grouped by cause")
	return cmd
}
