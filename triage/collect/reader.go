package collect

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"

	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/triage"
)

// reader is every read a Collector makes of the cluster: the Collector decides what to read
// for a question and assembles the Snapshot; a reader only fetches. It has two
// implementations, like controller-runtime's client.Reader (the API client and the cache
// satisfy the same interface, so callers never branch on which they hold):
//
//   - apiReader (New, reader_api.go) asks the API server every time, one request or one
//     paginated list per read, the way kubectl describe does;
//   - cacheReader (NewCached, reader_cache.go) answers from shared informers what it caches
//     (pods, nodes, PVCs, PVs, StorageClasses, CSINodes, events, the workload kinds,
//     namespaces, quotas and limit ranges) and asks the API server, through the apiReader it
//     embeds, for the rest.
//
// A new read is a method here and one in each implementation (or only in apiReader, when
// the cache does not keep that kind). Both return the same objects for the same cluster;
// objects from the cache are shared with it, so callers treat every result as read-only.
type reader interface {
	// pod returns the pod whole; both read it from the API server (the cache keeps pods
	// lean, leanpod.go).
	pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// podExists reports whether the pod exists (false when it cannot be read).
	podExists(ctx context.Context, namespace, name string) bool
	// pods returns the namespace's pods whose labels match sel.
	pods(ctx context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error)
	// podsOnNode returns the pods in namespace bound to node whose labels match sel.
	podsOnNode(ctx context.Context, namespace, node string, sel labels.Selector) ([]*corev1.Pod, error)
	// boundPods returns the pods bound to node ("": to any node) that still hold resources
	// (phase neither Succeeded nor Failed), without the pod whose UID is skip.
	boundPods(ctx context.Context, node string, skip types.UID) ([]*corev1.Pod, error)
	// allBound returns the pods bound to any node that still hold resources, by node (sorted
	// by namespace and name), and what they request on each node (triage.RequestsByNode): the
	// node table of an unscheduled pod. The cache builds the pods of a node only when a rule
	// asks for them (leanNodePods); the API reader lists them all.
	allBound(ctx context.Context) (triage.NodePods, map[string]corev1.ResourceList, error)
	// podRefs returns the namespace and name of every pod, or at least of those in namespace
	// when the others cannot be listed (RBAC); nil when none can.
	podRefs(ctx context.Context, namespace string) []triage.PodRef
	// podLog returns a container's log as pods/log serves it.
	podLog(ctx context.Context, namespace, name string, opts *corev1.PodLogOptions) ([]byte, error)

	// podEvents returns the events about pod, newest first.
	podEvents(ctx context.Context, pod *corev1.Pod) ([]triage.Event, error)
	// objectEvents returns the events about the object with uid in namespace, newest first.
	objectEvents(ctx context.Context, namespace, uid string) ([]triage.Event, error)
	// namespaceEvents returns the events of the namespace's objects by object UID. It is nil
	// when they could not be read (then the error says why).
	namespaceEvents(ctx context.Context, namespace string) (eventIndex, error)

	// node returns one node; nodes returns every node, in no particular order.
	node(ctx context.Context, name string) (*corev1.Node, error)
	nodes(ctx context.Context) ([]*corev1.Node, error)

	// claim returns one PersistentVolumeClaim (NotFound when it does not exist); claims
	// returns every claim of namespace (metav1.NamespaceAll: of every namespace).
	claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	claims(ctx context.Context, namespace string) ([]*corev1.PersistentVolumeClaim, error)
	// volume returns one PersistentVolume; volumes returns those named in names that exist.
	volume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
	volumes(ctx context.Context, names map[string]bool) (map[string]*corev1.PersistentVolume, error)
	storageClasses(ctx context.Context) ([]*storagev1.StorageClass, error)
	csiNodes(ctx context.Context) ([]*storagev1.CSINode, error)

	// workload returns the workload of kind (one of triage.WorkloadKinds) namespace/name as its
	// typed object (*appsv1.Deployment, *batchv1.Job, …).
	workload(ctx context.Context, kind triage.Kind, namespace, name string) (runtime.Object, error)
	// listWorkloads appends the namespace's workloads of kind to into.
	listWorkloads(ctx context.Context, namespace string, kind triage.Kind, into *namespaceWorkloads) error
	// workloadsNamed returns the workloads named name in every namespace, in
	// triage.WorkloadKinds order (best effort: a kind that cannot be listed is left out).
	workloadsNamed(ctx context.Context, name string) []triage.WorkloadRef

	// namespace returns the Namespace object; namespaceNames the names of every namespace.
	namespace(ctx context.Context, name string) (*corev1.Namespace, error)
	namespaceNames(ctx context.Context) ([]string, error)
	quotas(ctx context.Context, namespace string) ([]*corev1.ResourceQuota, error)
	limitRanges(ctx context.Context, namespace string) ([]*corev1.LimitRange, error)
	// names returns the sorted names of a core/v1 resource's objects in namespace and each
	// one's metadata.creationTimestamp, read as a metadata-only list (no Secret data field
	// crosses the wire) of which nothing else is kept.
	names(ctx context.Context, namespace, resource string) ([]string, map[string]time.Time, error)
	// mayList asks the API server whether the caller may list resource (core/v1) in namespace
	// (a SelfSubjectAccessReview); known is false when the review itself failed. Both ask the
	// API server.
	mayList(ctx context.Context, namespace, resource string) (allowed, known bool)

	// configMap and service return one object of namespace, read with a name-selected list
	// (the chart grants list on ConfigMaps and Services, not get); nil without error when it
	// does not exist. serviceAccountNamespaces returns the sorted namespaces that have a
	// ServiceAccount named name (one metadata-only list across namespaces). The cache keeps
	// none of these kinds: both ask the API server.
	configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	service(ctx context.Context, namespace, name string) (*corev1.Service, error)
	serviceAccountNamespaces(ctx context.Context, name string) ([]string, error)

	// serverVersion returns the API server's /version, nil when it cannot be read.
	serverVersion() *version.Info

	// The backend itself: whether its informers have synced (true for apiReader), how many
	// objects each holds (nil for apiReader), and its pods and nodes as the Calico IPAM cache
	// reads them (nil for apiReader).
	synced() bool
	objectCounts() map[string]int
	addressUsers() calico.AddressUsers
}

var (
	_ reader = apiReader{}
	_ reader = (*cacheReader)(nil)
)

// eventIndex holds events by the UID of the object they are about, newest first.
type eventIndex interface {
	// of returns the events about the object with uid.
	of(uid types.UID) []triage.Event
}

// eventMap is an eventIndex read once (apiReader.namespaceEvents).
type eventMap map[types.UID][]triage.Event

func (m eventMap) of(uid types.UID) []triage.Event { return m[uid] }
