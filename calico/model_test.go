package calico

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// testBlockJSON is a /29 block: ordinals 0-3 allocated to handles h0 (0,1), h1 (2) and the
// Windows reservation (3); 4-7 free.
const testBlockJSON = `{
 "apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMBlock",
 "metadata": {"name": "10-0-0-0-29", "resourceVersion": "7", "annotations": {"keep": "me"}},
 "spec": {
  "cidr": "10.0.0.0/29", "affinity": "host:n1", "strictAffinity": false,
  "allocations": [0, 0, 1, 2, null, null, null, null],
  "unallocated": [5, 4, 7, 6],
  "attributes": [
   {"handle_id": "h0", "secondary": {"node": "n1", "namespace": "ns", "pod": "p0"}},
   {"handle_id": "h1", "secondary": {"node": "n2", "namespace": "ns", "pod": "p1"}, "alternateOwnerAttrs": {"x": "y"}},
   {"handle_id": "windows-reserved-ipam-handle", "secondary": {"note": "windows host rsvd"}}
  ],
  "sequenceNumber": 1717000000000000100,
  "sequenceNumberForAllocation": {"0": 1717000000000000001, "1": 1717000000000000002, "2": 1717000000000000003, "3": 1717000000000000000},
  "futureField": {"a": 1}
 }
}`

func testBlock(t *testing.T) (*block, *unstructured.Unstructured) {
	t.Helper()
	var o blockObject
	if err := json.Unmarshal([]byte(testBlockJSON), &o); err != nil {
		t.Fatal(err)
	}
	b, err := o.parse()
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(testBlockJSON)); err != nil {
		t.Fatal(err)
	}
	return b, u
}

func reparse(t *testing.T, u *unstructured.Unstructured) *block {
	t.Helper()
	raw, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var o blockObject
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	b, err := o.parse()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBlockModel(t *testing.T) {
	b, _ := testBlock(t)
	if p := b.validate(); len(p) != 0 {
		t.Errorf("validate() = %v, want none", p)
	}
	if got := b.affineNode(); got != "n1" {
		t.Errorf("affineNode() = %q", got)
	}
	alloc, reserved := b.counts()
	if alloc != 4 || reserved != 1 {
		t.Errorf("counts() = %d, %d; want 4, 1", alloc, reserved)
	}
	if b.reservedOnly() {
		t.Error("reservedOnly() = true for a block with pods")
	}
	var got []string
	handles := map[string]bool{}
	for _, a := range appendAllocations(nil, b, handles) {
		got = append(got, fmt.Sprintf("%s %s %d %s inUse=%t borrowed=%t %v", a.IP, a.Handle, *a.SequenceNumber, a.Node, a.InUse, a.Borrowed, a.Owners))
	}
	want := []string{
		"10.0.0.0 h0 1717000000000000001 n1 inUse=false borrowed=false []",
		"10.0.0.1 h0 1717000000000000002 n1 inUse=false borrowed=false []",
		"10.0.0.2 h1 1717000000000000003 n2 inUse=false borrowed=true []",
		"10.0.0.3  1717000000000000000 n1 inUse=true borrowed=false [Reserved for Windows]",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("allocations (-want +got):\n%s", d)
	}
	if !handles["h0"] || !handles["h1"] || len(handles) != 2 {
		t.Errorf("handles = %v, want h0 and h1 (not the Windows reservation)", handles)
	}
}

func TestValidateFindsBrokenInvariants(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*blockSpec)
		want   string
	}{
		{"dangling attribute index", func(s *blockSpec) { s.Allocations[4] = ptr(9); s.Unallocated = []int{5, 7, 6} }, "missing attribute 9"},
		{"unreferenced attribute", func(s *blockSpec) { s.Allocations[2] = ptr(0) }, "attribute 1 is not referenced"},
		{"ordinal both allocated and free", func(s *blockSpec) { s.Unallocated = append(s.Unallocated, 0) }, "both allocated and unallocated"},
		{"duplicate free ordinal", func(s *blockSpec) { s.Unallocated = []int{5, 5, 7, 6} }, "listed twice"},
		{"lost ordinal", func(s *blockSpec) { s.Unallocated = []int{5, 7, 6} }, "3 unallocated != 8"},
		{"short allocations", func(s *blockSpec) { s.Allocations = s.Allocations[:7]; s.Unallocated = []int{5, 4, 6} }, "7 allocation entries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := testBlock(t)
			tt.mutate(b.spec)
			got := strings.Join(b.validate(), "; ")
			if !strings.Contains(got, tt.want) {
				t.Errorf("validate() = %q, want it to mention %q", got, tt.want)
			}
		})
	}
}

