package bot

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// emptyPlanner finds nothing to change.
type emptyPlanner struct{}

func (emptyPlanner) Plan(_ context.Context, kind actions.Kind, o actions.PlanOptions) (actions.Plan, error) {
	return actions.Plan{ID: actions.NewID(), Kind: kind, Cluster: "prod", Node: o.Node}, nil
}

func TestCommands(t *testing.T) {
	diagnose := AnswererFunc(func(_ context.Context, t triage.Target) (*triage.Answer, error) {
		return &triage.Answer{Pod: &triage.Diagnosis{
			Pod:     triage.PodRef{Namespace: t.Namespace, Name: t.Name},
			Summary: "IPAM is exhausted",
			Findings: []triage.Finding{{Code: "calico-ipam-exhausted", Summary: "IPAM is exhausted",
				Actions: []triage.ActionRef{{Kind: "release-leaked-ips", Label: "Release 181 leaked IPs"}}}},
		}}, nil
	})
	b := New(Options{
		Clusters: []*Cluster{
			{Name: "prod", Namespace: "shop", Answerer: diagnose, Planner: emptyPlanner{}, Executor: &fakeExecutor{}},
			{Name: "staging"},
			{Name: "down", Answerer: diagnose, IPAM: noCalicoIPAM{}, Health: func() error {
				return chat.ClusterUnavailable("down", testT0, errors.New("cannot reach the Kubernetes API server at https://10.0.9.1:6443: connection refused"))
			}},
			{Name: "plain", Answerer: diagnose, IPAM: noCalicoIPAM{}},
			{Name: "fresh", Answerer: diagnose, IPAM: uninitializedIPAM{}},
		},
		Log: quietLog,
	})
	const downLine = "Cluster down is unavailable: cannot reach the Kubernetes API server at https://10.0.9.1:6443: connection refused (since 12:00:00Z). Nothing was done."
	tests := []struct {
		name       string
		command    string
		args       string
		wantTitle  string // prefix
		wantPublic bool
		wantButton string // value of the first button, if any
	}{
		{"a pod in the default namespace of the default cluster", "why-pending", "web-7f9c", "shop/web-7f9c", true, "release-leaked-ips;cluster=prod"},
		{"no pod named", "why-pending", "", "/why-pending: name one pod", false, ""},
		{"a name that is not a pod name", "why-pending", "shop/Web_1", `/why-pending: "Web_1" is not a valid pod or workload name`, false, ""},
		{"a namespace before the kind gets the -n form to ask, not an answer", "why-pending", "shop/deploy/cart", `/why-pending: "shop/deploy/cart" puts the namespace before the kind: use -n shop deploy/cart (namespace first, then kind/name)`, false, ""},
		{"the -n form it gives is answered", "why-pending", "-n shop deploy/cart", "shop/cart", true, "release-leaked-ips;cluster=prod"},
		{"an unknown cluster", "why-pending", "web --cluster nope", `/why-pending: unknown cluster "nope" (configured: down, fresh, plain, prod, staging)`, false, ""},
		{"a name that is not a pod name is refused as such on an unavailable cluster too", "why-pending", "Web_1 --cluster down", `/why-pending: "Web_1" is not a valid pod or workload name`, false, ""},
		{"a pod on an unavailable cluster gets one line naming the cluster and the API server's error", "why-pending", "web --cluster down", downLine, false, ""},
		{"an ipam check on an unavailable cluster gets the same line", "ipam", "check --cluster down", downLine, false, ""},
		{"a cluster without Calico answers /ipam with a user error", "ipam", "check --cluster plain", "/ipam: Calico is not installed on cluster plain", false, ""},
		{"a cluster without Calico's ClusterInformation says so", "ipam", "check --cluster fresh", "/ipam: cluster fresh serves Calico's API but has no ClusterInformation default", false, ""},
		{"--node does not apply to release-handles", "ipam", "release-handles --node worker-1", "/ipam: release-handles is cluster-wide", false, ""},
		{"a cluster without diagnosis", "why-pending", "web --cluster staging", "/why-pending: cluster staging cannot diagnose pods", false, ""},
		{"no ipam subcommand", "ipam", "", "/ipam: choose one of check, blocks", false, ""},
		{"an unknown ipam subcommand", "ipam", "show", `/ipam: unknown subcommand "show"`, false, ""},
		{"a repair with nothing to do stores no plan", "ipam", "release-ips", "Nothing to do on prod: a fresh check found no leaked IPs", false, ""},
		{"--node does not apply to unlock", "ipam", "unlock --node worker-1", "/ipam: unlock is cluster-wide", false, ""},
		{"help lists the commands", "whypending", "help", "whypending: why is my pod stuck", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, args := chat.ParseCommand("/"+tt.command, tt.args)
			got := b.Command(t.Context(), chat.Request{Principal: alice, Channel: "C1", Command: name, Args: args})
			if !strings.HasPrefix(got.Message.Title, tt.wantTitle) || got.Public != tt.wantPublic {
				t.Errorf("/%s %s = %q public=%v, want %q… public=%v", tt.command, tt.args, got.Message.Title, got.Public, tt.wantTitle, tt.wantPublic)
			}
			button := ""
			if len(got.Message.Buttons) > 0 {
				button = got.Message.Buttons[0].Value
			}
			if button != tt.wantButton {
				t.Errorf("/%s %s first button value = %q, want %q", tt.command, tt.args, button, tt.wantButton)
			}
		})
	}
}
