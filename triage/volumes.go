package triage

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// volumeRules explains a scheduled pod held in ContainerCreating or Init by its volumes: a
// ConfigMap or Secret volume whose object does not exist (configmap-not-found,
// secret-not-found; referenced-object-now-exists when the kubelet said so but a live list shows
// it exists now, see existsNowFinding), a claim that does not exist or is not bound
// (pvc-not-found, pvc-unbound, with why: see explainUnboundClaim), a ReadWriteOnce volume still
// attached to another node (multi-attach-rwo), or any other FailedMount/FailedAttachVolume
// (volume-mount-failed). Every mount event is read: the kubelet's generic "Unable to attach or
// mount volumes … timed out" line often comes after the specific one, and it names the volumes
// it waits for.
func volumeRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !awaitingSandbox(pod) {
		return nil
	}
	events := currentEvents(s, eventsWithReason(s, "FailedMount", "FailedAttachVolume", "FailedMapVolume"))
	if len(events) == 0 {
		return nil
	}
	best := events[0]
	for _, e := range events[1:] {
		if volumeRank(s, e.Message) > volumeRank(s, best.Message) {
			best = e
		}
	}
	bestCode := volumeCode(best.Message)
	if bestCode == CodeCSIDriverNotRegistered {
		return []Finding{csiNotRegisteredFinding(s, best, events)}
	}
	if bestCode == CodeVolumeMountFailed {
		if f, ok := claimMountFinding(s, best, events); ok {
			return []Finding{f}
		}
	}
	return []Finding{volumeFinding(s, bestCode, best, events)}
}

// reVolumeList matches the kubelet's "unmounted volumes=[a b]" (and unattached) lists.
var reVolumeList = regexp.MustCompile(`(?:unmounted|unattached) volumes=\[([^\]]*)\]`)

// waitedVolumes returns the pod volumes a mount event says the kubelet waits for: the
// "unmounted volumes=[…]" list, else the quoted volume, else every claim volume of the pod.
func waitedVolumes(pod *corev1.Pod, msg string) []string {
	if m := reVolumeList.FindStringSubmatch(msg); m != nil {
		return strings.Fields(m[1])
	}
	if v := quoted(msg, "volume "); v != "" {
		return []string{v}
	}
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			out = append(out, v.Name)
		}
	}
	return out
}

// claimOf returns the claim name a pod volume uses, or "" when it is not a claim volume.
func claimOf(pod *corev1.Pod, volume string) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name != volume {
			continue
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			return v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			return pod.Name + "-" + v.Name
		}
	}
	return ""
}

// claimMountFinding explains a generic mount failure (a timeout) by the claims of the volumes
// the kubelet waits for: a claim that does not exist (pvc-not-found) or is not bound
// (pvc-unbound, with why). ok is false when every waited-for claim is bound (the cause is in
// attach or mount, not in binding).
func claimMountFinding(s *Snapshot, e Event, all []Event) (Finding, bool) {
	pod := s.Pod
	for _, vol := range waitedVolumes(pod, e.Message) {
		name := claimOf(pod, vol)
		if name == "" {
			continue
		}
		pvc, known := s.PVCs[name]
		if !known {
			continue // not read: say nothing rather than guess
		}
		obj := "PersistentVolumeClaim " + pod.Namespace + "/" + name
		f := Finding{Severity: SeverityBlocker, Evidence: []Evidence{EventEvidence(pod, e)}}
		if pvc == nil {
			f.Code = CodePVCNotFound
			f.Summary = fmt.Sprintf("Volume %q uses PersistentVolumeClaim %s, which does not exist in namespace %s, so the kubelet on %s cannot mount it (%s %s).",
				vol, name, pod.Namespace, pod.Spec.NodeName, e.Reason, eventSeen(s, e)) + missingObjectNote(s, "persistentvolumeclaims", name)
			f.Evidence = append(f.Evidence, Evidence{Object: obj, Message: "not found"})
			f.Fix = missingObjectFix(s, "persistentvolumeclaims", name, fmt.Sprintf("Create the claim %s, or point volume %q at the claim that exists.", name, vol))
			return f, true
		}
		if pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName != "" {
			continue
		}
		why := explainUnboundClaim(s, name, pvc)
		f.Code = CodePVCUnbound
		f.Uncertain = why.Unsure
		f.Summary = fmt.Sprintf("Volume %q waits for PersistentVolumeClaim %s, which is not bound (status %s): %s. The kubelet on %s times out mounting it (%s %s).",
			vol, name, claimPhase(pvc), why.Summary, pod.Spec.NodeName, e.Reason, eventSeen(s, e))
		f.Evidence = append(f.Evidence, Evidence{Object: obj, Field: "status.phase", Message: claimPhase(pvc)})
		f.Evidence = append(f.Evidence, why.Evidence...)
		f.Fix = why.Fix
		return f, true
	}
	return Finding{}, false
}

