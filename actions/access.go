package actions

import (
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/whypending/whypending/calico"
)

// Write is one verb a repair's apply sends on one Calico resource (cluster-scoped, in the
// group the cluster serves Calico in).
type Write struct {
	Verb, Resource string
}

// lockWrite is what taking and releasing the datastore lock sends (ClusterInformation
// datastoreReady).
var lockWrite = Write{Verb: "update", Resource: calico.ResourceClusterInfo}

// Access lists the permissions an execution of kind on this runner uses, as the API server
// authorizes them: the kind's writes (its repair in registry) and, when the runner takes the
// datastore lock for kind (LockPolicy and the kind's locks), the ClusterInformation update
// of the lock. Each is cluster-scoped, in the Calico API group of r.IPAM. The bot asks the
// API server whether a person may do each of these (a SubjectAccessReview, bot/authz) before
// it plans a repair for them or counts their approval; the writes themselves are still made
// with the bot's own credentials.
func (r *Runner) Access(kind Kind) ([]authorizationv1.ResourceAttributes, error) {
	rp, err := repairOf(kind)
	if err != nil {
		return nil, err
	}
	writes := rp.writes()
	if rp.locks() && r.LockPolicy != LockNever && !slices.Contains(writes, lockWrite) {
		writes = append(writes, lockWrite)
	}
	group, _, _ := strings.Cut(r.IPAM.APIGroup(), "/")
	out := make([]authorizationv1.ResourceAttributes, len(writes))
	for i, w := range writes {
		out[i] = authorizationv1.ResourceAttributes{Verb: w.Verb, Group: group, Resource: w.Resource}
	}
	return out, nil
}
