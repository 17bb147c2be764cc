package triage

import (
	"fmt"
	"regexp"
	"strings"
)

// A user whose access allows only some reads (a kubeconfig that may get the pod but not list
// its events or the nodes) still gets an answer from what could be read, marked partial: the
// reads the API server refused are listed on the primary finding, each as evidence and in
// JSON (Diagnosis.Refused), with the permissions that would complete the answer as its fix.
// A read that failed otherwise (it timed out, the connection broke, the API server answered
// 5xx) is listed the same way, so that missing data is never taken for absent data.

// ReadFailure is why a read of a question did not succeed.
type ReadFailure string

const (
	// ReadForbidden: the API server refused it (403 Forbidden, the asker's RBAC); granting
	// the permission completes the answer.
	ReadForbidden ReadFailure = "forbidden"
	// ReadTimedOut: no answer in time (the request timeout, or the question's deadline);
	// asking again once the API server answers may complete it.
	ReadTimedOut ReadFailure = "timed-out"
	// ReadFailed: any other failure: the connection failed, or the API server answered with
	// an error (5xx, 429).
	ReadFailed ReadFailure = "failed"
)

// RefusedRead is one read that did not succeed while a question was answered: refused by the
// API server (403 Forbidden, RBAC), or failed (Failure says which). The name is the one the
// JSON field "refused" has always had.
type RefusedRead struct {
	// Verb is the request's verb: "get" or "list".
	Verb string `json:"verb"`
	// Resource is the resource, qualified with its API group when it has one: "events",
	// "nodes", "pods/log", "deployments.apps", "storageclasses.storage.k8s.io".
	Resource string `json:"resource"`
	// Namespace is where it was asked; "" for a cluster-scoped resource or a list across all
	// namespaces.
	Namespace string `json:"namespace,omitempty"`
	// Message is the API server's message, verbatim ("nodes is forbidden: User … cannot list
	// resource …"), or the client's error for a read that failed otherwise.
	Message string `json:"message"`
	// Failure is why the read did not succeed; "" is ReadForbidden.
	Failure ReadFailure `json:"failure,omitempty"`
	// WaitedSeconds is how long the read waited before it failed, rounded to whole seconds,
	// for a read that did not succeed for another reason than ReadForbidden; 0 when under
	// half a second or not known (a read shared with another question), and then not said.
	WaitedSeconds int `json:"waitedSeconds,omitempty"`
}

// String is "events: forbidden (list in namespace shop)", "events: timed out after 30s (list
// in namespace shop)".
func (r RefusedRead) String() string {
	return fmt.Sprintf("%s: %s (%s %s)", r.Resource, r.Reason(), r.Verb, r.scope())
}

// Forbidden reports whether the API server refused r (RBAC), rather than r failing.
func (r RefusedRead) Forbidden() bool { return r.Failure == "" || r.Failure == ReadForbidden }

// Reason is why r did not succeed, in words: "forbidden", "timed out after 30s", "failed
// after 2s: connection refused".
func (r RefusedRead) Reason() string {
	switch {
	case r.Forbidden():
		return "forbidden"
	case r.Failure == ReadTimedOut:
		return "timed out" + r.after()
	}
	return "failed" + r.after() + ": " + lastClause(r.Message)
}

// after is " after 30s", "" when the wait is not known (a read another question made).
func (r RefusedRead) after() string {
	if r.WaitedSeconds <= 0 {
		return ""
	}
	return fmt.Sprintf(" after %ds", r.WaitedSeconds)
}

// lastClause is the innermost part of an error's text, the part after its last ": " (the
// wrapping names the request, which String says already), on one line and at most 120 bytes.
func lastClause(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	return truncateStart(strings.Join(strings.Fields(msg), " "), 120)
}

// scope is "in namespace shop", "in all namespaces" or "cluster-wide".
func (r RefusedRead) scope() string {
	switch {
	case r.Namespace != "":
		return "in namespace " + r.Namespace
	case clusterScoped[strings.SplitN(r.Resource, ".", 2)[0]]:
		return "cluster-wide"
	}
	return "in all namespaces"
}

