package triage

import "slices"

// Code is a stable diagnosis slug from docs/triage-codes.md. Never rename one: tests, the
// digest and users' alert rules key on them. Each constant's comment says when it applies (the
// scheduling codes also say what the operator does next).
type Code string

// Pending (not scheduled). Each comment says when the code applies, then what the operator
// does next.
const (
	// CodeInsufficientCPU (insufficient-cpu): no node has the pod's cpu request free. Next:
	// free cpu on the closest node, lower the request to what it has free, or add a node; the
	// answer says whether the free cpu is only fragmented across nodes.
	CodeInsufficientCPU Code = "insufficient-cpu"
	// CodeInsufficientMemory (insufficient-memory): no node has the pod's memory request free.
	// Next: free memory on the closest node, lower the request, or add a node.
	CodeInsufficientMemory Code = "insufficient-memory"
	// CodeInsufficientEphemeralStorage (insufficient-ephemeral-storage): no node has the pod's
	// ephemeral-storage request free (or the kubelets report none allocatable). Next: free disk
	// on a node, lower the request, or add a node with local storage.
	CodeInsufficientEphemeralStorage Code = "insufficient-ephemeral-storage"
	// CodeInsufficientExtendedResource (insufficient-extended-resource): no node has the
	// extended resource the pod requests (nvidia.com/gpu, hugepages) free. Next: free or add a
	// node that advertises it; when no node advertises it, check its device plugin.
	CodeInsufficientExtendedResource Code = "insufficient-extended-resource"
	// CodeTooManyPods (too-many-pods): nodes are at their pods capacity (the kubelet's
	// maxPods). Next: remove finished or unneeded pods, add a node, or raise maxPods.
	CodeTooManyPods Code = "too-many-pods"
	// CodeUntoleratedTaint (untolerated-taint): the nodes meant for the pod carry a taint it does
	// not tolerate. Next: a taint a controller owns (not-ready, pressure, cloud initialisation,
	// autoscaler) goes away when its owner is fixed; a control-plane or system taint stays, and
	// the pod needs room elsewhere; your own taint is tolerated on purpose or removed.
	CodeUntoleratedTaint Code = "untolerated-taint"
	// CodeNodeSelectorMismatch (node-selector-mismatch): the pod's nodeSelector or required node
	// affinity matches no node that could take it. Next: fix the selector to labels the nodes
	// carry, or label a node meant for the pod (never a label Kubernetes or the cloud sets).
	CodeNodeSelectorMismatch Code = "node-selector-mismatch"
	// CodeNodeUnschedulable (node-unschedulable): the nodes that would take the pod are cordoned
	// (spec.unschedulable). Next: uncordon a node whose maintenance is over, or find room on
	// the others.
	CodeNodeUnschedulable Code = "node-unschedulable"
	// CodePodAffinityUnsatisfiable (pod-affinity-unsatisfiable): required pod affinity finds no
	// pod to run next to in any domain the pod can use. Next: start those pods first, or relax
	// the rule to preferredDuringScheduling.
	CodePodAffinityUnsatisfiable Code = "pod-affinity-unsatisfiable"
	// CodePodAntiAffinityUnsatisfiable (pod-anti-affinity-unsatisfiable): required pod
	// anti-affinity (the pod's own or an existing pod's) rules out every node. Next: add nodes
	// or domains, run fewer replicas, use a narrower topologyKey, or make it preferred.
	CodePodAntiAffinityUnsatisfiable Code = "pod-anti-affinity-unsatisfiable"
	// CodeTopologySpreadUnsatisfiable (topology-spread-unsatisfiable): topologySpreadConstraints
	// with DoNotSchedule cannot be met. Next: add capacity in the emptiest domain the pod can
	// use, set nodeTaintsPolicy/nodeAffinityPolicy Honor when nodes it cannot use count as
	// domains, or raise maxSkew or use ScheduleAnyway.
	CodeTopologySpreadUnsatisfiable Code = "topology-spread-unsatisfiable"
	// CodeHostPortConflict (host-port-conflict): the pod's hostPort is taken on every node that
	// could take it. Next: drop hostPort (use a Service) or pick a free port; an older pod of
	// the same Deployment holding it needs maxSurge 0.
	CodeHostPortConflict Code = "host-port-conflict"
	// CodePVCUnbound (pvc-unbound): a claim the pod mounts is not bound, so the scheduler waits.
	// Next: what the answer names for the claim: its StorageClass (missing, no provisioner),
	// the provisioner's events, or a matching PersistentVolume to create.
	CodePVCUnbound Code = "pvc-unbound"
	// CodePVCNotFound (pvc-not-found): the pod mounts a PersistentVolumeClaim that does not
	// exist. Next: create the claim, or fix claimName in the pod's workload.
	CodePVCNotFound Code = "pvc-not-found"
	// CodeVolumeNodeAffinityConflict (volume-node-affinity-conflict): the node affinity or zone
	// labels of a PersistentVolume the pod's claims are bound to rule out the nodes the pod can
	// use. Next: when the claims were bound where the pod may not run (Immediate binding, or two
	// claims in two zones), a StorageClass with volumeBindingMode WaitForFirstConsumer or
	// allowedTopologies and a recreated claim; bring back a node only when none is left where
	// the volume is.
	CodeVolumeNodeAffinityConflict Code = "volume-node-affinity-conflict"
	// CodeVolumeAttachLimit (volume-attach-limit): nodes are at their CSI attachable-volume
	// limit (CSINode spec.drivers[].allocatable.count, "exceed max volume count"). Next: add a
	// node or an instance type that attaches more volumes, or need fewer volumes per node.
	CodeVolumeAttachLimit Code = "volume-attach-limit"
	// CodeSchedulingGated (scheduling-gated): spec.schedulingGates are not removed, so the
	// scheduler does not look at the pod. Next: find the controller that owns each gate and why
	// it holds the pod.
	CodeSchedulingGated Code = "scheduling-gated"
	// CodeNoNodes (no-nodes): the cluster has no nodes. Next: check why the kubelets do not
	// register (node group size, bootstrap token, kubelet logs).
	CodeNoNodes Code = "no-nodes"
	// CodeSchedulerNotRunning (scheduler-not-running): the pod is Pending and unscheduled, and no
	// scheduler has written any event or condition for it. Next: check that the scheduler it
	// names (spec.schedulerName) runs and holds its leader lease.
	CodeSchedulerNotRunning Code = "scheduler-not-running"
)

