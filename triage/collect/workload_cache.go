package collect

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/whypending/whypending/triage"
)

// workloadCache is the part of cacheReader that serves workload questions and namespace sweeps:
// the six workload kinds, the namespaces (their pod-security labels), ResourceQuotas,
// LimitRanges, and the events of everything but pods and nodes (a controller's FailedCreate),
// so a warm sweep of a big namespace sends no request.
type workloadCache struct {
	deployments  appslisters.DeploymentLister
	replicaSets  appslisters.ReplicaSetLister
	statefulSets appslisters.StatefulSetLister
	daemonSets   appslisters.DaemonSetLister
	jobs         batchlisters.JobLister
	cronJobs     batchlisters.CronJobLister
	namespaces   corelisters.NamespaceLister
	quotas       corelisters.ResourceQuotaLister
	limitRanges  corelisters.LimitRangeLister
	// events holds the events of objects other than Pods and Nodes, indexed by
	// involvedObject.uid (eventsByUIDIndex).
	events cache.Indexer
	// informers are the informers of the kinds that create pods (Deployments, through their
	// ReplicaSets) and of the events, which the watch follows (WatchWorkloads).
	informers      map[triage.Kind]cache.SharedIndexInformer
	eventsInformer cache.SharedIndexInformer
	// namespacesInformer is the namespaces' informer, which the watch follows for its opt-out
	// annotation (WatchNamespaces).
	namespacesInformer cache.SharedIndexInformer
}

// startWorkloadCache starts the informers of workloadCache, waits until they have synced and
// returns it; they run until ctx is done. Objects pass through stripWorkloadForCache.
func startWorkloadCache(ctx context.Context, client kubernetes.Interface) (*workloadCache, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripWorkloadForCache))
	wc := &workloadCache{
		deployments:        factory.Apps().V1().Deployments().Lister(),
		replicaSets:        factory.Apps().V1().ReplicaSets().Lister(),
		statefulSets:       factory.Apps().V1().StatefulSets().Lister(),
		daemonSets:         factory.Apps().V1().DaemonSets().Lister(),
		jobs:               factory.Batch().V1().Jobs().Lister(),
		cronJobs:           factory.Batch().V1().CronJobs().Lister(),
		namespaces:         factory.Core().V1().Namespaces().Lister(),
		quotas:             factory.Core().V1().ResourceQuotas().Lister(),
		limitRanges:        factory.Core().V1().LimitRanges().Lister(),
		namespacesInformer: factory.Core().V1().Namespaces().Informer(),
		informers: map[triage.Kind]cache.SharedIndexInformer{
			triage.KindDeployment:  factory.Apps().V1().Deployments().Informer(),
			triage.KindReplicaSet:  factory.Apps().V1().ReplicaSets().Informer(),
			triage.KindStatefulSet: factory.Apps().V1().StatefulSets().Informer(),
			triage.KindDaemonSet:   factory.Apps().V1().DaemonSets().Informer(),
			triage.KindJob:         factory.Batch().V1().Jobs().Informer(),
		},
	}
	// Controller events: everything but pod events (the pod event cache has those) and node
	// events (kubelets write many, and no workload rule reads them).
	events := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(stripForCache),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.AndSelectors(
				fields.OneTermNotEqualSelector("involvedObject.kind", "Pod"),
				fields.OneTermNotEqualSelector("involvedObject.kind", "Node"),
			).String()
		}))
	inf := events.Core().V1().Events().Informer()
	if err := inf.AddIndexers(cache.Indexers{eventsByUIDIndex: indexEventByUID}); err != nil {
		return nil, fmt.Errorf("add event index %s: %w", eventsByUIDIndex, err)
	}
	for _, f := range []informers.SharedInformerFactory{factory, events} {
		f.Start(ctx.Done())
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				factory.Shutdown()
				events.Shutdown()
				return nil, fmt.Errorf("sync informer cache for %v: %w", typ, context.Cause(ctx))
			}
		}
	}
	go func() {
		<-ctx.Done()
		factory.Shutdown()
		events.Shutdown()
	}()
	wc.events, wc.eventsInformer = inf.GetIndexer(), inf
	return wc, nil
}

// stripWorkloadForCache is stripForCache plus, for ReplicaSets and Jobs (the most numerous
// workload objects: every Deployment keeps old ReplicaSets, every CronJob old Jobs), the pod
// template, which no rule reads from them: the Deployment's and the CronJob's templates stay.
func stripWorkloadForCache(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		o.Spec.Template = corev1.PodTemplateSpec{}
	case *batchv1.Job:
		o.Spec.Template = corev1.PodTemplateSpec{}
	}
	return stripForCache(obj)
}

// get returns the cached workload of kind namespace/name as its typed object.
func (wc *workloadCache) get(kind triage.Kind, namespace, name string) (runtime.Object, error) {
	switch kind {
	case triage.KindDeployment:
		return nonNil(wc.deployments.Deployments(namespace).Get(name))
	case triage.KindReplicaSet:
		return nonNil(wc.replicaSets.ReplicaSets(namespace).Get(name))
	case triage.KindStatefulSet:
		return nonNil(wc.statefulSets.StatefulSets(namespace).Get(name))
	case triage.KindDaemonSet:
		return nonNil(wc.daemonSets.DaemonSets(namespace).Get(name))
	case triage.KindJob:
		return nonNil(wc.jobs.Jobs(namespace).Get(name))
	case triage.KindCronJob:
		return nonNil(wc.cronJobs.CronJobs(namespace).Get(name))
	}
	return nil, fmt.Errorf("%s is not a workload kind", kind)
}

// list stores the cached workloads of kind in namespace (metav1.NamespaceAll: every
// namespace) in into.
func (wc *workloadCache) list(namespace string, kind triage.Kind, into *namespaceWorkloads) error {
	all := labels.Everything()
	var err error
	switch kind {
	case triage.KindDeployment:
		into.deployments, err = wc.deployments.Deployments(namespace).List(all)
	case triage.KindReplicaSet:
		into.replicaSets, err = wc.replicaSets.ReplicaSets(namespace).List(all)
	case triage.KindStatefulSet:
		into.statefulSets, err = wc.statefulSets.StatefulSets(namespace).List(all)
	case triage.KindDaemonSet:
		into.daemonSets, err = wc.daemonSets.DaemonSets(namespace).List(all)
	case triage.KindJob:
		into.jobs, err = wc.jobs.Jobs(namespace).List(all)
	case triage.KindCronJob:
		into.cronJobs, err = wc.cronJobs.CronJobs(namespace).List(all)
	default:
		err = fmt.Errorf("%s is not a workload kind", kind)
	}
	return err
}
