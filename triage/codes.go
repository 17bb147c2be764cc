package triage

import "slices"

// Code is a stable diagnosis slug from docs/triage-codes.md. Never rename one: tests, the
// digest and users' alert rules key on them. Each constant's comment says what the operator
// does next when it is the primary cause (the scheduling and context codes also say when
// they apply).
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
	// CodeCalicoIPAMExhausted (calico-ipam-exhausted): release Calico's leaked IPs (whypending ipam release-ips --lock); if nothing is leaked, add an IPPool.
	CodeCalicoIPAMExhausted Code = "calico-ipam-exhausted"
	// CodeCalicoIPAMBlockLimit (calico-ipam-block-limit): release the node's empty blocks (whypending ipam release-blocks), or raise maxBlocksPerHost / use larger blocks.
	CodeCalicoIPAMBlockLimit Code = "calico-ipam-block-limit"
	// CodeCalicoDatastoreLocked (calico-datastore-locked): make sure no IPAM repair or upgrade is running, then unlock the datastore (whypending ipam unlock, or calicoctl datastore migrate unlock).
	CodeCalicoDatastoreLocked Code = "calico-datastore-locked"
	// CodeCalicoNodeNotReady (calico-node-not-ready): fix the node's calico-node pod: read its previous log and events.
	CodeCalicoNodeNotReady Code = "calico-node-not-ready"
	// CodeCalicoWindowsStrictAffinity (calico-windows-strict-affinity): turn on IPAM strictAffinity (kubectl patch ipamconfigs default, or calicoctl ipam configure --strictaffinity=true); Calico's Windows nodes need it.
	CodeCalicoWindowsStrictAffinity Code = "calico-windows-strict-affinity"
	// CodeAWSVPCCNIIPExhausted (aws-vpc-cni-ip-exhausted): read aws-node's settings first: without prefix delegation, match max-pods to the ENI limit or enable it; with it, free contiguous /28s in the node's subnet (or use another subnet).
	CodeAWSVPCCNIIPExhausted Code = "aws-vpc-cni-ip-exhausted"
	// CodeCNINotInitialized (cni-not-initialized): get the CNI's DaemonSet pod running on the node so it writes its config to /etc/cni/net.d.
	CodeCNINotInitialized Code = "cni-not-initialized"
	// CodeCNIIPRangeExhausted (cni-ip-range-exhausted): compare the CNI's range or pool with the pods that hold addresses: restart the agent or clean up leaked reservations, or give the node more addresses.
	CodeCNIIPRangeExhausted Code = "cni-ip-range-exhausted"
	// CodeSandboxCreationFailed (sandbox-creation-failed): act on what the CNI or runtime said (the answer names the component and its words); on the node, read the kubelet and runtime journal.
	CodeSandboxCreationFailed Code = "sandbox-creation-failed"
	// CodeConfigMapNotFound (configmap-not-found): create the named ConfigMap (or fix the name in the template, or mark it optional).
	CodeConfigMapNotFound Code = "configmap-not-found"
	// CodeSecretNotFound (secret-not-found): create the named Secret (or fix the name in the template, or mark it optional).
	CodeSecretNotFound Code = "secret-not-found"
	// CodeMultiAttachRWO (multi-attach-rwo): wait for or delete the old pod that holds the ReadWriteOnce volume on another node; for a Deployment use strategy Recreate.
	CodeMultiAttachRWO Code = "multi-attach-rwo"
	// CodeCSIDriverNotRegistered (csi-driver-not-registered): get the CSI driver's node plugin (its node DaemonSet's pod) running on the node, fixing what its FailedCreate events say; the volume mounts once the driver registers with the kubelet.
	CodeCSIDriverNotRegistered Code = "csi-driver-not-registered"
	// CodeVolumeMountFailed (volume-mount-failed): act on what the kubelet or CSI driver said about the mount (the answer quotes it): the storage backend, the node's mount helpers, or the driver.
	CodeVolumeMountFailed Code = "volume-mount-failed"
)