// ContainerCreating (sandbox or volumes).
const (
	// CodeCalicoIPAMExhausted (calico-ipam-exhausted): "failed to request N IPv4 addresses. IPAM allocated only 0", "pools are likely exhausted": IPAM believes the pool is used up (often leaked IPs)
	CodeCalicoIPAMExhausted Code = "calico-ipam-exhausted"
	// CodeCalicoIPAMBlockLimit (calico-ipam-block-limit): "cannot allocate new block due to per host block limit" (maxBlocksPerHost, strictAffinity)
	CodeCalicoIPAMBlockLimit Code = "calico-ipam-block-limit"
	// CodeCalicoDatastoreLocked (calico-datastore-locked): "Calico is currently not ready to process requests": ClusterInformation datastoreReady=false
	CodeCalicoDatastoreLocked Code = "calico-datastore-locked"
	// CodeCalicoNodeNotReady (calico-node-not-ready): the node's calico-node pod is not ready or crash-looping (calico-system or kube-system)
	CodeCalicoNodeNotReady Code = "calico-node-not-ready"
	// CodeAWSVPCCNIIPExhausted (aws-vpc-cni-ip-exhausted): "failed to assign an IP address to container" (aws-node / ipamd)
	CodeAWSVPCCNIIPExhausted Code = "aws-vpc-cni-ip-exhausted"
	// CodeCNINotInitialized (cni-not-initialized): "network plugin is not ready: cni config uninitialized"
	CodeCNINotInitialized Code = "cni-not-initialized"
	// CodeCNIIPRangeExhausted (cni-ip-range-exhausted): a node-local IPAM range is full ("no IP addresses available in range set", host-local as used by flannel, canal, antrea and bridge): compare the pods running on the node with the range size; reservations leaked by failed CNI ADD/DEL are the usual cause
	CodeCNIIPRangeExhausted Code = "cni-ip-range-exhausted"
	// CodeSandboxCreationFailed (sandbox-creation-failed): any other FailedCreatePodSandBox
	CodeSandboxCreationFailed Code = "sandbox-creation-failed"
	// CodeConfigMapNotFound (configmap-not-found): a volume's ConfigMap or Secret does not exist (FailedMount)
	CodeConfigMapNotFound Code = "configmap-not-found"
	// CodeSecretNotFound (secret-not-found): a volume's ConfigMap or Secret does not exist (FailedMount)
	CodeSecretNotFound Code = "secret-not-found"
	// CodeMultiAttachRWO (multi-attach-rwo): "Multi-Attach error": a ReadWriteOnce volume is still attached elsewhere
	CodeMultiAttachRWO Code = "multi-attach-rwo"
	// CodeVolumeMountFailed (volume-mount-failed): any other FailedMount / FailedAttachVolume
	CodeVolumeMountFailed Code = "volume-mount-failed"
)

