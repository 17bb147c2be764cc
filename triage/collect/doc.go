// Package collect reads, in one pass, everything package triage's rules need to explain a pod
// into a triage.Snapshot, and Diagnose evaluates it. It is the only part of triage that talks
// to the API server.
//
// A Collector decides what to read for a question and builds the Snapshot; every read goes
// through one reader interface (reader.go) with two implementations, as controller-runtime's
// client.Reader has the API client and the cache. New reads the API on every question
// (apiReader, reader_api.go: the CLI's one-shot answers, like kubectl describe); NewCached
// keeps pods, nodes, PVCs, PVs, pod events and the workload kinds in shared informers
// (cacheReader, reader_cache.go and workload_cache.go), so a warm question sends almost no
// request (the bot). The Collector never asks which one it holds, so cold and warm answers
// are built by the same code and agree. Expensive optional reads (Calico IPAM in calico.go,
// previous container logs in logs.go) happen only when the rules say the pod's state calls
// for them (triage.NeedsIPAM, triage.LogCandidates).
//
// Answer is the one entry point the CLI and the bot share: a pod (Diagnose), a workload
// (DiagnoseWorkload: CollectWorkload reads the workload, its controllers' events, the
// namespace's quotas, limit ranges and pod-security labels, and its pods' Snapshots with the
// reads they share done once, in podBatch) or a namespace (Sweep: one read per kind, light pod
// Snapshots). AnswerEach answers many questions at once (a watch's stuck pods and workloads)
// with the cluster-wide reads made once for all (shared.go).
//
// The node table of an unscheduled pod judges every node, and a large cluster's cache holds
// over 100,000 pods: the cached backend hands the rules the pods bound to each node one node
// at a time (leanNodePods, a triage.NodePods), built from the lean cache entries only when a
// filter reads that node, with the per-node requests summed from the entries; and pods of
// one workload with the same demand share one table (triage.NodeTables).
//
// Each question notes the reads the API server refuses (refusals.go), so an asker with partial
// read rights gets a partial answer that says what is missing, not a silent unknown.
//
// Files: collect.go (Collector, Collect), reader*.go (the reads), workload.go, namespace.go,
// batch.go (workload questions and sweeps), storage.go (claims, volumes, CSI limits),
// events.go (event normalisation), names.go (the names, creation times and ConfigMap keys that
// tell a not-found answer whether the object exists now, and its near names), calico.go,
// logs.go, leanpod.go and intern.go (the lean pod cache), answer.go (Answer), shared.go
// (AnswerEach and the cluster-wide reads).
package collect
