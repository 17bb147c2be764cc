package chat

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// UserError is an error whose text is meant for the person who typed the command (a usage
// problem, an unknown pod, a refusal). Any other error a handler returns is shown as a
// generic failure with a reference to the bot's log.
type UserError struct {
	// Text is one or more sentences shown to the user as they are.
	Text string
}

// Error returns Text.
func (e *UserError) Error() string { return e.Text }

// UnavailableError says that something a command needs cannot be used right now: a cluster
// whose API server is unreachable or whose connection is misconfigured, or an approval store
// whose namespace or CRD is missing. The router answers with Text in one line, without a
// usage hint; nothing was done. It is not the user's mistake, so it is kept apart from
// UserError.
type UnavailableError struct {
	// Text is one line naming what is unavailable and why, e.g. "Cluster prod-eu is
	// unavailable: cannot reach the Kubernetes API server at https://10.0.0.1:6443:
	// connection refused (since 12:03:04Z)."
	Text string
	// Err is the underlying error, for errors.Is/As; may be nil.
	Err error
}

// Error returns Text.
func (e *UnavailableError) Error() string { return e.Text }

// Unwrap returns Err.
func (e *UnavailableError) Unwrap() error { return e.Err }

// ClusterUnavailable is the UnavailableError for a configured cluster that cannot be used:
// why is one line naming the API server and its error (or the configuration problem); since
// is when the cluster became unavailable (zero: unknown).
func ClusterUnavailable(cluster string, since time.Time, why error) *UnavailableError {
	text := fmt.Sprintf("Cluster %s is unavailable: %s", cluster, JoinLines(why.Error()))
	if !since.IsZero() {
		text += fmt.Sprintf(" (since %s)", since.UTC().Format("15:04:05Z"))
	}
	return &UnavailableError{Text: text + ".", Err: why}
}

// ClusterDidNotAnswer is the UnavailableError for a configured cluster whose API server
// accepted a request and sent nothing for after: "Cluster prod did not answer within 30s: the
// Kubernetes API server at https://… did not answer within 30s (GET /api/v1/…)."
func ClusterDidNotAnswer(cluster string, after time.Duration, why error) *UnavailableError {
	return &UnavailableError{Text: fmt.Sprintf("Cluster %s did not answer within %s: %s.", cluster, after, JoinLines(why.Error())), Err: why}
}

// JoinLines joins the lines of s with "; ", so an error never breaks a one-line answer.
func JoinLines(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// ErrorRef returns a short random reference that ties a user-visible failure to its log line.
func ErrorRef() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
