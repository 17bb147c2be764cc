package collect

import (
	"context"
	"fmt"

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
// the nodes its claims and their PVs (s.NodeClaims, s.PVs). A claim a pod names that does not
// exist is left out of NodeClaims.
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
	wanted := map[string]bool{}
	for _, pods := range s.PodsByNode {
		for _, p := range pods {
			for _, name := range claimNames(p) {
				wanted[p.Namespace+"/"+name] = true
			}
		}
	}
	claims, pvs, err := c.claimsAndVolumes(ctx, wanted)
	if err != nil {
		return
	}
	if s.PVs == nil {
		s.PVs = map[string]*corev1.PersistentVolume{}
	}
	for name, pv := range pvs {
		if _, ok := s.PVs[name]; !ok {
			s.PVs[name] = pv
		}
	}
	s.CSINodes, s.NodeClaims = csiNodes, claims
}

// claimsAndVolumes returns the claims named in wanted ("namespace/name") that exist, and the
// PVs they are bound to: from the informer caches, or with one paginated list of all claims
// and one of all PVs (not a request per claim: a cluster may hold thousands).
func (c *Collector) claimsAndVolumes(ctx context.Context, wanted map[string]bool) (map[string]*corev1.PersistentVolumeClaim, map[string]*corev1.PersistentVolume, error) {
	claims := map[string]*corev1.PersistentVolumeClaim{}
	pvs := map[string]*corev1.PersistentVolume{}
	if len(wanted) == 0 {
		return claims, pvs, nil
	}
	keep := func(pvc *corev1.PersistentVolumeClaim) {
		if wanted[pvc.Namespace+"/"+pvc.Name] {
			claims[pvc.Namespace+"/"+pvc.Name] = pvc
		}
	}
	if c.cache != nil {
		all, err := c.cache.pvcs.List(labels.Everything())
		if err != nil {
			return nil, nil, err
		}
		for _, pvc := range all {
			keep(pvc)
		}
		for _, pvc := range claims {
			if pv, err := c.cache.pvs.Get(pvc.Spec.VolumeName); pvc.Spec.VolumeName != "" && err == nil {
				pvs[pv.Name] = pv
			}
		}
		return claims, pvs, nil
	}
	err := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{Limit: pageSize}, func(obj runtime.Object) error {
		keep(obj.(*corev1.PersistentVolumeClaim))
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list persistent volume claims: %w", err)
	}
	bound := map[string]bool{}
	for _, pvc := range claims {
		bound[pvc.Spec.VolumeName] = true
	}
	err = pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.client.CoreV1().PersistentVolumes().List(ctx, opts)
	}).EachListItem(ctx, metav1.ListOptions{Limit: pageSize}, func(obj runtime.Object) error {
		if pv := obj.(*corev1.PersistentVolume); bound[pv.Name] {
			pvs[pv.Name] = pv
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list persistent volumes: %w", err)
	}
	return claims, pvs, nil
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
