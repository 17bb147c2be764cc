package triage

import (
	"context"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
)

// maxSimilarPods is how many close names a pod-not-found answer suggests.
const maxSimilarPods = 5

// similarPods returns "namespace/name" of up to maxSimilarPods existing pods whose names are
// closest to name, in namespace and in the others: by edit distance, where a shared prefix
// (the Deployment and ReplicaSet part of a generated name) and the asked namespace count as
// closer. It is best effort: a failed list gives no suggestions.
func (c *Collector) similarPods(ctx context.Context, namespace, name string) []string {
	var refs []PodRef
	if c.cache != nil {
		pods, err := c.cache.pods.List(labels.Everything())
		if err != nil {
			return nil
		}
		for _, p := range pods {
			refs = append(refs, PodRef{Namespace: p.Namespace, Name: p.Name})
		}
	} else {
		// All namespaces first; a user who may only list pods in the asked namespace still
		// gets suggestions from it.
		for _, ns := range []string{metav1.NamespaceAll, namespace} {
			refs = refs[:0]
			err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return c.client.CoreV1().Pods(ns).List(ctx, opts)
			}).EachListItem(ctx, metav1.ListOptions{Limit: pageSize}, func(obj runtime.Object) error {
				p := obj.(*corev1.Pod)
				refs = append(refs, PodRef{Namespace: p.Namespace, Name: p.Name})
				return nil
			})
			if err == nil {
				break
			}
		}
	}
	return closestNames(refs, namespace, name, maxSimilarPods)
}

// closestNames ranks refs by nameDistance to namespace/name and returns the best n that are
// plausibly the same thing (distance at most half the longer name, or a shared prefix of at
// least 3 characters).
func closestNames(refs []PodRef, namespace, name string, n int) []string {
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
