package bot

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/digest"
	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
)

const (
	// digestTopNodes caps the per-node lines and rows of a digest; the rest is summarised as
	// "and N more nodes".
	digestTopNodes = 10
	// poolNearlyFull is the share of a pool's addresses allocated, in percent, from which
	// the digest reports the pool as a problem.
	poolNearlyFull = 90
)

// DigestMessage renders one cluster's IPAM digest: a title that counts the problems
// ("IPAM digest for prod-eu: 181 leaked IPs, 3 empty blocks"), a summary, the pool usage
// table, leaked IPs by node, empty blocks by node against maxBlocksPerHost, the datastore
// lock state and other findings, with one button per repair it offers. The buttons are the
// ones /ipam check and /why-pending offer (chat.PlanButton), so a click takes the same path
// (Bot.Click).
//
// "Empty blocks" in the title and on the button counts releasable ones: empty blocks that
// are not their node's last affine block (a node's only block is kept, like
// ReleaseEmptyBlocks does). check and util come from calico.Client.Check and Utilization of
// the same cluster (nil reads as empty); now is when they were read. It is pure: no I/O.
func DigestMessage(cluster string, check *calico.CheckResult, util *calico.Utilization, now time.Time) chat.Message {
	if check == nil {
		check = &calico.CheckResult{}
	}
	if util == nil {
		util = &calico.Utilization{}
	}
	leaked := len(check.LeakedIPs)
	releasable := 0
	for _, b := range util.EmptyBlocks {
		if !b.LastAffineBlock {
			releasable++
		}
	}
	locked := check.Report.DatastoreLocked
	full := fullPools(util.Pools)
	atLimit := nodesAtLimit(util)
	other := max(check.Problems-leaked, 0) + len(util.Affinities)

	m := chat.Message{
		Severity: chat.SeverityOK,
		Footer:   fmt.Sprintf("cluster %s · collected %s", cluster, now.UTC().Format(time.RFC3339)),
	}
	if rv := check.Report.ClusterInfoRevision; rv != "" {
		m.Footer += " · ClusterInformation rv " + rv
	}
	problems := leaked > 0 || releasable > 0 || locked || len(full) > 0 || len(atLimit) > 0 || other > 0
	if !problems {
		m.Title = fmt.Sprintf("IPAM digest for %s: no problems found", cluster)
	} else {
		parts := []string{fmt.Sprintf("%d %s", leaked, plural(leaked, "leaked IP", "leaked IPs")), fmt.Sprintf("%d %s", releasable, plural(releasable, "empty block", "empty blocks"))}
		if locked {
			parts = append(parts, "datastore locked")
		}
		for _, p := range full {
			parts = append(parts, fmt.Sprintf("pool %s %s allocated", p.Name, usedPercent(p.InUse, p.Total)))
		}
		if len(atLimit) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", len(atLimit), plural(len(atLimit), "node at maxBlocksPerHost", "nodes at maxBlocksPerHost")))
		}
		if other > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", other, plural(other, "other problem", "other problems")))
		}
		m.Title = fmt.Sprintf("IPAM digest for %s: %s", cluster, strings.Join(parts, ", "))
		m.Severity = "warning"
	}
	if locked {
		m.Severity = "blocker"
	}

	datastore := "unlocked"
	if locked {
		datastore = "locked (datastoreReady=false)"
	}
	empty := fmt.Sprint(len(util.EmptyBlocks))
	if len(util.EmptyBlocks) > 0 {
		empty = fmt.Sprintf("%d (%d releasable)", len(util.EmptyBlocks), releasable)
	}
	summary := chat.Section{Fields: []chat.Field{
		{Name: "Leaked IPs", Value: fmt.Sprint(leaked)},
		{Name: "Empty blocks", Value: empty},
		{Name: "IPAM blocks", Value: fmt.Sprint(check.Blocks)},
		{Name: "Addresses in use", Value: fmt.Sprint(check.InUseIPs)},
		{Name: "Datastore", Value: datastore},
		{Name: "maxBlocksPerHost", Value: fmt.Sprint(util.MaxBlocksPerHost)},
	}}
	if !problems {
		summary.Text = "No problems found: no leaked IPs, no releasable empty blocks, no pool nearly fully allocated, and the datastore is unlocked."
	}
	m.Sections = append(m.Sections, summary)
	if t := digestPoolTable(util.Pools); t != nil {
		m.Sections = append(m.Sections, chat.Section{Heading: "Pool usage", Table: t})
	}
	if locked {
		m.Sections = append(m.Sections, chat.Section{Heading: "Datastore locked", Text: "ClusterInformation default has datastoreReady=false: no pod can get or release an address until it is unlocked (/ipam unlock)."})
	}
	if leaked > 0 {
		byNode := map[string]int{}
		for _, a := range check.LeakedIPs {
			byNode[a.Node]++
		}
		m.Sections = append(m.Sections, chat.Section{Heading: "Leaked IPs by node", Lines: topCountLines(byNode, "leaked IPs")})
	}
	if t := digestBlockTable(util, atLimit); t != nil {
		m.Sections = append(m.Sections, chat.Section{Heading: "Empty blocks by node", Table: t})
	}
	if lines := digestOtherLines(check, util); len(lines) > 0 {
		m.Sections = append(m.Sections, chat.Section{Heading: "Other findings (run /ipam check or /ipam blocks for details)", Lines: lines})
	}

	if leaked > 0 {
		m.Buttons = append(m.Buttons, repairButton(actions.KindReleaseLeakedIPs, cluster,
			fmt.Sprintf("Release %s", fmt.Sprintf("%d %s", leaked, plural(leaked, "leaked IP", "leaked IPs"))), "primary"))
	}
	if releasable > 0 {
		m.Buttons = append(m.Buttons, repairButton(actions.KindReleaseEmptyBlocks, cluster,
			fmt.Sprintf("Release %s", fmt.Sprintf("%d %s", releasable, plural(releasable, "empty block", "empty blocks"))), "primary"))
	}
	if n := len(check.LeakedHandles); n > 0 {
		m.Buttons = append(m.Buttons, repairButton(actions.KindReleaseLeakedHandles, cluster,
			"Delete "+fmt.Sprintf("%d %s", n, plural(n, "leaked handle", "leaked handles")), ""))
	}
	if locked {
		m.Buttons = append(m.Buttons, repairButton(actions.KindUnlockDatastore, cluster, "Unlock the datastore", ""))
	}
	return m
}

