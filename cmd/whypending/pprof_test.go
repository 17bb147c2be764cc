package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestServePprof: the profiles listener answers a heap profile (gzip-compressed protobuf) and
// stops when its context ends.
func TestServePprof(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- servePprof(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		t.Fatalf("heap profile: %s, %d bytes starting %q", resp.Status, len(body), body[:min(len(body), 8)])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("servePprof after its context ended: %v", err)
	}
}