// canI is the kubectl auth can-i command that checks the permission r needs (a subresource
// goes in --subresource: can-i reads "pods/log" as the pod named log).
func (r RefusedRead) canI() string {
	resource, sub, _ := strings.Cut(r.Resource, "/")
	cmd := "kubectl auth can-i " + r.Verb + " " + resource
	if sub != "" {
		cmd += " --subresource=" + sub
	}
	switch {
	case r.Namespace != "":
		cmd += " -n " + shellQuote(r.Namespace)
	case !clusterScoped[strings.SplitN(r.Resource, ".", 2)[0]]:
		cmd += " --all-namespaces"
	}
	return cmd
}

// clusterScoped are the cluster-scoped resources the collector reads.
var clusterScoped = map[string]bool{"nodes": true, "persistentvolumes": true, "storageclasses": true, "csinodes": true, "namespaces": true}

// markRefused adds the refused and failed reads to f, the primary finding: each one as
// evidence; as fix, the kubectl auth can-i check of each refused read and a grant that covers
// them, and a health check of the API server and a retry of each failed read; and the
// partial-answer sentence to its summary.
func markRefused(f *Finding, refused []RefusedRead) {
	f.Summary += partialSummary(refused)
	for _, r := range refused {
		f.Evidence = append(f.Evidence, Evidence{Message: r.String()})
	}
	forbidden, failed := splitFailures(refused)
	for _, r := range forbidden {
		f.Fix = append(f.Fix, r.canI())
	}
	if len(forbidden) > 0 {
		f.Fix = append(f.Fix, "Every read whypending makes is in the ClusterRole of its Helm chart (charts/whypending/templates/rbac.yaml); an admin can grant just these: "+grantCommand(forbidden),
			"Bind it to the user: "+bindCommand(forbidden))
	}
	if len(failed) > 0 {
		f.Fix = append(f.Fix, fmt.Sprintf("kubectl get --raw='/readyz?verbose'  # is the API server healthy? %s failed; ask again once it answers", reads(len(failed))))
		for _, r := range failed {
			if c := r.retry(); c != "" {
				f.Fix = append(f.Fix, c)
			}
		}
	}
}

// splitFailures splits reads into the refused ones (Forbidden) and those that failed otherwise,
// each in its order.
func splitFailures(reads []RefusedRead) (forbidden, failed []RefusedRead) {
	for _, r := range reads {
		if r.Forbidden() {
			forbidden = append(forbidden, r)
		} else {
			failed = append(failed, r)
		}
	}
	return forbidden, failed
}

// retry is the kubectl command that makes r's read again with a longer request timeout; "" for
// a subresource (pods/log), which names no object here.
func (r RefusedRead) retry() string {
	if strings.Contains(r.Resource, "/") {
		return ""
	}
	cmd := "kubectl get " + r.Resource
	switch {
	case r.Namespace != "":
		cmd += " -n " + shellQuote(r.Namespace)
	case !clusterScoped[strings.SplitN(r.Resource, ".", 2)[0]]:
		cmd += " --all-namespaces"
	}
	return cmd + " --request-timeout=2m"
}

// reRefusedUser is the user an API server's Forbidden message names: `User "dev" cannot …`.
var reRefusedUser = regexp.MustCompile(`User "([^"]+)" cannot`)

// bindCommand binds the ClusterRole of grantCommand to the user the refusals name (YOU when
// they name none): a RoleBinding when every refused read was in one namespace, else a
// ClusterRoleBinding.
func bindCommand(refused []RefusedRead) string {
	subject := "--user=YOU"
	namespaces := map[string]bool{}
	for _, r := range refused {
		if m := reRefusedUser.FindStringSubmatch(r.Message); m != nil {
			if sa, ok := strings.CutPrefix(m[1], "system:serviceaccount:"); ok {
				subject = "--serviceaccount=" + shellQuote(sa)
			} else {
				subject = "--user=" + shellQuote(m[1])
			}
		}
		namespaces[r.Namespace] = true
	}
	if len(namespaces) == 1 && !namespaces[""] {
		ns := sortedKeys(namespaces)[0]
		return fmt.Sprintf("kubectl create rolebinding whypending-read -n %s --clusterrole=whypending-read %s", shellQuote(ns), subject)
	}
	return "kubectl create clusterrolebinding whypending-read --clusterrole=whypending-read " + subject
}

