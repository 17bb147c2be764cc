package triage

import (
	"fmt"
	"strings"
)

// This file adds what every "object not found" answer (configmap-not-found, secret-not-found,
// pvc-not-found) shares: the closest existing names in the namespace, and the Helm hook
// ordering that often explains why the object is not there yet. Whether a ConfigMap or Secret
// the kubelet reported missing exists now is exists_now.go's.

// helmHookAnnotation marks a Helm hook Job or Pod.
const helmHookAnnotation = "helm.sh/hook"

// resourceKinds names a resource's kind for a person.
var resourceKinds = map[string]string{
	"configmaps":             "ConfigMap",
	"secrets":                "Secret",
	"persistentvolumeclaims": "PersistentVolumeClaim",
}

// missingObjectNote returns a sentence to add to the summary of a missing object of resource
// ("configmaps", "secrets", "persistentvolumeclaims") named name: the closest existing names
// from Snapshot.NamesInNamespace, and, for a Helm hook, why the object may not exist yet. It is
// "" when there is nothing to add.
func missingObjectNote(s *Snapshot, resource, name string) string {
	var b strings.Builder
	if near := closestNames(name, s.NamesInNamespace[resource], 3); len(near) > 0 {
		fmt.Fprintf(&b, " Did you mean %s %s? (%s in %s.)", resourceKinds[resource], strings.Join(near, " or "), plural(len(near), "It exists", "They exist"), s.Pod.Namespace)
	}
	if hook, owner := helmHook(s); hook != "" {
		fmt.Fprintf(&b, " The pod runs as a Helm %s hook (%s): Helm runs hooks before it creates the release's other objects, so a hook cannot use a %s the same release creates.", hook, owner, resourceKinds[resource])
	}
	return b.String()
}

// missingObjectFix returns the fix for a missing object: the namespace's objects to look at,
// for a Helm hook how to order it (before todo: an object the release creates, made by hand
// instead, clashes with the release), then the near names and todo, which are alternatives.
// When the namespace's ConfigMaps or Secrets could not be listed (objectPresence is unknown),
// the first step gets the object itself: the kubelet's report may be older than the object,
// which must then not be created again.
func missingObjectFix(s *Snapshot, resource, name, todo string) []string {
	fix := []string{fmt.Sprintf("kubectl get %s -n %s", resource, shellQuote(s.Pod.Namespace))}
	if p, _ := objectPresence(s, resource, name); p == presenceUnknown && (resource == "configmaps" || resource == "secrets") {
		fix[0] = fmt.Sprintf("kubectl get %s %s -n %s   # if it is there now, do not create it: the kubelet retries on its own", strings.TrimSuffix(resource, "s"), shellQuote(name), shellQuote(s.Pod.Namespace))
	}
	if hook, _ := helmHook(s); hook != "" {
		fix = append(fix, fmt.Sprintf("If the release itself creates the %s, create it in an earlier hook (annotate it helm.sh/hook: %s with a lower helm.sh/hook-weight), or move this work out of the hook so it runs after the release's objects exist, rather than creating it by hand.", resourceKinds[resource], hook))
	}
	if near := closestNames(name, s.NamesInNamespace[resource], 3); len(near) > 0 {
		if ParseFixStep(todo).Command != "" {
			fix = append(fix, fmt.Sprintf("Either, if %s is the one meant, fix the name in the pod's spec (or its workload's template); or create %s %s:", strings.Join(near, " or "), resourceKinds[resource], name))
		} else {
			fix = append(fix, fmt.Sprintf("If %s is the one meant, fix the name in the pod's spec (or its workload's template).", strings.Join(near, " or ")))
		}
	}
	return append(fix, todo)
}

// helmHook returns the Helm hook the pod runs as (e.g. "pre-install,pre-upgrade") and the object
// that carries the annotation: the pod itself or its controlling Job (Snapshot.Controller).
func helmHook(s *Snapshot) (hook, owner string) {
	if h := s.Pod.Annotations[helmHookAnnotation]; h != "" {
		return h, "Pod " + s.Pod.Name
	}
	if c := s.Controller; c != nil {
		if h := c.Annotations[helmHookAnnotation]; h != "" {
			return h, c.Kind + " " + c.Name
		}
	}
	return "", ""
}
