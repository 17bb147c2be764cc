package triage

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file decides where a fix to a pod's spec goes. A Deployment's, StatefulSet's,
// DaemonSet's or ReplicaSet's pod template can be changed (kubectl set, patch, edit), and the
// controller rolls the change out. A Job's pod template is immutable, and so is most of a bare
// pod's spec: a command such as `kubectl set image job/…` or `kubectl set serviceaccount job/…`
// is refused by the API server. For those the fix is the manifest (or the CronJob that makes
// the Jobs) and a new object.

// templateTarget is "kind/name" of the object whose pod template holds the pod's spec, for
// kubectl commands, and whether that template may be changed in place: false for a Job (its
// template is immutable) and for a bare pod ("pod/name").
func templateTarget(pod *corev1.Pod) (target string, mutable bool) {
	kind, name := workloadOf(pod)
	switch kind {
	case "":
		return "pod/" + shellQuote(pod.Name), false
	case "job":
		return "job/" + shellQuote(name), false
	}
	return kind + "/" + shellQuote(name), true
}

// reCronJobJobName matches the name the CronJob controller gives a Job: the CronJob's name and
// the scheduled time in minutes since the epoch.
var reCronJobJobName = regexp.MustCompile(`^(.+)-(\d{8,})$`)

// immutableNote says how to change the spec of target (from templateTarget) whose template
// cannot be changed in place.
func immutableNote(target string) string {
	kind, name, _ := strings.Cut(target, "/")
	if kind == "job" {
		note := "a Job's pod template is immutable, so change the manifest it was created from, delete the Job and apply the manifest again"
		if m := reCronJobJobName.FindStringSubmatch(strings.Trim(name, "'")); m != nil {
			note = fmt.Sprintf("a Job's pod template is immutable; if CronJob %s created it (its name says so), change the CronJob's spec.jobTemplate instead, and delete this Job so the next run uses the fixed template", m[1])
		}
		return note
	}
	return "a pod's spec cannot be changed in place (except its images), so change the manifest it was created from and recreate the pod"
}
