package triage

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// imageRules explains containers (init or app) that wait on their image: not found,
// unauthorized, rate limited, over a registry quota, built for another platform, absent with
// imagePullPolicy Never, an invalid reference, or any other pull failure. The cause is read from
// the kubelet's "Failed to pull image" events for that container (the waiting message only
// says "Back-off pulling image"), falling back to the waiting message.
func imageRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil || pod.DeletionTimestamp != nil {
		return nil
	}
	var out []Finding
	for _, c := range containerStatuses(pod) {
		w := c.Status.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "RegistryUnavailable", "ImageInspectError", "SignatureValidationFailed":
			out = append(out, imageFinding(s, c))
		}
	}
	return out
}

// pullFailure is the most telling pull message for a container and where it was read.
type pullFailure struct {
	message  string
	evidence Evidence
}

// pullFailures returns the container's pull failure messages, newest first: "Failed" events
// that are not the bare "Error: ErrImagePull" lines, InspectFailed and ErrImageNeverPull
// events, then the waiting message.
func pullFailures(s *Snapshot, c containerStatus) []pullFailure {
	var out []pullFailure
	for _, e := range eventsMatching(s, forContainer(c.Status.Name)) {
		switch e.Reason {
		case "Failed", "InspectFailed", "ErrImageNeverPull":
		default:
			continue
		}
		if strings.HasPrefix(e.Message, "Error: ") && !strings.Contains(e.Message[7:], " ") {
			continue // "Error: ErrImagePull", "Error: ImagePullBackOff": only the reason again
		}
		if e.Reason == "Failed" && !containsAny(e.Message, "pull", "image") {
			continue // e.g. CreateContainerConfigError reported as Failed
		}
		out = append(out, pullFailure{message: e.Message, evidence: EventEvidence(s.Pod, e)})
	}
	w := c.Status.State.Waiting
	out = append(out, pullFailure{message: w.Message, evidence: waitingEvidence(s.Pod, c)})
	return out
}

var (
	reQuota     = regexp.MustCompile(`(?i)quota|exceed(s|ed)? (the )?(configured )?(upper )?limit|storage limit`)
	reRateLimit = regexp.MustCompile(`(?i)toomanyrequests|too many requests|rate limit|429 `)
	rePlatform  = regexp.MustCompile(`(?i)no matching manifest for|no match for platform in manifest|image with reference .* was found but does not match the specified platform`)
	reNotFound  = regexp.MustCompile(`(?i)manifest unknown|name unknown|repository does not exist|: not found|not found: manifest|\bnot found\b|NotFound`)
	reAuth      = regexp.MustCompile(`(?i)unauthorized|no basic auth credentials|authentication required|pull access denied|access to the resource is denied|401 |403 forbidden|denied:`)
)

// classifyPull maps a pull failure message (and the waiting reason) to an image code. Quota and
// rate limits are checked first because registries send them with 403/429 and "denied".
func classifyPull(reason, msg string, hasPullSecrets bool) Code {
	switch reason {
	case "ErrImageNeverPull":
		return CodeImageNotPresentPullNever
	case "InvalidImageName":
		return CodeInvalidImageName
	}
	switch {
	case strings.TrimSpace(msg) == "" || strings.HasPrefix(msg, "Back-off pulling image"):
		return CodeImagePullFailed
	case reQuota.MatchString(msg):
		return CodeRegistryQuotaExceeded
	case reRateLimit.MatchString(msg):
		return CodeImagePullRateLimited
	case rePlatform.MatchString(msg):
		return CodeImagePlatformMismatch
	case containsAny(msg, "repository does not exist or may require authorization"):
		// Docker Hub answers the same for a missing and a private repository. Without pull
		// secrets a missing repository is the likelier reading; with them, the credentials are.
		if hasPullSecrets {
			return CodeImagePullUnauthorized
		}
		return CodeImageNotFound
	case reAuth.MatchString(msg):
		return CodeImagePullUnauthorized
	case reNotFound.MatchString(msg):
		return CodeImageNotFound
	case containsAny(msg, "invalid reference format"):
		return CodeInvalidImageName
	}
	return CodeImagePullFailed
}

// specificity ranks image codes: a specific diagnosis from an older event beats the generic
// image-pull-failed of a newer one.
func imageCodeIsGeneric(c Code) bool { return c == CodeImagePullFailed }

