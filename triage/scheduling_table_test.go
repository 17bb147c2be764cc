package triage

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodeRows(t *testing.T) {
	verdicts := func(prefix string, n int, codes ...Code) []NodeVerdict {
		var out []NodeVerdict
		for i := range n {
			nv := NodeVerdict{Node: fmt.Sprintf("%s-%02d", prefix, i+1), Fits: len(codes) == 0}
			for _, c := range codes {
				nv.Reasons = append(nv.Reasons, NodeReason{Code: c, Message: string(c)})
			}
			out = append(out, nv)
		}
		return out
	}
	// shape renders rows as node names and "+N codes" count rows.
	shape := func(rows []NodeRow) []string {
		var out []string
		for _, r := range rows {
			switch {
			case r.More > 0 && r.Other:
				out = append(out, fmt.Sprintf("+%d other", r.More))
			case r.More > 0:
				out = append(out, fmt.Sprintf("+%d %v", r.More, r.Codes))
			default:
				out = append(out, r.Verdict.Node)
			}
		}
		return out
	}
	tests := []struct {
		name    string
		nodes   []NodeVerdict
		primary Code
		max     int
		want    []string
	}{
		{
			name:  "a table that fits shows every node, those that fit first, then by name",
			nodes: append(verdicts("b", 2, CodeInsufficientCPU), verdicts("a", 1)...), primary: CodeInsufficientCPU, max: 5,
			want: []string{"a-01", "b-01", "b-02"},
		},
		{
			name:  "30 tainted GPU nodes sorted first by name do not hide the 10 nodes that lack cpu",
			nodes: append(verdicts("gpu", 30, CodeUntoleratedTaint), verdicts("node", 10, CodeInsufficientCPU)...), primary: CodeInsufficientCPU, max: 8,
			want: []string{"node-01", "node-02", "node-03", "+7 [insufficient-cpu]", "gpu-01", "gpu-02", "gpu-03", "+27 [untolerated-taint]"},
		},
		{
			name: "more groups than rows: the groups left out are counted",
			nodes: append(append(append(verdicts("a", 3, CodeInsufficientCPU), verdicts("b", 3, CodeNodeUnschedulable)...),
				verdicts("c", 3, CodeUntoleratedTaint)...), verdicts("d", 3, CodeTooManyPods)...),
			primary: CodeTooManyPods, max: 5,
			want: []string{"d-01", "+2 [too-many-pods]", "a-01", "+2 [insufficient-cpu]", "+6 other"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := NodeRows(tt.nodes, tt.primary, tt.max)
			if diff := cmp.Diff(tt.want, shape(rows)); diff != "" {
				t.Errorf("NodeRows mismatch (-want +got):\n%s", diff)
			}
			if len(rows) > tt.max {
				t.Errorf("NodeRows gave %d rows, want at most %d", len(rows), tt.max)
			}
			counted := 0
			for _, r := range rows {
				if r.More > 0 {
					counted += r.More
				} else {
					counted++
				}
			}
			if counted != len(tt.nodes) {
				t.Errorf("rows account for %d nodes, want %d", counted, len(tt.nodes))
			}
		})
	}
}
