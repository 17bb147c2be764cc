package calico

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
)

// Utilization is address usage per pool and block, like `calicoctl ipam show --show-blocks`,
// plus block ownership: the affine node, each node's block count against maxBlocksPerHost,
// and which blocks are empty.
type Utilization struct {
	// Pools are the IPPools sorted by CIDR, then, when some block overlaps no pool, a
	// pseudo-pool "orphaned" with CIDR 0.0.0.0/0 (calicoctl hides its pool row).
	Pools []PoolUsage
	// NodeBlocks maps a node to the number of blocks affine to it: its confirmed host
	// BlockAffinities, which is what Calico compares with maxBlocksPerHost.
	NodeBlocks map[string]int
	// MaxBlocksPerHost is the effective per-node block limit: IPAMConfig maxBlocksPerHost, or
	// Calico's default of 20 when that is 0 or the object is missing.
	MaxBlocksPerHost int
	// MaxBlocksPerHostSet is the raw IPAMConfig value (0 when unset).
	MaxBlocksPerHostSet int
	// StrictAffinity and AutoAllocateBlocks come from IPAMConfig default (defaults false and
	// true when the object is missing).
	StrictAffinity, AutoAllocateBlocks bool
	// EmptyBlocks are the affine blocks with no address in use (every allocation, if any, is
	// Windows-reserved), sorted by CIDR: candidates for ReleaseEmptyBlocks.
	EmptyBlocks []BlockUsage
	// Affinities are BlockAffinity objects that are not confirmed or whose block does not
	// exist (Calico issue #4471), sorted by name.
	Affinities []AffinityProblem
}

// PoolUsage is one pool's address usage.
type PoolUsage struct {
	// Name and CIDR are the IPPool's metadata.name and spec.cidr; Disabled is spec.disabled;
	// BlockSize is spec.blockSize (prefix length).
	Name      string
	CIDR      netip.Prefix
	Disabled  bool
	BlockSize int
	// Total is the number of addresses in the pool (a float64: IPv6 pools exceed int64);
	// InUse is the number allocated in its blocks (Windows-reserved included, like calicoctl);
	// Free is Total - InUse.
	Total, InUse, Free float64
	// Blocks are the blocks attached to the pool (each block to the first pool it overlaps),
	// sorted by CIDR.
	Blocks []BlockUsage
}

// BlockUsage is one IPAMBlock's usage and ownership.
type BlockUsage struct {
	// Name is the IPAMBlock name; CIDR its spec.cidr.
	Name string
	CIDR netip.Prefix
	// Affinity is spec.affinity ("host:<node>", "virtual:load-balancer" or ""); Node is the
	// node of a host affinity.
	Affinity, Node string
	// Total is the block size; InUse the allocated ordinals (Reserved of them are
	// Windows-reserved); Free = Total - InUse.
	Total, InUse, Reserved, Free int
	// NodeBlocks is the number of blocks affine to Node; LastAffineBlock is true when this is
	// Node's only affine block (ReleaseEmptyBlocks keeps it unless told otherwise).
	NodeBlocks      int
	LastAffineBlock bool
	// Empty is true for an affine block with no address in use.
	Empty bool
}

// AffinityProblem is a BlockAffinity that does not match a confirmed, existing block.
type AffinityProblem struct {
	// Name, Node, CIDR and State come from the BlockAffinity.
	Name, Node, CIDR, State string
	// BlockExists is false when no IPAMBlock has the CIDR.
	BlockExists bool
}

// Utilization reads IPPools, IPAMBlocks, BlockAffinities and IPAMConfig (no pods) and computes
// usage.
func (c *Client) Utilization(ctx context.Context) (*Utilization, error) {
	inv, _, err := c.readInventory(ctx, readParts{utilization: true})
	if err != nil {
		return nil, err
	}
	return inv.utilization(), nil
}

