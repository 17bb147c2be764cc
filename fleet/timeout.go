package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// DefaultRequestTimeout is how long a request may wait for the API server to answer (the
// CLI's --request-timeout default, and Timing.RequestTimeout's).
const DefaultRequestTimeout = 30 * time.Second

// TimeoutError says that the API server accepted a request but sent nothing for After: no
// response within After of sending it, or no byte of the body for After while reading it.
type TimeoutError struct {
	// Host is the API server URL; Method and Path the request that waited.
	Host, Method, Path string
	// After is the request timeout that ran out.
	After time.Duration
	// EtcdFailing says that the API server's /readyz, asked while the request waited,
	// answered within the same timeout and listed its etcd check as failed.
	EtcdFailing bool
}

// Error names the server, the wait and the request.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("the Kubernetes API server at %s did not answer within %s (%s %s)", e.Host, e.After, e.Method, e.Path)
}

// Timeout reports that the request timed out (true), so that a *url.Error around it, and
// anything that asks errors.As for a Timeout method, reads it as a timeout.
func (e *TimeoutError) Timeout() bool { return true }

// RequestTimeout makes every request sent through cfg give up when the API server sends
// nothing for d: no response within d of sending the request (a server that accepts the
// connection, even the TLS handshake, and never replies), or no byte of the body for d
// while it is read. A large list that keeps streaming is never cut, however long it takes,
// and a watch is only held to d for its response headers (an idle watch sends nothing for
// minutes). The request then fails with a *TimeoutError (inside client-go's *url.Error).
// d <= 0 changes nothing, as kubectl's --request-timeout=0 does.
func RequestTimeout(cfg *rest.Config, d time.Duration) {
	if d <= 0 {
		return
	}
	host := cfg.Host
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &stallTransport{next: next, after: d, host: host}
	})
}

// errStalled is the cancellation cause of a request whose server sent nothing for too long.
var errStalled = errors.New("request stalled")

// stallTransport is the http.RoundTripper of RequestTimeout.
type stallTransport struct {
	next  http.RoundTripper
	after time.Duration
	host  string
}

// RoundTrip implements http.RoundTripper.
func (t *stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(t.after, func() { cancel(errStalled) })
	// Halfway through the wait for the response, /readyz is asked (within the rest of the
	// wait), so that a timeout can tell a hung etcd from a hung API server without waiting
	// any longer than the request timeout.
	var etcd atomic.Bool
	probe := time.AfterFunc(t.after/2, func() { etcd.Store(t.etcdFailing(ctx, req)) })
	stalled := func(err error) error {
		if errors.Is(context.Cause(ctx), errStalled) {
			return &TimeoutError{Host: t.host, Method: req.Method, Path: req.URL.Path, After: t.after, EtcdFailing: etcd.Load()}
		}
		return err
	}
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	probe.Stop()
	if err != nil {
		timer.Stop()
		cancel(nil)
		return nil, stalled(err)
	}
	if req.URL.Query().Get("watch") == "true" {
		// A watch may rightly be silent for minutes; its context ends with the response.
		timer.Stop()
		resp.Body = &closeBody{ReadCloser: resp.Body, done: func() { cancel(nil) }}
		return resp, nil
	}
	timer.Reset(t.after)
	resp.Body = &stallBody{ReadCloser: resp.Body, timer: timer, after: t.after, cancel: cancel, stalled: stalled}
	return resp, nil
}

// stallBody restarts the stall timer whenever bytes arrive, and turns a read cut by it into
// the *TimeoutError.
type stallBody struct {
	io.ReadCloser
	timer   *time.Timer
	after   time.Duration
	cancel  context.CancelCauseFunc
	stalled func(error) error
	once    sync.Once
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.timer.Reset(b.after)
	}
	if err != nil && err != io.EOF {
		err = b.stalled(err)
	}
	return n, err
}

func (b *stallBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		b.timer.Stop()
		b.cancel(nil)
	})
	return err
}

// closeBody ends the request's context when its body is closed.
type closeBody struct {
	io.ReadCloser
	done func()
	once sync.Once
}

func (b *closeBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// etcdFailing asks the API server's /readyz?verbose, with req's headers (its credentials),
// until ctx ends, and reports whether it lists its etcd check as failed ("[-]etcd ").
func (t *stallTransport) etcdFailing(ctx context.Context, req *http.Request) bool {
	if req.URL.Path == "/readyz" {
		return false
	}
	u := *req.URL
	u.Path, u.RawQuery = "/readyz", "verbose=true"
	pr, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false
	}
	pr.Header = req.Header.Clone()
	resp, err := t.next.RoundTrip(pr)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return strings.Contains(string(body), "[-]etcd ")
}