// imageFinding builds the finding for one container waiting on its image.
func imageFinding(s *Snapshot, c containerStatus) Finding {
	pod := s.Pod
	w := c.Status.State.Waiting
	image := c.Status.Image
	if c.Spec != nil {
		image = c.Spec.Image
	}
	secrets := len(pod.Spec.ImagePullSecrets) > 0
	failures := pullFailures(s, c)
	code, used := CodeImagePullFailed, failures[len(failures)-1]
	for _, pf := range failures {
		if got := classifyPull(w.Reason, pf.message, secrets); !imageCodeIsGeneric(got) {
			code, used = got, pf
			break
		}
	}
	f := Finding{Code: code, Severity: SeverityBlocker, Evidence: []Evidence{used.evidence}}
	if used.evidence.Field == "" {
		f.Evidence = append(f.Evidence, waitingEvidence(pod, c))
	}
	if c.Spec != nil {
		policy := c.Spec.ImagePullPolicy
		if policy == "" {
			policy = "(default)"
		}
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField("image"), Message: fmt.Sprintf("%s, imagePullPolicy %s", c.Spec.Image, policy)})
	}
	kind := "container"
	if c.Init {
		kind = "init container"
	}
	who := fmt.Sprintf("%s %q", kind, c.Status.Name)
	node := pod.Spec.NodeName
	ref := imageRef(image)
	switch code {
	case CodeImageNotFound:
		f.Summary = fmt.Sprintf("The image %s of %s does not exist in its registry (repository or tag not found).", image, who)
		if containsAny(used.message, "may require authorization") {
			f.Summary += " The registry gives the same answer for a private repository, so check the name first, then the pull credentials."
		}
		f.Fix = []string{
			fmt.Sprintf("crane ls %s  # or: docker manifest inspect %s", ref.repo, image),
			setImageFix(pod, c.Status.Name),
		}
	case CodeImagePullUnauthorized:
		f.Summary = fmt.Sprintf("The registry refused to serve %s to the kubelet on %s: the pull is not authorized.", image, node)
		if !secrets {
			f.Summary += " The pod has no imagePullSecrets."
		}
		f.Fix = []string{
			fmt.Sprintf("kubectl create secret docker-registry regcred %s --docker-server=%s --docker-username=<user> --docker-password=<token>", nsFlag(pod), ref.registry),
			fmt.Sprintf("kubectl patch serviceaccount %s %s -p '{\"imagePullSecrets\":[{\"name\":\"regcred\"}]}'", serviceAccount(pod), nsFlag(pod)),
			"Or give the node's identity pull rights on the registry (e.g. the ECR read-only policy for the node role).",
		}
	case CodeImagePullRateLimited:
		f.Summary = fmt.Sprintf("The registry %s is rate-limiting pulls of %s (toomanyrequests); the kubelet keeps backing off.", ref.registry, image)
		f.Fix = []string{
			fmt.Sprintf("kubectl create secret docker-registry regcred %s --docker-server=%s --docker-username=<user> --docker-password=<token>  # authenticated pulls get a higher limit", nsFlag(pod), ref.registry),
			"Or pull through a mirror or pull-through cache, and prefer imagePullPolicy IfNotPresent for tagged images.",
		}
	case CodeRegistryQuotaExceeded:
		f.Summary = fmt.Sprintf("The registry %s refuses to serve %s because a quota (pull or storage) is used up; this is not a network or credentials problem.", ref.registry, image)
		f.Fix = []string{
			fmt.Sprintf("Ask the owner of %s to raise or reset the project's quota, or wait for the quota period to roll over.", ref.registry),
			"Or mirror the image to a registry with quota left and point the workload at it.",
		}
	case CodeImagePlatformMismatch:
		f.Summary = fmt.Sprintf("The image %s has no build for the platform of node %s%s.", image, node, nodePlatform(s))
		f.Fix = []string{
			fmt.Sprintf("docker manifest inspect %s | grep -A3 platform", image),
			"Use an image published for this platform, or keep the pod off it with a nodeSelector on kubernetes.io/arch.",
		}
	case CodeImageNotPresentPullNever:
		f.Summary = fmt.Sprintf("The image %s is not on node %s and imagePullPolicy is Never, so the kubelet will not pull it.", image, node)
		f.Fix = []string{
			fmt.Sprintf("Load the image into the node's runtime (kind load docker-image %s, k3d image import %s, minikube image load %s), or", image, image, image),
			fmt.Sprintf("set imagePullPolicy: IfNotPresent on %s and push the image to a registry.", who),
		}
	case CodeInvalidImageName:
		f.Summary = fmt.Sprintf("The image reference %q of %s is not a valid image name, so the kubelet cannot even try to pull it.", image, who)
		f.Fix = []string{"Use a reference of the form [registry/]repository[:tag][@digest], e.g. docker.io/library/ubuntu:24.04."}
	default:
		f.Summary = fmt.Sprintf("The kubelet on %s cannot pull %s for %s (%s).", node, image, who, w.Reason)
		f.Fix = []string{fmt.Sprintf("On %s: crictl pull %s  # shows the runtime's own error", node, image)}
	}
	f.Fix = append(f.Fix, fmt.Sprintf("kubectl describe pod %s %s", nsFlag(pod), pod.Name))
	return f
}

// imageReference is an image split into the parts the fix lines need.
type imageReference struct {
	registry, repo string
}

// imageRef splits an image reference into its registry (docker.io by default) and repository.
func imageRef(image string) imageReference {
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 && !strings.Contains(name[i:], "/") {
		name = name[:i]
	}
	reg := "docker.io"
	if i := strings.IndexByte(name, '/'); i >= 0 && strings.ContainsAny(name[:i], ".:") || strings.HasPrefix(name, "localhost/") {
		reg = name[:strings.IndexByte(name, '/')]
	}
	return imageReference{registry: reg, repo: name}
}

// serviceAccount is the pod's service account name ("default" when unset).
func serviceAccount(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

// nodePlatform is " (os/arch)" from the pod's node, or "".
func nodePlatform(s *Snapshot) string {
	n := s.Node(s.Pod.Spec.NodeName)
	if n == nil {
		return ""
	}
	os, arch := n.Status.NodeInfo.OperatingSystem, n.Status.NodeInfo.Architecture
	if arch == "" {
		arch = n.Labels[corev1.LabelArchStable]
	}
	if os == "" && arch == "" {
		return ""
	}
	return " (" + os + "/" + arch + ")"
}

// setImageFix is the command that points container at an image that exists: on the owning
// workload, or on the pod itself when no controller owns it (a pod's image may be changed in
// place). The image is the one value only the operator can know.
func setImageFix(pod *corev1.Pod, container string) string {
	target, note := "pod/"+pod.Name, "a bare pod: also fix the manifest it was created from"
	if kind, name := workloadOf(pod); kind != "" {
		target, note = kind+"/"+name, "fix the tag in the owning workload"
	}
	return fmt.Sprintf("kubectl set image %s %s=<existing image:tag> %s  # %s", target, container, nsFlag(pod), note)
}
