package triage

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file answers for an object that a kubelet or a controller reported "not found" and that
// exists now (referenced-object-now-exists). Their report is as old as their last try: someone
// who ran `kubectl create secret` a minute ago and asks why the pod is still stuck must not be
// told the Secret does not exist, nor to create it again. Whether it exists now comes from a
// live list of the namespace's names (Snapshot.NamesInNamespace, metadata only); when that list
// could not be read, the answer says what the reporter said and when, no more.

// presence is what the snapshot says of an object that a kubelet or controller reported not
// found.
type presence int

const (
	// presenceUnknown: the object's kind was not listed, or the list failed (RBAC, a timeout):
	// neither "it exists" nor "it does not" may be said.
	presenceUnknown presence = iota
	// presenceMissing: the list of its kind does not have it: the report still holds.
	presenceMissing
	// presenceExists: the list has it: it was created after the report, or the reporter has
	// not seen it yet.
	presenceExists
)

// objectPresence reports whether the object of resource ("configmaps", "secrets", …) named
// name is in the pod's namespace now, from Snapshot.NamesInNamespace (a resource absent there
// is unknown), and its creationTimestamp (zero when not known).
func objectPresence(s *Snapshot, resource, name string) (presence, time.Time) {
	names, listed := s.NamesInNamespace[resource]
	if !listed {
		return presenceUnknown, time.Time{}
	}
	if !slices.Contains(names, name) {
		return presenceMissing, time.Time{}
	}
	return presenceExists, s.CreatedInNamespace[resource][name]
}

// reportSkew is how much later than an object's creationTimestamp a "not found" report may be
// and still be the reporter's last try before the object existed: the clocks of the node and of
// the API server differ a little, and the kubelet's watch of the object takes a moment.
const reportSkew = 5 * time.Second

// configPickup is how long after a Secret or ConfigMap is created the kubelet has surely retried
// a container it reported the object missing for, and written the outcome to the pod's status:
// it syncs a pod again 10 to 15 seconds after a failed sync, and writes a changed status at
// once. A container still waiting with the report after that never got the object.
const configPickup = time.Minute

// createdVersusReport renders when the object was created against the reporter's last "not
// found" (last, zero when not known): "created 40s ago, after that report". late is true when
// the report came more than reportSkew after the creation: the reporter still did not see the
// object, so the answer must not promise that its next try finds it.
func createdVersusReport(now, created, last time.Time) (text string, late bool) {
	if created.IsZero() {
		return "", false
	}
	text = "created " + FormatAge(ageAt(now, created)) + " ago"
	switch {
	case last.IsZero():
	case !created.Before(last):
		text += ", after that report"
	case last.Sub(created) > reportSkew:
		text += fmt.Sprintf(", %s before that report", FormatAge(last.Sub(created)))
		late = true
	}
	return text, late
}

// reportedWhen is " (Failed, 12 times, last 40s ago)" for the event that carries a report, or
// " (its waiting state; no event says when it last tried)" when none does.
func reportedWhen(s *Snapshot, e *Event, fallback string) string {
	if e == nil {
		return " (" + fallback + ")"
	}
	return fmt.Sprintf(" (%s, %s)", e.Reason, eventSeen(s, *e))
}

// newestNotFoundEvent returns the newest of events (Snapshot order: newest first) whose message says
// that kind name was not found, or nil.
func newestNotFoundEvent(events []Event, kind, name string) *Event {
	for i, e := range events {
		if quoted(e.Message, strings.ToLower(kind)+" ") == name && containsAny(e.Message, "not found") {
			return &events[i]
		}
	}
	return nil
}

// objectRef is one place in the pod's spec that reads a ConfigMap or Secret.
type objectRef struct {
	kind, name string
	// key is the key read, "" for envFrom or a whole volume.
	key string
	// optional is the reference's optional: true (the kubelet does without it).
	optional bool
	// field is the spec path, e.g. spec.containers[app].env[MODE]; desc the short name for a
	// summary ("env MODE", `volume "config"`).
	field, desc string
}

