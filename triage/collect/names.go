package collect

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/triage"
)

// collectNames reads, when a rule reports a ConfigMap, Secret or PVC missing
// (triage.NeedsNames), the names of those objects in the pod's namespace, and the metadata of
// the pod's controlling Job (a Helm hook carries helm.sh/hook there). Best effort: a list that
// fails (RBAC, for example) leaves that resource out.
func (c *Collector) collectNames(ctx context.Context, s *triage.Snapshot) {
	resources := triage.NeedsNames(s)
	if len(resources) == 0 {
		return
	}
	s.NamesInNamespace = map[string][]string{}
	for _, res := range resources {
		if names, err := c.read.names(ctx, s.Pod.Namespace, res); err == nil {
			s.NamesInNamespace[res] = names
		}
	}
	if ref := metav1.GetControllerOf(s.Pod); ref != nil && ref.Kind == "Job" {
		if o, err := c.read.workload(ctx, triage.KindJob, s.Pod.Namespace, ref.Name); err == nil {
			job := o.(*batchv1.Job)
			s.Controller = &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
				ObjectMeta: *job.ObjectMeta.DeepCopy(),
			}
		}
	}
}

// maxSimilarPods is how many close names a pod-not-found answer suggests.
const maxSimilarPods = 5

// similarPods returns "namespace/name" of up to maxSimilarPods existing pods whose names are
// closest to name, in namespace and in the others: by edit distance, where a shared prefix
// (the Deployment and ReplicaSet part of a generated name) and the asked namespace count as
// closer. It is best effort: a failed list gives no suggestions.
func (c *Collector) similarPods(ctx context.Context, namespace, name string) []string {
	refs := c.read.podRefs(ctx, namespace)
	return triage.ClosestPodNames(refs, namespace, name, maxSimilarPods)
}
