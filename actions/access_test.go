package actions

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/calico"
)

// TestAccess lists what a person must be allowed before a repair is planned or approved for
// them: each kind's writes, in the cluster's Calico group, and the datastore lock's
// ClusterInformation update when the runner takes the lock.
func TestAccess(t *testing.T) {
	t.Setenv("CALICO_API_GROUP", "projectcalico.org/v3")
	ipam, err := calico.NewClient(t.Context(), &rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	perm := func(verb, resource string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: "projectcalico.org", Resource: resource}
	}
	lock := perm("update", "clusterinformations")
	tests := []struct {
		kind   Kind
		policy LockPolicy
		want   []authorizationv1.ResourceAttributes
	}{
		{KindReleaseLeakedIPs, LockAlways, []authorizationv1.ResourceAttributes{perm("update", "ipamblocks"), perm("update", "ipamhandles"), perm("delete", "ipamhandles"), lock}},
		{KindReleaseLeakedIPs, LockNever, []authorizationv1.ResourceAttributes{perm("update", "ipamblocks"), perm("update", "ipamhandles"), perm("delete", "ipamhandles")}},
		{KindReleaseEmptyBlocks, LockAlways, []authorizationv1.ResourceAttributes{perm("update", "blockaffinities"), perm("delete", "blockaffinities"), perm("update", "ipamblocks"), perm("delete", "ipamblocks"), lock}},
		{KindReleaseLeakedHandles, LockNever, []authorizationv1.ResourceAttributes{perm("delete", "ipamhandles")}},
		{KindUnlockDatastore, LockNever, []authorizationv1.ResourceAttributes{lock}},
		{KindUnlockDatastore, LockAlways, []authorizationv1.ResourceAttributes{lock}},
	}
	for _, tt := range tests {
		got, err := (&Runner{IPAM: ipam, LockPolicy: tt.policy}).Access(tt.kind)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s with lock %s (-want +got):\n%s", tt.kind, tt.policy, diff)
		}
	}
	if _, err := (&Runner{IPAM: ipam}).Access("release-everything"); err == nil {
		t.Error("Access of an unknown kind: want an error")
	}
}