// Waiting (image and container config).
const (
	// CodeImageNotFound (image-not-found): point the workload at an image and tag that exist, or push the image.
	CodeImageNotFound Code = "image-not-found"
	// CodeImagePullUnauthorized (image-pull-unauthorized): give the kubelet credentials for the registry: an imagePullSecret on the pod or its ServiceAccount, or pull rights for the node's identity.
	CodeImagePullUnauthorized Code = "image-pull-unauthorized"
	// CodeImagePullRateLimited (image-pull-rate-limited): authenticate pulls (an imagePullSecret), or pull through a mirror or cache.
	CodeImagePullRateLimited Code = "image-pull-rate-limited"
	// CodeRegistryQuotaExceeded (registry-quota-exceeded): ask the registry's owner to raise or reset the quota, or mirror the image elsewhere.
	CodeRegistryQuotaExceeded Code = "registry-quota-exceeded"
	// CodeImagePlatformMismatch (image-platform-mismatch): use an image built for the node's OS/architecture (multi-arch), or keep the pod on matching nodes.
	CodeImagePlatformMismatch Code = "image-platform-mismatch"
	// CodeImageNotPresentPullNever (image-not-present-pull-never): load the image onto the node, or set imagePullPolicy IfNotPresent and push it to a registry.
	CodeImageNotPresentPullNever Code = "image-not-present-pull-never"
	// CodeInvalidImageName (invalid-image-name): fix the image reference in the template ([registry/]repository[:tag][@digest]).
	CodeInvalidImageName Code = "invalid-image-name"
	// CodeRegistryCertificateUntrusted (registry-certificate-untrusted): trust the registry's CA on every node (or pull by a name its certificate covers).
	CodeRegistryCertificateUntrusted Code = "registry-certificate-untrusted"
	// CodeRegistryUnreachable (registry-unreachable): fix the registry name first when it does not resolve (compare it with the registries the cluster uses), then the node's DNS, proxy or firewall path to it.
	CodeRegistryUnreachable Code = "registry-unreachable"
	// CodeImageShortNameAmbiguous (image-short-name-ambiguous): use a fully qualified image name (docker.io/library/…).
	CodeImageShortNameAmbiguous Code = "image-short-name-ambiguous"
	// CodeImagePullFailed (image-pull-failed): read the runtime's own error on the node (crictl pull) and act on it.
	CodeImagePullFailed Code = "image-pull-failed"
	// CodeSecretKeyNotFound (secret-key-not-found): add the missing key to the Secret, or fix the key name in the template.
	CodeSecretKeyNotFound Code = "secret-key-not-found"
	// CodeConfigMapKeyNotFound (configmap-key-not-found): add the missing key to the ConfigMap, or fix the key name in the template.
	CodeConfigMapKeyNotFound Code = "configmap-key-not-found"
	// CodeReferencedObjectNowExists (referenced-object-now-exists): the kubelet (or, for a workload, the controller) reported a Secret, ConfigMap or ServiceAccount not found, and it exists now: do not create it again. Wait for the reporter's next try (the kubelet retries a container within about 15 seconds and a mount within about 2 minutes; a controller backs off longer); to retry at once, delete a pod its controller recreates (never a bare pod: it would be lost). Check that the object has the keys the pod reads.
	CodeReferencedObjectNowExists Code = "referenced-object-now-exists"
	// CodeCreateContainerError (create-container-error): act on what the runtime said (the answer names the field it points at: a seccomp or AppArmor profile, a mount's propagation, the command); fix the workload's template.
	CodeCreateContainerError Code = "create-container-error"
)