// podObjectRefs returns where the pod reads ConfigMaps and Secrets: the env and envFrom of its
// containers that have yet to start (a running container read its env when it started, and an
// init container that completed does not run again), and, when volumes is true, its configMap,
// secret and projected volumes with their items.
func podObjectRefs(pod *corev1.Pod, volumes bool) []objectRef {
	var out []objectRef
	done := map[string]bool{}
	for _, st := range pod.Status.InitContainerStatuses {
		if t := st.State.Terminated; st.State.Running != nil || (t != nil && t.ExitCode == 0) {
			done[st.Name] = true
		}
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.State.Running != nil {
			done[st.Name] = true
		}
	}
	add := func(list string, cs []corev1.Container) {
		for _, c := range cs {
			if done[c.Name] {
				continue
			}
			base := "spec." + list + "[" + c.Name + "]"
			for i, e := range c.EnvFrom {
				field := fmt.Sprintf("%s.envFrom[%d]", base, i)
				if r := e.ConfigMapRef; r != nil {
					out = append(out, objectRef{kind: "ConfigMap", name: r.Name, optional: optionalTrue(r.Optional), field: field, desc: "envFrom"})
				}
				if r := e.SecretRef; r != nil {
					out = append(out, objectRef{kind: "Secret", name: r.Name, optional: optionalTrue(r.Optional), field: field, desc: "envFrom"})
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				field := base + ".env[" + e.Name + "]"
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					out = append(out, objectRef{kind: "ConfigMap", name: r.Name, key: r.Key, optional: optionalTrue(r.Optional), field: field, desc: "env " + e.Name})
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					out = append(out, objectRef{kind: "Secret", name: r.Name, key: r.Key, optional: optionalTrue(r.Optional), field: field, desc: "env " + e.Name})
				}
			}
		}
	}
	add("initContainers", pod.Spec.InitContainers)
	add("containers", pod.Spec.Containers)
	if !volumes {
		return out
	}
	for _, v := range pod.Spec.Volumes {
		field, desc := "spec.volumes["+v.Name+"]", fmt.Sprintf("volume %q", v.Name)
		addItems := func(kind, name string, optional bool, items []corev1.KeyToPath) {
			out = append(out, objectRef{kind: kind, name: name, optional: optional, field: field, desc: desc})
			for _, it := range items {
				out = append(out, objectRef{kind: kind, name: name, key: it.Key, optional: optional, field: field + ".items[" + it.Key + "]", desc: desc})
			}
		}
		switch {
		case v.ConfigMap != nil:
			addItems("ConfigMap", v.ConfigMap.Name, optionalTrue(v.ConfigMap.Optional), v.ConfigMap.Items)
		case v.Secret != nil:
			addItems("Secret", v.Secret.SecretName, optionalTrue(v.Secret.Optional), v.Secret.Items)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if cm := src.ConfigMap; cm != nil {
					addItems("ConfigMap", cm.Name, optionalTrue(cm.Optional), cm.Items)
				}
				if sec := src.Secret; sec != nil {
					addItems("Secret", sec.Name, optionalTrue(sec.Optional), sec.Items)
				}
			}
		}
	}
	return out
}

// optionalTrue is *p, false when unset.
func optionalTrue(p *bool) bool { return p != nil && *p }

// resourceOf is the resource of a ConfigMap or Secret ("configmaps", "secrets").
func resourceOf(kind string) string { return strings.ToLower(kind) + "s" }

// reportedObject is one "not found" report of the kubelet about a ConfigMap or Secret the pod
// reads, and what the kubelet was doing when it gave it.
type reportedObject struct {
	kind, name string
	// doing is what the kubelet tried: `create container "app"`, `mount volume "config"`.
	doing string
	// event is the newest event that carries the report; nil when only a container state does.
	event *Event
	// volumes is true when the kubelet was mounting the pod's volumes (none is mounted yet),
	// false when it was creating a container (the volumes are mounted).
	volumes bool
	// who is the container the report is about (`container "app"`), "" for a volume.
	who string
	// key is the key the kubelet said the object lacks ("couldn't find key"); "" when it said
	// the object itself was not found.
	key string
}

