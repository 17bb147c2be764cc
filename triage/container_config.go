package triage

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// containerConfigRules explains containers the kubelet cannot create or start:
// CreateContainerConfigError (a Secret or ConfigMap, or one of its keys, that env/envFrom
// references is missing: named, with the env var that references it), and every container
// whose process never ran (neverStarted: CreateContainerError, RunContainerError, a StartError
// or ContainerCannotRun termination behind a CrashLoopBackOff, a shell's exit 126/127, runc's
// own exec error), init containers included. crashRules and initContainerRules leave those
// containers to this rule, so the answer does not change with the moment the pod is caught.
func containerConfigRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil || pod.DeletionTimestamp != nil || lostOrEvicted(pod) {
		return nil
	}
	var out []Finding
	for _, c := range containerStatuses(pod) {
		if w := c.Status.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" {
			out = append(out, configErrorFinding(s, c))
		} else if sf, ok := neverStarted(s, c); ok {
			out = append(out, startFailureFinding(s, c, sf))
		}
	}
	return out
}

var (
	// kubelet: "container has runAsNonRoot and image will run as root", "container has
	// runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root".
	reRunAsNonRoot = regexp.MustCompile(`container has runAsNonRoot and image (?:will run as root|has non-numeric user \(([^)]*)\))`)
	// kubelet: `couldn't find key password in Secret shop/db`.
	reMissingKey = regexp.MustCompile(`couldn't find key (\S+) in (Secret|ConfigMap) ([^/\s]+)/([^\s"]+)`)
)

