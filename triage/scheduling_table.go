package triage

import (
	"slices"
	"sort"
	"strings"
)

// NodeRow is one row of the per-node "why not here" table as a reader sees it: one node's
// verdict, or, when More > 0, a row that counts More nodes left out. Those nodes fit (Fits), or
// share the reasons Codes, or (Other) belong to groups that have no row of their own.
type NodeRow struct {
	Verdict NodeVerdict
	More    int
	Fits    bool
	Codes   []Code
	Other   bool
}

// NodeRows picks at most max rows of the per-node table (max ≥ 3). When every node fits in max
// rows, they are all shown, nodes that fit first, then by name. Otherwise every group of nodes
// that fail for the same reasons shows: the nodes that fit first, then the groups with the
// primary code, then the others, bigger groups first; each group shows its first nodes by name
// and one row counting the rest, and the rows are shared out one per group in turn. With more
// groups than rows, the last row counts the nodes of the groups left out.
func NodeRows(nodes []NodeVerdict, primary Code, max int) []NodeRow {
	if len(nodes) <= max {
		// Every node has a row: nodes that fit first, then by name.
		sorted := slices.Clone(nodes)
		sort.SliceStable(sorted, func(i, j int) bool {
			if sorted[i].Fits != sorted[j].Fits {
				return sorted[i].Fits
			}
			return sorted[i].Node < sorted[j].Node
		})
		rows := make([]NodeRow, len(sorted))
		for i, nv := range sorted {
			rows[i] = NodeRow{Verdict: nv}
		}
		return rows
	}
	type group struct {
		key    string
		codes  []Code
		fits   bool
		nodes  []NodeVerdict
		shown  int
		hasPri bool
	}
	byKey := map[string]*group{}
	var groups []*group
	for _, nv := range nodes {
		var codes []Code
		for _, r := range nv.Reasons {
			if !slices.Contains(codes, r.Code) {
				codes = append(codes, r.Code)
			}
		}
		keys := make([]string, len(codes))
		for i, c := range codes {
			keys[i] = string(c)
		}
		key := strings.Join(keys, ",")
		g := byKey[key]
		if g == nil {
			g = &group{key: key, codes: codes, fits: nv.Fits, hasPri: slices.Contains(codes, primary)}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.nodes = append(g.nodes, nv)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		switch {
		case a.fits != b.fits:
			return a.fits
		case a.hasPri != b.hasPri:
			return a.hasPri
		case len(a.nodes) != len(b.nodes):
			return len(a.nodes) > len(b.nodes)
		default:
			return a.key < b.key
		}
	})
	for _, g := range groups {
		sort.SliceStable(g.nodes, func(i, j int) bool { return g.nodes[i].Node < g.nodes[j].Node })
	}
	// cost is the number of rows the groups take as shown: their nodes, a count row for each
	// group cut short, and one count row for the groups left out.
	cost := func() int {
		n, hidden := 0, false
		for _, g := range groups {
			switch {
			case g.shown == 0:
				hidden = true
			case g.shown < len(g.nodes):
				n += g.shown + 1
			default:
				n += g.shown
			}
		}
		if hidden {
			n++
		}
		return n
	}
	for grew := true; grew; {
		grew = false
		for _, g := range groups {
			if g.shown == len(g.nodes) {
				continue
			}
			g.shown++
			if cost() > max {
				g.shown--
				continue
			}
			grew = true
		}
	}
	var rows []NodeRow
	var leftOut int
	for _, g := range groups {
		if g.shown == 0 {
			leftOut += len(g.nodes)
			continue
		}
		for _, nv := range g.nodes[:g.shown] {
			rows = append(rows, NodeRow{Verdict: nv})
		}
		if rest := len(g.nodes) - g.shown; rest > 0 {
			rows = append(rows, NodeRow{More: rest, Fits: g.fits, Codes: g.codes})
		}
	}
	if leftOut > 0 {
		rows = append(rows, NodeRow{More: leftOut, Other: true})
	}
	return rows
}