// repairButton is a "make a plan" button for a cluster-wide repair of kind on cluster.
func repairButton(kind actions.Kind, cluster, label string, style chat.ButtonStyle) chat.Button {
	return chat.PlanButton{Kind: string(kind), Cluster: cluster}.Button(label, style)
}

// fullPools are the enabled pools with at least poolNearlyFull percent of their addresses
// allocated, in Utilization's order.
func fullPools(pools []calico.PoolUsage) []calico.PoolUsage {
	var out []calico.PoolUsage
	for _, p := range pools {
		if !p.Disabled && p.Total > 0 && p.InUse*100 >= p.Total*poolNearlyFull {
			out = append(out, p)
		}
	}
	return out
}

// nodesAtLimit are the nodes whose affine block count has reached maxBlocksPerHost, sorted.
func nodesAtLimit(u *calico.Utilization) []string {
	var out []string
	for n, c := range u.NodeBlocks {
		if n != "" && u.MaxBlocksPerHost > 0 && c >= u.MaxBlocksPerHost {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// digestPoolTable is the pool usage table: name (marked when disabled), CIDR, "allocated /
// total" addresses and the share allocated. Allocated counts leaked addresses too (calicoctl's
// "IPs in use"), which is why a pool can be full while few addresses are really used.
// The "orphaned" pseudo-pool shows only when it holds blocks.
func digestPoolTable(pools []calico.PoolUsage) *chat.Table {
	t := &chat.Table{Columns: []string{"Pool", "CIDR", "Allocated / total", "%"}}
	for _, p := range pools {
		if p.Name == "orphaned" && len(p.Blocks) == 0 {
			continue
		}
		name := p.Name
		if p.Disabled {
			name += " (disabled)"
		}
		t.Rows = append(t.Rows, []string{name, p.CIDR.String(), fmt.Sprintf("%.0f / %.0f", p.InUse, p.Total), usedPercent(p.InUse, p.Total)})
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return t
}

// usedPercent formats inUse/total as a whole percentage rounded down (so "100%" means full);
// "<1%" for a little use of a large (IPv6) pool, "-" for an empty total.
func usedPercent(inUse, total float64) string {
	switch {
	case total <= 0:
		return "-"
	case inUse > 0 && inUse*100 < total:
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", math.Floor(inUse*100/total))
}

// digestBlockTable lists the nodes with empty blocks or at maxBlocksPerHost: most empty blocks
// first, then by name; at most digestTopNodes rows, then "and N more nodes".
func digestBlockTable(u *calico.Utilization, atLimit []string) *chat.Table {
	type row struct {
		node              string
		empty, releasable int
	}
	rows := map[string]*row{}
	get := func(n string) *row {
		if rows[n] == nil {
			rows[n] = &row{node: n}
		}
		return rows[n]
	}
	for _, b := range u.EmptyBlocks {
		r := get(b.Node)
		r.empty++
		if !b.LastAffineBlock {
			r.releasable++
		}
	}
	for _, n := range atLimit {
		get(n)
	}
	if len(rows) == 0 {
		return nil
	}
	sorted := make([]*row, 0, len(rows))
	for _, r := range rows {
		sorted = append(sorted, r)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].empty != sorted[j].empty {
			return sorted[i].empty > sorted[j].empty
		}
		return sorted[i].node < sorted[j].node
	})
	t := &chat.Table{Columns: []string{"Node", "Empty blocks", "Blocks / max", "Note"}}
	for i, r := range sorted {
		if i == digestTopNodes {
			t.Rows = append(t.Rows, []string{fmt.Sprintf("and %d more nodes", len(sorted)-digestTopNodes), "", "", ""})
			break
		}
		blocks := u.NodeBlocks[r.node]
		var notes []string
		if u.MaxBlocksPerHost > 0 && blocks >= u.MaxBlocksPerHost {
			notes = append(notes, "at the limit")
		}
		if r.empty > r.releasable {
			notes = append(notes, "its only block is kept")
		}
		t.Rows = append(t.Rows, []string{dash(r.node), fmt.Sprint(r.empty),
			fmt.Sprintf("%d / %d", blocks, u.MaxBlocksPerHost), strings.Join(notes, "; ")})
	}
	return t
}

// topCountLines renders "node: count" lines, largest count first, then by name; at most
// digestTopNodes lines, then "and N more nodes (M <what>)".
func topCountLines(counts map[string]int, what string) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var out []string
	for i, k := range keys {
		if i == digestTopNodes {
			rest := 0
			for _, k := range keys[i:] {
				rest += counts[k]
			}
			out = append(out, fmt.Sprintf("and %d more nodes (%d %s)", len(keys)-i, rest, what))
			break
		}
		out = append(out, fmt.Sprintf("%s: %d", dash(k), counts[k]))
	}
	return out
}

// digestOtherLines counts the problems the digest does not detail: those of /ipam check beyond
// leaked IPs, and BlockAffinity problems.
func digestOtherLines(r *calico.CheckResult, u *calico.Utilization) []string {
	var out []string
	add := func(n int, one, many string) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, plural(n, one, many)))
		}
	}
	add(len(r.InUseNotAllocated), "address in use but not allocated", "addresses in use but not allocated")
	add(len(r.NotInPool), "address in use outside every active pool", "addresses in use outside every active pool")
	add(len(r.LeakedHandles), "leaked handle", "leaked handles")
	add(len(r.InvalidBlocks), "invalid block", "invalid blocks")
	add(len(u.Affinities), "BlockAffinity without a confirmed block", "BlockAffinities without a confirmed block")
	return out
}

