package collect

import (
	"context"

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
	return triage.ClosestPodNames(refs, namespace, name, maxSimilarPods)
}
