package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// APIError turns a failed API call into one line naming the server that failed, without a
// stack of wrapped errors:
//   - "cannot reach the Kubernetes API server at https://…: connection refused" (nothing
//     listens, or the connection broke: the API server stopped);
//   - "the Kubernetes API server at https://… did not answer within 30s (GET /api/v1/pods)"
//     (a *TimeoutError: it accepted the request and sent nothing);
//   - "etcd behind the Kubernetes API server at https://… is not answering: etcdserver:
//     request timed out" (the API server answers, its storage does not);
//   - else "ask the Kubernetes API server at https://…: " and the error.
//
// The result wraps err's *TimeoutError or API status (errors.As, apierrors.IsConflict, …)
// where there is one.
func APIError(host string, err error) error {
	var timeout *TimeoutError
	var opErr *net.OpError
	var urlErr *url.Error
	switch {
	case errors.As(err, &timeout):
		return timeout
	case errors.As(err, &opErr):
		cause := opErr.Err.Error()
		if i := strings.LastIndex(cause, ": "); i >= 0 {
			cause = cause[i+2:]
		}
		return &apiError{fmt.Sprintf("cannot reach the Kubernetes API server at %s: %s", host, cause), err}
	case errors.As(err, &urlErr):
		return &apiError{fmt.Sprintf("cannot reach the Kubernetes API server at %s: %s", host, brokenConnection(urlErr.Err)), err}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return &apiError{fmt.Sprintf("cannot reach the Kubernetes API server at %s: %s", host, brokenConnection(err)), err}
	case isEtcdError(err):
		return &apiError{fmt.Sprintf("etcd behind the Kubernetes API server at %s is not answering: %s", host, statusMessage(err)), err}
	default:
		return fmt.Errorf("ask the Kubernetes API server at %s: %w", host, err)
	}
}

// Explain is APIError for a call through cfg that failed, and it tells etcd's failure from
// the API server's: when the API server sent nothing for the request timeout, the /readyz
// that RequestTimeout asked halfway through the wait says; when it answered with a server
// error, Explain asks its /readyz (within 3 s, ignoring ctx's end). When the etcd check there
// fails the line says "etcd behind the Kubernetes API server at … is
// not answering".
func Explain(ctx context.Context, cfg *rest.Config, err error) error {
	line := APIError(cfg.Host, err)
	var timeout *TimeoutError
	if errors.As(err, &timeout) {
		// Asked while the request waited, within its timeout: no wait beyond it.
		if timeout.EtcdFailing {
			return &apiError{fmt.Sprintf("etcd behind the Kubernetes API server at %s is not answering (the API server's /readyz says etcd failed): %s", cfg.Host, line), err}
		}
		return line
	}
	if isEtcdError(err) || !isServerError(err) {
		return line
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if etcdFailing(pctx, cfg) {
		return &apiError{fmt.Sprintf("etcd behind the Kubernetes API server at %s is not answering (the API server's /readyz says etcd failed): %s", cfg.Host, line), err}
	}
	return line
}

// isServerError reports whether err is a 5xx answer of the API server.
func isServerError(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code >= 500
}

// etcdFailing reports whether the API server's /readyz?verbose answers and lists its etcd
// check as failed ("[-]etcd failed").
func etcdFailing(ctx context.Context, cfg *rest.Config) bool {
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return false
	}
	body, _ := client.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "true").DoRaw(ctx)
	return bytes.Contains(body, []byte("[-]etcd "))
}

// apiError is APIError's line, wrapping the error it describes.
type apiError struct {
	text string
	err  error
}

func (e *apiError) Error() string { return e.text }
func (e *apiError) Unwrap() error { return e.err }

// brokenConnection describes a transport error in a few words: the connection broke while the
// answer was on its way (the API server stopped), or the error itself.
func brokenConnection(err error) string {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the connection broke before the answer was complete (unexpected EOF): the API server stopped or restarted"
	case errors.Is(err, syscall.ECONNRESET):
		return "the connection was reset: the API server stopped or restarted"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer before the deadline (context deadline exceeded)"
	}
	return err.Error()
}

// isEtcdError reports whether err is an API server's answer that its storage (etcd) failed:
// an "etcdserver: …" message, or the 504 or 500 an API server sends when etcd does not
// answer in time.
func isEtcdError(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	msg := status.Status().Message
	return strings.Contains(msg, "etcdserver:") || strings.Contains(msg, "etcd cluster is unavailable") ||
		(apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err)) &&
			(strings.Contains(msg, "etcd") || strings.Contains(msg, "context deadline exceeded"))
}

// statusMessage is the API status message of err.
func statusMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}
