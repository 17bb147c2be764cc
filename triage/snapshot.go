package triage

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// Snapshot is everything the rules read, collected once by a Collector. Rules treat it as
// read-only. Optional parts are nil or empty when they could not be read; the matching
// *Err field then says why (best effort, like kubectl describe).
type Snapshot struct {
	// Now is the collection time; rules compute ages against it, never time.Now.
	Now time.Time
	// Requested is the pod asked about (namespace and name as given).
	Requested PodRef
	// Pod is the pod under diagnosis; nil when it does not exist (see SimilarPods).
	Pod *corev1.Pod
	// Events are all events whose involvedObject/regarding is the pod (matched by UID), from
	// core/v1 and events.k8s.io/v1, merged and sorted newest first by Event.LastSeen.
	Events []Event
	// EventsErr is set when events could not be listed.
	EventsErr error
	// MissingNamespace is set when the pod does not exist because its namespace does not (the
	// answer is then namespace-not-found, not pod-not-found).
	MissingNamespace *MissingNamespace
	// Refused are the reads of this question the API server refused (403 Forbidden: the
	// asker's RBAC), each once; the other parts are read as usual.
	Refused []RefusedRead
	// Nodes are the nodes the rules need, sorted by name: every node for an unscheduled pod,
	// only the pod's own node for a bound one.
	Nodes []*corev1.Node
	// PodsByNode maps a node name (of Nodes) to the pods bound to it that still hold
	// resources (phase neither Succeeded nor Failed), excluding the pod under diagnosis.
	// BoundPods, when set, holds the same pods instead, read one node at a time (NodePods):
	// the cached Collector sets it for an unscheduled pod, whose node table reads every node,
	// so that the pods of a large cluster are never all built at once. Rules read either
	// through Bound.
	PodsByNode map[string][]*corev1.Pod
	BoundPods  NodePods
	// RequestedByNode optionally holds RequestsByNode(PodsByNode): what the pods on each node
	// request. A Collector that shares one PodsByNode among many Snapshots (a workload's pods,
	// a namespace sweep) computes it once; nil makes the rules compute it.
	RequestedByNode map[string]corev1.ResourceList
	// NodeTables, when set, shares the node table of an unscheduled pod with the other
	// Snapshots of its batch (see NodeTables); nil computes it for this pod alone.
	NodeTables *NodeTables
	// NodesErr is set when Nodes or PodsByNode could not be read (e.g. RBAC forbids listing
	// nodes); Nodes is then not evidence that the cluster has no nodes.
	NodesErr error
	// PVCs maps each claim name the pod's volumes reference to the claim; a name that maps
	// to nil does not exist in the pod's namespace.
	PVCs map[string]*corev1.PersistentVolumeClaim
	// PVs maps a bound PV name to the PV: the pod's bound claims' PVs, and, when NodeClaims is
	// read, those claims' PVs too.
	PVs map[string]*corev1.PersistentVolume
	// StorageClasses maps a StorageClass name to the class (binding mode, provisioner, the
	// default-class annotation); read when one of the pod's claims is not bound
	// (NeedsStorageClasses). Nil when not read; StorageClassesErr says why it failed.
	StorageClasses    map[string]*storagev1.StorageClass
	StorageClassesErr error
	// ClaimEvents maps the name of each of the pod's claims that is not bound to the claim's
	// own events (the PV controller's and the provisioner's: WaitForFirstConsumer,
	// ProvisioningFailed, …), newest first; read with StorageClasses.
	ClaimEvents map[string][]Event
	// CSINodes maps a node name to its CSINode (spec.drivers[].allocatable.count: the node's
	// attachable-volume limit per CSI driver), and NodeClaims maps "namespace/name" to the
	// PersistentVolumeClaims that the pods in PodsByNode mount (their PVs are added to PVs).
	// Both are read only for an unscheduled pod when the scheduler reports a volume limit
	// (NeedsVolumeLimits); nil otherwise.
	CSINodes   map[string]*storagev1.CSINode
	NodeClaims map[string]*corev1.PersistentVolumeClaim
	// NamesInNamespace maps a resource ("configmaps", "secrets", "persistentvolumeclaims") to
	// the names of those objects in the pod's namespace (metadata only: no Secret data is
	// read), for "did you mean" suggestions. It is read only when a rule reports such an object
	// missing (NeedsNames); a resource that could not be listed is absent. A resource that is
	// absent is unknown, never empty: the rules take neither "exists" nor "does not exist" from
	// it (objectPresence).
	NamesInNamespace map[string][]string
	// CreatedInNamespace maps a resource of NamesInNamespace to each of its names'
	// metadata.creationTimestamp, from the same metadata-only list (nothing else of the objects
	// is kept).
	CreatedInNamespace map[string]map[string]time.Time
	// ConfigMapKeys maps the name of a ConfigMap in the pod's namespace to its keys (data and
	// binaryData, sorted; the values are not kept): each ConfigMap a kubelet report calls
	// missing, or missing a key, that exists now and whose keys the pod reads by name
	// (NeedsConfigMapKeys). A name that is absent was not read, or its read failed: its keys
	// are unknown.
	ConfigMapKeys map[string][]string
	// ImmutableConfigMaps holds the ConfigMaps of ConfigMapKeys marked immutable: true: their
	// data can never change, so a missing key cannot be added to them.
	ImmutableConfigMaps map[string]bool
	// WorkloadReplicas is spec.replicas of the Deployment (through its ReplicaSet), StatefulSet
	// or ReplicaSet that controls the pod: how many pods a resources fix on that workload must
	// make room for. Read for an unscheduled pod of such a workload (NeedsWorkloadReplicas);
	// nil otherwise, or when it could not be read.
	WorkloadReplicas *int32
	// Controller is the metadata of the pod's controlling owner (kind in TypeMeta), read with
	// NamesInNamespace when that owner is a Job: a Helm hook Job carries the helm.sh/hook
	// annotation. Nil otherwise.
	Controller *metav1.PartialObjectMetadata
	// CSIPlugin is what explains a CSI driver the pod's node has no registration for (its node
	// DaemonSet, that DaemonSet's events, the node's CSINode), read when a mount event says so
	// (NeedsCSIPlugin); nil otherwise.
	CSIPlugin *CSIPlugin
	// AWSNode is the AWS VPC CNI's DaemonSet kube-system/aws-node (its env says whether prefix
	// delegation, custom networking and warm targets are on), read when a sandbox event is the
	// CNI's IP exhaustion (NeedsAWSNode); nil when not read or absent, AWSNodeErr says why it
	// could not be read.
	AWSNode    *appsv1.DaemonSet
	AWSNodeErr error
	// AWSNodePod is the aws-node pod on the pod's node, read whole with AWSNode
	// (AWSNodePodName): its env is what the node's ipamd runs with, so it wins over the
	// DaemonSet's template; nil when not read or absent.
	AWSNodePod *corev1.Pod
	// RegistryHosting is the local registry the cluster publishes (ConfigMap
	// kube-public/local-registry-hosting), read when an image's registry host does not resolve
	// (NeedsRegistryHosting); nil when not read or not published, RegistryHostingErr says why it
	// could not be read.
	RegistryHosting    *RegistryHosting
	RegistryHostingErr error
	// CalicoNodePods are the calico-node pods (k8s-app=calico-node) in calico-system and
	// kube-system; empty when Calico is not installed that way.
	CalicoNodePods []*corev1.Pod
	// IPAM is a read-only summary of Calico IPAM state; nil when the cluster has no Calico
	// IPAM CRDs or when the pod's state does not call for it.
	IPAM *IPAMState
	// IPAMErr is set when Calico IPAM state could not be read.
	IPAMErr error
	// PreviousLogs maps a container name to the last lines of its previous instance's log
	// (pods/log?previous=true, tail-limited), for containers that restarted.
	PreviousLogs map[string]LogTail
	// ServerVersion is the API server's /version; nil if it could not be read.
	ServerVersion *version.Info
	// SimilarPods holds "namespace/name" of existing pods whose names are closest to the one
	// asked for; filled only when Pod is nil (pod-not-found).
	SimilarPods []string
	// Readable, when not nil, holds the other namespaces whose objects the answer may name
	// (per-user authorization: those the asker may read); any other namespace's pod or
	// workload is named only as "in a namespace you cannot read" (MayName, PodName). Nil
	// names everything.
	Readable map[string]bool
}