// Waiting (image and container config).
const (
	// CodeImageNotFound (image-not-found): repository or tag does not exist ("manifest unknown", "not found")
	CodeImageNotFound Code = "image-not-found"
	// CodeImagePullUnauthorized (image-pull-unauthorized): "pull access denied", "unauthorized", "no basic auth credentials"
	CodeImagePullUnauthorized Code = "image-pull-unauthorized"
	// CodeImagePullRateLimited (image-pull-rate-limited): "toomanyrequests"
	CodeImagePullRateLimited Code = "image-pull-rate-limited"
	// CodeRegistryQuotaExceeded (registry-quota-exceeded): the registry refuses because a storage or pull quota is reached
	CodeRegistryQuotaExceeded Code = "registry-quota-exceeded"
	// CodeImagePlatformMismatch (image-platform-mismatch): "no matching manifest for linux/…"
	CodeImagePlatformMismatch Code = "image-platform-mismatch"
	// CodeImageNotPresentPullNever (image-not-present-pull-never): ErrImageNeverPull
	CodeImageNotPresentPullNever Code = "image-not-present-pull-never"
	// CodeInvalidImageName (invalid-image-name): InvalidImageName
	CodeInvalidImageName Code = "invalid-image-name"
	// CodeRegistryCertificateUntrusted (registry-certificate-untrusted): the runtime does not trust the registry's TLS certificate ("x509: certificate signed by unknown authority", "certificate is not valid for")
	CodeRegistryCertificateUntrusted Code = "registry-certificate-untrusted"
	// CodeRegistryUnreachable (registry-unreachable): the registry cannot be reached ("dial tcp … i/o timeout", "connection refused", "no such host", a proxy error)
	CodeRegistryUnreachable Code = "registry-unreachable"
	// CodeImageShortNameAmbiguous (image-short-name-ambiguous): a short image name (no registry) that the runtime refuses to resolve, e.g. CRI-O short-name mode "enforcing" with several unqualified-search registries (ImageInspectError)
	CodeImageShortNameAmbiguous Code = "image-short-name-ambiguous"
	// CodeImagePullFailed (image-pull-failed): any other pull failure
	CodeImagePullFailed Code = "image-pull-failed"
	// CodeSecretKeyNotFound (secret-key-not-found): CreateContainerConfigError from env/envFrom
	CodeSecretKeyNotFound Code = "secret-key-not-found"
	// CodeConfigMapKeyNotFound (configmap-key-not-found): CreateContainerConfigError from env/envFrom
	CodeConfigMapKeyNotFound Code = "configmap-key-not-found"
	// CodeCreateContainerError (create-container-error): any other CreateContainerError / RunContainerError
	CodeCreateContainerError Code = "create-container-error"
)