// existsNowFinding explains a report the kubelet gave about an object that exists now (p is
// presenceExists, created its creationTimestamp). The answer is referenced-object-now-exists,
// unless what the snapshot shows of the pod's other references says the kubelet's next try
// fails anyway: a key of that ConfigMap the pod reads that it lacks (configmap-key-not-found),
// or another ConfigMap or Secret the pod needs that does not exist (configmap-not-found,
// secret-not-found). base carries the report's evidence.
func existsNowFinding(s *Snapshot, r reportedObject, created time.Time, base Finding) Finding {
	pod := s.Pod
	f := base
	f.Severity = SeverityBlocker
	var last time.Time
	if r.event != nil {
		last = r.event.LastSeen
	}
	said := fmt.Sprintf("%s %s not found", r.kind, r.name)
	exists := fmt.Sprintf("%s %s exists in namespace %s now", r.kind, r.name, pod.Namespace)
	late := false
	if r.key != "" {
		// The object existed then too: only its keys changed, and when is not known.
		said = fmt.Sprintf("no key %q in %s %s", r.key, r.kind, r.name)
		exists = fmt.Sprintf("%s %s has key %q now", r.kind, r.name, r.key)
	} else {
		var when string
		when, late = createdVersusReport(s.Now, created, last)
		if when != "" {
			exists += " (" + when + ")"
		}
		objEv := Evidence{Object: r.kind + " " + pod.Namespace + "/" + r.name, Field: "metadata.creationTimestamp", Message: "exists now"}
		if !created.IsZero() {
			objEv.Message = fmt.Sprintf("exists now, created %s (%s ago)", created.UTC().Format(time.RFC3339), FormatAge(age(s, created)))
		}
		f.Evidence = append(f.Evidence, objEv)
	}
	reported := fmt.Sprintf("The kubelet on %s reported %s when it tried to %s%s", pod.Spec.NodeName, said, r.doing,
		reportedWhen(s, r.event, "its waiting state; no event left says when it last tried"))
	refs := podObjectRefs(pod, r.volumes)
	for _, ref := range refs {
		if ref.kind == r.kind && ref.name == r.name && (r.key == "" || ref.key == r.key) && len(f.Evidence) < 8 &&
			!slices.ContainsFunc(f.Evidence, func(e Evidence) bool { return e.Field == ref.field }) {
			f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: ref.field, Message: "references " + r.kind + " " + r.name + keySuffix(ref.key)})
		}
	}

	// Another object the pod needs that a live list shows missing is the next failure.
	for _, ref := range refs {
		if ref.optional || (ref.kind == r.kind && ref.name == r.name) {
			continue
		}
		if p, _ := objectPresence(s, resourceOf(ref.kind), ref.name); p == presenceMissing {
			return nextMissingFinding(s, f, reported, exists, ref)
		}
	}
	// The keys of the reported ConfigMap that the pod reads: missing ones are the next failure.
	var keys []string
	var wanted []objectRef
	for _, ref := range refs {
		if ref.kind == r.kind && ref.name == r.name && ref.key != "" && !ref.optional {
			wanted = append(wanted, ref)
		}
	}
	keyNote := ""
	if len(wanted) > 0 {
		names := uniqueKeys(wanted)
		switch have, read := s.ConfigMapKeys[r.name]; {
		case r.kind == "Secret":
			keyNote = fmt.Sprintf(" Whether it has the %s the pod reads (%s) was not checked: whypending does not read Secret data.", plural(len(names), "key", "keys"), strings.Join(names, ", "))
		case !read:
			keyNote = fmt.Sprintf(" Whether it has the %s the pod reads (%s) was not checked: its keys could not be read.", plural(len(names), "key", "keys"), strings.Join(names, ", "))
		default:
			var missing []objectRef
			for _, ref := range wanted {
				if !slices.Contains(have, ref.key) {
					missing = append(missing, ref)
				}
			}
			if len(missing) > 0 {
				return missingKeysFinding(s, f, reported, exists, r, have, missing)
			}
			keys = have
			if len(names) > 1 || names[0] != r.key { // else the summary has said it: "has key k now"
				keyNote = fmt.Sprintf(" It has the %s the pod reads (%s).", plural(len(names), "key", "keys"), strings.Join(names, ", "))
			}
			f.Evidence = append(f.Evidence, Evidence{Object: "ConfigMap " + pod.Namespace + "/" + r.name, Field: "data", Message: "keys: " + joinLimited(keys, 12)})
		}
	}

	f.Code = CodeReferencedObjectNowExists
	f.Summary = reported + ", but " + exists + "."
	switch {
	case late:
		f.Summary += fmt.Sprintf(" The kubelet still did not find it after it was created, so its view of the cluster lags: it may not reach the API server, or %s may be in trouble.", pod.Spec.NodeName)
	case !r.volumes && r.key == "" && !created.IsZero() && age(s, created) > configPickup:
		// The container's waiting state is the kubelet's current word: had a retry since the
		// creation found the object, the container would have left it.
		late = true
		f.Summary += fmt.Sprintf(" The kubelet retries within 10 to 15 seconds, yet %s still waits with that error %s after the creation: the kubelet has not picked it up, so its view of the cluster lags (it may not reach the API server, or %s may be in trouble).",
			r.who, FormatAge(age(s, created)), pod.Spec.NodeName)
	default:
		f.Summary += " " + retryBehaviour(r.volumes)
	}
	f.Uncertain = late
	if n := s.Node(pod.Spec.NodeName); n != nil && !NodeReady(n) {
		f.Summary += fmt.Sprintf(" Node %s is NotReady, so its kubelet may not be trying at all until it is back.", n.Name)
	}
	f.Summary += keyNote
	f.Fix = existsNowFix(s, r, late, len(wanted) > 0 && r.kind == "Secret")
	return f
}

