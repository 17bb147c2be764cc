package collect

import (
	"context"
	"strings"

	"github.com/whypending/whypending/triage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	var refs []triage.PodRef
	if c.cache != nil {
		for _, o := range c.cache.podIndex.List() {
			if lp := leanPodOf(o); lp != nil {
				refs = append(refs, triage.PodRef{Namespace: lp.namespace.Value(), Name: lp.name})
			}
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
				refs = append(refs, triage.PodRef{Namespace: p.Namespace, Name: p.Name})
				return nil
			})
			if err == nil {
				break
			}
		}
	}
	return visibleNames(ctx, namespace, triage.ClosestPodNames(refs, namespace, name, len(refs)), maxSimilarPods)
}

// visibleKey carries a question's Target.Visible through its reads (Answer).
type visibleKey struct{}

// withVisible returns ctx carrying visible (nil: every namespace is visible).
func withVisible(ctx context.Context, visible func(context.Context, string) bool) context.Context {
	if visible == nil {
		return ctx
	}
	return context.WithValue(ctx, visibleKey{}, visible)
}

// maxVisibleChecks bounds the other namespaces one list of suggestions asks about.
const maxVisibleChecks = 10

// visibleNames returns up to n of names ("namespace/…", closest first) whose namespace is
// namespace or one the question may name (Target.Visible, carried by ctx); at most
// maxVisibleChecks other namespaces are asked about.
func visibleNames(ctx context.Context, namespace string, names []string, n int) []string {
	visible, _ := ctx.Value(visibleKey{}).(func(context.Context, string) bool)
	out := make([]string, 0, n)
	seen := map[string]bool{namespace: true}
	checks := 0
	for _, name := range names {
		if len(out) == n {
			break
		}
		ns, _, _ := strings.Cut(name, "/")
		ok, known := seen[ns]
		if !known && visible == nil {
			ok, known = true, true
		}
		if !known && checks < maxVisibleChecks {
			checks++
			ok = visible(ctx, ns)
			seen[ns] = ok
		}
		if ok {
			out = append(out, name)
		}
	}
	return out
}
