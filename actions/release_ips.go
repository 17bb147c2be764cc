package actions

import (
	"context"
	"fmt"
	"strings"

	"github.com/whypending/whypending/calico"
)

// leakedIPs is KindReleaseLeakedIPs: release the allocations a check finds leaked, each only
// while it carries the handle and sequence number the plan saw.
type leakedIPs struct{}

func (leakedIPs) verb(n int) string {
	return fmt.Sprintf("release %d leaked %s", n, plural(n, "IP", "IPs"))
}
func (leakedIPs) destructive() bool { return true }
func (leakedIPs) locks() bool       { return true }

// writes: the block's allocation cleared, and the handle decremented or deleted.
func (leakedIPs) writes() []Write {
	return []Write{{"update", calico.ResourceBlocks}, {"update", calico.ResourceHandles}, {"delete", calico.ResourceHandles}}
}

func (leakedIPs) validate(p Plan) error {
	if len(p.Blocks) > 0 || p.AllowLastBlock {
		return fmt.Errorf("plan %s: blocks and the last block apply to %s only", p.Kind, KindReleaseEmptyBlocks)
	}
	return nil
}

func (leakedIPs) read(ctx context.Context, _ *Runner, rd *reads) (view, error) {
	if rep := rd.report; rep != nil {
		return &ipsView{leaked: rep.Leaked(), basisOf: "report of ClusterInformation rv " + rep.ClusterInfoRevision}, nil
	}
	check, err := rd.Check(ctx)
	if err != nil {
		return nil, err
	}
	return &ipsView{leaked: check.LeakedIPs, all: check.Allocations, basisOf: "ClusterInformation rv " + check.Report.ClusterInfoRevision}, nil
}

// ipsView is a check's leaked allocations (or a report's). The maps by IP are built on first
// use: a plan needs none of them.
type ipsView struct {
	leaked  []calico.Allocation // sorted by IP
	all     []calico.Allocation // every allocation (nil for a report)
	basisOf string

	leakedByIP, allByIP map[string]*calico.Allocation
}

func (v *ipsView) items(p Plan) []Item {
	var out []Item
	for _, a := range v.leaked {
		if p.inScope(a.Node) {
			out = append(out, itemOf(a))
		}
	}
	return out
}

func (*ipsView) excluded(Plan) []Skip { return nil }
func (v *ipsView) basis() string      { return v.basisOf }

// leakedIP returns the leaked allocation of ip, if any.
func (v *ipsView) leakedIP(ip string) (calico.Allocation, bool) {
	if v.leakedByIP == nil {
		v.leakedByIP = byIP(v.leaked)
	}
	a, ok := v.leakedByIP[ip]
	if !ok {
		return calico.Allocation{}, false
	}
	return *a, true
}

func byIP(allocs []calico.Allocation) map[string]*calico.Allocation {
	m := make(map[string]*calico.Allocation, len(allocs))
	for i := range allocs {
		m[allocs[i].IP] = &allocs[i]
	}
	return m
}

func (v *ipsView) still(_ Plan, it Item) (bool, string) {
	cur, ok := v.leakedIP(it.Target)
	switch {
	case !ok:
		return false, v.whyNotLeaked(it.Target)
	case cur.Handle != it.Handle || seq(cur) != it.SequenceNumber:
		return false, "re-allocated since the plan (handle or sequence number changed)"
	}
	return true, ""
}

// apply releases the items' current allocations. calico.Client.ReleaseIPs checks each
// allocation's handle and sequence number again, keeps every address of a handle together and
// re-reads the pods and nodes that could use an address right before each block write.
func (v *ipsView) apply(ctx context.Context, r *Runner, _ Plan, items []Item, res *Result) error {
	release := make([]calico.Allocation, 0, len(items))
	for _, it := range items {
		a, _ := v.leakedIP(it.Target)
		release = append(release, a)
	}
	rr, err := r.IPAM.ReleaseIPs(ctx, release, calico.ReleaseOptions{})
	if rr != nil {
		res.Done = len(rr.Released)
		res.Unconfirmed = len(rr.Unconfirmed)
		for _, s := range rr.Skipped {
			res.Skipped = append(res.Skipped, Skip{Target: s.IP, Reason: s.Reason})
		}
		for _, s := range rr.HandleErrors {
			res.Leftovers = append(res.Leftovers, Skip{Target: s.ID, Reason: "not decremented after its block write (" + s.Reason + "); the next check reports it as a leaked handle"})
		}
		res.Writes.add(rr)
	}
	if err != nil {
		return fmt.Errorf("release ips: %w", err)
	}
	return nil
}

// whyNotLeaked says why a planned IP is no longer leaked.
func (v *ipsView) whyNotLeaked(ip string) string {
	if v.allByIP == nil {
		v.allByIP = byIP(v.all)
	}
	a, ok := v.allByIP[ip]
	switch {
	case !ok:
		return "already released"
	case a.InUse && len(a.Owners) > 0:
		return "now in use by " + strings.Join(a.Owners, ", ")
	case a.InUse:
		return "now in use"
	case a.CoolingDown:
		return "cooling down"
	}
	return "a pod is being given this address (CNI ADD in flight)"
}

// itemOf turns a leaked allocation into a plan item.
func itemOf(a calico.Allocation) Item {
	it := Item{Target: a.IP, Node: a.Node, Handle: a.Handle, Block: a.Block}
	if a.SequenceNumber != nil {
		it.SequenceNumber = *a.SequenceNumber
	}
	switch {
	case a.Pod != "":
		it.Owner = a.Namespace + "/" + a.Pod
	case a.Type != "":
		it.Owner = a.Type
	}
	return it
}

func seq(a calico.Allocation) uint64 {
	if a.SequenceNumber == nil {
		return 0
	}
	return *a.SequenceNumber
}
