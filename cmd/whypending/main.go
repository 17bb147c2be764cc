// Command whypending explains why a Kubernetes pod is stuck, from the command line or as a chat
// bot (Slack, Discord, local console), and repairs Calico IPAM leaks behind approvals.
//
//	whypending why-pending [-n NS] POD      explain one pod
//	whypending demo                          local control plane + demo scenarios + console
//	whypending ipam check|show|release-ips|release-blocks|lock|unlock
//	whypending serve --config FILE           run the bot
//	whypending version                       version, commit and Go version
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
