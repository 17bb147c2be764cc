package calico

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUtilizationAndReleaseEmptyBlocksSeedBlockLimit(t *testing.T) {
	ctx := t.Context()
	c, cl := startCluster(t, "seed-block-limit")
	u, err := cl.Utilization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u.MaxBlocksPerHost != 4 || !u.StrictAffinity {
		t.Errorf("config: max %d strict %t; want 4, true", u.MaxBlocksPerHost, u.StrictAffinity)
	}
	if d := cmp.Diff(map[string]int{"worker-1": 4, "worker-2": 1}, u.NodeBlocks); d != "" {
		t.Errorf("NodeBlocks (-want +got):\n%s", d)
	}
	var empty []string
	for _, b := range u.EmptyBlocks {
		empty = append(empty, fmt.Sprintf("%s %s %d/%d last=%t", b.CIDR, b.Node, b.InUse, b.Total, b.LastAffineBlock))
	}
	if d := cmp.Diff([]string{"172.24.10.64/26 worker-1 0/64 last=false"}, empty); d != "" {
		t.Errorf("EmptyBlocks (-want +got):\n%s", d)
	}
	if res, err := cl.Check(ctx, CheckOptions{}); err != nil || len(res.LeakedIPs) != 86 {
		t.Errorf("check: %v; leaked = %d, want 86", err, len(res.LeakedIPs))
	}

	// Another node with a single, empty block (its last) whose address a pod uses without an
	// allocation, and a third with a single empty block.
	w := &world{t: t, ctx: ctx, c: c, cl: cl, kube: c.Client}
	w.node("worker-3", nil)
	w.node("worker-4", nil)
	w.block("172.24.12.0/26", "host:worker-3", nil)
	w.block("172.24.13.0/26", "host:worker-4", nil)
	w.block("172.24.13.64/26", "host:worker-4", nil)
	w.pod("seed-block-limit", "squatter", "worker-4", []string{"172.24.13.70"}, nil)

	blocks := []netip.Prefix{
		netip.MustParsePrefix("172.24.10.64/26"), // empty: released
		netip.MustParsePrefix("172.24.10.0/26"),  // in use
		netip.MustParsePrefix("172.24.12.0/26"),  // worker-3's last block
		netip.MustParsePrefix("172.24.13.64/26"), // a pod uses 172.24.13.70
		netip.MustParsePrefix("172.24.99.0/26"),  // no such block
	}
	res, err := cl.ReleaseEmptyBlocks(ctx, blocks, BlockReleaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"172.24.10.64/26"}, res.Released); d != "" {
		t.Errorf("released (-want +got):\n%s", d)
	}
	reasons := map[string]string{}
	for _, s := range res.Skipped {
		reasons[s.CIDR] = s.Reason
	}
	for cidr, want := range map[string]string{
		"172.24.10.0/26":  "allocations in use",
		"172.24.12.0/26":  "last affine block of node worker-3",
		"172.24.13.64/26": "172.24.13.70 is in use by Workload(seed-block-limit/squatter)",
		"172.24.99.0/26":  "no such block",
	} {
		if !strings.Contains(reasons[cidr], want) {
			t.Errorf("reason for %s = %q, want %q", cidr, reasons[cidr], want)
		}
	}
	// Calico's procedure: affinity pendingDeletion, block soft-delete + delete, affinity
	// soft-delete + delete.
	if res.Writes != 5 {
		t.Errorf("writes = %d, want 5", res.Writes)
	}
	if _, err := cl.res(resBlocks).Get(ctx, "172-24-10-64-26", metav1.GetOptions{}); !isNotFound(err) {
		t.Errorf("block still exists: %v", err)
	}
	if _, err := cl.res(resAffinities).Get(ctx, "worker-1-172-24-10-64-26", metav1.GetOptions{}); !isNotFound(err) {
		t.Errorf("affinity still exists: %v", err)
	}
	// With AllowLastBlock, worker-3's last block goes too.
	res, err = cl.ReleaseEmptyBlocks(ctx, []netip.Prefix{netip.MustParsePrefix("172.24.12.0/26")}, BlockReleaseOptions{AllowLastBlock: true})
	if err != nil || len(res.Released) != 1 {
		t.Errorf("release last block: %v, %+v", err, res)
	}
	u, err = cl.Utilization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]int{"worker-1": 3, "worker-2": 1, "worker-4": 2}, u.NodeBlocks); d != "" {
		t.Errorf("NodeBlocks after release (-want +got):\n%s", d)
	}
	blockInvariants(t, cl)
}