// retryBehaviour says how the kubelet retries what failed, without promising the pod starts
// (something else may fail next).
func retryBehaviour(volumes bool) string {
	if volumes {
		return "The kubelet's volume manager retries a failed mount on its own with exponential back-off (from 0.5s, doubling, at most about 2 minutes between tries), so its next try should find it; the containers are created once every volume is mounted."
	}
	return "The kubelet retries on its own: after a failed sync it syncs the pod again within 10 to 15 seconds, so its next try should find it."
}

// existsNowFix is the fix of referenced-object-now-exists: list a Secret's key names (never
// its values) when the pod reads keys of it; when the kubelet lags, look at its node; watch the
// pod (last of the looks: it runs until Ctrl-C); and, to retry at once, delete a pod its
// controller recreates (a bare pod would be lost).
func existsNowFix(s *Snapshot, r reportedObject, late, secretKeys bool) []string {
	pod := s.Pod
	var fix []string
	if secretKeys {
		fix = append(fix, secretKeysCommand(pod, r.name)+"   # key names only, never values: check the pod's keys are among them")
	}
	if late {
		fix = append(fix,
			fmt.Sprintf("kubectl get node %s", shellQuote(pod.Spec.NodeName)),
			// The kubelet quotes the name: `secret "db-creds" not found`.
			fmt.Sprintf("On %s: journalctl -u kubelet --since '15 min ago' | grep -F %s", pod.Spec.NodeName, shellQuote(`"`+r.name+`"`)),
		)
	}
	fix = append(fix, fmt.Sprintf("kubectl get pod %s %s -w   # the kubelet retries on its own; stop with Ctrl-C once it is Running", shellQuote(pod.Name), nsFlag(pod)))
	return append(fix, retryAtOnce(pod))
}

// retryAtOnce is the step that retries a pod at once instead of waiting for the kubelet's
// back-off: delete it when a controller recreates it; a bare pod would be lost, so say that.
// A pod nothing known recreates (recreates) is not deleted: the step says to let the kubelet
// retry.
func retryAtOnce(pod *corev1.Pod) string {
	if !recreates(pod) {
		return "Let the kubelet retry: " + replacement(pod) + "."
	}
	return fmt.Sprintf("kubectl delete pod %s %s   # only to retry at once: %s", shellQuote(pod.Name), nsFlag(pod), replacement(pod))
}