// UnreadablePod is how an answer names a pod of a namespace the asker cannot read.
const UnreadablePod = "a pod in a namespace you cannot read"

// MayName reports whether the answer may name an object of namespace: the pod's own
// namespace, or any namespace when Readable is nil, or one Readable holds. It is the one
// place the rules ask.
func (s *Snapshot) MayName(namespace string) bool {
	return s == nil || s.Readable == nil || namespace == s.Requested.Namespace || s.Readable[namespace]
}

// PodName names p in the answer: "pod NAMESPACE/NAME", or UnreadablePod when the answer may
// not name p's namespace (MayName).
func (s *Snapshot) PodName(p *corev1.Pod) string {
	if !s.MayName(p.Namespace) {
		return UnreadablePod
	}
	return "pod " + p.Namespace + "/" + p.Name
}

// Event is one pod event, normalised from core/v1 Event or events.k8s.io/v1 Event.
type Event struct {
	// Type is "Normal" or "Warning".
	Type string `json:"type"`
	// Reason is the event reason, e.g. "FailedScheduling", "FailedCreatePodSandBox".
	Reason string `json:"reason"`
	// Message is the event message (core/v1 message, events.k8s.io note).
	Message string `json:"message"`
	// Count is how many times it was seen (series.count, else count, at least 1).
	Count int32 `json:"count"`
	// FirstSeen is firstTimestamp, else eventTime.
	FirstSeen time.Time `json:"firstSeen,omitzero"`
	// LastSeen is series.lastObservedTime if set, else lastTimestamp, else eventTime, else
	// firstTimestamp: the one time events are sorted on.
	LastSeen time.Time `json:"lastSeen,omitzero"`
	// Source is the reporting component, e.g. "default-scheduler", "kubelet".
	Source string `json:"source,omitempty"`
	// FieldPath is involvedObject.fieldPath, e.g. "spec.containers{app}".
	FieldPath string `json:"fieldPath,omitempty"`
}

