package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Progress lines: a step still running after progressAfter prints one line to stderr, then
// one every progressEvery, so a slow API server or a large cluster never leaves the shell
// silent.
const (
	progressAfter = 3 * time.Second
	progressEvery = 10 * time.Second
)

// slowStep runs f and, while it runs longer than progressAfter, prints "whypending: still
// <what>, waiting for the Kubernetes API server at <host> (12s so far)" to w every
// progressEvery.
func slowStep[T any](ctx context.Context, w io.Writer, what, host string, f func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTimer(progressAfter)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "whypending: still %s, waiting for the Kubernetes API server at %s (%s so far)\n", what, host, time.Since(start).Round(time.Second))
				t.Reset(progressEvery)
			}
		}
	}()
	v, err := f(ctx)
	close(done)
	<-stopped
	return v, err
}
