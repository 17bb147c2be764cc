package collect

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
				if events, err := c.read.objectEvents(ctx, pvc.Namespace, string(pvc.UID)); err == nil {
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
	all, err := c.read.storageClasses(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]*storagev1.StorageClass{}
	for _, sc := range all {
		out[sc.Name] = sc
	}
	return out, nil
}

// volumeLimits reads what the NodeVolumeLimits filter counts: every CSINode, and for each pod on
// the nodes its claims and their PVs (s.NodeClaims, s.PVs). A claim a pod names that does not
// exist is left out of NodeClaims.
func (c *Collector) volumeLimits(ctx context.Context, s *triage.Snapshot) {
	all, err := c.read.csiNodes(ctx)
	if err != nil {
		return
	}
	csiNodes := map[string]*storagev1.CSINode{}
	for _, n := range all {
		csiNodes[n.Name] = n
	}
	wanted := map[string]bool{}
	pods := s.Bound()
	for _, node := range boundNodes(s.Pod, s.Nodes) {
		for _, p := range pods.On(node) {
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
// PVs they are bound to, with one read of all claims and one of their volumes (not a request
// per claim: a cluster may hold thousands).
func (c *Collector) claimsAndVolumes(ctx context.Context, wanted map[string]bool) (map[string]*corev1.PersistentVolumeClaim, map[string]*corev1.PersistentVolume, error) {
	claims := map[string]*corev1.PersistentVolumeClaim{}
	if len(wanted) == 0 {
		return claims, map[string]*corev1.PersistentVolume{}, nil
	}
	all, err := c.read.claims(ctx, metav1.NamespaceAll)
	if err != nil {
		return nil, nil, err
	}
	bound := map[string]bool{}
	for _, pvc := range all {
		if key := pvc.Namespace + "/" + pvc.Name; wanted[key] {
			claims[key] = pvc
			if pvc.Spec.VolumeName != "" {
				bound[pvc.Spec.VolumeName] = true
			}
		}
	}
	pvs, err := c.read.volumes(ctx, bound)
	if err != nil {
		return nil, nil, err
	}
	return claims, pvs, nil
}

// claim reads one PVC (nil, nil when it does not exist).
func (c *Collector) claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := c.read.claim(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pvc, err
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
