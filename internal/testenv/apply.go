package testenv

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// applyFieldManager is the field manager of Apply's server-side apply requests.
const applyFieldManager = "whypending-testenv"

// Apply sends objs to the API server in order with server-side apply (field manager
// "whypending-testenv", conflicts forced), as `kubectl apply --server-side` does. With
// dryRun the API server runs defaulting, validation and admission and persists nothing
// (`--dry-run=server`). Unlike Load it installs no permissive CRD: a kind the cluster does not
// serve is an error. It stops at the first error, which names the object.
func (c *Cluster) Apply(ctx context.Context, objs []*unstructured.Unstructured, dryRun bool) error {
	opts := metav1.PatchOptions{FieldManager: applyFieldManager, Force: new(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, obj := range objs {
		what := fmt.Sprintf("%s %s", obj.GetKind(), obj.GetName())
		if ns := obj.GetNamespace(); ns != "" {
			what += " in " + ns
		}
		gvk := obj.GroupVersionKind()
		m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			c.Mapper.Reset()
			m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
		var r dynamic.ResourceInterface = c.Dynamic.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			r = c.Dynamic.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
		if _, err := r.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts); err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
	}
	return nil
}