// LogTail is the end of a container's previous log.
type LogTail struct {
	// Lines are the last lines, oldest first.
	Lines []string
	// Err says why the log could not be read (then Lines is empty).
	Err error
}

// IPAMState is the part of Calico IPAM state triage reads (through package calico, read only).
type IPAMState struct {
	// DatastoreReady is ClusterInformation default spec.datastoreReady (nil when unset).
	DatastoreReady *bool
	// StrictAffinity and MaxBlocksPerHost come from IPAMConfig default (MaxBlocksPerHost is the
	// effective limit: 0 in the object means Calico's default of 20).
	StrictAffinity   bool
	MaxBlocksPerHost int
	// Pools is the usage of each IPPool.
	Pools []PoolUsage
	// NodeBlocks maps a node name to the number of blocks affine to it (confirmed affinities).
	NodeBlocks map[string]int
	// LeaksChecked is true when the leak check ran (calico.Overview.Check is set). When it
	// is false (the check's reads failed, see Snapshot.IPAMErr), LeakedIPs and LeakedIPsByNode
	// are unknown, not zero.
	LeaksChecked bool
	// LeakedIPs is how many allocations no pod or node uses (calicoctl ipam check's
	// "allocated but not in use"), cluster-wide.
	LeakedIPs int
	// LeakedIPsByNode counts those leaked allocations by the block's affine node.
	LeakedIPsByNode map[string]int
	// EmptyBlocks is how many affine blocks have 0 IPs in use.
	EmptyBlocks int
	// EmptyBlocksByNode counts those empty blocks by affine node.
	EmptyBlocksByNode map[string]int
	// EmptyBlockCIDRs lists those empty blocks' CIDRs by affine node, sorted (what
	// `whypending ipam release-blocks CIDR...` takes).
	EmptyBlockCIDRs map[string][]string
}

// PoolUsage is one IPPool's address usage.
type PoolUsage struct {
	// Name and CIDR come from the IPPool; Disabled is spec.disabled.
	Name     string
	CIDR     string
	Disabled bool
	// BlockSize is spec.blockSize, the prefix length of the pool's blocks (26 by default for
	// IPv4, 122 for IPv6); 0 when unknown.
	BlockSize int
	// Total is the number of addresses in the pool; InUse is the number allocated in its blocks.
	Total int
	InUse int
}

// SortEvents sorts events newest first by LastSeen (ties: by reason, then message, so the
// order is stable).
func SortEvents(events []Event) {
	sort.SliceStable(events, func(i, j int) bool {
		a, b := events[i], events[j]
		if !a.LastSeen.Equal(b.LastSeen) {
			return a.LastSeen.After(b.LastSeen)
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		return a.Message < b.Message
	})
}
