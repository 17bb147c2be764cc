// Package calico reads and repairs Calico IPAM state stored in Kubernetes (KDD mode) through
// the Kubernetes API: IPPools, IPAMBlocks, BlockAffinities, IPAMHandles, IPAMConfig and
// ClusterInformation. It provides Check (like calicoctl ipam check), Utilization (like
// calicoctl ipam show --show-blocks), releasing leaked IPs and empty blocks, and the datastore
// lock. It depends on client-go only.
package calico
