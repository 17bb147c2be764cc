package actions

import (
	"context"
	"fmt"
	"strings"

	"github.com/whypending/whypending/calico"
)

// planLeakedIPs fills p with the leaked IPs a fresh check finds.
func (r *Runner) planLeakedIPs(ctx context.Context, p *Plan) error {
	res, err := r.IPAM.Check(ctx, calico.CheckOptions{})
	if err != nil {
		return fmt.Errorf("check calico ipam: %w", err)
	}
	for _, a := range res.LeakedIPs {
		if p.inScope(a.Node) {
			p.Items = append(p.Items, itemOf(a))
		}
	}
	p.Total = len(p.Items)
	p.Basis = "ClusterInformation rv " + res.Report.ClusterInfoRevision
	return nil
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

// releaseLeakedIPs re-checks and releases the planned IPs that are still leaked with the same
// handle and sequence number.
func (r *Runner) releaseLeakedIPs(ctx context.Context, p Plan, res *Result) error {
	check, err := r.IPAM.Check(ctx, calico.CheckOptions{})
	if err != nil {
		return fmt.Errorf("re-check calico ipam: %w", err)
	}
	leaked := map[string]calico.Allocation{}
	for _, a := range check.LeakedIPs {
		leaked[a.IP] = a
	}
	all := map[string]calico.Allocation{}
	for _, a := range check.Allocations {
		all[a.IP] = a
	}
	planned := map[string]bool{}
	var release []calico.Allocation
	for _, it := range p.Items {
		planned[it.Target] = true
		cur, isLeaked := leaked[it.Target]
		switch {
		case !isLeaked:
			res.Skipped = append(res.Skipped, Skip{Target: it.Target, Reason: whyNotLeaked(all, it.Target)})
		case cur.Handle != it.Handle || seq(cur) != it.SequenceNumber:
			res.Skipped = append(res.Skipped, Skip{Target: it.Target, Reason: "re-allocated since the plan (handle or sequence number changed)"})
		default:
			release = append(release, cur)
		}
	}
	for ip, a := range leaked {
		if !planned[ip] && p.inScope(a.Node) {
			res.NewSince++
		}
	}
	if len(release) == 0 {
		return nil
	}
	rr, err := r.IPAM.ReleaseIPs(ctx, release, calico.ReleaseOptions{})
	if rr != nil {
		res.Done = len(rr.Released)
		for _, s := range rr.Skipped {
			res.Skipped = append(res.Skipped, Skip{Target: s.IP, Reason: s.Reason})
		}
	}
	if err != nil {
		return fmt.Errorf("release ips: %w", err)
	}
	return nil
}

// whyNotLeaked says why a planned IP is no longer leaked.
func whyNotLeaked(all map[string]calico.Allocation, ip string) string {
	a, ok := all[ip]
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

func seq(a calico.Allocation) uint64 {
	if a.SequenceNumber == nil {
		return 0
	}
	return *a.SequenceNumber
}

// countLeaked is the verification: how many leaked IPs in the plan's scope a fresh check
// finds (-1 on error).
func (r *Runner) countLeaked(ctx context.Context, p Plan) int {
	res, err := r.IPAM.Check(ctx, calico.CheckOptions{})
	if err != nil {
		return -1
	}
	n := 0
	for _, a := range res.LeakedIPs {
		if p.inScope(a.Node) {
			n++
		}
	}
	return n
}
