package triage

// rule is one family of checks over a Snapshot, in the shape of a scheduler filter plugin
// without the framework: pure, no API calls. It returns every finding it is sure of. A finding
// with SeverityBlocker is a candidate primary cause; others are context.
type rule struct {
	name  string
	check func(s *Snapshot) []Finding
}

// rules lists every rule family in priority order: when several families report a blocker,
// the first one here is the primary cause. Adding a rule means one file, one scenario folder
// and one line here.
var rules = []rule{
	// Gone or going away: the pod's lifecycle outranks anything inside it. Evicted and
	// NodeLost come before terminating: a NodeLost pod that was then deleted is explained by
	// its lost node (terminatingRules leaves it alone), and an evicted pod is never deleted
	// by its own kubelet.
	{"evicted-or-lost", evictedRules},
	{"terminating", terminatingRules},

	// Not scheduled yet.
	{"scheduling", schedulingRules},

	// Scheduled, not started: sandbox/network, volumes, image pulls, container config, init.
	{"network", networkRules},
	{"volumes", volumeRules},
	{"images", imageRules},
	{"container-config", containerConfigRules},
	{"init-containers", initContainerRules},

	// Started, then crashing or not ready.
	{"crashloop", crashRules},

	// Not stuck: SeverityInfo findings, the answer only when nobody found a blocker.
	{"healthy", healthyRules},

	// Context: never primary on their own.
	{"nodes", nodeContextRules},
	{"calico-context", calicoContextRules},
}

// workloadRules lists the workload-level rule families in priority order: a controller the API
// server refuses pods to is the root cause of a failed Job, a stalled rollout or a DaemonSet
// short of nodes, so it comes first; a CronJob whose schedules an active Job blocks comes
// before the Job's own failure.
var workloadRules = []workloadRule{
	{"failed-create", failedCreateRules},
	{"cronjob", cronJobRules},
	{"job", jobRules},
	{"rollout", rolloutRules},
	{"daemonset", daemonSetRules},
}