func TestReleaseOrdinalsKeepsInvariants(t *testing.T) {
	b, u := testBlock(t)
	// Release h0 (ordinals 0 and 1): attribute 0 goes, attributes 1 and 2 become 0 and 1.
	if err := releaseOrdinals(u.Object, []int{1, 0}); err != nil {
		t.Fatal(err)
	}
	after := reparse(t, u)
	if p := after.validate(); len(p) != 0 {
		t.Fatalf("invalid after release: %v", p)
	}
	if d := cmp.Diff([]int{5, 4, 7, 6, 1, 0}, after.spec.Unallocated); d != "" {
		t.Errorf("unallocated is not FIFO (-want +got):\n%s", d)
	}
	if after.handleOf(2) != "h1" || after.handleOf(3) != windowsReservedHandle {
		t.Errorf("renumbering broke handles: 2=%q 3=%q", after.handleOf(2), after.handleOf(3))
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "sequenceNumberForAllocation", "0"); ok {
		t.Error("sequenceNumberForAllocation[0] kept after release")
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "sequenceNumberForAllocation", "2"); !ok {
		t.Error("sequenceNumberForAllocation[2] lost in the release of 0 and 1")
	}
	if after.seqOf(2) != b.seqOf(2) {
		t.Errorf("seq of 2 changed: %d -> %d", b.seqOf(2), after.seqOf(2))
	}
	if after.spec.SequenceNumber != b.spec.SequenceNumber+1 {
		t.Errorf("sequenceNumber = %d, want %d", after.spec.SequenceNumber, b.spec.SequenceNumber+1)
	}
	// Unknown fields, annotations and int64 precision survive.
	if u.GetAnnotations()["keep"] != "me" {
		t.Error("annotation lost")
	}
	if v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "futureField", "a"); v != int64(1) {
		t.Errorf("spec.futureField.a = %v", v)
	}
	attrs, _, _ := unstructured.NestedSlice(u.Object, "spec", "attributes")
	if _, ok := attrs[0].(map[string]any)["alternateOwnerAttrs"]; !ok {
		t.Error("alternateOwnerAttrs lost")
	}
	if err := releaseOrdinals(u.Object, []int{0}); err == nil {
		t.Error("releasing a free ordinal succeeded")
	}
}

