package fleet

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// APIError turns a failed API call into one line naming the server, without a stack of
// wrapped errors: "cannot reach the Kubernetes API server at https://…: connection refused".
func APIError(host string, err error) error {
	var urlErr *url.Error
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr):
		cause := opErr.Err.Error()
		if i := strings.LastIndex(cause, ": "); i >= 0 {
			cause = cause[i+2:]
		}
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %s", host, cause)
	case errors.As(err, &urlErr):
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %v", host, urlErr.Err)
	default:
		return fmt.Errorf("ask the Kubernetes API server at %s: %w", host, err)
	}
}
