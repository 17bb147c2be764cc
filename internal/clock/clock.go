// Package clock waits in a way that a context can cut short: the one sleep that serve's
// reconnect loop and the local control plane's polling share.
package clock

import (
	"context"
	"time"
)

// Sleep sleeps for d or until ctx is done (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