func TestPrecheck(t *testing.T) {
	b, _ := testBlock(t)
	seq := func(v uint64) *uint64 { return &v }
	tests := []struct {
		name string
		a    Allocation
		ord  int
		want string
	}{
		{"ok", Allocation{Handle: "h0", SequenceNumber: seq(1717000000000000001)}, 0, ""},
		{"ok without handle or sequence", Allocation{}, 2, ""},
		{"free", Allocation{Handle: "h0"}, 4, "not allocated"},
		{"windows", Allocation{}, 3, "reserved for Windows"},
		{"handle changed", Allocation{Handle: "other"}, 0, "handle changed"},
		{"reallocated", Allocation{Handle: "h0", SequenceNumber: seq(5)}, 0, "sequence number changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := precheck(b, &releaseTarget{Allocation: tt.a, ord: tt.ord})
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("precheck = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReportJSONShape(t *testing.T) {
	seq := uint64(42)
	uid := "fc38d452-ba76-4f0e-8ad9-30b874fc52da"
	r := &CheckResult{Report: Report{
		Version: "v3.32.1", ClusterGUID: "g", ClusterInfoRevision: "12", ClusterType: "k8s,kdd",
		Allocations: map[string][]*Allocation{
			"10.0.0.1": {{IP: "10.0.0.1", Handle: "h", SequenceNumber: &seq, Pod: "p", Namespace: "ns", Node: "n", InUse: false, Block: "10.0.0.0/26"}},
			"10.0.0.2": {{IP: "10.0.0.2", SequenceNumber: new(uint64), InUse: true, Owners: []string{"Node(n)"}}},
		},
		LeakedHandles: []HandleInfo{{ID: "h2", UID: &uid, Revision: "9"}},
	}}
	var buf bytes.Buffer
	if err := r.WriteReport(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"version": "v3.32.1", "clusterGUID": "g", "datastoreLocked": false, "clusterInformationRevision": "12", "clusterType": "k8s,kdd",
		"allocations": map[string]any{
			"10.0.0.1": []any{map[string]any{"ip": "10.0.0.1", "handle": "h", "sequenceNumber": 42.0, "pod": "p", "namespace": "ns", "node": "n", "inUse": false, "owners": nil}},
			"10.0.0.2": []any{map[string]any{"ip": "10.0.0.2", "sequenceNumber": 0.0, "inUse": true, "owners": []any{"Node(n)"}}},
		},
		"leakedHandles": []any{map[string]any{"ID": "h2", "UID": uid, "Revision": "9"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("report JSON (-want +got):\n%s", d)
	}
	rep, err := ReadReport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	leaked := rep.Leaked()
	if len(leaked) != 1 || leaked[0].IP != "10.0.0.1" || *leaked[0].SequenceNumber != 42 {
		t.Errorf("Leaked() = %+v, want 10.0.0.1 only", leaked)
	}
}

func TestPodUse(t *testing.T) {
	now := metav1.Now()
	pod := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: map[string]string{}},
			Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		mut(p)
		return p
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		ok      bool
		ips     string
		pending bool
	}{
		{"status podIPs", pod(func(p *corev1.Pod) {
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
			p.Status.PodIP = "10.0.0.1"
		}), true, "[10.0.0.1 fd00::1]", false},
		{"status podIP", pod(func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.2" }), true, "[10.0.0.2]", false},
		{"calico podIPs annotation", pod(func(p *corev1.Pod) { p.Annotations[annPodIPs] = "10.0.0.3/32,fd00::3/128" }), true, "[10.0.0.3 fd00::3]", false},
		{"calico podIP annotation", pod(func(p *corev1.Pod) { p.Annotations[annPodIP] = "10.0.0.4/32" }), true, "[10.0.0.4]", false},
		{"aws annotation", pod(func(p *corev1.Pod) { p.Annotations[annAWSIPs] = "10.0.0.5" }), true, "[10.0.0.5]", false},
		{"no address yet", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), true, "[]", true},
		{"unscheduled", pod(func(p *corev1.Pod) { p.Spec.NodeName = "" }), false, "", false},
		{"host network", pod(func(p *corev1.Pod) { p.Spec.HostNetwork = true; p.Status.PodIP = "192.168.0.1" }), false, "", false},
		{"succeeded", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded; p.Status.PodIP = "10.0.0.6" }), false, "", false},
		{"failed", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed; p.Status.PodIP = "10.0.0.6" }), false, "", false},
		{"terminating, CNI done", pod(func(p *corev1.Pod) {
			p.DeletionTimestamp = &now
			p.Annotations[annPodIP] = ""
			p.Status.PodIP = "10.0.0.7"
		}), false, "", false},
		{"terminating, CNI not done", pod(func(p *corev1.Pod) {
			p.DeletionTimestamp = &now
			p.Annotations[annPodIP] = "10.0.0.8/32"
			p.Status.PodIP = "10.0.0.8"
		}), true, "[10.0.0.8]", false},
	}
	enc := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(how string, f *podFields) {
				u, ok := podUseOf(f)
				if ok != tt.ok {
					t.Fatalf("%s: ok = %t, want %t", how, ok, tt.ok)
				}
				if ok && (fmt.Sprint(u.IPs) != tt.ips || u.Pending != tt.pending || u.Node != "n1" || u.owner() != "Workload(ns/p)") {
					t.Errorf("%s: use = %+v, want ips %s pending %t", how, u, tt.ips, tt.pending)
				}
			}
			check("typed", podFieldsOf(tt.pod))
			// The same pod through the protobuf list decoder.
			list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{Continue: "next"}, Items: []corev1.Pod{*tt.pod}}
			var buf bytes.Buffer
			if err := enc.Encode(list, &buf); err != nil {
				t.Fatal(err)
			}
			n := 0
			err := decodePodList(bytes.NewReader(buf.Bytes()), func(f *podFields) { n++; check("protobuf", f) })
			if err != nil || n != 1 {
				t.Errorf("decodePodList = %v, %d pods; want nil, 1", err, n)
			}
		})
	}
}

