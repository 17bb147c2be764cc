package collect

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/whypending/whypending/triage"
)

// collectWorkloadReplicas fills s.WorkloadReplicas when the rules ask for it
// (triage.NeedsWorkloadReplicas).
func (c *Collector) collectWorkloadReplicas(ctx context.Context, s *triage.Snapshot) {
	if triage.NeedsWorkloadReplicas(s) {
		s.WorkloadReplicas = c.workloadReplicas(ctx, s.Pod)
	}
}

// workloadReplicas reads spec.replicas of the workload that controls pod: a StatefulSet's, or a
// ReplicaSet's, or, for a ReplicaSet a Deployment controls, the Deployment's. It reads the
// informer caches when there are some, else one or two gets. Best effort: nil when a read fails.
func (c *Collector) workloadReplicas(ctx context.Context, pod *corev1.Pod) *int32 {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	ns := pod.Namespace
	switch ref.Kind {
	case "StatefulSet":
		if o, err := c.read.workload(ctx, triage.KindStatefulSet, ns, ref.Name); err == nil {
			if sts, ok := o.(*appsv1.StatefulSet); ok {
				return replicasOrOne(sts.Spec.Replicas)
			}
		}
	case "ReplicaSet":
		o, err := c.read.workload(ctx, triage.KindReplicaSet, ns, ref.Name)
		rs, ok := o.(*appsv1.ReplicaSet)
		if err != nil || !ok {
			return nil
		}
		owner := metav1.GetControllerOf(rs)
		if owner == nil || owner.Kind != "Deployment" {
			return replicasOrOne(rs.Spec.Replicas)
		}
		if o, err := c.read.workload(ctx, triage.KindDeployment, ns, owner.Name); err == nil {
			if d, ok := o.(*appsv1.Deployment); ok {
				return replicasOrOne(d.Spec.Replicas)
			}
		}
	}
	return nil
}

// replicasOrOne is spec.replicas, which defaults to 1.
func replicasOrOne(r *int32) *int32 {
	if r == nil {
		one := int32(1)
		return &one
	}
	n := *r
	return &n
}

// collectWorkloadReplicas is Collector.collectWorkloadReplicas, read once per controller for the
// batch's pods.
func (b *podBatch) collectWorkloadReplicas(ctx context.Context, s *triage.Snapshot) {
	ref := metav1.GetControllerOf(s.Pod)
	if !triage.NeedsWorkloadReplicas(s) || ref == nil {
		return
	}
	b.replicasMu.Lock()
	defer b.replicasMu.Unlock()
	r, ok := b.replicas[ref.UID]
	if !ok {
		r = b.c.workloadReplicas(ctx, s.Pod)
		if b.replicas == nil {
			b.replicas = map[types.UID]*int32{}
		}
		b.replicas[ref.UID] = r
	}
	s.WorkloadReplicas = r
}
