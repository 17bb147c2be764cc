package calico

import (
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBlockAndAffinityNames(t *testing.T) {
	tests := []struct {
		cidr, node, block, affinity string
	}{
		{"172.24.10.64/26", "worker-1", "172-24-10-64-26", "worker-1-172-24-10-64-26"},
		{"10.0.0.0/26", "node-1", "10-0-0-0-26", "node-1-10-0-0-0-26"},
		{"fd00:10:244::/122", "w", "fd00-10-244---122", "w-fd00-10-244---122"},
		{"172.24.10.70/26", "n", "172-24-10-64-26", "n-172-24-10-64-26"}, // masked
	}
	for _, tt := range tests {
		p := netip.MustParsePrefix(tt.cidr)
		if got := BlockName(p); got != tt.block {
			t.Errorf("BlockName(%s) = %q, want %q", tt.cidr, got, tt.block)
		}
		if got := AffinityName(tt.node, p); got != tt.affinity {
			t.Errorf("AffinityName(%s, %s) = %q, want %q", tt.node, tt.cidr, got, tt.affinity)
		}
	}
}

func TestAffinityNameTruncatesLongNodes(t *testing.T) {
	node := strings.Repeat("n", 260)
	p := netip.MustParsePrefix("10.0.0.0/26")
	got := AffinityName(node, p)
	if len(got) != 252 {
		t.Errorf("len(AffinityName(long)) = %d, want 252", len(got))
	}
	// Calico keeps 252-len(cidr name)-13 node characters, then "-<cidr name>-<11 hex>".
	wantPrefix := strings.Repeat("n", 252-len("10-0-0-0-26")-13) + "-10-0-0-0-26-"
	if !strings.HasPrefix(got, wantPrefix) {
		t.Errorf("AffinityName(long) = %q, want prefix %q", got, wantPrefix)
	}
	if got == AffinityName(strings.Repeat("n", 261), p) {
		t.Error("different long nodes gave the same name")
	}
}

func TestConvertUID(t *testing.T) {
	const uid = "3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b"
	got, err := ConvertUID(uid)
	if err != nil {
		t.Fatal(err)
	}
	// Bytes 6 (0x4f, version) and 8 (0x8a, variant) stay; the others are bit-reversed
	// (0x3f -> 0xfc, 0x1c -> 0x38, ...).
	if want := "fc38d452-ba76-4f0e-8ad9-30b874fc52da"; got != want {
		t.Errorf("ConvertUID(%s) = %s, want %s", uid, got, want)
	}
	back, _ := ConvertUID(got)
	if back != uid {
		t.Errorf("ConvertUID is not its own inverse: %s -> %s -> %s", uid, got, back)
	}
	if _, err := ConvertUID("not-a-uid"); err == nil {
		t.Error("ConvertUID(bad) succeeded")
	}
}

func TestOrdinalIPRoundTrip(t *testing.T) {
	tests := []struct {
		cidr string
		ord  int
		ip   string
	}{
		{"10.0.0.0/26", 0, "10.0.0.0"},
		{"10.0.0.0/26", 63, "10.0.0.63"},
		{"10.0.0.192/26", 5, "10.0.0.197"},
		{"10.0.255.0/24", 255, "10.0.255.255"},
		{"10.1.0.0/20", 300, "10.1.1.44"},
		{"fd00::ff00/120", 255, "fd00::ffff"},
		{"fd00::/122", 17, "fd00::11"},
	}
	for _, tt := range tests {
		p := netip.MustParsePrefix(tt.cidr)
		if got := ordinalIP(p, tt.ord).String(); got != tt.ip {
			t.Errorf("ordinalIP(%s, %d) = %s, want %s", tt.cidr, tt.ord, got, tt.ip)
		}
		if got := ipOrdinal(p, netip.MustParseAddr(tt.ip)); got != tt.ord {
			t.Errorf("ipOrdinal(%s, %s) = %d, want %d", tt.cidr, tt.ip, got, tt.ord)
		}
	}
	if got := ipOrdinal(netip.MustParsePrefix("10.0.0.0/26"), netip.MustParseAddr("10.0.0.64")); got != -1 {
		t.Errorf("ipOrdinal(outside) = %d, want -1", got)
	}
	if got := blockSize(netip.MustParsePrefix("10.0.0.0/26")); got != 64 {
		t.Errorf("blockSize(/26) = %d, want 64", got)
	}
	if got := blockSize(netip.MustParsePrefix("fd00::/122")); got != 64 {
		t.Errorf("blockSize(/122) = %d, want 64", got)
	}
}

func TestParseIP(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1": "10.0.0.1", "10.0.0.1/32": "10.0.0.1", " 10.0.0.1 ": "10.0.0.1",
		"::ffff:10.0.0.1": "10.0.0.1", "fd00::1/128": "fd00::1", "fd00:0::1": "fd00::1",
	} {
		got, ok := parseIP(in)
		if !ok || got.String() != want {
			t.Errorf("parseIP(%q) = %v, %t; want %s", in, got, ok, want)
		}
	}
	if _, ok := parseIP("nope"); ok {
		t.Error("parseIP(nope) succeeded")
	}
}

func TestPickGroup(t *testing.T) {
	groups := func(names ...string) *metav1.APIGroupList {
		l := &metav1.APIGroupList{}
		for _, n := range names {
			l.Groups = append(l.Groups, metav1.APIGroup{Name: n})
		}
		return l
	}
	tests := []struct {
		served []string
		want   string
	}{
		{[]string{"apps", "crd.projectcalico.org"}, "crd.projectcalico.org/v1"},
		{[]string{"projectcalico.org", "crd.projectcalico.org"}, "crd.projectcalico.org/v1"}, // aggregated API server + v1 storage
		{[]string{"projectcalico.org"}, "projectcalico.org/v3"},
		{[]string{"apps"}, ""},
	}
	for _, tt := range tests {
		g, v, err := pickGroup(groups(tt.served...))
		got := g + "/" + v
		if err != nil {
			got = ""
		}
		if got != tt.want {
			t.Errorf("pickGroup(%v) = %q, want %q", tt.served, got, tt.want)
		}
	}
}
