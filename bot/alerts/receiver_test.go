package alerts

import (
	"slices"
	"testing"
	"time"

	"github.com/whypending/whypending/ledger"
)

// TestUnposted: a thread waits (Options.WaitCluster) only for the clusters of the diagnosis
// replies it still has to post, each once, the default cluster as "".
func TestUnposted(t *testing.T) {
	start := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	alert := func(fp, cluster string) alertState {
		return alertState{Fingerprint: fp, StartsAt: start, Status: "firing",
			Object: &Object{Cluster: cluster, Namespace: "shop", Kind: "pod", Name: fp}}
	}
	noObject := alertState{Fingerprint: "fp-none", StartsAt: start, Status: "firing"}
	prod, prod2, dflt, east := alert("fp-prod", "prod"), alert("fp-prod-2", "prod"), alert("fp-default", ""), alert("fp-east", "east")
	g := group{Alerts: []alertState{prod, prod2, dflt, east, noObject}, Replies: []reply{
		{Key: "d-prod", Alert: prod.id()},
		{Key: "d-prod-2", Alert: prod2.id()},
		{Key: "d-default", Alert: dflt.id()},
		{Key: "d-east", Alert: east.id()},
		{Key: "d-none", Alert: noObject.id()},
		{Key: "c1", Text: "fp-east resolved"},
	}}
	tests := []struct {
		name   string
		posted []string
		want   []string
	}{
		{"nothing posted: every cluster named, once", nil, []string{"prod", "", "east"}},
		{"a cluster whose replies are all posted is not waited for", []string{"d-prod", "d-prod-2"}, []string{"", "east"}},
		{"one reply of a cluster left: still waited for", []string{"d-prod"}, []string{"prod", "", "east"}},
		{"every diagnosis posted: no wait", []string{"d-prod", "d-prod-2", "d-default", "d-east"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &ledger.Entry{Messages: map[string]ledger.Posted{}}
			if err := e.SetData(g); err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.posted {
				e.Messages[k] = ledger.Posted{At: start}
			}
			if got := unposted(e); !slices.Equal(got, tt.want) {
				t.Errorf("unposted = %q, want %q", got, tt.want)
			}
		})
	}
}