// Crashing or not ready.
const (
	// CodeOOMKilled (oom-killed): raise the container's memory limit above what it uses, or make it use less.
	CodeOOMKilled Code = "oom-killed"
	// CodeLivenessProbeFailed (liveness-probe-failed): fix the liveness probe (path, port, timeouts, initialDelaySeconds) or what makes the app stop answering it.
	CodeLivenessProbeFailed Code = "liveness-probe-failed"
	// CodeStartupProbeFailed (startup-probe-failed): give the startup probe enough failureThreshold × periodSeconds for the app to start, or fix what it checks.
	CodeStartupProbeFailed Code = "startup-probe-failed"
	// CodeReadinessProbeNeverReady (readiness-probe-never-ready): fix the readiness probe or what it checks (a dependency the app waits for).
	CodeReadinessProbeNeverReady Code = "readiness-probe-never-ready"
	// CodeContainerExitsImmediately (container-exits-immediately): give the container a long-running command, or run it as a Job if it is meant to finish.
	CodeContainerExitsImmediately Code = "container-exits-immediately"
	// CodeExecFormatError (exec-format-error): use an image built for the node's CPU architecture.
	CodeExecFormatError Code = "exec-format-error"
	// CodePermissionDenied (permission-denied): fix the file's mode or owner, or the container's runAsUser/fsGroup, so the process may read, write or execute it.
	CodePermissionDenied Code = "permission-denied"
	// CodeAppError (app-error): read the container's last log lines and fix the app or its configuration.
	CodeAppError Code = "app-error"
	// CodeInitContainerCrashloop (init-container-crashloop): read the init container's log and fix what it fails on.
	CodeInitContainerCrashloop Code = "init-container-crashloop"
	// CodeInitContainerWaitingDependency (init-container-waiting-dependency): start or fix the dependency the init container waits for (a Service, a DNS name, a database).
	CodeInitContainerWaitingDependency Code = "init-container-waiting-dependency"
)

// Terminating, lost, evicted.
const (
	// CodeFinalizerBlocking (finalizer-blocking): fix or start the controller that owns the finalizer; remove it by hand only when that controller is gone for good.
	CodeFinalizerBlocking Code = "finalizer-blocking"
	// CodeNodeUnreachableTerminating (node-unreachable-terminating): bring the node back, or, once it is known to be off, force-delete the pod.
	CodeNodeUnreachableTerminating Code = "node-unreachable-terminating"
	// CodeVolumeTeardownStuck (volume-teardown-stuck): fix the unmount or detach on the node (the answer quotes it), or force-detach the volume once the node is known to be off.
	CodeVolumeTeardownStuck Code = "volume-teardown-stuck"
	// CodeNodeLost (node-lost): bring the node back or remove it; its pods are recreated elsewhere once it is gone.
	CodeNodeLost Code = "node-lost"
	// CodeEvicted (evicted): relieve the node's named pressure (memory, disk, ephemeral-storage, pids), or set requests and limits so the pod is not the first evicted; delete the evicted pods.
	CodeEvicted Code = "evicted"
)

// Not stuck, or not found.
const (
	// CodePodHealthy (pod-healthy): nothing: the pod is Running and Ready.
	CodePodHealthy Code = "pod-healthy"
	// CodePodCompleted (pod-completed): nothing: the pod ran to completion.
	CodePodCompleted Code = "pod-completed"
	// CodePodNotFound (pod-not-found): ask again with one of the similar names the answer suggests (or the right namespace).
	CodePodNotFound Code = "pod-not-found"
	// CodeNamespaceNotFound (namespace-not-found): the namespace asked about (with -n, as NAMESPACE/POD, or the chat channel's) does not exist on this cluster: check the name (the closest are suggested) and the cluster (the bot names the configured clusters that have it)
	CodeNamespaceNotFound Code = "namespace-not-found"
)

