package triage

import (
	"fmt"
	"sort"
	"strings"
)

// A question about a namespace that does not exist is answered as such (namespace-not-found,
// with the closest names), not as "no pod of that name"; and a sweep of an empty namespace, or
// of "default" with nothing stuck, says where the stuck pods are instead of an all-clear.

// MissingNamespace says that the namespace asked about does not exist.
type MissingNamespace struct {
	// Name is the namespace asked about.
	Name string
	// Existing are the names of the namespaces that exist (for "did you mean"); nil when they
	// could not be listed.
	Existing []string
	// Flag is the namespace the asker named with -n when the question read Name as a
	// namespace though it is kubectl's name of a kind ("svc/web -n shop": Target.FlagNamespace);
	// the object of that kind is looked for there. "" when -n was not given.
	Flag string
}

// NamespaceStuck is a namespace and how many of its pods are stuck (PodNeedsDiagnosis).
type NamespaceStuck struct {
	Namespace string `json:"namespace"`
	Pods      int    `json:"pods"`
}

// maxSimilarNamespaces is how many close namespace names a namespace-not-found answer names.
const maxSimilarNamespaces = 3

// otherKinds are kubectl's names for kinds whypending does not diagnose, by the kind they
// name. "svc/web" reads as pod web in namespace svc (NAMESPACE/NAME), so when that namespace
// does not exist the answer says what the asker most likely meant.
var otherKinds = map[string]string{}

func init() {
	for kind, words := range map[string][]string{
		"Service":                 {"svc", "service", "services"},
		"Ingress":                 {"ing", "ingress", "ingresses"},
		"PersistentVolumeClaim":   {"pvc", "persistentvolumeclaim", "persistentvolumeclaims"},
		"PersistentVolume":        {"pv", "persistentvolume", "persistentvolumes"},
		"ConfigMap":               {"cm", "configmap", "configmaps"},
		"Secret":                  {"secret", "secrets"},
		"Node":                    {"no", "node", "nodes"},
		"Namespace":               {"ns", "namespace", "namespaces"},
		"ServiceAccount":          {"sa", "serviceaccount", "serviceaccounts"},
		"HorizontalPodAutoscaler": {"hpa", "horizontalpodautoscaler", "horizontalpodautoscalers"},
		"PodDisruptionBudget":     {"pdb", "poddisruptionbudget", "poddisruptionbudgets"},
		"Endpoints":               {"ep", "endpoints"},
	} {
		for _, w := range words {
			otherKinds[w] = kind
		}
	}
}

// otherKind returns the kind word names when it is kubectl's name of a kind whypending does
// not diagnose ("svc": "Service"; case does not matter).
func otherKind(word string) (string, bool) {
	kind, ok := otherKinds[strings.ToLower(word)]
	return kind, ok
}

// namespaceNotFoundFinding is the answer to a question about something in a namespace that
// does not exist; what is the thing asked about ("pod web", "Deployment checkout", "" for a
// sweep) and name its name.
func namespaceNotFoundFinding(m *MissingNamespace, what, name string) Finding {
	f := Finding{
		Code:     CodeNamespaceNotFound,
		Severity: SeverityBlocker,
		Summary:  fmt.Sprintf("Namespace %q does not exist", m.Name),
		Evidence: []Evidence{{Object: "Namespace " + m.Name, Message: "not found"}},
		Fix:      []string{"kubectl get namespaces"},
	}
	if what != "" {
		f.Summary += fmt.Sprintf(", so there is no %s in it", what)
	}
	f.Summary += "."
	if kind, ok := otherKind(m.Name); ok && name != "" {
		// "svc/web": the asker named a kind, not a namespace.
		f.Summary += fmt.Sprintf(" %s/%s reads as %s in namespace %s: %s is kubectl's name of the %s kind, which whypending does not diagnose."+
			" It explains pods and the workloads that own them (po, deploy, sts, ds, job, cj, rs): ask about the pods or the workload behind %s %s.",
			m.Name, name, what, m.Name, m.Name, kind, kind, name)
		describe := fmt.Sprintf("kubectl describe %s %s", strings.ToLower(kind), shellQuote(name))
		if m.Flag != "" {
			describe += " -n " + shellQuote(m.Flag)
		}
		f.Fix = append(f.Fix, describe)
		return f
	}
	if near := closestNames(m.Name, m.Existing, maxSimilarNamespaces); len(near) > 0 {
		f.Summary += " Did you mean namespace " + strings.Join(near, ", ") + "?"
		for _, n := range near {
			f.Evidence = append(f.Evidence, Evidence{Object: "Namespace " + n, Message: "similar name"})
		}
	}
	return f
}

// stuckElsewhere is the sentence that names the namespaces with stuck pods (most first), or
// says that none has any; "" when they were not read.
func stuckElsewhere(stuck []NamespaceStuck, read bool) string {
	if !read {
		return ""
	}
	if len(stuck) == 0 {
		return " No other namespace has stuck pods either."
	}
	var parts []string
	for i, s := range stuck {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(stuck)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", s.Namespace, s.Pods))
	}
	return fmt.Sprintf(" Stuck pods are in %s %s: ask with -n %s --all.",
		plural(len(stuck), "namespace", "namespaces"), strings.Join(parts, ", "), stuck[0].Namespace)
}

// SortNamespaceStuck orders namespaces most stuck pods first, ties by name.
func SortNamespaceStuck(s []NamespaceStuck) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Pods != s[j].Pods {
			return s[i].Pods > s[j].Pods
		}
		return s[i].Namespace < s[j].Namespace
	})
}
