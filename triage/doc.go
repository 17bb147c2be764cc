// Package triage explains why a pod is stuck, with pure rules over a Snapshot.
//
// A diagnosis has two steps, like kubectl describe and the kube-scheduler's filter plugins:
//
//  1. Package triage/collect reads everything a diagnosis needs once, within a fixed request
//     budget, into a Snapshot: the pod, all of its events (core/v1 and events.k8s.io), the
//     nodes and the pods bound to them, the pod's PVCs, PVs and StorageClasses, the
//     calico-node pods, a Calico IPAM summary (read only, through package calico) and, for
//     crashing containers, the tail of the previous log. It is the only place in triage that
//     talks to the API server.
//  2. Evaluate runs the rules of this package over the Snapshot. Rules are pure functions
//     (func(*Snapshot) []Finding) listed in rules.go, one file per family: scheduling,
//     images, crashloop, network, volumes, terminating, nodes, …. They never call the API:
//     this package does not import client-go (TestRulesDoNoIO checks it).
//
// To add a rule: write its family file (or add to one), add one line to rules in rules.go,
// give it a table test beside it and a scenario folder under testdata/.
//
// The scheduling family is laid out like the kube-scheduler's filter plugins:
// scheduling_filters.go has one row per filter plugin of the default profile, in its order
// (plugin, codes, the scheduler's words, the per-node judgement, its prose), and each plugin it
// models has one file, scheduling_<plugin>.go, with its judgement, its prose and its table test.
// A new scheduling code is one row (or a code in a row), the constant in codes.go, its row in
// docs/triage-codes.md and a test case.
//
// A component's message is as old as its last try. A rule that reads "not found" in a kubelet's
// or controller's words (a Secret, ConfigMap or ServiceAccount) checks the object against a live
// list of the namespace's names before it says the object does not exist: one that exists now
// is referenced-object-now-exists (exists_now.go), and one whose kind could not be listed is
// only said to have been reported missing, and when. Unknown is never read as absent, nor as
// present.
//
// The primary cause is Diagnosis.Findings[0]; its Code is a stable slug from
// docs/triage-codes.md that tests, the digest and users' alert rules key on.
//
// Questions name a Target (ParseTarget reads "POD", "NAMESPACE/POD", "TYPE/NAME" and --all the
// way kubectl reads TYPE/NAME). A workload is explained from a WorkloadSnapshot: the workload,
// its ReplicaSets or Jobs, their events (a controller's FailedCreate is often the only trace of
// a pod the API server refused), the namespace's admission settings, and a pod Snapshot of each
// pod read in full. EvaluateWorkload groups the pods by their own primary code, each group with
// one pod's full Diagnosis, and runs the workload rules (workloadRules in rules.go: FailedCreate
// causes, failed Jobs, stalled rollouts, DaemonSets short of nodes). EvaluateNamespace sweeps a
// NamespaceSnapshot the same way. Every answer is an Answer.
package triage
