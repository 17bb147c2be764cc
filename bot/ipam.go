package bot

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
)

// ipamSubcommands maps /ipam subcommands that make plans to their action kinds.
var ipamSubcommands = map[string]actions.Kind{
	"release-ips":     actions.KindReleaseLeakedIPs,
	"release-blocks":  actions.KindReleaseEmptyBlocks,
	"release-handles": actions.KindReleaseLeakedHandles,
	"unlock":          actions.KindUnlockDatastore,
}

// IPAMRepairs lists the /ipam subcommands that make a plan for approval, sorted: adapters
// register them and refuse them where nobody could approve.
func IPAMRepairs() []string {
	out := make([]string, 0, len(ipamSubcommands))
	for sub := range ipamSubcommands {
		out = append(out, sub)
	}
	sort.Strings(out)
	return out
}

// ipamChoices lists the /ipam subcommands for usage errors.
const ipamChoices = "check, blocks, release-ips, release-blocks, release-handles, unlock"

// ipamRequest is a parsed /ipam command.
type ipamRequest struct {
	sub     string       // the subcommand
	kind    actions.Kind // the repair it plans; "" for check and blocks
	cluster string       // --cluster ("" the default)
	node    string       // --node
}

// parseIPAM reads "/ipam check|blocks|release-ips|release-blocks|release-handles|unlock
// [--cluster C] [--node N]".
func parseIPAM(req chat.Request) (ipamRequest, error) {
	f, err := parseFlags(req.Args, "cluster", "node")
	if err != nil {
		return ipamRequest{}, err
	}
	if len(f.positional) != 1 {
		return ipamRequest{}, userErrorf("choose one of %s", ipamChoices)
	}
	ip := ipamRequest{sub: f.positional[0], cluster: f.values["cluster"], node: f.values["node"]}
	if kind, ok := ipamSubcommands[ip.sub]; ok {
		if ip.node != "" && (kind == actions.KindUnlockDatastore || kind == actions.KindReleaseLeakedHandles) {
			return ipamRequest{}, userErrorf("%s is cluster-wide; --node does not apply", ip.sub)
		}
		ip.kind = kind
		return ip, nil
	}
	if ip.sub != "check" && ip.sub != "blocks" {
		return ipamRequest{}, userErrorf("unknown subcommand %q: choose one of %s", ip.sub, ipamChoices)
	}
	if ip.node != "" {
		return ipamRequest{}, userErrorf("--node applies to release-ips and release-blocks only")
	}
	return ip, nil
}

// ipam answers "/ipam check|blocks|release-ips|release-blocks|release-handles|unlock
// [--cluster C]".
func (b *Bot) ipam(ctx context.Context, req chat.Request) (chat.Reply, error) {
	ip, err := parseIPAM(req)
	if err != nil {
		return chat.Reply{}, err
	}
	if ip.kind != "" {
		return b.plan(ctx, req, ip.kind, ip.cluster, actions.PlanOptions{Node: ip.node})
	}
	c, err := b.cluster(ip.cluster)
	if err != nil {
		return chat.Reply{}, err
	}
	if c.IPAM == nil {
		return chat.Reply{}, userErrorf("cluster %s has no Calico IPAM access configured", c.Name)
	}
	if err := b.allowIPAMRead(ctx, req.Principal, c, ip.sub); err != nil {
		return chat.Reply{}, err
	}
	if ip.sub == "check" {
		res, err := c.IPAM.Check(ctx, calico.CheckOptions{})
		if err != nil {
			return chat.Reply{}, ipamError(c, "check calico ipam", err)
		}
		return chat.Reply{Message: CheckMessage(c.Name, res), Public: true}, nil
	}
	u, err := c.IPAM.Utilization(ctx)
	if err != nil {
		return chat.Reply{}, ipamError(c, "read calico ipam utilization", err)
	}
	return chat.Reply{Message: BlocksMessage(c.Name, u), Public: true}, nil
}

// plan makes a plan of kind on the named cluster and stores it for approval. A plan with
// nothing to change is answered without storing anything. Under per-user authorization the
// requester must be allowed every permission the repair uses before anything is read.
func (b *Bot) plan(ctx context.Context, req chat.Request, kind actions.Kind, clusterName string, opts actions.PlanOptions) (chat.Reply, error) {
	if !kind.Valid() {
		return chat.Reply{}, userErrorf("unknown repair %q", kind)
	}
	c, err := b.cluster(clusterName)
	if err != nil {
		return chat.Reply{}, err
	}
	if c.Planner == nil || c.Executor == nil {
		return chat.Reply{}, userErrorf("cluster %s cannot run repairs (not configured)", c.Name)
	}
	if opts.Node != "" && len(validation.IsDNS1123Subdomain(opts.Node)) > 0 {
		return chat.Reply{}, userErrorf("%q is not a node name", opts.Node)
	}
	if _, err := b.allowRepair(ctx, req.Principal, c.Name, kind, "plan "+string(kind)); err != nil {
		return chat.Reply{}, err
	}
	p, err := c.Planner.Plan(ctx, kind, opts)
	if err != nil {
		return chat.Reply{}, ipamError(c, "plan "+string(kind), err)
	}
	if len(p.Items) == 0 {
		return chat.Reply{Message: chat.Message{
			Title:    fmt.Sprintf("Nothing to do on %s: %s", c.Name, nothingToDo(kind)),
			Severity: chat.SeverityOK,
			Footer:   p.Basis,
		}}, nil
	}
	a, err := b.approvals.Request(ctx, p, req.Principal, req.Channel)
	if err != nil {
		return chat.Reply{}, err
	}
	return chat.Reply{Message: b.approvals.Message(a), Public: true, PlanID: p.ID}, nil
}

