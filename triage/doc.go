// Package triage explains why a pod is stuck.
//
// Diagnose works in two steps, like kubectl describe and the kube-scheduler's filter plugins:
//
//  1. Collect reads everything a diagnosis needs once, within a fixed request budget, into a
//     Snapshot: the pod, all of its events (core/v1 and events.k8s.io), the nodes and the pods
//     bound to them, the pod's PVCs, the calico-node pods, a Calico IPAM summary (read only,
//     through package calico) and, for crashing containers, the tail of the previous log.
//  2. Pure rules (one file per family: scheduling, images, crashloop, network, volumes,
//     terminating, nodes) read the Snapshot and return Findings. Rules never call the API.
//
// The primary cause is Diagnosis.Findings[0]; its Code is a stable slug from
// shared/triage-codes.md that tests, the digest and users' alert rules key on.
package triage