// claimPhase is the claim's status.phase, Pending when unset.
func claimPhase(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Status.Phase == "" {
		return string(corev1.ClaimPending)
	}
	return string(pvc.Status.Phase)
}

var reGenericMount = regexp.MustCompile(`(?i)unable to attach or mount volumes|timed out waiting for the condition|context deadline exceeded`)

// volumeCode maps a FailedMount/FailedAttachVolume message to a code.
func volumeCode(msg string) Code {
	switch {
	case containsAny(msg, "Multi-Attach error"):
		return CodeMultiAttachRWO
	case reCSINotRegistered.MatchString(msg):
		return CodeCSIDriverNotRegistered
	case quoted(msg, "configmap ") != "" && containsAny(msg, "not found"):
		return CodeConfigMapNotFound
	case quoted(msg, "secret ") != "" && containsAny(msg, "not found"):
		return CodeSecretNotFound
	case reVolumeMissingKey.MatchString(msg):
		if m := reVolumeMissingKey.FindStringSubmatch(msg); strings.EqualFold(m[1], "configmap") {
			return CodeConfigMapKeyNotFound
		}
		return CodeSecretKeyNotFound
	}
	return CodeVolumeMountFailed
}

// reVolumeMissingKey is the kubelet's word for a ConfigMap or Secret volume whose items name a
// key the object lacks: `configmap references non-existent config key: app.yaml`, `secret
// references non-existent secret key: tls.crt`. It names the key and the volume, not the object.
var reVolumeMissingKey = regexp.MustCompile(`(?i)(configmap|secret) references non-existent (?:config|secret) key: (\S+)`)

// volumeKeyReport reads a reVolumeMissingKey message: the kind ("ConfigMap", "Secret") and name
// of the object the pod's volume takes the key from, the key and the volume; ok is false when
// the message is not one, or the volume names no such object with that key among its items.
func volumeKeyReport(pod *corev1.Pod, msg string) (kind, name, key, volume string, ok bool) {
	m := reVolumeMissingKey.FindStringSubmatch(msg)
	if m == nil {
		return "", "", "", "", false
	}
	kind, key, volume = "Secret", m[2], quoted(msg, "volume ")
	if strings.EqualFold(m[1], "configmap") {
		kind = "ConfigMap"
	}
	for _, ref := range podObjectRefs(pod, true) {
		if ref.kind == kind && ref.key == key && (volume == "" || strings.HasPrefix(ref.field, "spec.volumes["+volume+"]")) {
			return kind, ref.name, key, volume, true
		}
	}
	return "", "", "", "", false
}

// volumeSpecificity ranks mount messages: a named cause (2) over another concrete failure
// (1) over the kubelet's generic timeout summary (0).
func volumeSpecificity(msg string) int {
	switch {
	case volumeCode(msg) != CodeVolumeMountFailed:
		return 2
	case reGenericMount.MatchString(msg):
		return 0
	}
	return 1
}

// volumeRank orders mount messages by volumeSpecificity and, among named causes, puts a
// ConfigMap or Secret that a live list shows exists now after every other: when the kubelet
// reported two objects not found and one was created since, the other is what still blocks.
func volumeRank(s *Snapshot, msg string) int {
	rank := 2 * volumeSpecificity(msg)
	if kind, name := notFoundObject(msg); kind == "" {
		rank++
	} else if p, _ := objectPresence(s, resourceOf(kind), name); p != presenceExists {
		rank++
	}
	return rank
}

