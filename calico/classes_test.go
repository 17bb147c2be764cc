package calico

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// problemWorld builds one cluster with every class of IPAM problem Check knows, next to the
// states that look like problems but are not.
func problemWorld(t *testing.T) *world {
	w := newWorld(t)
	w.pool("v4", "10.10.0.0/24", 26, false)
	w.pool("v4-disabled", "10.20.0.0/24", 26, true)
	w.pool("v6", "fd00:10::/120", 122, false)
	w.namespace("app")
	w.node("n1", map[string]string{
		"projectcalico.org/IPv4IPIPTunnelAddr":         "10.10.0.0",
		"projectcalico.org/IPv6VXLANTunnelAddr":        "fd00:10::",
		"projectcalico.org/IPv6WireguardInterfaceAddr": "fd00:10::1",
	})
	w.node("n2", map[string]string{"projectcalico.org/IPv4VXLANTunnelAddr": "10.10.0.11"})

	tunnel := func(kind, node string) attr {
		return attr{handle: kind + "-tunnel-addr-" + node, sec: map[string]string{"node": node, "type": kind + "TunnelAddress"}}
	}
	w.block("10.10.0.0/26", "host:n1", map[int]attr{
		0:  tunnel("ipip", "n1"),
		2:  podAttr("app", "running", "n1"),
		3:  podAttr("app", "gone", "n1"),                                                         // leaked
		4:  podAttr("app", "starting", "n1"),                                                     // pod exists, no IP yet
		5:  podAttr("app", "finished", "n1"),                                                     // leaked: pod Succeeded
		6:  podAttr("app", "hostnet", "n1"),                                                      // leaked: host-networked pod
		7:  {handle: windowsReservedHandle, sec: map[string]string{"note": "windows host rsvd"}}, // in use
		8:  {handle: "lb-svc", sec: map[string]string{"service": "lb", "namespace": "app", "type": "loadBalancer"}},
		9:  {handle: "no-handle-object", sec: map[string]string{"namespace": "app", "pod": "orphan-handle", "node": "n1"}},
		11: {handle: "vxlan-tunnel-addr-n2", sec: map[string]string{"node": "n2", "type": "vxlanTunnelAddress"}}, // borrowed by n2
	})
	w.block("10.10.0.64/26", "host:n2", map[int]attr{0: podAttr("app", "on-n2", "n2")})
	w.block("fd00:10::/122", "host:n1", map[int]attr{0: tunnel("vxlan-v6", "n1"), 1: tunnel("wireguard-v6", "n1"), 2: podAttr("app", "gone6", "n1")})
	for id, b := range map[string]string{
		"ipip-tunnel-addr-n1": "10.10.0.0/26", "k8s-pod-network.app.running": "10.10.0.0/26", "k8s-pod-network.app.gone": "10.10.0.0/26",
		"k8s-pod-network.app.starting": "10.10.0.0/26", "k8s-pod-network.app.finished": "10.10.0.0/26", "k8s-pod-network.app.hostnet": "10.10.0.0/26",
		"lb-svc": "10.10.0.0/26", "vxlan-tunnel-addr-n2": "10.10.0.0/26", "k8s-pod-network.app.on-n2": "10.10.0.64/26",
		"vxlan-v6-tunnel-addr-n1": "fd00:10::/122", "wireguard-v6-tunnel-addr-n1": "fd00:10::/122", "k8s-pod-network.app.gone6": "fd00:10::/122",
		"leaked-handle": "10.10.0.0/26", // no block references it
	} {
		w.handle(id, map[string]int{b: 1})
	}
	// An invalid block: an attribute nothing references.
	w.post(resBlocks, map[string]any{"metadata": map[string]any{"name": "10-10-0-128-26"}, "spec": map[string]any{
		"cidr": "10.10.0.128/26", "affinity": "host:n2", "strictAffinity": false, "allocations": append([]any{0}, make([]any, 63)...),
		"unallocated": seq(1, 64), "attributes": []any{
			map[string]any{"handle_id": "k8s-pod-network.app.on-n2b", "secondary": map[string]any{"namespace": "app", "pod": "on-n2b", "node": "n2"}},
			map[string]any{"handle_id": "stray", "secondary": map[string]any{}}},
		"sequenceNumberForAllocation": map[string]any{"0": 1}}})
	w.handle("k8s-pod-network.app.on-n2b", map[string]int{"10.10.0.128/26": 1})
	// A soft-deleted block is ignored.
	w.post(resBlocks, map[string]any{"metadata": map[string]any{"name": "10-10-0-192-26"}, "spec": map[string]any{
		"cidr": "10.10.0.192/26", "strictAffinity": false, "deleted": true, "allocations": append([]any{0}, make([]any, 63)...),
		"unallocated": seq(1, 64), "attributes": []any{map[string]any{"handle_id": "x", "secondary": map[string]any{}}}}})

	w.pod("app", "running", "n1", []string{"10.10.0.2"}, nil)
	w.pod("app", "starting", "n1", nil, nil)
	w.pod("app", "finished", "n1", []string{"10.10.0.5"}, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	w.pod("app", "hostnet", "n1", []string{"10.10.0.6"}, func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	w.pod("app", "orphan-handle", "n1", []string{"10.10.0.9"}, nil)
	w.pod("app", "on-n2", "n2", []string{"10.10.0.64"}, nil)
	w.pod("app", "on-n2b", "n2", []string{"10.10.0.128"}, nil)
	w.pod("app", "unallocated", "n2", []string{"10.10.0.100"}, nil) // in an active pool, no allocation
	w.pod("app", "foreign", "n2", []string{"10.30.0.5"}, nil)       // in no pool
	w.pod("app", "disabled-pool", "n2", []string{"10.20.0.5"}, nil) // in a disabled pool
	w.pod("app", "unscheduled", "", nil, nil)
	w.loadBalancer("app", "lb", "10.10.0.8")
	w.loadBalancer("app", "cloud-lb", "203.0.113.7") // not a Calico address: ignored
	return w
}

func seq(from, to int) []any {
	var out []any
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestCheckFindsEveryProblemClass(t *testing.T) {
	w := problemWorld(t)
	res, err := w.cl.Check(t.Context(), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{
		"leaked":            ips(res.LeakedIPs),
		"pending":           ips(res.Pending),
		"inUseNotAllocated": useIPs(res.InUseNotAllocated),
		"notInPool":         useIPs(res.NotInPool),
		"missingHandles":    res.MissingHandles,
		"problems":          res.Problems,
		"blocks":            res.Blocks,
		"allocations":       len(res.Allocations),
	}
	var leakedHandles, invalid []string
	for _, h := range res.LeakedHandles {
		leakedHandles = append(leakedHandles, h.ID)
	}
	for _, b := range res.InvalidBlocks {
		invalid = append(invalid, b.CIDR+": "+strings.Join(b.Problems, "; "))
	}
	got["leakedHandles"], got["invalidBlocks"] = leakedHandles, invalid
	want := map[string]any{
		// 10.10.0.3: pod gone; .5: pod Succeeded; .6: host-networked pod; fd00:10::2: pod gone.
		"leaked":            []string{"10.10.0.3", "10.10.0.5", "10.10.0.6", "fd00:10::2"},
		"pending":           []string{"10.10.0.4"},
		"inUseNotAllocated": []string{"10.10.0.100 [Workload(app/unallocated)]"},
		"notInPool":         []string{"10.20.0.5 [Workload(app/disabled-pool)]", "10.30.0.5 [Workload(app/foreign)]"},
		"missingHandles":    []string{"no-handle-object"},
		"leakedHandles":     []string{"leaked-handle"},
		"invalidBlocks":     []string{"10.10.0.128/26: attribute 1 is not referenced"},
		"problems":          4 + 1 + 2 + 1 + 1,
		"blocks":            4,
		"allocations":       10 + 1 + 3 + 1,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("check (-want +got):\n%s", d)
	}
	// The report marks in-use addresses with their owners (IPv6 tunnels and Windows
	// reservations included) and leaked ones with none.
	owners := map[string][]string{}
	for ip, allocs := range res.Report.Allocations {
		owners[ip] = allocs[0].Owners
		if allocs[0].InUse != (len(allocs[0].Owners) > 0) {
			t.Errorf("%s: inUse %t with owners %v", ip, allocs[0].InUse, allocs[0].Owners)
		}
	}
	for ip, want := range map[string][]string{
		"10.10.0.0": {"Node(n1)"}, "fd00:10::": {"Node(n1)"}, "fd00:10::1": {"Node(n1)"}, "10.10.0.11": {"Node(n2)"},
		"10.10.0.7": {"Reserved for Windows"}, "10.10.0.8": {"Service(app/lb)"}, "10.10.0.2": {"Workload(app/running)"},
		"10.10.0.4": {"Workload(app/starting) without IP yet"}, "10.10.0.3": nil,
	} {
		if d := cmp.Diff(want, owners[ip]); d != "" {
			t.Errorf("owners of %s (-want +got):\n%s", ip, d)
		}
	}
	if res.Report.ClusterGUID != "test-guid" || res.Report.Version != "v3.32.1" || res.Report.ClusterInfoRevision == "" {
		t.Errorf("report header = %+v", res.Report)
	}
	if uid := *res.LeakedHandles[0].UID; uid == "" {
		t.Error("leaked handle has no UID")
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf, ProblemIPs); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Found 4 IPs that are allocated in IPAM but not actually in use.",
		"  10.10.0.3 leaked; attrs Main:k8s-pod-network.app.gone Extra:namespace=app,node=n1,pod=gone,timestamp=2026-11-29 10:00:00.000 +0000 UTC",
		"  10.10.0.100 in use by Workload(app/unallocated) and in active IPAM pool but has no IPAM allocation.",
		"Found 1 handles with no matching IPs (and 13 handles with matches).",
		"Check complete; found 9 problems.",
	} {
		if !strings.Contains(buf.String(), line+"\n") {
			t.Errorf("text output lacks %q:\n%s", line, buf.String())
		}
	}
}

// TestReleaseReverifies: ReleaseIPs keeps addresses that became used after the check, and
// never releases pending or in-use allocations even when asked to.
func TestReleaseReverifies(t *testing.T) {
	w := problemWorld(t)
	ctx := t.Context()
	res, err := w.cl.Check(ctx, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// After the check: a pod shows up with leaked address 10.10.0.3, and the pod the
	// attributes of fd00:10::2 name appears (its CNI ADD is in flight).
	w.pod("app", "late", "n1", []string{"10.10.0.3"}, nil)
	w.pod("app", "gone6", "n1", nil, nil)
	// Ask for more than the leaks: the pending allocation and an in-use one.
	ask := append(append([]Allocation{}, res.LeakedIPs...), res.Pending...)
	for _, a := range res.Allocations {
		if a.IP == "10.10.0.2" || a.IP == "10.10.0.7" {
			ask = append(ask, a)
		}
	}
	rel, err := w.cl.ReleaseIPs(ctx, ask, ReleaseOptions{Handles: res.LeakedHandles, HandleGracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	skipped := map[string]string{}
	for _, s := range rel.Skipped {
		skipped[s.IP] = s.Reason
	}
	if d := cmp.Diff([]string{"10.10.0.5", "10.10.0.6"}, ips(rel.Released)); d != "" {
		t.Errorf("released (-want +got):\n%s", d)
	}
	for ip, want := range map[string]string{
		"10.10.0.3":  "in use by Workload(app/late)",
		"fd00:10::2": "pod app/gone6 exists and has no IP yet",
		"10.10.0.4":  "pod app/starting exists and has no IP yet",
		"10.10.0.2":  "in use by Workload(app/running)",
		"10.10.0.7":  "reserved for Windows",
	} {
		if !strings.Contains(skipped[ip], want) {
			t.Errorf("skip reason of %s = %q, want %q", ip, skipped[ip], want)
		}
	}
	if rel.HandlesDeleted != 3 || rel.BlockWrites != 1 || rel.HandleWrites != 3 {
		t.Errorf("handles deleted %d, block writes %d, handle writes %d; want 3 (2 released + 1 leaked), 1, 3",
			rel.HandlesDeleted, rel.BlockWrites, rel.HandleWrites)
	}
	blockInvariants(t, w.cl, "10-10-0-128-26")
	if _, err := w.cl.res(resHandles).Get(ctx, "leaked-handle", metav1.GetOptions{}); !isNotFound(err) {
		t.Errorf("leaked handle still there: %v", err)
	}
}
