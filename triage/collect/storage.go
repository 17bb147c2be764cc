package collect

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/whypending/whypending/triage"
)

// collectStorage fills the storage parts of s the rules ask for: the StorageClasses when a claim
// of the pod is not bound (triage.NeedsStorageClasses), and the CSINodes plus the claims and
// PVs of the pods on the nodes when the scheduler reports a volume limit
// (triage.NeedsVolumeLimits). Best effort: a failed read leaves the part nil.
func (c *Collector) collectStorage(ctx context.Context, s *triage.Snapshot) {
	if triage.NeedsStorageClasses(s) {
		s.StorageClasses, s.StorageClassesErr = c.storageClasses(ctx)
		s.ClaimEvents = map[string][]triage.Event{}
		for name, pvc := range s.PVCs {
			if pvc != nil && pvc.Spec.VolumeName == "" {
				if events, err := c.objectEvents(ctx, pvc.Namespace, string(pvc.UID)); err == nil {
					s.ClaimEvents[name] = events
				}
			}
		}
	}
	if triage.NeedsVolumeLimits(s) {
		c.volumeLimits(ctx, s)
	}
}

// storageClasses returns every StorageClass by name.
func (c *Collector) storageClasses(ctx context.Context) (map[string]*storagev1.StorageClass, error) {
	out := map[string]*storagev1.StorageClass{}
	if c.cache != nil {
		all, err := c.cache.storageClasses.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		for _, sc := range all {
			out[sc.Name] = sc
		}
		return out, nil
	}
	list, err := c.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list storage classes: %w", err)
	}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// volumeLimits reads what the NodeVolumeLimits filter counts: every CSINode, and for each pod on
// the nodes its claims and their PVs (s.NodeClaims, s.PVs).
func (c *Collector) volumeLimits(ctx context.Context, s *triage.Snapshot) {
	csiNodes := map[string]*storagev1.CSINode{}
	if c.cache != nil {
		all, err := c.cache.csiNodes.List(labels.Everything())
		if err != nil {
			return
		}
		for _, n := range all {
			csiNodes[n.Name] = n
		}
	} else {
		err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.client.StorageV1().CSINodes().List(ctx, opts)
		}).EachListItem(ctx, metav1.ListOptions{Limit: pageSize}, func(obj runtime.Object) error {
			n := obj.(*storagev1.CSINode)
			csiNodes[n.Name] = n
			return nil
		})
		if err != nil {
			return
		}
	}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for _, pods := range s.PodsByNode {
		for _, p := range pods {
			for _, name := range claimNames(p) {
				claims[p.Namespace+"/"+name] = nil
			}
		}
	}
	keys := make([]string, 0, len(claims))
	for k := range claims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pvNames := map[string]bool{}
	for _, key := range keys {
		ns, name := splitKey(key)
		pvc, err := c.claim(ctx, ns, name)
		if err != nil {
			delete(claims, key)
			continue
		}
		claims[key] = pvc
		if pvc != nil && pvc.Spec.VolumeName != "" {
			pvNames[pvc.Spec.VolumeName] = true
		}
	}
	if s.PVs == nil {
		s.PVs = map[string]*corev1.PersistentVolume{}
	}
	for name := range pvNames {
		if _, ok := s.PVs[name]; ok {
			continue
		}
		if pv, err := c.persistentVolume(ctx, name); err == nil {
			s.PVs[name] = pv
		}
	}
	s.CSINodes, s.NodeClaims = csiNodes, claims
}

// claim reads one PVC (nil, nil when it does not exist).
func (c *Collector) claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	var pvc *corev1.PersistentVolumeClaim
	var err error
	if c.cache != nil {
		pvc, err = c.cache.pvcs.PersistentVolumeClaims(namespace).Get(name)
	} else {
		pvc, err = c.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pvc, err
}

// persistentVolume reads one PV.
func (c *Collector) persistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	if c.cache != nil {
		return c.cache.pvs.Get(name)
	}
	return c.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// claimNames returns the names of the claims a pod's volumes use: persistentVolumeClaim volumes
// and generic ephemeral volumes (whose claim is named <pod>-<volume>).
func claimNames(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// splitKey splits "namespace/name".
func splitKey(key string) (namespace, name string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}