// notFoundObject returns the kind ("ConfigMap", "Secret") and name of the object a
// configmap-not-found or secret-not-found mount message names, or "", "".
func notFoundObject(msg string) (kind, name string) {
	switch volumeCode(msg) {
	case CodeConfigMapNotFound:
		return "ConfigMap", quoted(msg, "configmap ")
	case CodeSecretNotFound:
		return "Secret", quoted(msg, "secret ")
	}
	return "", ""
}

// volumeFinding builds the finding for code from event e.
func volumeFinding(s *Snapshot, code Code, e Event, all []Event) Finding {
	pod := s.Pod
	f := Finding{Code: code, Severity: SeverityBlocker, Evidence: []Evidence{EventEvidence(pod, e)}}
	for _, other := range all {
		if other.Message != e.Message && len(f.Evidence) < 3 {
			f.Evidence = append(f.Evidence, EventEvidence(pod, other))
		}
	}
	volume := quoted(e.Message, "volume ")
	if volume == "" {
		volume = strings.Join(waitedVolumes(pod, e.Message), ", ")
	}
	seen := eventSeen(s, e)
	blocked := "the pod's containers cannot start"
	if len(pod.Spec.InitContainers) > 0 {
		blocked = "not even the init containers can start"
	}
	switch code {
	case CodeConfigMapNotFound, CodeSecretNotFound:
		kind, res := "ConfigMap", "configmap"
		if code == CodeSecretNotFound {
			kind, res = "Secret", "secret"
		}
		name := quoted(e.Message, res+" ")
		doing := fmt.Sprintf("mount volume %q", volume)
		if volume == "" {
			doing = "mount the pod's volumes"
		}
		report := reportedObject{kind: kind, name: name, doing: doing, event: newestNotFoundEvent(all, kind, name), volumes: true}
		p, created := objectPresence(s, res+"s", name)
		if p == presenceExists {
			return existsNowFinding(s, report, created, f)
		}
		if p == presenceMissing {
			f.Summary = fmt.Sprintf("Volume %q mounts %s %s, which does not exist in namespace %s, so %s (%s %s).", volume, kind, name, pod.Namespace, blocked, e.Reason, seen)
		} else {
			f.Summary = unlistedReport(s, report, fmt.Sprintf("volume %q mounts it, so %s", volume, blocked))
		}
		f.Summary += missingObjectNote(s, res+"s", name)
		for _, v := range pod.Spec.Volumes {
			if (v.ConfigMap != nil && v.ConfigMap.Name == name) || (v.Secret != nil && v.Secret.SecretName == name) {
				f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "spec.volumes[" + v.Name + "]", Message: fmt.Sprintf("%s %s", kind, name)})
			}
		}
		f.Fix = missingObjectFix(s, res+"s", name, fmt.Sprintf("Create %s %s, or point volume %q at the one that exists (or set optional: true).", kind, name, volume))
	case CodeConfigMapKeyNotFound, CodeSecretKeyNotFound:
		kind, name, key, volume, ok := volumeKeyReport(pod, e.Message)
		if !ok {
			f.Code = CodeVolumeMountFailed
			f.Summary = fmt.Sprintf("The kubelet on %s cannot mount volume %s, so %s (%s %s): %s.", pod.Spec.NodeName, orUnknownVolume(volume), blocked, e.Reason, seen, truncateStart(e.Message, 240))
			f.Fix = []string{fmt.Sprintf("kubectl describe pod %s %s", nsFlag(pod), shellQuote(pod.Name))}
			break
		}
		return volumeKeyFinding(s, f, e, kind, name, key, volume, blocked)
	case CodeMultiAttachRWO:
		f.Summary = fmt.Sprintf("Volume %q is ReadWriteOnce and still attached to another node, so it cannot attach to %s (%s %s).", volume, pod.Spec.NodeName, e.Reason, seen)
		if users := alreadyUsedBy(e.Message); users != "" {
			f.Summary += " It is still used by " + users + "."
		}
		f.Fix = []string{
			"kubectl get volumeattachments -o wide | grep <pv-name>",
			"Wait for (or delete) the old pod that uses it; if its node is down, the attach/detach controller releases the volume after about 6 minutes, or delete the stale VolumeAttachment once the node is known to be off.",
			"For a Deployment with a RWO volume use strategy Recreate, so the old pod is gone before the new one starts.",
		}
	default:
		if explainMount(s, e, volume, &f) {
			f.Fix = append(f.Fix, fmt.Sprintf("kubectl describe pod %s %s", nsFlag(pod), shellQuote(pod.Name)))
			break
		}
		f.Summary = fmt.Sprintf("The kubelet on %s cannot mount volume %s, so %s (%s %s).", pod.Spec.NodeName, orUnknownVolume(volume), blocked, e.Reason, seen)
		if words := mountWordsOf(e.Message); words != "" {
			f.Summary += fmt.Sprintf(" It says: %q.", truncateStart(words, 240))
		}
		f.Fix = []string{
			fmt.Sprintf("kubectl describe pod %s %s", nsFlag(pod), shellQuote(pod.Name)),
			fmt.Sprintf("kubectl get pvc %s; kubectl get volumeattachments -o wide | grep %s", nsFlag(pod), shellQuote(pod.Spec.NodeName)),
		}
	}
	return f
}