// recreatingKinds are the controllers known to create a new pod for one deleted.
var recreatingKinds = map[string]bool{"ReplicaSet": true, "StatefulSet": true, "DaemonSet": true, "Job": true}

// recreates says whether pod's own controller is one known to create a new pod for it once
// it is deleted (recreatingKinds).
func recreates(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && recreatingKinds[ref.Kind]
}

// replacement says, for a fix's comment, what replaces pod once it is deleted: "its ReplicaSet
// web-5d8f creates a new pod". It names the pod's own controller, not a workload guessed from
// it (a ReplicaSet with a Deployment's name may have none). When nothing known does
// (recreates is false), it says so: a bare pod is gone for good, and a controller of another
// kind (an Argo Workflow, a Tekton TaskRun) may fail its whole run instead.
func replacement(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	switch {
	case ref == nil:
		return "the pod has no controller, so deleting it would lose it for good (recreate it from its manifest)"
	case !recreatingKinds[ref.Kind]:
		return fmt.Sprintf("the pod's controller is %s %s, and whether it replaces a deleted pod or fails its run is up to it", ref.Kind, ref.Name)
	case ref.Kind == "Job":
		return fmt.Sprintf("Job %s creates a new pod, and counts the deleted one as a failed attempt against its backoffLimit", ref.Name)
	}
	return fmt.Sprintf("its %s %s creates a new pod", ref.Kind, ref.Name)
}

// secretKeysCommand lists the key names of Secret name in the pod's namespace, one a line,
// without their values (kubectl's jsonpath over .data would print the values).
func secretKeysCommand(pod *corev1.Pod, name string) string {
	return fmt.Sprintf("kubectl get secret %s %s -o go-template='{{range $k, $v := .data}}{{println $k}}{{end}}'", shellQuote(name), nsFlag(pod))
}

// configMapKeysCommand lists the key names of ConfigMap name (data and binaryData), one a line.
func configMapKeysCommand(pod *corev1.Pod, name string) string {
	return fmt.Sprintf("kubectl get configmap %s %s -o go-template='{{range $k, $v := .data}}{{println $k}}{{end}}{{range $k, $v := .binaryData}}{{println $k}}{{end}}'", shellQuote(name), nsFlag(pod))
}

// uniqueKeys returns the keys of refs, each once, in order.
func uniqueKeys(refs []objectRef) []string {
	var out []string
	for _, r := range refs {
		if !slices.Contains(out, r.key) {
			out = append(out, r.key)
		}
	}
	return out
}

// missingKeysFinding is configmap-key-not-found for a ConfigMap that exists now but lacks keys
// the pod reads (missing): the kubelet's next try fails on the first of them.
func missingKeysFinding(s *Snapshot, f Finding, reported, exists string, r reportedObject, have []string, missing []objectRef) Finding {
	pod := s.Pod
	keys := uniqueKeys(missing)
	var uses []string
	for _, m := range missing {
		if !slices.Contains(uses, m.desc) {
			uses = append(uses, m.desc)
		}
		if !slices.ContainsFunc(f.Evidence, func(e Evidence) bool { return e.Field == m.field }) {
			f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: m.field, Message: fmt.Sprintf("references ConfigMap %s key %s", r.name, m.key)})
		}
	}
	f.Evidence = append(f.Evidence, Evidence{Object: "ConfigMap " + pod.Namespace + "/" + r.name, Field: "data", Message: "keys: " + orNone(joinLimited(have, 12))})
	f.Code = CodeConfigMapKeyNotFound
	f.Summary = fmt.Sprintf("%s, and %s, but it has no %s %s, which the pod reads (%s): the kubelet's next try fails on %s.",
		reported, exists, plural(len(keys), "key", "keys"), strings.Join(quoteAll(keys), ", "), strings.Join(uses, ", "), plural(len(keys), "it", "them"))
	f.Fix = []string{
		configMapKeysCommand(pod, r.name),
		addConfigMapKeys(s, r.name, keys),
		"Or fix the key names in the pod template (or mark the references optional: true).",
	}
	return f
}