func TestUtilizationOf(t *testing.T) {
	aff := func(node, cidr, state string) affinityObject {
		var a affinityObject
		a.Metadata.Name = AffinityName(node, netip.MustParsePrefix(cidr))
		a.Spec.Node, a.Spec.CIDR, a.Spec.State, a.Spec.Type = node, cidr, state, "host"
		return a
	}
	pools := []PoolUsage{{Name: "p", CIDR: netip.MustParsePrefix("10.0.0.0/24"), BlockSize: 26, Total: 256}}
	blocks := []BlockUsage{
		{Name: "b1", CIDR: netip.MustParsePrefix("10.0.0.64/26"), Node: "n1", Total: 64, InUse: 0, Free: 64, Empty: true},
		{Name: "b0", CIDR: netip.MustParsePrefix("10.0.0.0/26"), Node: "n1", Total: 64, InUse: 64},
		{Name: "b2", CIDR: netip.MustParsePrefix("10.0.0.128/26"), Node: "n2", Total: 64, InUse: 3, Reserved: 3, Free: 61, Empty: true},
		{Name: "o", CIDR: netip.MustParsePrefix("192.168.0.0/26"), Total: 64, InUse: 1, Free: 63},
	}
	affs := []affinityObject{aff("n1", "10.0.0.0/26", "confirmed"), aff("n1", "10.0.0.64/26", "confirmed"),
		aff("n2", "10.0.0.128/26", "confirmed"), aff("n3", "10.0.0.192/26", "pendingDeletion")}
	cfg := &ipamConfigObject{}
	cfg.Spec.StrictAffinity, cfg.Spec.MaxBlocksPerHost = true, 4
	u := utilizationOf(pools, blocks, affs, cfg)
	if u.MaxBlocksPerHost != 4 || !u.StrictAffinity || !u.AutoAllocateBlocks {
		t.Errorf("config = %d %t %t", u.MaxBlocksPerHost, u.StrictAffinity, u.AutoAllocateBlocks)
	}
	if d := cmp.Diff(map[string]int{"n1": 2, "n2": 1}, u.NodeBlocks); d != "" {
		t.Errorf("NodeBlocks (-want +got):\n%s", d)
	}
	var empty []string
	for _, b := range u.EmptyBlocks {
		empty = append(empty, fmt.Sprintf("%s %s last=%t", b.CIDR, b.Node, b.LastAffineBlock))
	}
	if d := cmp.Diff([]string{"10.0.0.64/26 n1 last=false", "10.0.0.128/26 n2 last=true"}, empty); d != "" {
		t.Errorf("EmptyBlocks (-want +got):\n%s", d)
	}
	if len(u.Pools) != 2 || u.Pools[0].InUse != 67 || u.Pools[0].Free != 189 || u.Pools[1].Name != "orphaned" {
		t.Errorf("pools = %+v", u.Pools)
	}
	if len(u.Affinities) != 1 || u.Affinities[0].Node != "n3" || u.Affinities[0].BlockExists {
		t.Errorf("affinity problems = %+v", u.Affinities)
	}
	if cfg.Spec.MaxBlocksPerHost = 0; utilizationOf(nil, nil, nil, cfg).MaxBlocksPerHost != 20 {
		t.Error("maxBlocksPerHost 0 is not 20")
	}
	var buf bytes.Buffer
	if err := u.WriteText(&buf, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| IP Pool  | 10.0.0.0/24    |", "67 (26%)", "10.0.0.128/26 on n2 (the node's last affine block)", "| n1   | 2/4 "} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestMinAllocationAge(t *testing.T) {
	now := time.Now().UTC()
	for in, ok := range map[string]bool{
		now.String():                              true, // Go's time.Time.String(), as the CNI writes it
		"2025-06-01 07:00:00.000 +0000 UTC":       true,
		"2026-01-02 03:04:05.123456789 +0000 UTC": true,
		"":          false,
		"yesterday": false,
	} {
		if _, got := parseAllocationTime(in); got != ok {
			t.Errorf("parseAllocationTime(%q) ok = %t, want %t", in, got, ok)
		}
	}
	b, _ := testBlock(t)
	b.spec.Attributes[0].Secondary.Timestamp = now.Add(-10 * time.Second).String()
	r := &releaser{minAge: time.Minute}
	if got := r.precheck(b, &releaseTarget{ord: 0}); !strings.Contains(got, "less than the minimum age") {
		t.Errorf("young allocation: precheck = %q", got)
	}
	r.minAge = 5 * time.Second
	if got := r.precheck(b, &releaseTarget{ord: 0}); got != "" {
		t.Errorf("old enough allocation: precheck = %q", got)
	}
}

// TestDecodeMetadataList decodes a protobuf PartialObjectMetadataList the way the API server
// writes one for a metadata-only list: name, UID, resourceVersion and creation time survive,
// managedFields are skipped.
func TestDecodeMetadataList(t *testing.T) {
	sch := runtime.NewScheme()
	metav1.AddMetaToScheme(sch)
	created := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}}
	for i := range 3 {
		list.Items = append(list.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("k8s-pod-network.%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)), ResourceVersion: fmt.Sprint(100 + i),
			CreationTimestamp: metav1.NewTime(created.Add(time.Duration(i) * time.Second)),
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "calico", Operation: metav1.ManagedFieldsOperationUpdate}},
		}})
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(sch, sch).Encode(list, &buf); err != nil {
		t.Fatal(err)
	}
	var got []string
	_, err := decodeMetadataList(bytes.NewReader(buf.Bytes()), func(o *objectMetaFields) {
		got = append(got, fmt.Sprintf("%s %s %s %s", o.name, o.uid, o.resourceVersion, o.created.UTC().Format(time.RFC3339)))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"k8s-pod-network.0 uid-0 100 2026-11-30T10:00:00Z",
		"k8s-pod-network.1 uid-1 101 2026-11-30T10:00:01Z",
		"k8s-pod-network.2 uid-2 102 2026-11-30T10:00:02Z",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("decodeMetadataList (-want +got):\n%s", d)
	}
}

