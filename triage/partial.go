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

// RefusedRead is one read the API server refused with 403 Forbidden (RBAC) while a question
// was answered.
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
	// resource …").
	Message string `json:"message"`
}

// String is "events: forbidden (list in namespace shop)".
func (r RefusedRead) String() string {
	return fmt.Sprintf("%s: forbidden (%s %s)", r.Resource, r.Verb, r.scope())
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

// markRefused adds the refused reads to f, the primary finding: each one as evidence, the
// kubectl auth can-i check of each and a grant that covers them as fix, and the partial-answer
// sentence to its summary.
func markRefused(f *Finding, refused []RefusedRead) {
	f.Summary += partialSummary(refused)
	for _, r := range refused {
		f.Evidence = append(f.Evidence, Evidence{Message: r.String()})
	}
	for _, r := range refused {
		f.Fix = append(f.Fix, r.canI())
	}
	f.Fix = append(f.Fix, "Every read whypending makes is in the ClusterRole of its Helm chart (charts/whypending/templates/rbac.yaml); an admin can grant just these: "+grantCommand(refused),
		"Bind it to the user: "+bindCommand(refused))
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
	return fmt.Sprintf(" Partial answer: the API server refused %s (%s), so this rests on what could be read; the fix lists the permissions that give the full answer.",
		reads(len(refused)), refusedList(refused))
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