// refusedList is "list events in namespace shop, list nodes cluster-wide".
func refusedList(refused []RefusedRead) string {
	parts := make([]string, 0, len(refused))
	for _, r := range refused {
		parts = append(parts, r.Verb+" "+r.Resource+" "+r.scope())
	}
	return strings.Join(parts, ", ")
}

// reads is "1 read", "3 reads".
func reads(n int) string { return fmt.Sprintf("%d %s", n, plural(n, "read", "reads")) }

// grantCommand is a kubectl command that creates a ClusterRole with the refused verbs and
// resources (bound with kubectl create clusterrolebinding … --user=YOU).
func grantCommand(refused []RefusedRead) string {
	verbs, resources := map[string]bool{}, map[string]bool{}
	for _, r := range refused {
		verbs[r.Verb] = true
		resources[r.Resource] = true
	}
	return fmt.Sprintf("kubectl create clusterrole whypending-read --verb=%s --resource=%s", strings.Join(sortedKeys(verbs), ","), strings.Join(sortedKeys(resources), ","))
}

// partialSummary is the sentence a partial answer's summary ends with.
func partialSummary(refused []RefusedRead) string {
	forbidden, failed := splitFailures(refused)
	var parts []string
	if len(forbidden) > 0 {
		parts = append(parts, fmt.Sprintf("the API server refused %s (%s)", reads(len(forbidden)), refusedList(forbidden)))
	}
	if len(failed) > 0 {
		parts = append(parts, fmt.Sprintf("%s failed (%s)", reads(len(failed)), failedList(failed)))
	}
	end := "asking again once the API server answers may give the full answer"
	if len(forbidden) > 0 {
		end = "the fix lists the permissions that give the full answer"
	}
	return fmt.Sprintf(" Partial answer: %s, so this rests on what could be read; %s.", strings.Join(parts, " and "), end)
}

// failedList is "list events in namespace shop: timed out after 30s, list nodes cluster-wide:
// failed after 1s: connection refused".
func failedList(failed []RefusedRead) string {
	parts := make([]string, 0, len(failed))
	for _, r := range failed {
		parts = append(parts, r.Verb+" "+r.Resource+" "+r.scope()+": "+r.Reason())
	}
	return strings.Join(parts, ", ")
}

// withRefused returns findings and summary with the refused reads marked on the primary
// finding (markRefused); both unchanged when nothing was refused.
func withRefused(findings []Finding, summary string, refused []RefusedRead) ([]Finding, string) {
	if len(refused) == 0 || len(findings) == 0 {
		return findings, summary
	}
	out := append([]Finding{findings[0]}, findings[1:]...)
	out[0].Evidence = append([]Evidence(nil), out[0].Evidence...)
	out[0].Fix = append([]string(nil), out[0].Fix...)
	markRefused(&out[0], refused)
	return out, summary + partialSummary(refused)
}

// unread is why the question's read of resource ("events") did not succeed, in words
// ("timed out after 30s"); "could not be read" when err says it failed but no read of it is
// listed; "" when err is nil.
func unread(err error, refused []RefusedRead, resource string) string {
	if err == nil {
		return ""
	}
	for _, r := range refused {
		if r.Resource == resource {
			return r.Reason()
		}
	}
	return "could not be read"
}

// eventsUnread is why the pod's events could not be read ("timed out after 30s"), "" when
// they were: a rule that finds no event says so only when they were read, since events that
// could not be read are not events that do not exist.
func (s *Snapshot) eventsUnread() string { return unread(s.EventsErr, s.Refused, "events") }
