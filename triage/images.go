package triage

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// imageRules explains containers (init or app) that wait on their image: not found,
// unauthorized, rate limited, over a registry quota, built for another platform, absent with
// imagePullPolicy Never, an invalid reference, a registry certificate the node does not trust,
// a registry the node cannot reach, a short name the runtime will not resolve, or any other
// pull failure. The cause is read from the kubelet's "Failed to pull image" events for that
// container (the waiting message only says "Back-off pulling image"), falling back to the
// waiting message; the newest informative event is always quoted. An answer a registry gives
// both for a missing and for a private repository yields both readings, each Uncertain.
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
			out = append(out, imageFindings(s, c)...)
		}
	}
	return out
}

// pullFailure is the most telling pull message for a container and where it was read.
type pullFailure struct {
	message  string
	evidence Evidence
}

// pullFailures returns the container's pull failure messages, newest first: informative
// "Failed" events (not the bare "Error: ErrImagePull" lines), InspectFailed and
// ErrImageNeverPull events, then the waiting message.
func pullFailures(s *Snapshot, c containerStatus) []pullFailure {
	var out []pullFailure
	for _, e := range eventsMatching(s, forContainer(c.Status.Name)) {
		switch e.Reason {
		case "Failed", "InspectFailed", "ErrImageNeverPull":
		default:
			continue
		}
		if !informative(e) {
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
	// CRI-O and Podman (containers/image) short-name policy.
	reShortName = regexp.MustCompile(`(?i)short-name|short name mode|did not resolve to an alias|unqualified-search registries|pull an unqualified image|returns ambiguous list`)
	// Go's crypto/x509 and net/http: the registry's certificate is not trusted, or it speaks
	// plain HTTP.
	reTLS = regexp.MustCompile(`(?i)x509: |tls: failed to verify certificate|certificate signed by unknown authority|certificate is not valid for|certificate has expired|server gave HTTP response to HTTPS client`)
	// Go's net and net/http: DNS, TCP or proxy failures before any registry answer.
	reNetwork = regexp.MustCompile(`(?i)dial tcp|no such host|i/o timeout|connection refused|no route to host|network is unreachable|TLS handshake timeout|proxyconnect|Client\.Timeout exceeded|connection reset by peer|server misbehaving|407 Proxy Authentication Required`)
	// Docker Hub (and registries like it) give these for a repository that does not exist and
	// for a private one pulled without credentials alike.
	// Google's Artifact Registry says "(or it may not exist)", Harbor "unauthorized to access
	// repository" for a project or repository that does not exist as for a private one.
	reAmbiguousDenial = regexp.MustCompile(`(?i)pull access denied|repository does not exist or may require|requested access to the resource is denied|insufficient_scope|failed to fetch anonymous token: .*(401|403)|or it may not exist|unauthorized to access repository`)
)

// classifyPull maps a pull failure message (and the waiting reason) to an image code.
// ambiguous is true when the registry's answer fits a missing repository and a private one
// equally (the code is then CodeImageNotFound, and the caller gives both readings). Quota and
// rate limits are checked first because registries send them with 403/429 and "denied"; TLS
// and network failures before credentials because a token request that never reached the
// registry ("failed to authorize: … dial tcp … i/o timeout") is not a refusal.
func classifyPull(reason, msg string) (code Code, ambiguous bool) {
	switch reason {
	case "ErrImageNeverPull":
		return CodeImageNotPresentPullNever, false
	case "InvalidImageName":
		return CodeInvalidImageName, false
	}
	// The kubelet's back-off message carries the last pull's error after its prefix
	// ("Back-off pulling image "x": ErrImagePull: … not found"): those are the runtime's words.
	msg = reBackOff.ReplaceAllString(strings.TrimSpace(msg), "")
	switch {
	case strings.TrimSpace(msg) == "":
		return CodeImagePullFailed, false
	case reQuota.MatchString(msg):
		return CodeRegistryQuotaExceeded, false
	case reRateLimit.MatchString(msg):
		return CodeImagePullRateLimited, false
	case rePlatform.MatchString(msg):
		return CodeImagePlatformMismatch, false
	case reShortName.MatchString(msg):
		return CodeImageShortNameAmbiguous, false
	case reTLS.MatchString(msg):
		return CodeRegistryCertificateUntrusted, false
	case reNetwork.MatchString(msg):
		return CodeRegistryUnreachable, false
	case reAmbiguousDenial.MatchString(msg):
		return CodeImageNotFound, true
	case reAuth.MatchString(msg):
		return CodeImagePullUnauthorized, false
	case reNotFound.MatchString(msg):
		return CodeImageNotFound, false
	case containsAny(msg, "invalid reference format"):
		return CodeInvalidImageName, false
	}
	return CodeImagePullFailed, false
}

// imageFindings builds the finding for one container waiting on its image: the most specific
// reading of its pull failures, or, for an ambiguous registry answer, both readings.
func imageFindings(s *Snapshot, c containerStatus) []Finding {
	w := c.Status.State.Waiting
	failures := pullFailures(s, c)
	// The newest informative message is the evidence unless an older one names a cause.
	code, ambiguous, used := CodeImagePullFailed, false, failures[0]
	for _, pf := range failures {
		if got, amb := classifyPull(w.Reason, pf.message); got != CodeImagePullFailed {
			code, ambiguous, used = got, amb, pf
			break
		}
	}
	p := newPull(s, c, used)
	if ambiguous {
		return p.ambiguousFindings()
	}
	return []Finding{p.finding(code)}
}

// pull is one container's failed pull, with what its findings share.
type pull struct {
	s     *Snapshot
	c     containerStatus
	pod   *corev1.Pod
	image string
	ref   imageReference
	used  pullFailure
	// words is the runtime's own error, without the kubelet's "Failed to pull image" prefix.
	words string
	who   string
	node  string
	base  []Evidence
}

func newPull(s *Snapshot, c containerStatus, used pullFailure) *pull {
	pod := s.Pod
	p := &pull{s: s, c: c, pod: pod, image: containerImage(c), used: used, who: c.who(), node: pod.Spec.NodeName}
	p.ref = imageRef(p.image)
	p.words = runtimeWords(used.message)
	p.base = []Evidence{used.evidence}
	if used.evidence.Field == "" {
		p.base = append(p.base, waitingEvidence(pod, c))
	}
	if c.Spec != nil {
		policy := string(c.Spec.ImagePullPolicy)
		if policy == "" {
			policy = "(default)"
		}
		p.base = append(p.base, Evidence{Object: podObject(pod), Field: c.specField("image"), Message: fmt.Sprintf("%s, imagePullPolicy %s", c.Spec.Image, policy)})
	}
	return p
}

// reBackOff is the kubelet's ImagePullBackOff prefix of a waiting message.
var reBackOff = regexp.MustCompile(`^Back-off pulling image "[^"]*"(?::\s*(?:ErrImagePull:\s*)?)?`)

var reRPCPrefix = regexp.MustCompile(`^(?:Failed to (?:pull|inspect) image "[^"]*": )?(?:rpc error: code = \w+ desc = )?`)

// runtimeWords strips the kubelet's and gRPC's prefixes from a pull failure message, leaving
// the runtime's own error.
func runtimeWords(msg string) string {
	return strings.TrimSpace(reRPCPrefix.ReplaceAllString(reBackOff.ReplaceAllString(strings.TrimSpace(msg), ""), ""))
}

// finding builds the finding for code.
func (p *pull) finding(code Code) Finding {
	pod, image, who, node := p.pod, p.image, p.who, p.node
	f := Finding{Code: code, Severity: SeverityBlocker, Evidence: p.base}
	ref := p.ref
	switch code {
	case CodeImageNotFound:
		f.Summary = fmt.Sprintf("The image %s of %s does not exist in its registry (repository or tag not found).", image, who)
		f.Fix = []string{
			fmt.Sprintf("crane ls %s  # or: docker manifest inspect %s", shellQuote(ref.repo), shellQuote(image)),
			setImageFix(pod, p.c.Status.Name),
		}
	case CodeImagePullUnauthorized:
		f.Summary = fmt.Sprintf("The registry refused to serve %s to the kubelet on %s: the pull is not authorized.", image, node)
		if len(pod.Spec.ImagePullSecrets) == 0 {
			f.Summary += " The pod has no imagePullSecrets."
		}
		f.Fix = credentialsFix(pod, ref)
		if names, e := p.unretrievedPullSecrets(); e != nil {
			f.Summary += " " + unretrievedSentence(p.s, names, *e)
			f.Evidence = append(f.Evidence, EventEvidence(pod, *e))
			if pullSecretsExistNow(p.s, names) {
				f.Fix = createdPullSecretFix(pod, ref, names[0])
			} else {
				f.Fix = missingPullSecretFix(pod, ref, names)
			}
		}
	case CodeImagePullRateLimited:
		f.Summary = fmt.Sprintf("The registry %s is rate-limiting pulls of %s (toomanyrequests); the kubelet keeps backing off.", ref.registry, image)
		f.Fix = []string{
			fmt.Sprintf("kubectl get pod %s %s -o jsonpath='{.spec.imagePullSecrets}'   # empty: the kubelet pulls anonymously, which gets the lowest limit", shellQuote(pod.Name), nsFlag(pod)),
			fmt.Sprintf("Either, if it pulls anonymously, authenticate the pulls (authenticated pulls get a higher limit) with a pull secret for %s on the pod's ServiceAccount:", ref.registry),
		}
		f.Fix = append(f.Fix, pullSecretFix(pod, ref, "set both first")...)
		f.Fix = append(f.Fix, "Or pull through a mirror or pull-through cache, and prefer imagePullPolicy IfNotPresent for tagged images.")
	case CodeRegistryQuotaExceeded:
		f.Summary = fmt.Sprintf("The registry %s refuses to serve %s because a quota (pull or storage) is used up; this is not a network or credentials problem.", ref.registry, image)
		f.Fix = []string{
			fmt.Sprintf("Ask the owner of %s to raise or reset the project's quota, or wait for the quota period to roll over.", ref.registry),
			"Or mirror the image to a registry with quota left and point the workload at it.",
		}
	case CodeImagePlatformMismatch:
		f.Summary = fmt.Sprintf("The image %s has no build for the platform of node %s%s.", image, node, nodePlatform(p.s))
		f.Fix = []string{
			fmt.Sprintf("docker manifest inspect %s | grep -A3 platform", shellQuote(image)),
			"Use an image published for this platform, or keep the pod off it with a nodeSelector on kubernetes.io/arch.",
		}
	case CodeImageNotPresentPullNever:
		f.Summary = fmt.Sprintf("The image %s is not on node %s and imagePullPolicy is Never, so the kubelet will not pull it.", image, node)
		f.Fix = append([]string{fmt.Sprintf("docker image inspect %s --format '{{.Id}}'   # where the image was built: it must be there to be loaded (build it first if this fails)", shellQuote(image))},
			loadImageFix(p.s, image, "Either")...)
		f.Fix = append(f.Fix, fmt.Sprintf("Or set imagePullPolicy: IfNotPresent on %s and push the image to a registry.", who))
	case CodeInvalidImageName:
		f.Summary = fmt.Sprintf("The image reference %q of %s is not a valid image name, so the kubelet cannot even try to pull it.", image, who)
		f.Fix = []string{"Use a reference of the form [registry/]repository[:tag][@digest], e.g. docker.io/library/ubuntu:24.04."}
	case CodeRegistryCertificateUntrusted:
		p.certificateDetail(&f)
	case CodeRegistryUnreachable:
		p.unreachableDetail(&f)
	case CodeImageShortNameAmbiguous:
		qualified := qualifiedName(image)
		f.Summary = fmt.Sprintf("The container runtime on %s refuses the short image name %s of %s: its short-name policy will not guess which registry is meant.", node, image, who)
		if p.words != "" {
			f.Summary += fmt.Sprintf(" It says: %q.", truncateStart(p.words, 240))
		}
		f.Fix = []string{
			fmt.Sprintf("crane digest %s   # is the image on Docker Hub? (or: docker manifest inspect %s)", shellQuote(qualified), shellQuote(qualified)),
			fmt.Sprintf("Use a fully qualified image name: %s if the command above finds it on Docker Hub, else the registry you mean (e.g. quay.io/…).", qualified),
			setImageTo(pod, p.c.Status.Name, qualified),
		}
	default:
		f.Uncertain = true
		if u := p.s.eventsUnread(); u != "" && (p.words == "" || strings.HasPrefix(p.words, "Back-off pulling image")) {
			f.Summary = fmt.Sprintf("The kubelet on %s cannot pull %s for %s (%s); the runtime's error is in the pod's events, which could not be read (%s), so the cause is not known.", node, image, who, p.c.Status.State.Waiting.Reason, u)
		} else if p.words == "" || strings.HasPrefix(p.words, "Back-off pulling image") {
			f.Summary = fmt.Sprintf("The kubelet on %s cannot pull %s for %s (%s), and no event with the runtime's error is left (events expire after an hour); the cause is not known.", node, image, who, p.c.Status.State.Waiting.Reason)
		} else {
			f.Summary = fmt.Sprintf("The kubelet on %s cannot pull %s for %s; no rule recognises the runtime's error, so its own words are the evidence: %q.", node, image, who, truncateStart(p.words, 300))
		}
		f.Fix = []string{fmt.Sprintf("On %s: crictl pull %s  # shows the runtime's own error", shellQuote(node), shellQuote(image))}
	}
	f.Fix = append(f.Fix, fmt.Sprintf("kubectl describe pod %s %s", nsFlag(pod), shellQuote(pod.Name)))
	return f
}

// reUnretrievedPullSecrets is the kubelet's FailedToRetrieveImagePullSecret event: "Unable to
// retrieve some image pull secrets (regcred, other); attempting to pull the image may not
// succeed."
var reUnretrievedPullSecrets = regexp.MustCompile(`image pull secrets \(([^)]+)\)`)

// unretrievedPullSecrets returns the pull secrets the pod names that the kubelet could not
// retrieve (its newest FailedToRetrieveImagePullSecret event, which it gives when a secret does
// not exist or cannot be read), and that event; nil when there is none.
func (p *pull) unretrievedPullSecrets() ([]string, *Event) {
	for _, e := range eventsWithReason(p.s, "FailedToRetrieveImagePullSecret") {
		if m := reUnretrievedPullSecrets.FindStringSubmatch(e.Message); m != nil {
			var names []string
			for _, n := range strings.Split(m[1], ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
			if len(names) > 0 {
				return names, &e
			}
		}
	}
	return nil, nil
}

// unretrievedSentence says the kubelet pulled without the pull secrets names, and whether they
// exist now (a live list of the namespace's Secrets, when it could be read).
func unretrievedSentence(s *Snapshot, names []string, e Event) string {
	out := fmt.Sprintf("The kubelet could not retrieve the pod's pull %s %s (FailedToRetrieveImagePullSecret %s), so it pulled without %s",
		plural(len(names), "secret", "secrets"), strings.Join(names, ", "), eventSeen(s, e), plural(len(names), "it", "them"))
	switch {
	case pullSecretsExistNow(s, names):
		return out + fmt.Sprintf(", but %s in namespace %s now: the kubelet reads pull secrets at each pull, so its next try (back-off, at most 5 minutes) uses %s; if that pull is refused too, the credentials in %s are.",
			plural(len(names), "it exists", "they exist"), s.Pod.Namespace, plural(len(names), "it", "them"), plural(len(names), "it", "them"))
	case slices.ContainsFunc(names, func(n string) bool { p, _ := objectPresence(s, "secrets", n); return p == presenceMissing }):
		return out + fmt.Sprintf(": %s not exist in namespace %s.", plural(len(names), "it does", "they do"), s.Pod.Namespace)
	}
	return out + fmt.Sprintf(": %s not exist in namespace %s, or cannot be read (whether it exists now was not checked).", plural(len(names), "it does", "they do"), s.Pod.Namespace)
}

// pullSecretsExistNow says whether a live list shows every one of names in the pod's namespace.
func pullSecretsExistNow(s *Snapshot, names []string) bool {
	for _, n := range names {
		if p, _ := objectPresence(s, "secrets", n); p != presenceExists {
			return false
		}
	}
	return true
}

// missingPullSecretFix creates the pull secrets the pod names that the kubelet could not
// retrieve. The pod names them already, so no ServiceAccount changes; the kubelet reads pull
// secrets at each pull, so its next try (back-off up to 5 minutes) uses them.
func missingPullSecretFix(pod *corev1.Pod, ref imageReference, names []string) []string {
	fix := []string{fmt.Sprintf("kubectl get secret %s %s -o name   # NotFound: the pull secret the pod names does not exist", shellQuote(names[0]), nsFlag(pod))}
	for _, n := range names {
		fix = append(fix, fmt.Sprintf("kubectl create secret docker-registry %s %s --docker-server=%s --docker-username=\"$REGISTRY_USER\" --docker-password=\"$REGISTRY_TOKEN\"  # set both to an account that may pull, first; the kubelet's next pull try uses it",
			shellQuote(n), nsFlag(pod), shellQuote(ref.registry)))
	}
	return append(fix, "Or, if the pod names the wrong secret, fix imagePullSecrets in its template.")
}

// createdPullSecretFix is for a pull secret the kubelet could not retrieve that exists now:
// check it names the registry, watch the next pull, and only if that is refused too replace
// its credentials (creating it again would fail: it exists).
func createdPullSecretFix(pod *corev1.Pod, ref imageReference, name string) []string {
	return []string{
		fmt.Sprintf("kubectl get secret %s %s -o jsonpath='{.data.\\.dockerconfigjson}' | base64 -d | jq '.auths | keys'  # must name %s", shellQuote(name), nsFlag(pod), ref.registry),
		fmt.Sprintf("kubectl get pod %s %s -w   # the kubelet's next pull uses it; stop with Ctrl-C once it is Running", shellQuote(pod.Name), nsFlag(pod)),
		"If that pull is refused too, the credentials in it are: replace them with an account that may pull:",
		fmt.Sprintf("kubectl create secret docker-registry %s %s --docker-server=%s --docker-username=\"$REGISTRY_USER\" --docker-password=\"$REGISTRY_TOKEN\" --dry-run=client -o yaml | kubectl apply -f -  # set both first",
			shellQuote(name), nsFlag(pod), shellQuote(ref.registry)),
	}
}

// credentialsFix is how to give the kubelet credentials for ref's registry: first what the pod
// has (its pull secret; without one, its ServiceAccount's, which admission copies only into
// pods created after it was added), then a pull secret on the ServiceAccount, or the node's own
// identity.
func credentialsFix(pod *corev1.Pod, ref imageReference) []string {
	var fix []string
	if secrets := pod.Spec.ImagePullSecrets; len(secrets) > 0 {
		fix = append(fix,
			fmt.Sprintf("kubectl get secret %s %s -o jsonpath='{.data.\\.dockerconfigjson}' | base64 -d | jq '.auths | keys'  # the pod's pull secret must name %s and still be valid", shellQuote(secrets[0].Name), nsFlag(pod), ref.registry),
			fmt.Sprintf("If it names %s and its credentials still work, the registry refuses that account: grant it pull rights on the repository. Otherwise either give the pod a pull secret that works:", ref.registry))
	} else {
		fix = append(fix,
			fmt.Sprintf("kubectl get serviceaccount %s %s -o jsonpath='{.imagePullSecrets}'   # the pod has none; a pull secret listed here reaches only pods created after it was added", shellQuote(serviceAccount(pod)), nsFlag(pod)),
			fmt.Sprintf("Either give the pod a pull secret for %s:", ref.registry))
	}
	fix = append(fix, pullSecretFix(pod, ref, "set both to an account that may pull, first")...)
	return append(fix, "Or give the node's identity pull rights on the registry (e.g. the ECR read-only policy for the node role).")
}

// pullSecretFix creates a pull secret for ref's registry (first says what to set first) and
// puts it on the pod's ServiceAccount. That patch replaces the account's list of pull secrets
// (the field has no merge key), and admission copies the list only into pods created after it,
// so its comment says both.
func pullSecretFix(pod *corev1.Pod, ref imageReference, first string) []string {
	return []string{
		fmt.Sprintf("kubectl create secret docker-registry regcred %s --docker-server=%s --docker-username=\"$REGISTRY_USER\" --docker-password=\"$REGISTRY_TOKEN\"  # %s", nsFlag(pod), shellQuote(ref.registry), first),
		fmt.Sprintf("kubectl patch serviceaccount %s %s -p '{\"imagePullSecrets\":[{\"name\":\"regcred\"}]}'   # replaces the account's pull secrets: name any it already lists too; only pods created from now on get it, so delete the stuck pod for its controller to create it again (a bare pod: create it again)", shellQuote(serviceAccount(pod)), nsFlag(pod)),
	}
}

var (
	// `Get "https://registry.example.com/v2/": …`, `Head "https://…"`, `pinging container registry x`.
	reRegistryURL  = regexp.MustCompile(`(?:Get|Head|GET|HEAD|Post|POST) "?https?://([^/"\s:]+(?::\d+)?)`)
	reRegistryPing = regexp.MustCompile(`pinging (?:container|docker) registry ([^\s:]+(?::\d+)?)`)
	reLookup       = regexp.MustCompile(`lookup ([^\s:]+)(?: on [^\s]+)?: (no such host|server misbehaving|i/o timeout|Temporary failure in name resolution)`)
	reDial         = regexp.MustCompile(`dial tcp ([^\s]+): (?:connect: )?(i/o timeout|connection refused|no route to host|network is unreachable)`)
	reValidFor     = regexp.MustCompile(`certificate is valid for ([^"]+?), not ([^\s":]+)`)
)

// failingHost is the host the runtime's message says it talked to, else the image's registry.
func (p *pull) failingHost() string {
	for _, re := range []*regexp.Regexp{reLookup, reRegistryPing, reRegistryURL} {
		if m := re.FindStringSubmatch(p.words); m != nil {
			return m[1]
		}
	}
	return p.ref.registry
}

// certificateDetail fills a registry-certificate-untrusted finding: which certificate problem,
// and how to trust the CA on the nodes or use a registry name they already trust.
func (p *pull) certificateDetail(f *Finding) {
	host, node, image := p.failingHost(), p.node, p.image
	unit := runtimeUnit(p.s)
	via := ""
	if h := hostOnly(host); h != hostOnly(p.ref.registry) {
		via = fmt.Sprintf(" (the image's registry is %s; %s is where the runtime was sent for it)", p.ref.registry, host)
	}
	trust := fmt.Sprintf("Either trust the CA that signed %s (the issuer above) on every node: %s, then restart %s if needed.", host, caPath(unit, host), unit)
	inspect := fmt.Sprintf("On %s: openssl s_client -connect %s -servername %s -showcerts </dev/null | openssl x509 -noout -issuer -subject -dates", shellQuote(node), shellQuote(withPort(host)), shellQuote(hostOnly(host)))
	switch {
	case containsAny(p.words, "HTTP response to HTTPS client"):
		f.Summary = fmt.Sprintf("The registry %s answers in plain HTTP, but the container runtime on %s pulls %s over HTTPS%s.", host, node, image, via)
		f.Fix = []string{
			fmt.Sprintf("On %s: curl -sI %s   # any HTTP answer here (even 401) confirms the registry speaks plain HTTP", shellQuote(node), shellQuote("http://"+host+"/v2/")),
			fmt.Sprintf("Either serve TLS on %s (preferred), or declare it a plain-HTTP registry on every node: %s.", host, plainHTTPConfig(unit, host)),
		}
	case reValidFor.MatchString(p.words):
		m := reValidFor.FindStringSubmatch(p.words)
		f.Summary = fmt.Sprintf("The TLS certificate of %s is issued for %s, not for the name %s that %s is pulled by, so the container runtime on %s refuses it%s.", host, m[1], m[2], image, node, via)
		f.Fix = []string{
			inspect,
			fmt.Sprintf("Either pull by a name the certificate covers (%s), or reissue the certificate with %s as a subject alternative name.", m[1], m[2]),
		}
	case containsAny(p.words, "certificate has expired", "not yet valid"):
		f.Summary = fmt.Sprintf("The TLS certificate of %s has expired (or is not valid yet by the clock of %s), so the container runtime refuses it%s.", host, node, via)
		f.Fix = []string{inspect, fmt.Sprintf("Renew the certificate of %s; if it is valid, check the clock of %s (timedatectl).", host, node)}
	default:
		f.Summary = fmt.Sprintf("The container runtime on %s does not trust the TLS certificate of %s (signed by an unknown authority), so it cannot pull %s for %s%s.", node, host, image, p.who, via)
		f.Fix = []string{inspect, trust}
		if inCluster := openShiftInternalName(p.ref); inCluster != "" {
			f.Fix = append(f.Fix,
				fmt.Sprintf("Or pull through the registry's in-cluster name, whose certificate the nodes already trust: %s", inCluster),
				setImageTo(p.pod, p.c.Status.Name, inCluster))
		} else {
			f.Fix = append(f.Fix, "Or pull through a registry name the nodes already trust (for an in-cluster registry, its Service name when it serves a cluster-CA certificate). If a proxy inspects TLS on the way out, it is the proxy's CA the nodes must trust.")
		}
	}
	if p.words != "" {
		f.Summary += fmt.Sprintf(" The runtime says: %q.", truncateStart(p.words, 240))
	}
}

// unreachableDetail fills a registry-unreachable finding: DNS, a timeout, a refused connection
// or the proxy, and where to look on the node.
func (p *pull) unreachableDetail(f *Finding) {
	host, node, unit := p.failingHost(), p.node, runtimeUnit(p.s)
	what := "cannot reach"
	var fix []string
	env := fmt.Sprintf("On %s: systemctl show %s --property=Environment  # the HTTP_PROXY, HTTPS_PROXY and NO_PROXY the runtime pulls with", shellQuote(node), unit)
	switch {
	case containsAny(p.words, "proxyconnect", "407 Proxy Authentication Required"):
		what = "cannot get through its HTTP proxy to"
		fix = []string{env, fmt.Sprintf("Fix the proxy settings of %s (address, credentials), or add %s to NO_PROXY if it is reachable directly; then restart %s.", unit, hostOnly(host), unit)}
	case reLookup.MatchString(p.words) && reLookup.FindStringSubmatch(p.words)[2] == "no such host":
		// A name that does not resolve is a name problem before it is a network problem.
		what = "cannot resolve the name of"
		if hostOnly(p.ref.registry) == hostOnly(host) {
			host = p.ref.registry // the lookup names the host without its port
		}
		better, why, ev := registryNameProblem(p.s, host)
		f.Evidence = append(f.Evidence, ev...)
		if better != "" {
			fixed := withRegistry(p.image, better)
			f.Summary = fmt.Sprintf("The registry host %s of image %s does not resolve on %s (no such host): a name problem, not the network. %s; the image should be %s.", host, p.image, node, why, fixed)
			f.Summary += fmt.Sprintf(" The runtime says: %q.", truncateStart(p.words, 240))
			// Nothing here has asked node whether better resolves or serves the image: the
			// fix checks both there before it changes the image.
			f.Fix = []string{
				fmt.Sprintf("On %s: getent hosts %s   # does this name resolve on %s? %s does not", shellQuote(node), shellQuote(hostOnly(better)), node, hostOnly(host)),
				fmt.Sprintf("On %s: crictl pull %s   # does the image pull by that name?", shellQuote(node), shellQuote(fixed)),
				fmt.Sprintf("If both succeed, point %s at %s:", p.who, fixed),
				setImageTo(p.pod, p.c.Status.Name, fixed),
			}
			return
		}
		fix = []string{
			fmt.Sprintf("On %s: getent hosts %s  # DNS as the node (not a pod) sees it", shellQuote(node), shellQuote(hostOnly(host))),
			env,
			fmt.Sprintf("If it does not resolve there either, check the spelling of %s in the image name first: a typo or a name only known outside the cluster (localhost, a laptop's /etc/hosts) explains that as well as DNS.", hostOnly(host)),
			fmt.Sprintf("Fix the node's resolver (/etc/resolv.conf, systemd-resolved) or the registry name; with a proxy, %s resolves it only if the proxy is set for %s.", hostOnly(host), unit),
		}
	case reLookup.MatchString(p.words):
		what = "cannot resolve the name of"
		fix = []string{
			fmt.Sprintf("On %s: getent hosts %s  # DNS as the node (not a pod) sees it", shellQuote(node), shellQuote(hostOnly(host))),
			env,
			fmt.Sprintf("Fix the node's resolver (/etc/resolv.conf, systemd-resolved) or the registry name; with a proxy, %s resolves it only if the proxy is set for %s.", hostOnly(host), unit),
		}
	default:
		if m := reDial.FindStringSubmatch(p.words); m != nil {
			what = fmt.Sprintf("gets %q connecting to", m[2])
			if h := hostOnly(host); h != m[1] && !strings.HasPrefix(m[1], h) {
				what = fmt.Sprintf("gets %q connecting (at %s) to", m[2], m[1])
			}
		}
		fix = []string{
			env,
			fmt.Sprintf("On %s: curl -sv %s -o /dev/null  # any HTTP answer, even 401, means the node reaches it", shellQuote(node), shellQuote("https://"+host+"/")),
			fmt.Sprintf("Allow %s to reach %s (and the registry's blob storage host) through firewalls and security groups, or set HTTPS_PROXY for %s; an internal registry behind a proxy belongs in NO_PROXY.", node, withPort(host), unit),
		}
	}
	via := ""
	if hostOnly(host) != hostOnly(p.ref.registry) {
		via = fmt.Sprintf(" (the image's registry is %s; the runtime was sent to %s for its token or layers)", p.ref.registry, host)
	}
	f.Summary = fmt.Sprintf("The container runtime on %s %s %s%s, so it cannot pull %s for %s: a proxy, NO_PROXY, DNS or firewall problem between the node and the registry, not the image.", node, what, host, via, p.image, p.who)
	if m := reLookup.FindStringSubmatch(p.words); m != nil && m[2] == "no such host" {
		f.Summary = fmt.Sprintf("The registry host %s%s does not resolve on %s (no such host), so the container runtime cannot pull %s for %s: a misspelt registry name, or one known only outside the cluster, before the node's DNS.", host, via, node, p.image, p.who)
	}
	if p.words != "" {
		f.Summary += fmt.Sprintf(" The runtime says: %q.", truncateStart(p.words, 240))
	}
	f.Fix = append(fix, fmt.Sprintf("On %s: crictl pull %s  # retry with the runtime's own settings", shellQuote(node), shellQuote(p.image)))
}

// caPath is where the node's container runtime looks for a registry's CA.
func caPath(unit, host string) string {
	switch unit {
	case "crio":
		return fmt.Sprintf("/etc/containers/certs.d/%s/ca.crt", host)
	case "docker":
		return fmt.Sprintf("/etc/docker/certs.d/%s/ca.crt", host)
	}
	return fmt.Sprintf("/etc/containerd/certs.d/%s/ca.crt (named in hosts.toml), or the system trust store", host)
}

// plainHTTPConfig is how the node's runtime is told that host speaks plain HTTP.
func plainHTTPConfig(unit, host string) string {
	switch unit {
	case "crio":
		return fmt.Sprintf("insecure = true for %s in /etc/containers/registries.conf", host)
	case "docker":
		return fmt.Sprintf("\"insecure-registries\": [\"%s\"] in /etc/docker/daemon.json", host)
	}
	return fmt.Sprintf("server = \"http://%s\" in /etc/containerd/certs.d/%s/hosts.toml", host, host)
}

// openShiftInternalName is the in-cluster name of an image pulled through OpenShift's external
// registry route (default-route-openshift-image-registry.<apps domain>), or "".
func openShiftInternalName(ref imageReference) string {
	if !strings.HasPrefix(ref.registry, "default-route-openshift-image-registry.") {
		return ""
	}
	name := "image-registry.openshift-image-registry.svc:5000/" + ref.path
	if ref.tag != "" {
		name += ":" + ref.tag
	}
	return name + ref.digest
}

// hostOnly strips a port from host.
func hostOnly(host string) string {
	if h, _, ok := strings.Cut(host, ":"); ok {
		return h
	}
	return host
}

// withPort is host:port, with 443 when host names no port.
func withPort(host string) string {
	if strings.Contains(host, ":") {
		return host
	}
	return host + ":443"
}

// ambiguousFindings gives both readings of an answer a registry sends for a missing and a
// private repository alike, the likelier first, each Uncertain and with its own fix.
func (p *pull) ambiguousFindings() []Finding {
	missing, private, missingFirst := p.readings()
	answer := p.words
	if loc := reAmbiguousDenial.FindStringIndex(answer); loc != nil {
		answer = answer[loc[0]:] // the registry's answer, without the runtime's "failed to resolve reference …" preamble
	}
	said := fmt.Sprintf("%q", truncate(answer, 200))
	both := fmt.Sprintf("The registry %s refused %s for %s with an answer it gives both for a repository that does not exist and for a private one pulled without credentials: %s.", p.ref.registry, p.image, p.who, said)

	nf := p.finding(CodeImageNotFound)
	nf.Uncertain = true
	nf.Summary = both + " Reading 1: the image does not exist there, e.g. it was built locally and never pushed, or never loaded into the node."
	if len(missing) > 0 {
		nf.Summary += " For this reading: " + strings.Join(missing, "; ") + "."
	}
	// p.finding's fix for a missing image starts with the crane ls that tells this reading
	// from the other: it comes first, before pushing or loading anything.
	look, rest := nf.Fix[0], nf.Fix[1:]
	absent := fmt.Sprintf("If it lists no tag %s", orDefault(p.ref.tag, "latest"))
	if p.ref.tag == "" && p.ref.digest != "" {
		absent = "If the manifest of that digest is not there"
	}
	fix := []string{
		look,
		absent + fmt.Sprintf(", the image is not there: either push it to a registry the node can pull from, then point %s at it:", p.who),
		fmt.Sprintf(`docker tag %s "$TARGET" && docker push "$TARGET"   # set TARGET=REGISTRY/REPOSITORY:TAG first`, shellQuote(p.image)),
	}
	fix = append(fix, loadImageFix(p.s, p.image, "Or")...)
	fix = append(fix, pullPolicyFix(p.pod, p.c, p.ref))
	if len(rest) > 0 && ParseFixStep(rest[0]).Command == "" {
		rest[0] = "Or " + lowerFirst(rest[0])
	}
	nf.Fix = append(fix, rest...)

	un := p.finding(CodeImagePullUnauthorized)
	un.Uncertain = true
	un.Summary = both + " Reading 2: the repository exists but is private, and the kubelet has no credentials that grant it."
	if len(private) > 0 {
		un.Summary += " For this reading: " + strings.Join(private, "; ") + "."
	}
	if missingFirst {
		return []Finding{nf, un}
	}
	nf.Summary = strings.Replace(nf.Summary, "Reading 1", "Reading 2", 1)
	un.Summary = strings.Replace(un.Summary, "Reading 2", "Reading 1", 1)
	return []Finding{un, nf}
}

// readings weighs the evidence for a missing image (built locally, never pushed or loaded)
// against a private repository: where the name points, the tag, the pod's pull secrets, and
// whether the node looks like a single-node development cluster. It returns the reasons for
// each reading and whether the missing image is the likelier one.
func (p *pull) readings() (missing, private []string, missingFirst bool) {
	ref := p.ref
	weight := 0 // > 0 favours the missing image, < 0 the private repository
	switch {
	case !ref.explicitHost && !strings.Contains(ref.path, "/"):
		missing = append(missing, fmt.Sprintf("%s names no registry and no namespace, so it means docker.io/library/%s, and every repository there is a public official image", p.image, ref.path))
		weight += 2 // a private library repository cannot exist
	case !ref.explicitHost:
		missing = append(missing, fmt.Sprintf("%s names no registry host, so the runtime asked Docker Hub for it", p.image))
		weight++
	default:
		private = append(private, fmt.Sprintf("%s names its registry (%s) explicitly", p.image, ref.registry))
		weight--
	}
	if localTag(ref.tag) {
		missing = append(missing, fmt.Sprintf("its tag %q looks like a local build", orDefault(ref.tag, "latest")))
		weight++
	}
	if names, e := p.unretrievedPullSecrets(); e != nil {
		private = append(private, strings.TrimSuffix(lowerFirst(unretrievedSentence(p.s, names, *e)), "."))
		weight -= 3
	} else if secrets := p.pod.Spec.ImagePullSecrets; len(secrets) == 0 {
		missing = append(missing, "the pod has no imagePullSecrets, so nothing suggests a private repository")
		weight++
	} else {
		var names []string
		for _, s := range secrets {
			names = append(names, s.Name)
		}
		private = append(private, fmt.Sprintf("the pod has imagePullSecrets (%s), so the repository is meant to be private; they may not grant it", strings.Join(names, ", ")))
		weight -= 2
	}
	if kind, _ := devCluster(p.s); kind != "" {
		missing = append(missing, fmt.Sprintf("node %s looks like a single-node %s cluster, where images are often built locally", p.node, kind))
		weight++
	}
	return missing, private, weight >= 0
}

// localTag reports whether an image tag looks like a local development build.
func localTag(tag string) bool {
	switch strings.ToLower(tag) {
	case "", "latest", "dev", "local", "test", "snapshot", "debug", "wip":
		return true
	}
	return strings.Contains(tag, "dirty") || strings.HasSuffix(strings.ToLower(tag), "-snapshot") || isHex(tag) && len(tag) >= 12
}

// isHex reports whether s is all hexadecimal digits (a commit or content hash).
func isHex(s string) bool {
	return s != "" && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// devCluster recognises the pod's node as a local development cluster: kind, minikube, k3d,
// Docker Desktop, Rancher Desktop, MicroK8s. It returns the tool and the cluster's name (for
// its image load command), or "" when the node looks like anything else.
func devCluster(s *Snapshot) (kind, name string) {
	n := s.Node(s.Pod.Spec.NodeName)
	if n == nil {
		return "", ""
	}
	switch {
	case strings.HasPrefix(n.Spec.ProviderID, "kind://"):
		parts := strings.Split(strings.TrimPrefix(n.Spec.ProviderID, "kind://"), "/")
		if len(parts) >= 2 {
			return "kind", parts[1]
		}
		return "kind", "kind"
	case n.Labels["minikube.k8s.io/name"] != "":
		return "minikube", n.Labels["minikube.k8s.io/name"]
	case strings.HasPrefix(n.Name, "k3d-"):
		name := strings.TrimPrefix(n.Name, "k3d-")
		for _, sep := range []string{"-server-", "-agent-"} {
			if i := strings.LastIndex(name, sep); i > 0 {
				name = name[:i]
			}
		}
		return "k3d", name
	case n.Name == "docker-desktop" || n.Name == "desktop-control-plane":
		return "Docker Desktop", n.Name
	case strings.Contains(n.Name, "rancher-desktop"):
		return "Rancher Desktop", n.Name
	case n.Labels["microk8s.io/cluster"] != "":
		return "MicroK8s", n.Name
	case strings.HasSuffix(n.Name, "-control-plane") && n.Spec.ProviderID == "":
		return "kind", strings.TrimSuffix(n.Name, "-control-plane")
	}
	return "", ""
}

// loadImageFix is how to load a locally built image into the node's runtime, one alternative
// of the fix that lead ("Either", "Or") introduces: a line of prose, then the command for the
// development cluster the node belongs to; when it is not recognised, each such cluster's
// command, one a line.
func loadImageFix(s *Snapshot, image, lead string) []string {
	img := shellQuote(image)
	intro := lead + " load the image into the node's runtime:"
	switch kind, name := devCluster(s); kind {
	case "kind":
		return []string{intro, fmt.Sprintf("kind load docker-image %s --name %s  # load the locally built image into the kind node", img, shellQuote(name))}
	case "minikube":
		return []string{intro, fmt.Sprintf("minikube image load %s -p %s  # load the locally built image into minikube", img, shellQuote(name))}
	case "k3d":
		return []string{intro, fmt.Sprintf("k3d image import %s -c %s  # load the locally built image into the k3d nodes", img, shellQuote(name))}
	case "MicroK8s":
		return []string{intro, fmt.Sprintf("docker save %s | microk8s ctr image import -  # load the locally built image into MicroK8s", img)}
	case "Docker Desktop", "Rancher Desktop":
		return []string{fmt.Sprintf("%s build %s with the cluster's own engine (Docker Desktop's docker, Rancher Desktop's nerdctl --namespace k8s.io) so the node sees it.", lead, image)}
	}
	return []string{
		lead + " load the image into the node's runtime with your cluster's tool, one of these (on another cluster, import it with ctr -n k8s.io images import on the node):",
		fmt.Sprintf("kind load docker-image %s   # kind", img),
		fmt.Sprintf("minikube image load %s   # minikube", img),
		fmt.Sprintf("k3d image import %s   # k3d", img),
	}
}

// pullPolicyFix says to stop the kubelet pulling a loaded image: with tag latest (or none) the
// default imagePullPolicy is Always.
func pullPolicyFix(pod *corev1.Pod, c containerStatus, ref imageReference) string {
	policy := corev1.PullIfNotPresent
	if c.Spec != nil && c.Spec.ImagePullPolicy != "" {
		policy = c.Spec.ImagePullPolicy
	} else if ref.tag == "" || ref.tag == "latest" {
		policy = corev1.PullAlways
	}
	if policy != corev1.PullAlways {
		return fmt.Sprintf("%s is %s (for tag %q), so a loaded image is used without a pull.", c.specField("imagePullPolicy"), policy, orDefault(ref.tag, "latest"))
	}
	fix := fmt.Sprintf("A loaded image needs %s: IfNotPresent (or Never): it is Always now, so the kubelet would still pull.", c.specField("imagePullPolicy"))
	target, _ := workloadTarget(pod)
	kind, _, _ := strings.Cut(target, "/")
	if i := containerIndex(pod, c); i >= 0 && (kind == "deployment" || kind == "statefulset" || kind == "daemonset") {
		list := "containers"
		if c.Init {
			list = "initContainers"
		}
		fix += fmt.Sprintf(" kubectl patch %s %s --type=json -p '[{\"op\":\"add\",\"path\":\"/spec/template/spec/%s/%d/imagePullPolicy\",\"value\":\"IfNotPresent\"}]'", target, nsFlag(pod), list, i)
	}
	return fix
}

// containerIndex is the index of c in its spec list, or -1.
func containerIndex(pod *corev1.Pod, c containerStatus) int {
	list := pod.Spec.Containers
	if c.Init {
		list = pod.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == c.Status.Name {
			return i
		}
	}
	return -1
}

// imageReference is an image split into the parts the fix lines need.
type imageReference struct {
	// registry is the host (docker.io when the name has none); repo is the name without tag
	// or digest, as written; path is the repository path without the host.
	registry, repo, path string
	// tag and digest ("@sha256:…") as written ("" when absent).
	tag, digest string
	// explicitHost is true when the name itself names the registry.
	explicitHost bool
}

// imageRef splits an image reference into its registry (docker.io by default), repository,
// tag and digest.
func imageRef(image string) imageReference {
	var r imageReference
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, r.digest = name[:i], name[i:]
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 && !strings.Contains(name[i:], "/") {
		name, r.tag = name[:i], name[i+1:]
	}
	r.registry, r.repo, r.path = "docker.io", name, name
	if i := strings.IndexByte(name, '/'); i >= 0 && (strings.ContainsAny(name[:i], ".:") || name[:i] == "localhost") {
		r.registry, r.path, r.explicitHost = name[:i], name[i+1:], true
	}
	return r
}

// qualifiedName is image with Docker Hub's implicit parts written out
// ("nginx:1.27" -> "docker.io/library/nginx:1.27"); a name with a registry host is returned as is.
func qualifiedName(image string) string {
	ref := imageRef(image)
	if ref.explicitHost {
		return image
	}
	path := ref.path
	if !strings.Contains(path, "/") {
		path = "library/" + path
	}
	q := "docker.io/" + path
	if ref.tag != "" {
		q += ":" + ref.tag
	}
	return q + ref.digest
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

// workloadTarget is "kind/name" of the pod's owning workload (owned true), or "pod/name" for a
// pod no controller owns, for kubectl commands.
func workloadTarget(pod *corev1.Pod) (target string, owned bool) {
	if kind, name := workloadOf(pod); kind != "" {
		return kind + "/" + shellQuote(name), true
	}
	return "pod/" + shellQuote(pod.Name), false
}

// setImageFix is the command that points container at an image that exists: on the owning
// workload, or on the pod itself when no controller owns it (a pod's image may be changed in
// place). The image is the one value only the operator can know.
func setImageFix(pod *corev1.Pod, container string) string {
	target, owned := workloadTarget(pod)
	if strings.HasPrefix(target, "job/") {
		return fmt.Sprintf("Point container %s at an image and tag that exist: %s.", container, immutableNote(target))
	}
	if owned {
		return fmt.Sprintf("Point container %s of %s at an image and tag that exist (the crane ls above lists the repository's tags); the workload rolls the change out.", container, target)
	}
	return fmt.Sprintf("Point container %s at an image and tag that exist (the crane ls above lists the repository's tags): a bare pod's image can be changed in place, and fix the manifest it was created from too.", container)
}

// setImageTo is the command that points container at image, on the owning workload or the pod
// (a pod's image may be changed in place); for a Job, whose template is immutable, where to
// change it instead.
func setImageTo(pod *corev1.Pod, container, image string) string {
	target, _ := workloadTarget(pod)
	if strings.HasPrefix(target, "job/") {
		return fmt.Sprintf("Set the image of container %s to %s: %s.", container, image, immutableNote(target))
	}
	return fmt.Sprintf("kubectl set image %s %s %s", target, shellQuote(container+"="+image), nsFlag(pod))
}

// lowerFirst is s with its first letter in lower case, to continue a sentence ("Or point …").
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