// addConfigMapKeys is the step that adds keys to ConfigMap name, unless it is immutable
// (Snapshot.ImmutableConfigMaps): its data can never change, so the step says what works.
func addConfigMapKeys(s *Snapshot, name string, keys []string) string {
	what := plural(len(keys), "key", "keys") + " " + strings.Join(keys, ", ")
	if s.ImmutableConfigMaps[name] {
		return fmt.Sprintf("ConfigMap %s is immutable (immutable: true): the API server refuses any change to its data, so %s cannot be added to it. Create a ConfigMap under a new name with every key the pod reads and point the pod template at it, or delete %s and create it again with them (running pods that mount it keep the old data until they restart).",
			name, what, name)
	}
	return fmt.Sprintf("kubectl edit configmap %s %s   # add %s", shellQuote(name), nsFlag(s.Pod), what)
}

// nextMissingFinding is configmap-not-found or secret-not-found for ref, an object the pod
// needs that a live list shows missing, while the one the kubelet reported exists now: the
// kubelet's next try fails on ref.
func nextMissingFinding(s *Snapshot, f Finding, reported, exists string, ref objectRef) Finding {
	pod := s.Pod
	res := resourceOf(ref.kind)
	f.Code = CodeSecretNotFound
	if ref.kind == "ConfigMap" {
		f.Code = CodeConfigMapNotFound
	}
	f.Summary = fmt.Sprintf("%s, and %s, but %s %s, which the pod also needs (%s), does not exist in namespace %s, so the pod cannot start until it does.",
		reported, exists, ref.kind, ref.name, ref.desc, pod.Namespace) + missingObjectNote(s, res, ref.name)
	f.Evidence = append(f.Evidence,
		Evidence{Object: podObject(pod), Field: ref.field, Message: "references " + ref.kind + " " + ref.name},
		Evidence{Object: ref.kind + " " + pod.Namespace + "/" + ref.name, Message: "not found"})
	f.Fix = missingObjectFix(s, res, ref.name, fmt.Sprintf("Create %s %s in namespace %s with the keys the pod reads, or fix the name in the pod template (or mark the reference optional: true).", ref.kind, ref.name, pod.Namespace))
	return f
}

// newestEventWith returns the newest of events (newest first) whose message contains words, or
// nil.
func newestEventWith(events []Event, words string) *Event {
	for i, e := range events {
		if strings.Contains(e.Message, words) {
			return &events[i]
		}
	}
	return nil
}

// unlistedReport is the summary of the kubelet's "not found" report about an object whose kind
// could not be listed: what the kubelet said and when, what needs the object (needs: "container
// "app" needs it (env DB_PASSWORD)"), and that whether it exists now was not checked. It claims
// no more than the kubelet did.
// Another object the pod needs that a live list shows missing is named too: the pod cannot
// start until both exist.
func unlistedReport(s *Snapshot, r reportedObject, needs string) string {
	pod := s.Pod
	out := fmt.Sprintf("The kubelet on %s reported %s %s not found in namespace %s when it tried to %s%s, and %s. Whether it exists now was not checked: whypending could not list the namespace's %ss.",
		pod.Spec.NodeName, r.kind, r.name, pod.Namespace, r.doing, reportedWhen(s, r.event, "its waiting state; no event left says when it last tried"), needs, r.kind)
	for _, ref := range podObjectRefs(pod, r.volumes) {
		if ref.optional || (ref.kind == r.kind && ref.name == r.name) {
			continue
		}
		if p, _ := objectPresence(s, resourceOf(ref.kind), ref.name); p == presenceMissing {
			return out + fmt.Sprintf(" %s %s, which the pod also needs (%s), does not exist in namespace %s, so the pod cannot start until both exist.", ref.kind, ref.name, ref.desc, pod.Namespace)
		}
	}
	return out
}

// keySuffix is " key KEY", or "" for no key.
func keySuffix(key string) string {
	if key == "" {
		return ""
	}
	return " key " + key
}