// Crashing or not ready.
const (
	// CodeOOMKilled (oom-killed): last termination OOMKilled (exit 137): show limit vs usage if known
	CodeOOMKilled Code = "oom-killed"
	// CodeLivenessProbeFailed (liveness-probe-failed): kubelet kills the container after failed liveness probes
	CodeLivenessProbeFailed Code = "liveness-probe-failed"
	// CodeStartupProbeFailed (startup-probe-failed): same for the startup probe
	CodeStartupProbeFailed Code = "startup-probe-failed"
	// CodeReadinessProbeNeverReady (readiness-probe-never-ready): Running but never Ready because the readiness probe fails
	CodeReadinessProbeNeverReady Code = "readiness-probe-never-ready"
	// CodeContainerExitsImmediately (container-exits-immediately): exits 0 ("Completed") and restartPolicy restarts it
	CodeContainerExitsImmediately Code = "container-exits-immediately"
	// CodeExecFormatError (exec-format-error): binary built for another CPU architecture
	CodeExecFormatError Code = "exec-format-error"
	// CodePermissionDenied (permission-denied): the process cannot read/write/exec what it needs (fsGroup, runAsUser, volume permissions)
	CodePermissionDenied Code = "permission-denied"
	// CodeAppError (app-error): any other non-zero exit: show exit code, reason and the last log lines
	CodeAppError Code = "app-error"
	// CodeInitContainerCrashloop (init-container-crashloop): an init container fails repeatedly
	CodeInitContainerCrashloop Code = "init-container-crashloop"
	// CodeInitContainerWaitingDependency (init-container-waiting-dependency): an init container keeps running, waiting for something
	CodeInitContainerWaitingDependency Code = "init-container-waiting-dependency"
)

// Terminating, lost, evicted.
const (
	// CodeFinalizerBlocking (finalizer-blocking): deletionTimestamp set and finalizers remain (name them and the controller that owns each)
	CodeFinalizerBlocking Code = "finalizer-blocking"
	// CodeNodeUnreachableTerminating (node-unreachable-terminating): deleted, but its node is NotReady/unreachable so the kubelet never confirms
	CodeNodeUnreachableTerminating Code = "node-unreachable-terminating"
	// CodeVolumeTeardownStuck (volume-teardown-stuck): unmount/detach errors keep the pod from finishing
	CodeVolumeTeardownStuck Code = "volume-teardown-stuck"
	// CodeNodeLost (node-lost): status Unknown / NodeLost
	CodeNodeLost Code = "node-lost"
	// CodeEvicted (evicted): status.reason Evicted (say which pressure: memory, disk, ephemeral-storage, pids)
	CodeEvicted Code = "evicted"
)

// Not stuck, or not found.
const (
	// CodePodHealthy (pod-healthy): Running and Ready: say so plainly
	CodePodHealthy Code = "pod-healthy"
	// CodePodCompleted (pod-completed): Succeeded
	CodePodCompleted Code = "pod-completed"
	// CodePodNotFound (pod-not-found): no such pod: suggest the closest names in that and other namespaces
	CodePodNotFound Code = "pod-not-found"
	// CodeNamespaceNotFound (namespace-not-found): the namespace asked about (with -n, as NAMESPACE/POD, or the chat channel's) does not exist on this cluster: check the name (the closest are suggested) and the cluster (the bot names the configured clusters that have it)
	CodeNamespaceNotFound Code = "namespace-not-found"
)

