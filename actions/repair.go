package actions

import (
	"context"
	"fmt"

	"github.com/whypending/whypending/calico"
)

// repair is one Kind: what it is called, and how it sees the cluster. Each kind is one type in
// its own file (release_ips.go, release_blocks.go, release_handles.go, unlock.go), listed once
// in registry. The Runner does everything else the same way for every kind: the plan's ID,
// cap and fingerprint; the approval and cluster checks; the datastore lock; comparing the plan
// with a fresh read (compare); the check afterwards; Recover.
type repair interface {
	// verb is the kind as an imperative phrase with a count (Kind.Verb).
	verb(n int) string
	// destructive reports whether running the kind deletes or frees something
	// (Kind.Destructive).
	destructive() bool
	// locks reports whether Execute holds the datastore lock around the fresh read and the
	// writes (when Runner.LockPolicy asks for it).
	locks() bool
	// writes are the verbs apply sends on Calico resources, each at most once (Runner.Access;
	// the chart's remediation grants are their union).
	writes() []Write
	// validate refuses a plan whose scope the kind cannot honour, before anything is read.
	validate(p Plan) error
	// read reads the cluster as the kind sees it, through rd.
	read(ctx context.Context, r *Runner, rd *reads) (view, error)
}

// view is the cluster as one kind saw it in one read.
// cautioned is a view whose plan must warn its reviewer (Plan.Warning) and may need a second
// person's approval (Plan.SecondApprover).
type cautioned interface {
	caution(r *Runner) (warning string, secondApprover bool)
}

type view interface {
	// items are what a plan made now in p's scope would change, sorted by Target.
	items(p Plan) []Item
	// excluded are the candidates in p's scope that a plan made now leaves out, and why
	// (Plan.Excluded).
	excluded(p Plan) []Skip
	// basis describes the state read (Plan.Basis).
	basis() string
	// still reports whether the planned item it is still exactly as planned; if not, why
	// (the Skip reason).
	still(p Plan, it Item) (ok bool, why string)
	// apply changes the planned items that are still as planned, and adds what it did and
	// what it left alone to res.
	apply(ctx context.Context, r *Runner, p Plan, items []Item, res *Result) error
}

// registry lists every kind, in the order of Kinds.
var registry = []struct {
	kind Kind
	repair
}{
	{KindReleaseLeakedIPs, leakedIPs{}},
	{KindReleaseEmptyBlocks, emptyBlocks{}},
	{KindUnlockDatastore, unlockDatastore{}},
	{KindReleaseLeakedHandles, leakedHandles{}},
}

// Kinds lists every kind in a fixed order.
var Kinds = func() []Kind {
	out := make([]Kind, len(registry))
	for i, e := range registry {
		out[i] = e.kind
	}
	return out
}()

// repairOf returns the repair of kind, or ErrUnknownKind.
func repairOf(kind Kind) (repair, error) {
	for _, e := range registry {
		if e.kind == kind {
			return e.repair, nil
		}
	}
	return nil, fmt.Errorf("%q: %w", kind, ErrUnknownKind)
}

// compare is the plan-versus-now loop every kind shares: it returns the planned items that v
// finds still as planned, adds the others to res.Skipped with the reason, and counts in
// res.NewSince the items v finds eligible in p's scope that the plan does not hold.
func compare(p Plan, v view, res *Result) []Item {
	planned := make(map[string]bool, len(p.Items))
	var keep []Item
	for _, it := range p.Items {
		planned[it.Target] = true
		if ok, why := v.still(p, it); ok {
			keep = append(keep, it)
		} else {
			res.Skipped = append(res.Skipped, Skip{Target: it.Target, Reason: why})
		}
	}
	for _, it := range v.items(p) {
		if !planned[it.Target] {
			res.NewSince++
		}
	}
	return keep
}

// reads are the reads of one step (a plan, the fresh read before the writes, the check
// afterwards), each made at most once: the kinds that one step runs share them (the CLI's
// release-ips plans and executes leaked IPs and leaked handles from one check). A step may
// start from reads its caller already made (PlanOptions.Check, Recover's lock status).
type reads struct {
	ipam IPAM
	// again marks the fresh read before the writes, in error messages ("re-check").
	again bool
	// report, when set, is the calicoctl-schema report a plan takes its candidates from.
	report *calico.Report

	check    *calico.CheckResult
	checkErr error
	util     *calico.Utilization
	utilErr  error
	lock     *calico.LockStatus
	lockErr  error
}

// Check is an IPAM check, read once per step.
func (rd *reads) Check(ctx context.Context) (*calico.CheckResult, error) {
	if rd.check == nil && rd.checkErr == nil {
		if rd.check, rd.checkErr = rd.ipam.Check(ctx, calico.CheckOptions{}); rd.checkErr != nil {
			rd.checkErr = fmt.Errorf("%s calico ipam: %w", rd.verb("check", "re-check"), rd.checkErr)
		}
	}
	return rd.check, rd.checkErr
}

// Utilization is the IPAM utilization, read once per step.
func (rd *reads) Utilization(ctx context.Context) (*calico.Utilization, error) {
	if rd.util == nil && rd.utilErr == nil {
		if rd.util, rd.utilErr = rd.ipam.Utilization(ctx); rd.utilErr != nil {
			rd.utilErr = fmt.Errorf("%s calico ipam utilization: %w", rd.verb("read", "re-read"), rd.utilErr)
		}
	}
	return rd.util, rd.utilErr
}

// LockStatus is the datastore lock, read once per step.
func (rd *reads) LockStatus(ctx context.Context) (*calico.LockStatus, error) {
	if rd.lock == nil && rd.lockErr == nil {
		if rd.lock, rd.lockErr = rd.ipam.LockStatus(ctx); rd.lockErr != nil {
			rd.lockErr = fmt.Errorf("read calico datastore lock: %w", rd.lockErr)
		}
	}
	return rd.lock, rd.lockErr
}

func (rd *reads) verb(first, again string) string {
	if rd.again {
		return again
	}
	return first
}