// ipamError is what the user sees when an IPAM read or plan on c fails: a cluster without
// Calico, or without Calico's ClusterInformation, is an answer, not a failure; anything else
// stays an error, naming the cluster.
func ipamError(c *Cluster, what string, err error) error {
	switch {
	case errors.Is(err, calico.ErrCalicoNotInstalled):
		return userErrorf("Calico is not installed on cluster %s (its API server serves no Calico API group): /ipam does not apply there", c.Name)
	case errors.Is(err, calico.ErrNotInitialized):
		return userErrorf("cluster %s serves Calico's API but has no ClusterInformation default: calico-node has never started there (or Calico does not use the Kubernetes datastore), so there is no IPAM state to check or repair", c.Name)
	}
	return fmt.Errorf("%s on %s: %w", what, c.Name, err)
}

// nothingToDo says why a plan of kind came out empty.
func nothingToDo(kind actions.Kind) string {
	switch kind {
	case actions.KindReleaseLeakedIPs:
		return "a fresh check found no leaked IPs"
	case actions.KindReleaseEmptyBlocks:
		return "a fresh check found no empty block that can be released"
	case actions.KindUnlockDatastore:
		return "the Calico datastore is not locked"
	case actions.KindReleaseLeakedHandles:
		return "a fresh check found no leaked IPAM handle older than a minute"
	}
	return "nothing is eligible"
}

// CheckMessage renders an IPAM check like `calicoctl ipam check`, with a button to plan the
// release of leaked IPs when there are any.
func CheckMessage(cluster string, r *calico.CheckResult) chat.Message {
	leaked := len(r.LeakedIPs)
	how := "took " + roundDuration(r.Took)
	if r.Cached {
		how = "from the bot's watch caches"
	}
	m := chat.Message{Footer: fmt.Sprintf("cluster %s · ClusterInformation rv %s · %s", cluster, r.Report.ClusterInfoRevision, how)}
	switch {
	case r.Problems == 0:
		m.Title, m.Severity = fmt.Sprintf("Calico IPAM on %s: no problems found", cluster), "ok"
	case leaked > 0:
		m.Title, m.Severity = fmt.Sprintf("Calico IPAM on %s: %d leaked IPs (%d problems)", cluster, leaked, r.Problems), "warning"
	default:
		m.Title, m.Severity = fmt.Sprintf("Calico IPAM on %s: %d problems", cluster, r.Problems), "warning"
	}
	m.Sections = append(m.Sections, chat.Section{Fields: []chat.Field{
		{Name: "IPAM blocks", Value: fmt.Sprint(r.Blocks)},
		{Name: "Addresses in use", Value: fmt.Sprint(r.InUseIPs)},
		{Name: "Leaked IPs", Value: fmt.Sprint(leaked)},
		{Name: "Leaked handles", Value: fmt.Sprint(len(r.LeakedHandles))},
		{Name: "In use, not allocated", Value: fmt.Sprint(len(r.InUseNotAllocated))},
		{Name: "Active pools", Value: strings.Join(r.ActivePools, ", ")},
	}})
	if r.Report.DatastoreLocked {
		m.Severity = "blocker"
		m.Sections = append(m.Sections, chat.Section{Heading: "Datastore locked", Text: "ClusterInformation default has datastoreReady=false: no pod can get or release an address until it is unlocked (/ipam unlock)."})
	}
	if leaked > 0 {
		byNode := map[string]int{}
		t := &chat.Table{Columns: []string{"IP", "Node", "Allocated to", "Handle"}}
		for _, a := range r.LeakedIPs {
			byNode[a.Node]++
			t.Rows = append(t.Rows, []string{a.IP, dash(a.Node), dash(allocationOwner(a)), dash(a.Handle)})
		}
		m.Sections = append(m.Sections, chat.Section{Heading: "Leaked IPs by node", Lines: countLines(byNode)}, chat.Section{Heading: "Leaked IPs", Table: t})
		m.Buttons = append(m.Buttons, chat.Button{
			ActionID: chat.ActionPlanPrefix + string(actions.KindReleaseLeakedIPs),
			Label:    fmt.Sprintf("Release %d %s", leaked, plural(leaked, "leaked IP", "leaked IPs")),
			Value:    string(actions.KindReleaseLeakedIPs) + ";cluster=" + cluster,
			Style:    chat.StylePrimary,
		})
	}
	if n := len(r.LeakedHandles); n > 0 {
		m.Buttons = append(m.Buttons, repairButton(actions.KindReleaseLeakedHandles, cluster,
			"Delete "+fmt.Sprintf("%d %s", n, plural(n, "leaked handle", "leaked handles")), ""))
	}
	if n := len(r.InUseNotAllocated); n > 0 {
		var lines []string
		for _, u := range r.InUseNotAllocated {
			lines = append(lines, u.IP+" used by "+strings.Join(u.Owners, ", "))
		}
		m.Sections = append(m.Sections, chat.Section{Heading: "In use but not allocated (never released automatically)", Lines: lines})
	}
	if len(r.InvalidBlocks) > 0 {
		var lines []string
		for _, b := range r.InvalidBlocks {
			lines = append(lines, b.CIDR+": "+strings.Join(b.Problems, "; "))
		}
		m.Sections = append(m.Sections, chat.Section{Heading: "Invalid blocks", Lines: lines})
	}
	if r.Report.DatastoreLocked {
		m.Buttons = append(m.Buttons, chat.Button{
			ActionID: chat.ActionPlanPrefix + string(actions.KindUnlockDatastore),
			Label:    "Unlock the datastore",
			Value:    string(actions.KindUnlockDatastore) + ";cluster=" + cluster,
		})
	}
	return m
}