// Workloads (why-pending TYPE/NAME and --all): what a controller cannot do for its pods.
const (
	// CodeResourceQuotaExceeded (resource-quota-exceeded): FailedCreate: a ResourceQuota refuses the pod ("exceeded quota": what the pod asks, what is used of the hard limit), or requires requests/limits the template does not set ("failed quota: must specify")
	CodeResourceQuotaExceeded Code = "resource-quota-exceeded"
	// CodePodSecurityViolation (pod-security-violation): FailedCreate: the namespace's Pod Security level (pod-security.kubernetes.io/enforce) rejects the pod template; name the level and each field to set
	CodePodSecurityViolation Code = "pod-security-violation"
	// CodeAdmissionWebhookDenied (admission-webhook-denied): FailedCreate: a validating or mutating admission webhook denied the pod (its name and message), or could not be called and its failurePolicy is Fail
	CodeAdmissionWebhookDenied Code = "admission-webhook-denied"
	// CodeServiceAccountNotFound (service-account-not-found): FailedCreate: the template's serviceAccountName does not exist in the namespace (suggest the closest names)
	CodeServiceAccountNotFound Code = "service-account-not-found"
	// CodeLimitRangeViolation (limit-range-violation): FailedCreate: a LimitRange's min, max or limit/request ratio rejects the pod's requests or limits
	CodeLimitRangeViolation Code = "limit-range-violation"
	// CodeRolloutStalled (rollout-stalled): a Deployment's Progressing condition is False with ProgressDeadlineExceeded: quote the condition and the new ReplicaSet's pod causes
	CodeRolloutStalled Code = "rollout-stalled"
	// CodeJobBackoffLimit (job-backoff-limit): a Job (or a CronJob's newest Job) failed with BackoffLimitExceeded: its pods failed spec.backoffLimit times; the pod groups say why
	CodeJobBackoffLimit Code = "job-backoff-limit"
	// CodeJobFailed (job-failed): a Job failed for another reason (DeadlineExceeded, PodFailurePolicy, MaxFailedIndexesExceeded, …): quote its Failed condition
	CodeJobFailed Code = "job-failed"
	// CodeDaemonSetUnplaced (daemonset-unplaced): a DaemonSet has no scheduled pod on nodes it should run on (which nodes, and each pod's reason), or, as context, skips nodes by its own rules (untolerated taints, node selector)
	CodeDaemonSetUnplaced Code = "daemonset-unplaced"
	// CodeWorkloadHealthy (workload-healthy): every pod the workload wants is Running and Ready (or its Job completed, it is scaled to zero, its CronJob is suspended or between runs)
	CodeWorkloadHealthy Code = "workload-healthy"
	// CodeWorkloadNotFound (workload-not-found): no such Deployment, StatefulSet, DaemonSet, Job, CronJob or ReplicaSet: suggest the closest names
	CodeWorkloadNotFound Code = "workload-not-found"
)

// Context findings (never the primary cause on their own).
const (
	// CodeNodeNotReady (node-not-ready): the pod's node or candidate nodes are NotReady. Next:
	// the node's kubelet, container runtime and network (kubectl describe node).
	CodeNodeNotReady Code = "node-not-ready"
	// CodeKubeletVersionSkew (kubelet-version-skew): a node's kubelet is outside the supported skew of the API server
	CodeKubeletVersionSkew Code = "kubelet-version-skew"
	// CodeCalicoIPAMLeaks (calico-ipam-leaks): IPAM holds allocations no pod or node uses (count them; offer the release action)
	CodeCalicoIPAMLeaks Code = "calico-ipam-leaks"
	// CodeCalicoIPAMEmptyBlocks (calico-ipam-empty-blocks): affine blocks with 0 IPs in use (count them; offer the block release action)
	CodeCalicoIPAMEmptyBlocks Code = "calico-ipam-empty-blocks"
)

// CodeUnknown is emitted when no rule is sure; the diagnosis is then marked Uncertain.
const CodeUnknown Code = "unknown"

// Pending reports whether c is a cause that keeps a pod unscheduled (the Pending family of
// docs/triage-codes.md), found by the scheduling rules.
func (c Code) Pending() bool {
	return c != CodeNodeNotReady && slices.Contains(schedulingOrder, c)
}