// configErrorFinding reports secret-not-found, configmap-not-found, secret-key-not-found,
// configmap-key-not-found or create-container-error for a CreateContainerConfigError, and
// referenced-object-now-exists when the Secret or ConfigMap (or the ConfigMap's key) the kubelet
// did not find exists now (existsNowFinding): the kubelet's words are as old as its last try.
func configErrorFinding(s *Snapshot, c containerStatus) Finding {
	pod := s.Pod
	w := c.Status.State.Waiting
	msg := w.Message
	f := Finding{Severity: SeverityBlocker, Evidence: []Evidence{waitingEvidence(pod, c)}}
	failed := eventsMatching(s, func(e Event) bool {
		return forContainer(c.Status.Name)(e) && e.Reason == "Failed" && strings.HasPrefix(e.Message, "Error: ")
	})
	for _, e := range failed {
		if len(f.Evidence) < 2 {
			f.Evidence = append(f.Evidence, EventEvidence(pod, e))
			if msg == "" {
				msg = strings.TrimPrefix(e.Message, "Error: ")
			}
		}
	}
	who := c.who()
	if m := reMissingKey.FindStringSubmatch(msg); m != nil {
		key, kind, name := m[1], m[2], m[4]
		report := reportedObject{kind: kind, name: name, key: key, doing: "create " + who, who: who, event: newestEventWith(failed, m[0])}
		if kind == "ConfigMap" {
			if have, read := s.ConfigMapKeys[name]; read && slices.Contains(have, key) {
				return existsNowFinding(s, report, time.Time{}, f)
			}
		}
		f.Code = CodeSecretKeyNotFound
		if kind == "ConfigMap" {
			f.Code = CodeConfigMapKeyNotFound
		}
		keysCmd := secretKeysCommand(pod, name) + "   # key names only, never values"
		if kind == "ConfigMap" {
			keysCmd = configMapKeysCommand(pod, name)
		}
		if have, read := s.ConfigMapKeys[name]; kind == "ConfigMap" && read {
			// Read now: the key is still missing.
			f.Summary = fmt.Sprintf("%s %s has no key %q, which %s needs%s.", kind, name, key, who, refDesc(c, kind, name, key))
			f.Evidence = append(f.Evidence, Evidence{Object: "ConfigMap " + pod.Namespace + "/" + name, Field: "data", Message: "keys: " + orNone(joinLimited(have, 12))})
		} else {
			f.Summary = fmt.Sprintf("The kubelet on %s reported that %s %s has no key %q, which %s needs%s%s.", pod.Spec.NodeName, kind, name, key, who, refDesc(c, kind, name, key),
				reportedWhen(s, report.event, "its waiting state"))
			if kind == "Secret" {
				f.Summary += " Whether it has the key now was not checked: whypending does not read Secret data."
			} else {
				f.Summary += " Whether it has the key now was not checked: its keys could not be read."
			}
		}
		f.Evidence = append(f.Evidence, refEvidence(pod, c, kind, name, key)...)
		f.Fix = []string{
			keysCmd,
			fmt.Sprintf("Add key %s to %s %s, or fix the key name in the pod template (or mark the reference optional: true).", key, kind, name),
		}
		if kind == "ConfigMap" && s.ImmutableConfigMaps[name] {
			f.Fix[1] = addConfigMapKeys(s, name, []string{key})
			f.Fix = append(f.Fix, "Or fix the key name in the pod template (or mark the reference optional: true).")
		}
		return f
	}
	for _, kind := range []string{"Secret", "ConfigMap"} {
		name := quoted(msg, strings.ToLower(kind)+" ")
		if name == "" {
			continue
		}
		resource := strings.ToLower(kind) + "s"
		report := reportedObject{kind: kind, name: name, doing: "create " + who, who: who, event: newestNotFoundEvent(failed, kind, name)}
		p, created := objectPresence(s, resource, name)
		if p == presenceExists {
			return existsNowFinding(s, report, created, f)
		}
		f.Code = CodeSecretNotFound
		literals := fromLiterals(c, kind, name)
		create := fmt.Sprintf("kubectl create secret generic %s %s%s", shellQuote(name), nsFlag(pod), literals)
		if kind == "ConfigMap" {
			f.Code = CodeConfigMapNotFound
			create = fmt.Sprintf("kubectl create configmap %s %s%s", shellQuote(name), nsFlag(pod), literals)
		}
		if literals == "" {
			create = fmt.Sprintf("Create %s %s in namespace %s with the keys the container reads, with kubectl create %s %s %s and --from-literal=KEY=VALUE or --from-env-file", kind, name, pod.Namespace, strings.ToLower(strings.Replace(kind, "Secret", "secret generic", 1)), name, nsFlag(pod))
		}
		if p == presenceMissing {
			f.Summary = fmt.Sprintf("%s %s does not exist in namespace %s, and %s needs it%s.", kind, name, pod.Namespace, who, refDesc(c, kind, name, ""))
		} else {
			f.Summary = unlistedReport(s, report, fmt.Sprintf("%s needs it%s", who, refDesc(c, kind, name, "")))
		}
		f.Summary += missingObjectNote(s, resource, name)
		f.Evidence = append(f.Evidence, refEvidence(pod, c, kind, name, "")...)
		f.Fix = missingObjectFix(s, resource, name, create+"  # or install the chart step that creates it")
		return f
	}
	if m := reRunAsNonRoot.FindStringSubmatch(msg); m != nil {
		f.Code = CodeCreateContainerError
		user := "root (UID 0)"
		if m[1] != "" {
			user = fmt.Sprintf("the non-numeric user %q, which the kubelet cannot check is not root", m[1])
		}
		f.Summary = fmt.Sprintf("The kubelet refuses to start %s: its securityContext says runAsNonRoot: true, but the image runs as %s and the pod sets no runAsUser.", who, user)
		// The image's USER says which UID it can run as: read before one is set.
		f.Fix = []string{
			fmt.Sprintf("crane config %s | jq .config.User   # the image's USER: empty or root runs as UID 0, a name needs its numeric UID (or: docker image inspect)", shellQuote(containerImage(c))),
			fmt.Sprintf("Set securityContext.runAsUser to a non-zero UID the image can run as (for example 1000) on %s or the pod, or use an image whose USER is a numeric non-root UID.", who),
		}
		if target, mutable := templateTarget(pod); mutable {
			f.Fix = append(f.Fix, patchContainerFix(pod, c, `{"securityContext":{"runAsUser":1000}}`, "runs it as UID 1000; check the image works as that user"))
		} else {
			f.Fix = append(f.Fix, immutableNote(target)+".")
		}
		return f
	}
	f.Code = CodeCreateContainerError
	f.Summary = fmt.Sprintf("The kubelet cannot build the configuration of %s: %s", who, strings.TrimSpace(msg))
	f.Fix = []string{fmt.Sprintf("kubectl describe pod %s %s", nsFlag(pod), pod.Name)}
	return f
}