// TestDecodePodListStreams decodes a protobuf PodList as it streams in: every pod arrives in
// order with its own fields (the item buffer is reused, so nothing may alias it) when the body
// is read one byte per Read, and a body that ends anywhere before the list's last byte is
// errBadListProto, never a shorter list.
func TestDecodePodListStreams(t *testing.T) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "42"}}
	for i := range 50 {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("pod-%d", i),
			Annotations: map[string]string{annPodIP: fmt.Sprintf("10.0.%d.%d/32", i/10, i%10), "other": strings.Repeat("x", i*37)}},
			Spec:   corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%3)},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.%d.%d", i/10, i%10)}}
		list.Items = append(list.Items, p)
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &buf); err != nil {
		t.Fatal(err)
	}
	body := buf.Bytes()
	var got []string
	err := decodePodList(iotest.OneByteReader(bytes.NewReader(body)), func(f *podFields) {
		got = append(got, fmt.Sprintf("%s/%s %s %s %s", f.namespace, f.name, f.node, f.podIP, *f.annIP))
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 || got[0] != "ns/pod-0 node-0 10.0.0.0 10.0.0.0/32" || got[49] != "ns/pod-49 node-1 10.0.4.9 10.0.4.9/32" {
		t.Fatalf("decoded %d pods: first %q, last %q", len(got), got[0], got[len(got)-1])
	}
	// The envelope ends with the optional contentEncoding and contentType fields (3 and 4):
	// a body cut after the list itself (field 2) is whole.
	whole := len(k8sProtoMagic)
	for rest := body[whole:]; len(rest) > 0; {
		num, _, n := protowire.ConsumeTag(rest)
		m := protowire.ConsumeFieldValue(num, protowire.BytesType, rest[n:])
		rest, whole = rest[n+m:], whole+n+m
		if num == 2 {
			break
		}
	}
	for cut := range whole {
		if cut > 64 && cut < whole-300 && cut%13 != 0 {
			continue // every cut near both ends, every 13th in between
		}
		n := 0
		err := decodePodList(bytes.NewReader(body[:cut]), func(*podFields) { n++ })
		if cut < len(k8sProtoMagic) && err == nil || cut >= len(k8sProtoMagic) && !errors.Is(err, errBadListProto) {
			t.Fatalf("body cut at %d of %d bytes: err = %v (%d pods), want %v", cut, len(body), err, n, errBadListProto)
		}
	}
	if err := decodePodList(bytes.NewReader(body[:whole]), func(*podFields) {}); err != nil {
		t.Errorf("the list without the envelope's trailing fields: %v", err)
	}
}

// TestDecodeListKeepsReadErrors: a connection that breaks mid-list reports its own error
// (net/http's "unexpected EOF" for a body cut short, or any other read error), not
// "malformed protobuf list", which is kept for a body that ends cleanly inside a message.
func TestDecodeListKeepsReadErrors(t *testing.T) {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}, {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}}}}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &buf); err != nil {
		t.Fatal(err)
	}
	body := buf.Bytes()
	// A server that promises the whole body and closes the connection halfway.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body[:len(body)/2])
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := decodePodList(resp.Body, func(*podFields) {}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("connection closed mid-body: err = %v, want %v", err, io.ErrUnexpectedEOF)
	}
	reset := errors.New("connection reset by peer")
	for _, cut := range []int{4, 10, len(body) - 4} {
		r := io.MultiReader(bytes.NewReader(body[:cut]), iotest.ErrReader(reset))
		if err := decodePodList(r, func(*podFields) {}); !errors.Is(err, reset) {
			t.Errorf("read fails after %d bytes: err = %v, want %v", cut, err, reset)
		}
	}
	if _, err := decodeMetadataList(bytes.NewReader(body[:len(body)/2]), func(*objectMetaFields) {}); !errors.Is(err, errBadListProto) {
		t.Errorf("metadata list ending cleanly mid-message: err = %v, want %v", err, errBadListProto)
	}
}

