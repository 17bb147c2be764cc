// Package calico reads and repairs Calico IPAM state stored in Kubernetes (KDD mode) through
// the Kubernetes API: IPPools, IPAMBlocks, BlockAffinities, IPAMHandles, IPAMConfig and
// ClusterInformation, in crd.projectcalico.org/v1 or, where only that group is served,
// projectcalico.org/v3. It depends on client-go only (no libcalico-go).
//
// A Client (NewClient) offers:
//
//   - Check: calicoctl ipam check — leaked allocations, in-use addresses with no allocation,
//     leaked and missing handles, broken block invariants — with calicoctl's text output
//     (CheckResult.WriteText) and report schema (CheckResult.WriteReport, ReadReport).
//   - Utilization: calicoctl ipam show --show-blocks plus block ownership, per-node block
//     counts against maxBlocksPerHost, and empty blocks.
//   - ReleaseIPs: frees leaked addresses with one compare-and-set write per block and one per
//     handle, re-verifying every address against live pods and nodes right before each
//     block write.
//   - ReleaseEmptyBlocks: Calico's own procedure for deleting an empty block and its
//     affinity.
//   - Lock, Lock.Unlock, RecoverLocks, UnlockOwner, ForceUnlock, LockStatus: the datastore
//     lock (ClusterInformation spec.datastoreReady) with an owner marker, so a lock left by a
//     killed process is undone by the owner's next start.
//
// Files by concern: client.go (connection, API group detection, paginated lists), model.go
// (the objects as read), names.go (object names, UID conversion, ordinal arithmetic),
// usage.go and podproto.go (what uses addresses: pods, node tunnels, LoadBalancers),
// check.go, utilization.go, release.go and verify.go, blocks.go, lock.go.
//
// Writes never marshal the structs in model.go: they change the unstructured object that was
// read, so fields this package does not know survive, and carry its resourceVersion.
//
// The client needs, in the Calico group: get, list, update and delete on ipamblocks,
// blockaffinities and ipamhandles; get, list and update on clusterinformations; get and list
// on ippools and ipamconfigs (ipamconfigurations in v3). In the core group: list on pods,
// namespaces and services; get and list on nodes.
package calico