// RenderDigest renders one cluster's digest report: DigestMessage when it was read, else a
// short message saying it was skipped (the cluster is unavailable) or could not be collected;
// then the stuck workloads the watch did not post because their answer is not sure
// (digestUnclearSection). A cluster without Calico gets those alone.
func RenderDigest(r digest.Report) chat.Message {
	var m chat.Message
	switch {
	case r.NoCalico:
		n := len(r.Unclear)
		m = chat.Message{Title: fmt.Sprintf("Digest for %s: %d stuck %s without a clear cause", r.Cluster, n, plural(n, "workload", "workloads")),
			Severity: chat.SeverityWarning, Footer: fmt.Sprintf("cluster %s · collected %s", r.Cluster, r.At.UTC().Format(time.RFC3339))}
	case r.Unavailable != nil:
		m = digestSkippedMessage(r.Cluster, r.Unavailable, r.At)
	case r.Failed:
		m = digestFailedMessage(r.Cluster, r.At)
	default:
		m = DigestMessage(r.Cluster, r.Check, r.Utilization, r.At)
	}
	if s, ok := digestUnclearSection(r); ok {
		m.Sections = append(m.Sections, s)
	}
	return m
}

// digestUnclearMost caps the digest's lines of stuck workloads without a clear cause.
const digestUnclearMost = 20

