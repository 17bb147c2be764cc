package triage

import (
	"sort"
	"strings"
)

// ClosestPodNames ranks refs by name distance to namespace/name and returns the best n that are
// plausibly the same thing (distance at most half the longer name, or a shared prefix of at
// least 3 characters).
func ClosestPodNames(refs []PodRef, namespace, name string, n int) []string {
	type scored struct {
		ref   PodRef
		score int
	}
	var cands []scored
	for _, r := range refs {
		d := editDistance(name, r.Name)
		prefix := commonPrefixLen(name, r.Name)
		longer := max(len(name), len(r.Name))
		if d > longer/2 && prefix < 3 && !strings.Contains(r.Name, name) {
			continue
		}
		score := 2*d - prefix
		if r.Namespace != namespace {
			score += 2
		}
		cands = append(cands, scored{r, score})
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].score != cands[j].score {
			return cands[i].score < cands[j].score
		}
		return cands[i].ref.String() < cands[j].ref.String()
	})
	var out []string
	for i := 0; i < len(cands) && i < n; i++ {
		out = append(out, cands[i].ref.String())
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

// commonPrefixLen is the length of the longest common prefix of a and b.
func commonPrefixLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
