package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// The package's own tests cannot import internal/testcluster (it imports testenv), so they
// keep these two small helpers of their own.

// startT starts a fresh cluster and stops it in t.Cleanup (testcluster.Start).
func startT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("testenv.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	return c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := Shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