// BlocksMessage renders IPAM utilization like `calicoctl ipam show --show-blocks`, plus each
// block's node and whether it is empty, with a button to plan the release of empty blocks.
func BlocksMessage(cluster string, u *calico.Utilization) chat.Message {
	pools := &chat.Table{Columns: []string{"Pool", "CIDR", "Total", "In use", "Free"}}
	blocks := &chat.Table{Columns: []string{"Block", "Node", "In use", "Free", "Note"}}
	var inUse, total float64
	nBlocks := 0
	for _, p := range u.Pools {
		if p.Name != "orphaned" || len(p.Blocks) > 0 {
			pools.Rows = append(pools.Rows, []string{p.Name, p.CIDR.String(), fmt.Sprintf("%.0f", p.Total),
				fmt.Sprintf("%.0f", p.InUse), fmt.Sprintf("%.0f", p.Free)})
		}
		inUse, total = inUse+p.InUse, total+p.Total
		for _, b := range p.Blocks {
			nBlocks++
			note := ""
			switch {
			case b.Empty && b.LastAffineBlock:
				note = "empty (node's last block: kept)"
			case b.Empty:
				note = "empty"
			case b.Affinity == "":
				note = "no affinity"
			}
			blocks.Rows = append(blocks.Rows, []string{b.CIDR.String(), dash(b.Node), fmt.Sprint(b.InUse), fmt.Sprint(b.Free), note})
		}
	}
	nodes := map[string]int{}
	for n, c := range u.NodeBlocks {
		nodes[n] = c
	}
	var nodeLines []string
	for _, l := range countLines(nodes) {
		nodeLines = append(nodeLines, fmt.Sprintf("%s of %d blocks (maxBlocksPerHost)", l, u.MaxBlocksPerHost))
	}
	m := chat.Message{
		Title:    fmt.Sprintf("Calico IPAM blocks on %s: %d blocks, %.0f of %.0f addresses in use", cluster, nBlocks, inUse, total),
		Severity: chat.SeverityInfo,
		Sections: []chat.Section{
			{Heading: "Pools", Table: pools},
			{Heading: "Blocks", Table: blocks},
			{Heading: "Blocks per node", Lines: nodeLines},
		},
		Footer: fmt.Sprintf("cluster %s · strictAffinity %v · autoAllocateBlocks %v", cluster, u.StrictAffinity, u.AutoAllocateBlocks),
	}
	if len(u.Affinities) > 0 {
		var lines []string
		for _, a := range u.Affinities {
			lines = append(lines, fmt.Sprintf("%s: node %s, %s, state %q, block exists %v", a.Name, a.Node, a.CIDR, a.State, a.BlockExists))
		}
		m.Sections = append(m.Sections, chat.Section{Heading: "BlockAffinity problems", Lines: lines})
	}
	releasable := 0
	for _, b := range u.EmptyBlocks {
		if !b.LastAffineBlock {
			releasable++
		}
	}
	if releasable > 0 {
		m.Buttons = append(m.Buttons, chat.Button{
			ActionID: chat.ActionPlanPrefix + string(actions.KindReleaseEmptyBlocks),
			Label:    fmt.Sprintf("Release %d %s", releasable, plural(releasable, "empty block", "empty blocks")),
			Value:    string(actions.KindReleaseEmptyBlocks) + ";cluster=" + cluster,
			Style:    chat.StylePrimary,
		})
	}
	return m
}

func allocationOwner(a calico.Allocation) string {
	if a.Pod != "" {
		return a.Namespace + "/" + a.Pod
	}
	return a.Type
}

func countLines(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s: %d", dash(k), m[k]))
	}
	return out
}