// fromLiterals is " --from-literal=KEY=\"$KEY\"" for each key container c reads from kind/name
// through env (the values from the environment, which only the operator knows), or "" when it
// reads none by key (envFrom takes every key).
func fromLiterals(c containerStatus, kind, name string) string {
	if c.Spec == nil {
		return ""
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, e := range c.Spec.Env {
		if e.ValueFrom == nil {
			continue
		}
		key := ""
		switch {
		case kind == "Secret" && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name:
			key = e.ValueFrom.SecretKeyRef.Key
		case kind == "ConfigMap" && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == name:
			key = e.ValueFrom.ConfigMapKeyRef.Key
		}
		if key == "" || seen[key] {
			continue
		}
		seen[key] = true
		fmt.Fprintf(&b, " --from-literal=%s=\"$%s\"", shellQuote(key), envVarName(e.Name))
	}
	if b.Len() > 0 {
		b.WriteString("   # each value from the environment variable of that name: export them first")
	}
	return b.String()
}

// envVarName makes name a shell variable name (letters, digits and _).
func envVarName(name string) string {
	out := []rune(strings.ToUpper(name))
	for i, r := range out {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			out[i] = '_'
		}
	}
	if len(out) == 0 || out[0] >= '0' && out[0] <= '9' {
		return "V_" + string(out)
	}
	return string(out)
}

// envRef is one place in a container spec that references a Secret or ConfigMap.
type envRef struct {
	field string // e.g. spec.containers[app].env[DB_PASSWORD]
	desc  string // e.g. env DB_PASSWORD
}

// envRefs returns where container c references kind/name (and key, when not empty).
func envRefs(c containerStatus, kind, name, key string) []envRef {
	if c.Spec == nil {
		return nil
	}
	var out []envRef
	for _, e := range c.Spec.Env {
		if e.ValueFrom == nil {
			continue
		}
		var refName, refKey string
		switch {
		case kind == "Secret" && e.ValueFrom.SecretKeyRef != nil:
			refName, refKey = e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key
		case kind == "ConfigMap" && e.ValueFrom.ConfigMapKeyRef != nil:
			refName, refKey = e.ValueFrom.ConfigMapKeyRef.Name, e.ValueFrom.ConfigMapKeyRef.Key
		default:
			continue
		}
		if refName == name && (key == "" || refKey == key) {
			out = append(out, envRef{field: c.specField("env[" + e.Name + "]"), desc: "env " + e.Name})
		}
	}
	for i, e := range c.Spec.EnvFrom {
		if (kind == "Secret" && e.SecretRef != nil && e.SecretRef.Name == name) ||
			(kind == "ConfigMap" && e.ConfigMapRef != nil && e.ConfigMapRef.Name == name) {
			out = append(out, envRef{field: c.specField(fmt.Sprintf("envFrom[%d]", i)), desc: "envFrom"})
		}
	}
	return out
}

// refDesc is " (env DB_PASSWORD)" naming what references the object, or "".
func refDesc(c containerStatus, kind, name, key string) string {
	refs := envRefs(c, kind, name, key)
	if len(refs) == 0 {
		return ""
	}
	var d []string
	for _, r := range refs {
		d = append(d, r.desc)
	}
	return " (" + strings.Join(d, ", ") + ")"
}

// refEvidence is the spec fields that reference the missing object or key.
func refEvidence(pod *corev1.Pod, c containerStatus, kind, name, key string) []Evidence {
	var ev []Evidence
	for _, r := range envRefs(c, kind, name, key) {
		msg := kind + " " + name
		if key != "" {
			msg += " key " + key
		}
		ev = append(ev, Evidence{Object: podObject(pod), Field: r.field, Message: "references " + msg})
	}
	return ev
}
