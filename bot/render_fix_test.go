package bot

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/chat"
)

func TestFixSections(t *testing.T) {
	for _, tt := range []struct {
		name string
		fix  []string
		want []chat.Section
	}{
		{"commands only: one code block", []string{"kubectl describe node a", "kubectl get pods -A"},
			[]chat.Section{{Heading: "Fix", Code: "kubectl describe node a\nkubectl get pods -A"}}},
		{"prose only: bullets, no code", []string{"Lower the request.", "Or add a node."},
			[]chat.Section{{Heading: "Fix", Text: "• Lower the request.\n• Or add a node."}}},
		{"commands, then prose: the prose after the block", []string{"kubectl describe node a", "Lower the request."},
			[]chat.Section{{Heading: "Fix", Code: "kubectl describe node a"}, {Text: "• Lower the request."}}},
		{"prose introduces the commands after it, in order", []string{
			"kubectl logs -n kube-system calico-node-x -c calico-node --previous",
			"If its log says the pools are exhausted, check them:",
			"whypending ipam check",
			"Then release the leaked addresses.",
		}, []chat.Section{
			{Heading: "Fix", Code: "kubectl logs -n kube-system calico-node-x -c calico-node --previous"},
			{Text: "• If its log says the pools are exhausted, check them:", Code: "whypending ipam check"},
			{Text: "• Then release the leaked addresses."},
		}},
		{"a node's commands get their own block, introduced; the user's shell after it is named", []string{
			"kubectl describe node n1",
			"On n1: systemctl status kubelet",
			"On n1: journalctl -u kubelet | tail",
			"On n2: df -h",
			"kubectl get pods -A -o wide",
		}, []chat.Section{
			{Heading: "Fix", Code: "kubectl describe node n1"},
			{Text: "• On n1:", Code: "systemctl status kubelet\njournalctl -u kubelet | tail"},
			{Text: "• On n2:", Code: "df -h"},
			{Text: "• " + localShell, Code: "kubectl get pods -A -o wide"},
		}},
		{"prose between a node's block and the user's: no shell line", []string{
			"On n1: crictl ps -a",
			"If it persists, remove that container.",
			"kubectl delete pod -n a b",
		}, []chat.Section{
			{Heading: "Fix", Text: "• On n1:", Code: "crictl ps -a"},
			{Text: "• If it persists, remove that container.", Code: "kubectl delete pod -n a b"},
		}},
		{"a change gets a block of its own, between reads", []string{
			"kubectl describe pod -n a b",
			"kubectl get events -n a",
			"kubectl delete pod -n a b --force --grace-period=0",
			"kubectl delete node n1",
			"kubectl get pods -n a -w",
		}, []chat.Section{
			{Heading: "Fix", Code: "kubectl describe pod -n a b\nkubectl get events -n a"},
			{Code: "kubectl delete pod -n a b --force --grace-period=0"},
			{Code: "kubectl delete node n1"},
			{Code: "kubectl get pods -n a -w"},
		}},
		{"a command that runs until interrupted ends its block: a line pasted after it never runs", []string{
			"kubectl get pod -n a b -w   # stop with Ctrl-C once it is Running",
			"kubectl get secret -n a s -o name",
			"On n1: journalctl -u kubelet -f",
			"On n1: crictl ps -a",
			"kubectl logs -n a b --follow",
			"kubectl get events -n a",
		}, []chat.Section{
			{Heading: "Fix", Code: "kubectl get pod -n a b -w   # stop with Ctrl-C once it is Running"},
			{Code: "kubectl get secret -n a s -o name"},
			{Text: "• On n1:", Code: "journalctl -u kubelet -f"},
			{Text: "• On n1:", Code: "crictl ps -a"},
			{Text: "• " + localShell, Code: "kubectl logs -n a b --follow"},
			{Code: "kubectl get events -n a"},
		}},
		{"a node's change split from its reads names the node again", []string{
			"On n1: crictl images",
			"On n1: crictl rmi --prune",
		}, []chat.Section{
			{Heading: "Fix", Text: "• On n1:", Code: "crictl images"},
			{Text: "• On n1:", Code: "crictl rmi --prune"},
		}},
		{"prose on a node stays prose", []string{"On n1: install the client tools."},
			[]chat.Section{{Heading: "Fix", Text: "• On n1: install the client tools."}}},
		{"no fix, no section", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.want {
				tt.want[i].Commands = tt.want[i].Code != "" // a Fix's code is commands: never cut
			}
			if diff := cmp.Diff(tt.want, fixSections(tt.fix)); diff != "" {
				t.Errorf("fixSections(%q) (-want +got):\n%s", tt.fix, diff)
			}
		})
	}
}