// Workloads (why-pending TYPE/NAME and --all): what a controller cannot do for its pods.
const (
	// CodeResourceQuotaExceeded (resource-quota-exceeded): make room in the quota the answer names (its remaining room is given) or lower the pods' requests; for "must specify", set the named requests/limits (or a LimitRange default), never raise the quota; for an object count such as count/jobs.batch, remove finished objects (lower a CronJob's history limits, set ttlSecondsAfterFinished).
	CodeResourceQuotaExceeded Code = "resource-quota-exceeded"
	// CodePodSecurityViolation (pod-security-violation): set or remove the named securityContext fields in the template; for a system daemon (CSI, CNI) that needs them, label its namespace with the level it needs.
	CodePodSecurityViolation Code = "pod-security-violation"
	// CodeAdmissionWebhookDenied (admission-webhook-denied): change the template to what the webhook's message asks; when the webhook cannot be called, fix its backend (and break a deadlock where the webhook refuses its own backend's pods).
	CodeAdmissionWebhookDenied Code = "admission-webhook-denied"
	// CodeServiceAccountNotFound (service-account-not-found): create the ServiceAccount in the namespace (or point the template at one that exists; a same-named one in another namespace does not count).
	CodeServiceAccountNotFound Code = "service-account-not-found"
	// CodeLimitRangeViolation (limit-range-violation): set the container's requests and limits within the LimitRange's bounds (the answer gives them).
	CodeLimitRangeViolation Code = "limit-range-violation"
	// CodeOpenShiftSCCDenied (openshift-scc-denied): remove or change the named securityContext field so an SCC the pods' ServiceAccount may use admits it, or grant that ServiceAccount the SCC it needs (oc adm policy add-scc-to-user).
	CodeOpenShiftSCCDenied Code = "openshift-scc-denied"
	// CodeRolloutStalled (rollout-stalled): fix the cause the new ReplicaSet's pods show, or roll back to the previous revision.
	CodeRolloutStalled Code = "rollout-stalled"
	// CodeJobBackoffLimit (job-backoff-limit): fix what the Job's pods fail on, then run the Job again (a failed Job never retries).
	CodeJobBackoffLimit Code = "job-backoff-limit"
	// CodeJobFailed (job-failed): fix the reason in the Job's Failed condition, then run it again.
	CodeJobFailed Code = "job-failed"
	// CodeCronJobBlockedByActiveJob (cronjob-blocked-by-active-job): fix or delete the named active Job that never finishes (concurrencyPolicy Forbid skips every schedule while it runs), and give the CronJob's job template an activeDeadlineSeconds and backoffLimit so it cannot hang again.
	CodeCronJobBlockedByActiveJob Code = "cronjob-blocked-by-active-job"
	// CodeDaemonSetUnplaced (daemonset-unplaced): fix what keeps the DaemonSet's pods off the named nodes (each node's reason is given).
	CodeDaemonSetUnplaced Code = "daemonset-unplaced"
	// CodeWorkloadHealthy (workload-healthy): nothing: every pod the workload wants is Running and Ready, or it is between runs.
	CodeWorkloadHealthy Code = "workload-healthy"
	// CodeWorkloadNotFound (workload-not-found): ask again with one of the similar workload names the answer suggests.
	CodeWorkloadNotFound Code = "workload-not-found"
)

// Context findings (never the primary cause on their own).
const (
	// CodeNodeNotReady (node-not-ready): the pod's node or candidate nodes are NotReady. Next:
	// the node's kubelet, container runtime and network (kubectl describe node).
	CodeNodeNotReady Code = "node-not-ready"
	// CodeKubeletVersionSkew (kubelet-version-skew): upgrade the kubelet to within the supported skew of the API server, one minor version at a time.
	CodeKubeletVersionSkew Code = "kubelet-version-skew"
	// CodeCalicoIPAMLeaks (calico-ipam-leaks): release the leaked allocations (whypending ipam release-ips --lock).
	CodeCalicoIPAMLeaks Code = "calico-ipam-leaks"
	// CodeCalicoIPAMEmptyBlocks (calico-ipam-empty-blocks): release the empty blocks (whypending ipam release-blocks --all-empty) if nodes run into the block limit.
	CodeCalicoIPAMEmptyBlocks Code = "calico-ipam-empty-blocks"
)

// CodeUnknown is emitted when no rule is sure; the diagnosis is then marked Uncertain.
const CodeUnknown Code = "unknown"

// Pending reports whether c is a cause that keeps a pod unscheduled (the Pending family of
// docs/triage-codes.md), found by the scheduling rules.
func (c Code) Pending() bool {
	return c != CodeNodeNotReady && slices.Contains(schedulingOrder, c)
}

// Terminating reports whether c is a cause that keeps a deleted pod from going away (the
// Terminating family of docs/triage-codes.md): once the pod is gone, that problem is over.
func (c Code) Terminating() bool {
	return c == CodeFinalizerBlocking || c == CodeNodeUnreachableTerminating || c == CodeVolumeTeardownStuck
}