// utilizationOf assembles a Utilization from what Utilization read.
func utilizationOf(pools []PoolUsage, blocks []BlockUsage, affs []affinityObject, cfg *ipamConfigObject) *Utilization {
	u := &Utilization{NodeBlocks: map[string]int{}, AutoAllocateBlocks: true}
	if cfg != nil {
		u.StrictAffinity = cfg.Spec.StrictAffinity
		u.MaxBlocksPerHostSet = cfg.Spec.MaxBlocksPerHost
		if cfg.Spec.AutoAllocateBlocks != nil {
			u.AutoAllocateBlocks = *cfg.Spec.AutoAllocateBlocks
		}
	}
	u.MaxBlocksPerHost = cmp.Or(u.MaxBlocksPerHostSet, DefaultMaxBlocksPerHost)
	for _, a := range affs {
		if a.Spec.State == stateConfirmed && (a.Spec.Type == "" || a.Spec.Type == "host") {
			u.NodeBlocks[a.Spec.Node]++
		}
	}
	slices.SortFunc(pools, func(a, b PoolUsage) int { return a.CIDR.Addr().Compare(b.CIDR.Addr()) })
	slices.SortFunc(blocks, func(a, b BlockUsage) int { return a.CIDR.Addr().Compare(b.CIDR.Addr()) })
	var orphaned *PoolUsage
	existing := map[netip.Prefix]bool{}
	for _, b := range blocks {
		existing[b.CIDR] = true
		b.NodeBlocks = u.NodeBlocks[b.Node]
		b.LastAffineBlock = b.Node != "" && b.NodeBlocks == 1
		if b.Empty {
			u.EmptyBlocks = append(u.EmptyBlocks, b)
		}
		i := slices.IndexFunc(pools, func(p PoolUsage) bool { return p.CIDR.Overlaps(b.CIDR) })
		if i < 0 {
			if orphaned == nil {
				orphaned = &PoolUsage{Name: "orphaned", CIDR: netip.MustParsePrefix("0.0.0.0/0")}
			}
			orphaned.Blocks = append(orphaned.Blocks, b)
			orphaned.Total += float64(b.Total)
			orphaned.InUse += float64(b.InUse)
			continue
		}
		pools[i].Blocks = append(pools[i].Blocks, b)
		pools[i].InUse += float64(b.InUse)
	}
	if orphaned != nil {
		pools = append(pools, *orphaned)
	}
	for i := range pools {
		pools[i].Free = pools[i].Total - pools[i].InUse
	}
	u.Pools = pools
	for _, a := range affs {
		cidr, err := netip.ParsePrefix(a.Spec.CIDR)
		exists := err == nil && existing[cidr.Masked()]
		if a.Spec.State == stateConfirmed && exists {
			continue
		}
		u.Affinities = append(u.Affinities, AffinityProblem{Name: a.Metadata.Name, Node: a.Spec.Node,
			CIDR: a.Spec.CIDR, State: a.Spec.State, BlockExists: exists})
	}
	slices.SortFunc(u.Affinities, func(a, b AffinityProblem) int { return strings.Compare(a.Name, b.Name) })
	return u
}

// WriteText prints the usage table like `calicoctl ipam show [--show-blocks]`; with blocks it
// adds NODE and NODE BLOCKS columns (the node's affine block count / the effective
// maxBlocksPerHost), then the IPAM configuration, the empty blocks and affinity problems.
func (u *Utilization) WriteText(w io.Writer, showBlocks bool) error {
	pct := func(n, total float64) string {
		if total == 0 {
			return fmt.Sprintf("%.5g", n)
		}
		return fmt.Sprintf("%.5g (%.f%%)", n, 100*n/total)
	}
	header := []string{"GROUPING", "CIDR", "IPS TOTAL", "IPS IN USE", "IPS FREE"}
	if showBlocks {
		header = append(header, "NODE", "NODE BLOCKS")
	}
	var rows [][]string
	for _, p := range u.Pools {
		if p.CIDR.Bits() > 0 {
			row := []string{"IP Pool", p.CIDR.String(), fmt.Sprintf("%.5g", p.Total), pct(p.InUse, p.Total), pct(p.Free, p.Total)}
			if showBlocks {
				row = append(row, "", "")
			}
			rows = append(rows, row)
		}
		if !showBlocks {
			continue
		}
		for _, b := range p.Blocks {
			node, nb := cmp.Or(b.Node, b.Affinity), ""
			if b.Node != "" {
				nb = fmt.Sprintf("%d/%d", b.NodeBlocks, u.MaxBlocksPerHost)
			}
			t := float64(b.Total)
			rows = append(rows, []string{"Block", b.CIDR.String(), fmt.Sprintf("%.5g", t), pct(float64(b.InUse), t), pct(float64(b.Free), t), node, nb})
		}
	}
	ew := &errWriter{w: w}
	writeTable(ew, header, rows, 2)
	if showBlocks {
		ew.printf("\nIPAM configuration: strictAffinity=%t autoAllocateBlocks=%t maxBlocksPerHost=%d (effective %d)\n",
			u.StrictAffinity, u.AutoAllocateBlocks, u.MaxBlocksPerHostSet, u.MaxBlocksPerHost)
		ew.printf("Empty affine blocks: %d\n", len(u.EmptyBlocks))
		for _, b := range u.EmptyBlocks {
			last := ""
			if b.LastAffineBlock {
				last = " (the node's last affine block)"
			}
			ew.printf("  %s on %s%s\n", b.CIDR, b.Node, last)
		}
		for _, a := range u.Affinities {
			ew.printf("BlockAffinity %s: node %s, cidr %s, state %q, block exists: %t\n", a.Name, a.Node, a.CIDR, a.State, a.BlockExists)
		}
	}
	return ew.err
}

// writeTable draws a boxed table like calicoctl's (go-pretty's default style); columns from
// rightFrom on are right-aligned.
func writeTable(ew *errWriter, header []string, rows [][]string, rightFrom int) {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func() {
		var b strings.Builder
		b.WriteString("+")
		for _, w := range width {
			b.WriteString(strings.Repeat("-", w+2) + "+")
		}
		ew.printf("%s\n", b.String())
	}
	row := func(cells []string, right bool) {
		var b strings.Builder
		b.WriteString("|")
		for i, w := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			if right && i >= rightFrom && i < 5 {
				fmt.Fprintf(&b, " %*s |", w, c)
			} else {
				fmt.Fprintf(&b, " %-*s |", w, c)
			}
		}
		ew.printf("%s\n", b.String())
	}
	line()
	row(header, false)
	line()
	for _, r := range rows {
		row(r, true)
	}
	line()
}