// TestParseKeepsSequenceNumbers: parse moves sequenceNumberForAllocation into a slice by
// ordinal, and keeps the map when a key is not exactly an ordinal of the block (so nothing is
// lost and nothing is read under another key).
func TestParseKeepsSequenceNumbers(t *testing.T) {
	b, _ := testBlock(t)
	if b.seqs == nil || b.spec.SequenceNumberForAllocation != nil {
		t.Fatalf("parse kept the map: seqs %v, map %v", b.seqs, b.spec.SequenceNumberForAllocation)
	}
	var o blockObject
	if err := json.Unmarshal([]byte(testBlockJSON), &o); err != nil {
		t.Fatal(err)
	}
	want := map[int]uint64{}
	for ord := range o.Spec.Allocations {
		want[ord] = o.Spec.SequenceNumberForAllocation[fmt.Sprint(ord)]
	}
	// Keys Calico never writes ("01", "+1") keep the map, read by the exact key as before.
	for _, key := range []string{"not-an-ordinal", "01", "+1", "-0"} {
		o := o
		o.Spec.SequenceNumberForAllocation = maps.Clone(o.Spec.SequenceNumberForAllocation)
		o.Spec.SequenceNumberForAllocation[key] = 7
		kept, err := o.parse()
		if err != nil {
			t.Fatal(err)
		}
		if kept.seqs != nil || kept.spec.SequenceNumberForAllocation[key] != 7 || kept.seqOf(1) != want[1] {
			t.Errorf("key %q: the map was not kept (seqs %v, seqOf(1) = %d)", key, kept.seqs, kept.seqOf(1))
		}
	}
	o.Spec.SequenceNumberForAllocation["not-an-ordinal"] = 7
	kept, err := o.parse()
	if err != nil {
		t.Fatal(err)
	}
	for ord, seq := range want {
		if b.seqOf(ord) != seq || kept.seqOf(ord) != seq {
			t.Errorf("ordinal %d: seqOf = %d (slice), %d (map); want %d", ord, b.seqOf(ord), kept.seqOf(ord), seq)
		}
	}
	if b.seqOf(-1) != 0 || b.seqOf(len(b.spec.Allocations)) != 0 {
		t.Error("an ordinal outside the block has a sequence number")
	}
}