// digestUnclearSection lists the cluster's stuck workloads whose answer is uncertain or
// unknown: the watch never posts them on its own (only its roll-up line counts them), so the
// digest names each, with the command that shows what is known. ok is false when there is
// nothing to say.
func digestUnclearSection(r digest.Report) (chat.Section, bool) {
	switch {
	case len(r.Unclear) > 0:
		return chat.Section{Heading: fmt.Sprintf("Stuck without a clear cause (%d, not posted on their own)", len(r.Unclear)),
			Lines: watch.Lines(r.Unclear, digestUnclearMost)}, true
	case r.UnclearFailed:
		return chat.Section{Heading: "Stuck without a clear cause", Text: "The watch's list could not be read; the bot's log has the details."}, true
	}
	return chat.Section{}, false
}

// digestSkippedMessage says a cluster's digest was skipped because the cluster is
// unavailable, with the one-line reason (the API server and its error).
func digestSkippedMessage(cluster string, why error, at time.Time) chat.Message {
	var ue *chat.UnavailableError
	if !errors.As(why, &ue) {
		ue = chat.ClusterUnavailable(cluster, time.Time{}, why)
	}
	return chat.Message{
		Title:    fmt.Sprintf("IPAM digest for %s skipped: the cluster is unavailable", cluster),
		Severity: chat.SeverityWarning,
		Sections: []chat.Section{{Text: ue.Text + " The digest covers it again once it is back; /readyz shows its state."}},
		Footer:   fmt.Sprintf("cluster %s · attempted %s", cluster, at.UTC().Format(time.RFC3339)),
	}
}

// digestFailedMessage says a cluster's digest could not be collected, without error text.
func digestFailedMessage(cluster string, at time.Time) chat.Message {
	return chat.Message{
		Title:    fmt.Sprintf("IPAM digest for %s could not be collected", cluster),
		Severity: chat.SeverityWarning,
		Sections: []chat.Section{{Text: "Reading Calico IPAM failed; the bot's log has the details. Try /ipam check --cluster " + cluster + "."}},
		Footer:   fmt.Sprintf("cluster %s · attempted %s", cluster, at.UTC().Format(time.RFC3339)),
	}
}
