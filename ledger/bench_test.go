package ledger

import (
	"fmt"
	"strings"
	"testing"
)

// postData is feature state the size of a watch post's: a rendered answer of a few sections
// of evidence lines and a fix, about 16 KB of JSON.
func postData(tb testing.TB) any {
	tb.Helper()
	type section struct {
		Heading string   `json:"heading"`
		Text    string   `json:"text"`
		Lines   []string `json:"lines"`
		Code    string   `json:"code"`
	}
	var sections []section
	for i := range 6 {
		s := section{Heading: fmt.Sprintf("Evidence %d", i), Text: strings.Repeat("The pod cannot be scheduled. ", 8)}
		for j := range 20 {
			s.Lines = append(s.Lines, fmt.Sprintf("Warning FailedScheduling pod/cart-%d-%d: 0/1000 nodes are available: 1000 Insufficient cpu", i, j))
		}
		s.Code = strings.Repeat("kubectl -n shop scale deploy/cart --replicas=2\n", 4)
		sections = append(sections, s)
	}
	return map[string]any{"workload": map[string]string{"kind": "Deployment", "namespace": "shop", "name": "cart"}, "state": "stuck", "code": "insufficient-cpu",
		"message": map[string]any{"title": "cart is Pending", "sections": sections}}
}

// BenchmarkUpdate is one compare-and-set write of an entry holding a post's state, from the
// entry as last written (the watch's and the deliveries' common step), against the real API
// server: what a write allocates in the bot.
func BenchmarkUpdate(b *testing.B) {
	client, ns := start(b)
	s := New(client, ns, Options{})
	data := postData(b)
	e, err := s.Update(b.Context(), testKey, func(e *Entry) error { return e.SetData(data) })
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if e, err = s.UpdateFrom(b.Context(), e, func(e *Entry) error { e.Revision++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(e.Data)), "data-bytes")
}

// BenchmarkFollowedCopy is reading an entry from the followed copy (Copy), as the watch does
// for each workload it looks at.
func BenchmarkFollowedCopy(b *testing.B) {
	client, ns := start(b)
	s := New(client, ns, Options{})
	if _, err := s.Update(b.Context(), testKey, func(e *Entry) error { return e.SetData(postData(b)) }); err != nil {
		b.Fatal(err)
	}
	s.Follow(b.Context(), testKey.Source)
	waitSynced(b, s)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.Copy(testKey.Name()); !ok {
			b.Fatal("no copy")
		}
	}
}