// volumeKeyFinding explains the kubelet's report that volume takes key from ConfigMap or
// Secret name, which lacks it: configmap-key-not-found (or, when the ConfigMap has it now,
// referenced-object-now-exists) or secret-key-not-found (a Secret's keys are never read).
func volumeKeyFinding(s *Snapshot, f Finding, e Event, kind, name, key, volume, blocked string) Finding {
	pod := s.Pod
	report := reportedObject{kind: kind, name: name, key: key, doing: fmt.Sprintf("mount volume %q", volume), event: &e, volumes: true}
	have, read := s.ConfigMapKeys[name]
	if kind == "ConfigMap" && read && slices.Contains(have, key) {
		return existsNowFinding(s, report, time.Time{}, f)
	}
	f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "spec.volumes[" + volume + "]", Message: fmt.Sprintf("items take key %s of %s %s", key, kind, name)})
	keysCmd := secretKeysCommand(pod, name) + "   # key names only, never values"
	f.Summary = fmt.Sprintf("Volume %q takes key %q of %s %s, which the kubelet on %s reported it lacks, so %s (%s %s).", volume, key, kind, name, pod.Spec.NodeName, blocked, e.Reason, eventSeen(s, e))
	add := fmt.Sprintf("Add key %s to %s %s, or fix the volume's items (or mark it optional: true).", key, kind, name)
	if kind == "ConfigMap" {
		f.Code = CodeConfigMapKeyNotFound
		keysCmd = configMapKeysCommand(pod, name)
		if read {
			f.Summary += fmt.Sprintf(" It still lacks it: its keys are %s.", orNone(joinLimited(have, 12)))
			f.Evidence = append(f.Evidence, Evidence{Object: "ConfigMap " + pod.Namespace + "/" + name, Field: "data", Message: "keys: " + orNone(joinLimited(have, 12))})
			if s.ImmutableConfigMaps[name] {
				add = addConfigMapKeys(s, name, []string{key})
			}
		}
	} else {
		f.Code = CodeSecretKeyNotFound
		f.Summary += " Whether it has the key now was not checked: whypending does not read Secret data."
	}
	f.Fix = []string{keysCmd, add}
	if strings.HasPrefix(add, "ConfigMap ") { // immutable: the alternative follows
		f.Fix = append(f.Fix, "Or fix the volume's items (or mark it optional: true).")
	}
	return f
}

// alreadyUsedBy extracts "pod(s) a, b" from a Multi-Attach message, or "".
func alreadyUsedBy(msg string) string {
	const marker = "already used by "
	i := strings.Index(msg, marker)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(msg[i+len(marker):])
}

// orUnknownVolume quotes a volume name, or says the name is unknown.
func orUnknownVolume(v string) string {
	if v == "" {
		return "(unnamed in the event)"
	}
	return fmt.Sprintf("%q", v)
}

// mountWordsOf is the driver's or mount helper's own words in a mount event: what follows the
// kubelet's "… failed for volume "x" : " prefix, or "" for the kubelet's generic timeout.
func mountWordsOf(msg string) string {
	if reGenericMount.MatchString(msg) {
		return ""
	}
	if i := strings.Index(msg, `" : `); i >= 0 {
		return strings.TrimSpace(msg[i+4:])
	}
	return strings.TrimSpace(msg)
}
