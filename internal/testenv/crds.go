package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/whypending/whypending/internal/clock"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates every CustomResourceDefinition found in the *.yaml and *.yml files of
// dir in fsys (several documents per file allowed; existing CRDs are left as they are), waits
// until each is Established and served by discovery, and resets c.Mapper.
func (c *Cluster) InstallCRDs(ctx context.Context, fsys fs.FS, dir string) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return fmt.Errorf("install crds: %w", err)
	}
	var crds []*unstructured.Unstructured
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("install crds: %w", err)
		}
		objs, err := DecodeObjects(data)
		if err != nil {
			return fmt.Errorf("install crds: %s: %w", e.Name(), err)
		}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, o)
			}
		}
	}
	return c.createCRDs(ctx, crds)
}

// createCRDs creates crds, then waits for them to be established and discoverable.
func (c *Cluster) createCRDs(ctx context.Context, crds []*unstructured.Unstructured) error {
	client := c.Dynamic.Resource(crdGVR)
	for _, crd := range crds {
		if _, err := client.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create crd %s: %w", crd.GetName(), err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, crd := range crds {
		for {
			live, err := client.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("wait for crd %s: %w", crd.GetName(), err)
			}
			if crdEstablished(live) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("wait for crd %s: not established after 30s", crd.GetName())
			}
			if err := clock.Sleep(ctx, 20*time.Millisecond); err != nil {
				return fmt.Errorf("wait for crd %s: %w", crd.GetName(), err)
			}
		}
	}
	// Established does not mean discovery already lists the resource; wait for that too so
	// Load can map the kinds at once.
	for _, crd := range crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		for {
			c.Mapper.Reset()
			if _, err := c.Mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind}); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("wait for crd %s: not in discovery after 30s", crd.GetName())
			}
			if err := clock.Sleep(ctx, 50*time.Millisecond); err != nil {
				return fmt.Errorf("wait for crd %s: %w", crd.GetName(), err)
			}
		}
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, cond := range conds {
		m, ok := cond.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// DecodeObjects splits a multi-document YAML (or JSON) stream into objects, skipping empty
// documents. Nulls inside lists (IPAMBlock allocations) are kept.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read document %d: %w", i, err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("parse document %d: %w", i, err)
		}
		js = bytes.TrimSpace(js)
		if len(js) == 0 || bytes.Equal(js, []byte("null")) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("decode document %d: %w", i, err)
		}
		objs = append(objs, u)
	}
}