// FuzzDecodePodList compares the streaming decoder with a whole-body parse of the same bytes
// (every raw field of the envelope, then each item): on any input it must not panic, and when
// both succeed they must yield the same pods.
func FuzzDecodePodList(f *testing.F) {
	enc := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	for _, n := range []int{0, 1, 3} {
		list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
		for i := range n {
			list.Items = append(list.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", i), Annotations: map[string]string{annPodIP: "10.0.0.1/32"}},
				Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}}})
		}
		var buf bytes.Buffer
		if err := enc.Encode(list, &buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var streamed []string
		streamErr := decodePodList(bytes.NewReader(body), func(p *podFields) { streamed = append(streamed, p.String()) })
		if !bytes.HasPrefix(body, k8sProtoMagic) {
			return // the JSON path
		}
		var whole []string
		err := eachField(body[len(k8sProtoMagic):], func(num protowire.Number, raw []byte, _ uint64) error {
			if num != 2 || raw == nil {
				return nil
			}
			return eachField(raw, func(num protowire.Number, v []byte, _ uint64) error {
				if num != 2 || v == nil {
					return nil
				}
				var p podFields
				if err := decodePod(v, &p); err != nil {
					return err
				}
				whole = append(whole, p.String())
				return nil
			})
		})
		if err == nil && streamErr == nil && !slices.Equal(streamed, whole) {
			t.Errorf("streamed %q, whole body %q", streamed, whole)
		}
	})
}

// String shows every field of p, the annotations' values rather than their addresses.
func (p *podFields) String() string {
	val := func(s *string) string {
		if s == nil {
			return "<absent>"
		}
		return strconv.Quote(*s)
	}
	return fmt.Sprintf("%s/%s node=%q phase=%q podIP=%q podIPs=%q hostNetwork=%t deleting=%t annIP=%s annIPs=%s annAWS=%s",
		p.namespace, p.name, p.node, p.phase, p.podIP, p.podIPs, p.hostNetwork, p.deleting, val(p.annIP), val(p.annIPs), val(p.annAWS))
}
