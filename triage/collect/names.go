package collect

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/triage"
)

// partialMetadataList asks the API server for a PartialObjectMetadataList: names and metadata
// only, so listing Secrets transfers no secret data.
const partialMetadataList = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

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
		if names, err := c.namesIn(ctx, s.Pod.Namespace, res); err == nil {
			s.NamesInNamespace[res] = names
		}
	}
	if ref := metav1.GetControllerOf(s.Pod); ref != nil && ref.Kind == "Job" {
		if job, err := c.client.BatchV1().Jobs(s.Pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
			s.Controller = &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
				ObjectMeta: *job.ObjectMeta.DeepCopy(),
			}
		}
	}
}

// namesIn lists the names of resource (a core/v1 resource) in namespace, metadata only.
func (c *Collector) namesIn(ctx context.Context, namespace, resource string) ([]string, error) {
	var list metav1.PartialObjectMetadataList
	err := c.client.CoreV1().RESTClient().Get().
		Namespace(namespace).Resource(resource).
		SetHeader("Accept", partialMetadataList).
		Do(ctx).Into(&list)
	if err != nil {
		return nil, fmt.Errorf("list %s names in %s: %w", resource, namespace, err)
	}
	names := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		names = append(names, it.Name)
	}
	sort.Strings(names)
	return names, nil
}
