// Package collect reads, in one pass, everything package triage's rules need to explain a pod
// into a triage.Snapshot, and Diagnose evaluates it. It is the only part of triage that talks
// to the API server.
//
// A Collector has two backends behind one type: New reads the API on every Collect (the CLI's
// one-shot answers, like kubectl describe); NewCached keeps pods, nodes, PVCs, PVs and pod
// events in shared informers, so a warm Collect sends almost no request (the bot). Both build
// the Snapshot with the same code, so cold and warm answers agree. Expensive optional reads
// (Calico IPAM, previous container logs) happen only when the rules say the pod's state calls
// for them (triage.NeedsIPAM, triage.LogCandidates).
//
// Answer is the one entry point the CLI and the bot share: a pod (Diagnose), a workload
// (DiagnoseWorkload: CollectWorkload reads the workload, its controllers' events, the
// namespace's quotas, limit ranges and pod-security labels, and its pods' Snapshots with the
// reads they share done once, in podBatch) or a namespace (Sweep: one read per kind, light pod
// Snapshots). The cached backend keeps the workload kinds, namespaces, quotas, limit ranges and
// controller events in informers too (workload_cache.go), so a warm sweep sends no request.
package collect
