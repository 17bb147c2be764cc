package triage

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// nameScore says how plausibly have is what someone asking for want meant, lower is closer;
// ok is false when it is not close at all. Close means one of:
//   - a typo away: edit distance at most a third of the shorter name (at least 1);
//   - the same generated-name stem: both names without their last "-suffix" segment are equal
//     and at least 3 characters (web-7f9c5d-abcde for web-7f9c5d-xyz12: the same ReplicaSet);
//   - want, at least 3 characters, is have's leading segments (checkout for
//     checkout-7d9f8b6c4-x2k9q: the workload of that pod).
//
// Anything else, e.g. "x" against every name with an x in it, is never suggested.
func nameScore(want, have string) (score int, ok bool) {
	if want == "" || have == "" {
		return 0, false
	}
	d := editDistance(want, have)
	if d <= max(1, min(len(want), len(have))/3) {
		return d, true
	}
	if sw, sh := stem(want), stem(have); len(sw) >= 3 && sw == sh {
		return 10 + d, true
	}
	if len(want) >= 3 && strings.HasPrefix(have, want+"-") {
		return 20 + len(have) - len(want), true
	}
	return 0, false
}

// stem drops a name's last "-segment" ("web-7f9c5d-abcde" -> "web-7f9c5d"); a name without a
// dash has no stem.
func stem(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return ""
	}
	return name[:i]
}

// closestNames returns up to n of candidates that are close to want (nameScore), closest
// first, ties by name. It never returns want itself.
func closestNames(want string, candidates []string, n int) []string {
	var cands []scoredName
	for _, c := range candidates {
		if score, ok := nameScore(want, c); ok && c != want {
			cands = append(cands, scoredName{c, score})
		}
	}
	return bestNames(cands, n)
}

// ClosestNamespaceNames returns up to n of names that are close to want, closest first (the
// order a namespace-not-found answer suggests them in).
func ClosestNamespaceNames(want string, names []string, n int) []string {
	return closestNames(want, names, n)
}

// ClosestPodNames returns "namespace/name" of up to n pods of refs whose names are close to
// name (see nameScore), closest first; a pod in another namespace than the one asked ranks
// after an equally close one in it. A name that is close to nothing gets no suggestion.
func ClosestPodNames(refs []PodRef, namespace, name string, n int) []string {
	var cands []scoredName
	for _, r := range refs {
		score, ok := nameScore(name, r.Name)
		if !ok || (r.Name == name && r.Namespace == namespace) {
			continue
		}
		if r.Namespace != namespace {
			score++
		}
		cands = append(cands, scoredName{r.String(), score})
	}
	return bestNames(cands, n)
}

// ClosestWorkloadNames returns "kind/name" (kubectl's short kind) of up to n workloads of refs
// close to the one asked for (see nameScore), closest first; a workload of another kind with
// exactly the asked name ranks first ("deploy/checkout" when sts/checkout was asked).
func ClosestWorkloadNames(refs []WorkloadRef, asked WorkloadRef, n int) []string {
	var cands []scoredName
	for _, r := range refs {
		label := r.Kind.Short() + "/" + r.Name
		switch score, ok := nameScore(asked.Name, r.Name); {
		case r.Name == asked.Name && r.Kind != asked.Kind:
			cands = append(cands, scoredName{label, 0})
		case ok && r.Name != asked.Name:
			cands = append(cands, scoredName{label, score + 1})
		}
	}
	return bestNames(cands, n)
}

// scoredName is a suggestion and its nameScore.
type scoredName struct {
	name  string
	score int
}

// bestNames returns the names of the n lowest scores (ties by name).
func bestNames(cands []scoredName, n int) []string {
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].score != cands[j].score {
			return cands[i].score < cands[j].score
		}
		return cands[i].name < cands[j].name
	})
	var out []string
	for i := 0; i < len(cands) && i < n; i++ {
		out = append(out, cands[i].name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// CheckPodRef returns an error saying what is wrong when namespace is not a valid namespace
// name (a DNS-1123 label) or name is not a valid pod name (a DNS-1123 subdomain). No such pod
// can exist, so callers answer with the error and ask the API server nothing.
func CheckPodRef(namespace, name string) error { return checkNames(namespace, name, "pod") }

// checkNames returns an error saying what is wrong when namespace is not a valid namespace
// name or name not a valid name of what ("pod", "deployment", …); what "" checks the
// namespace only.
func checkNames(namespace, name, what string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("%q is not a valid namespace name (lower-case letters, digits and '-', at most 63 characters)", namespace)
	}
	if errs := validation.IsDNS1123Subdomain(name); what != "" && len(errs) > 0 {
		return fmt.Errorf("%q is not a valid %s name (lower-case letters, digits, '-' and '.')", name, what)
	}
	return nil
}
