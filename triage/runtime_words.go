package triage

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file reads what a container runtime (containerd, CRI-O, Docker) wrote when it could not
// create a container and its words name the cause: a seccomp or AppArmor profile it cannot
// load, a volume whose mount propagation the host mount does not allow, a full disk. The code
// stays create-container-error, but the answer names the runtime and the field of the pod that
// its words point at (seccompProfile.localhostProfile, mountPropagation, appArmorProfile), reads
// that field, and fixes it there.

// kubeletSeccompRoot is the kubelet's seccomp profile root (--root-dir/seccomp): a Localhost
// profile's localhostProfile is a path relative to it.
const kubeletSeccompRoot = "/var/lib/kubelet/seccomp"

// runtimeWords is one message shape of a runtime's create error.
type runtimeWordsRow struct {
	re *regexp.Regexp
	// explain fills f's Summary (the runtime and cause first) and Fix, reading the container's
	// spec; m is re's submatches of msg.
	explain func(s *Snapshot, c containerStatus, msg string, m []string, f *Finding)
}

// runtimeTable lists the create errors with a known meaning, most specific first.
var runtimeTable = []runtimeWordsRow{
	// containerd: `cannot load seccomp profile "/var/lib/kubelet/seccomp/x": open …: no such file
	// or directory`; CRI-O: `failed to load seccomp profile … no such file`.
	{regexp.MustCompile(`(?:cannot|failed to) load seccomp profile "?([^":\s]+)"?`), seccompWords},
	// containerd 1.7 on a node without the AppArmor tools: it needs apparmor_parser to load its
	// default profile, and the node has none.
	{regexp.MustCompile(`apparmor_parser(?: version)?: exec: \\?"?apparmor_parser\\?"?: executable file not found|get apparmor_parser version`), appArmorParserWords},
	// containerd/CRI-O: an AppArmor profile that is not loaded on the node.
	{regexp.MustCompile(`(?i)apparmor profile "?([^"\s]+)"? (?:not found|is not loaded)|failed to apply apparmor profile|apparmor_parser`), appArmorWords},
	// Docker/containerd: a Bidirectional or HostToContainer mount over a host path that is not a
	// shared (or slave) mount.
	{regexp.MustCompile(`path "?([^"\s]+)"? is mounted on "?([^"\s]+)"? but it is not a (shared(?: or slave)?) mount`), propagationWords},
	// A hostPath the runtime must create on a node whose root filesystem is read-only (Talos,
	// Flatcar, Bottlerocket).
	{regexp.MustCompile(`mkdir "?([^":\s]+)"?: read-only file system`), readOnlyHostWords},
	{regexp.MustCompile(`no space left on device`), runtimeNoSpaceWords},
}

// explainRuntime fills f from the table row matching msg; ok is false when none does.
func explainRuntime(s *Snapshot, c containerStatus, msg string, f *Finding) bool {
	for _, r := range runtimeTable {
		if m := r.re.FindStringSubmatch(msg); m != nil {
			r.explain(s, c, msg, m, f)
			return true
		}
	}
	return false
}

// seccompProfileOf is the container's effective seccomp profile (container, else pod) and the
// field it was read from.
func seccompProfileOf(pod *corev1.Pod, c containerStatus) (*corev1.SeccompProfile, string) {
	if c.Spec != nil && c.Spec.SecurityContext != nil && c.Spec.SecurityContext.SeccompProfile != nil {
		return c.Spec.SecurityContext.SeccompProfile, c.specField("securityContext.seccompProfile")
	}
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.SeccompProfile != nil {
		return pod.Spec.SecurityContext.SeccompProfile, "spec.securityContext.seccompProfile"
	}
	return nil, ""
}

func seccompWords(s *Snapshot, c containerStatus, msg string, m []string, f *Finding) {
	pod := s.Pod
	node := pod.Spec.NodeName
	file := m[1]
	prof, field := seccompProfileOf(pod, c)
	local := ""
	if prof != nil && prof.LocalhostProfile != nil {
		local = *prof.LocalhostProfile
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: field, Message: fmt.Sprintf("type %s, localhostProfile %q (the kubelet looks for %s)", prof.Type, local, path.Join(kubeletSeccompRoot, local))})
	}
	f.Summary = fmt.Sprintf("The container runtime on %s cannot load the seccomp profile of %s: %s does not exist on the node, so it never creates the container.", node, c.who(), file)
	written := seccompWrittenBy(pod)
	want := ""
	switch {
	case strings.HasPrefix(local, "localhost/"):
		want = strings.TrimPrefix(local, "localhost/")
		f.Summary += fmt.Sprintf(" Its localhostProfile %q is the old annotation's form: the kubelet reads localhostProfile as a path under %s, so the \"localhost/\" prefix becomes a directory and it looks for %s.", local, kubeletSeccompRoot, path.Join(kubeletSeccompRoot, local))
	case local != "":
		want = local
	}
	if w, ok := written[path.Join(kubeletSeccompRoot, want)]; ok && want != "" {
		f.Summary += fmt.Sprintf(" The pod's init container %q writes the profile to %s, so localhostProfile must be %q.", w, path.Join(kubeletSeccompRoot, want), want)
	} else if len(written) > 0 {
		for file, w := range written {
			rel := strings.TrimPrefix(file, kubeletSeccompRoot+"/")
			f.Summary += fmt.Sprintf(" The pod's init container %q writes a profile to %s (localhostProfile %q).", w, file, rel)
			if want == "" || !strings.HasPrefix(local, "localhost/") {
				want = rel
			}
			break
		}
	}
	// The node's listing shows which profile exists, so it comes before the patch that points
	// at one; the Helm note before the patch a chart upgrade would undo.
	f.Fix = []string{fmt.Sprintf("On %s: ls -l %s %s   # the profiles that exist, and where the runtime looked", shellQuote(node), kubeletSeccompRoot, shellQuote(path.Dir(file)))}
	elsewhere := fmt.Sprintf("put the profile where the runtime looks (%s on every node), or use seccompProfile type RuntimeDefault.", file)
	if want == "" || want == local {
		f.Fix = append(f.Fix, capitalize(elsewhere))
		return
	}
	f.Fix = append(f.Fix,
		fmt.Sprintf("Either point localhostProfile at %q (the patch below; if a Helm chart renders this template, change the value there instead, or upgrade the chart to a release that fixed it: the next upgrade undoes a patch), or %s", want, elsewhere),
		patchContainerFix(pod, c, fmt.Sprintf(`{"securityContext":{"seccompProfile":{"type":"Localhost","localhostProfile":%q}}}`, want),
			fmt.Sprintf("set localhostProfile to %q, relative to %s", want, kubeletSeccompRoot)))
}

// seccompWrittenBy maps the host files under the kubelet's seccomp root that the pod's init
// containers copy a profile to (through a hostPath volume on that root) to the init container.
func seccompWrittenBy(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, ic := range pod.Spec.InitContainers {
		for _, vm := range ic.VolumeMounts {
			v := podVolume(pod, vm.Name)
			if v == nil || v.HostPath == nil || !strings.HasPrefix(path.Clean(v.HostPath.Path), kubeletSeccompRoot) {
				continue
			}
			mount := strings.TrimSuffix(vm.MountPath, "/")
			for _, arg := range append(append([]string(nil), ic.Command...), ic.Args...) {
				for _, word := range strings.Fields(arg) {
					if rel, ok := strings.CutPrefix(word, mount+"/"); ok && rel != "" {
						out[path.Join(v.HostPath.Path, rel)] = ic.Name
					}
				}
			}
		}
	}
	return out
}

// patchContainerFix is the strategic-merge patch that sets fields of container c in the pod
// template of the pod's workload (merged by container name), or, for a bare pod or a Job
// (whose template is immutable), what to change instead.
func patchContainerFix(pod *corev1.Pod, c containerStatus, fields, what string) string {
	list := "containers"
	if c.Init {
		list = "initContainers"
	}
	target, mutable := templateTarget(pod)
	if !mutable {
		return fmt.Sprintf("In %s, %s for %s (%s): %s.", target, what, c.who(), c.specField(""), immutableNote(target))
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{%q:[{"name":%q,%s}]}}}}`, list, c.Status.Name, strings.TrimPrefix(strings.TrimSuffix(fields, "}"), "{"))
	return fmt.Sprintf("kubectl patch %s %s -p %s   # %s", target, nsFlag(pod), shellQuote(patch), what)
}

func appArmorWords(s *Snapshot, c containerStatus, msg string, m []string, f *Finding) {
	pod := s.Pod
	node := pod.Spec.NodeName
	profile := ""
	if len(m) > 1 {
		profile = m[1]
	}
	if c.Spec != nil && c.Spec.SecurityContext != nil && c.Spec.SecurityContext.AppArmorProfile != nil {
		p := c.Spec.SecurityContext.AppArmorProfile
		msg := string(p.Type)
		if p.LocalhostProfile != nil {
			msg += " " + *p.LocalhostProfile
			profile = orDefault(profile, *p.LocalhostProfile)
		}
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField("securityContext.appArmorProfile"), Message: msg})
	}
	if a := pod.Annotations["container.apparmor.security.beta.kubernetes.io/"+c.Status.Name]; a != "" {
		f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "metadata.annotations[container.apparmor.security.beta.kubernetes.io/" + c.Status.Name + "]", Message: a})
		profile = orDefault(profile, strings.TrimPrefix(a, "localhost/"))
	}
	f.Summary = fmt.Sprintf("The container runtime on %s cannot apply the AppArmor profile %s of %s: it is not loaded on the node, so the container is never created.", node, orQuoted(profile, "the pod asks for"), c.who())
	f.Fix = []string{
		fmt.Sprintf("On %s: aa-status | grep -F %s   # loaded profiles", shellQuote(node), shellQuote(orDefault(profile, c.Status.Name))),
		fmt.Sprintf("Load the profile on every node that may run the pod (apparmor_parser -r /etc/apparmor.d/%s, or a DaemonSet such as the security-profiles-operator), or set appArmorProfile type RuntimeDefault.", orDefault(profile, "<profile>")),
	}
}

func propagationWords(s *Snapshot, c containerStatus, msg string, m []string, f *Finding) {
	pod := s.Pod
	node := pod.Spec.NodeName
	hostPath, mountPoint, kind := m[1], m[2], m[3]
	var mounts []string
	if c.Spec != nil {
		for i, vm := range c.Spec.VolumeMounts {
			if vm.MountPropagation != nil && *vm.MountPropagation != corev1.MountPropagationNone {
				mounts = append(mounts, fmt.Sprintf("%s (volume %q at %s)", *vm.MountPropagation, vm.Name, vm.MountPath))
				f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: c.specField(fmt.Sprintf("volumeMounts[%d].mountPropagation", i)), Message: fmt.Sprintf("%s, volume %q at %s", *vm.MountPropagation, vm.Name, vm.MountPath)})
			}
		}
	}
	f.Summary = fmt.Sprintf("The container runtime on %s refuses %s: its volume mount asks for mount propagation (%s), which needs the host mount %s (holding %s) to be a %s mount, and on this node it is not.",
		node, c.who(), orDefault(strings.Join(mounts, "; "), "mountPropagation"), mountPoint, hostPath, kind)
	f.Fix = []string{
		fmt.Sprintf("On %s: findmnt -o TARGET,PROPAGATION %s   # private means no propagation", shellQuote(node), shellQuote(mountPoint)),
		fmt.Sprintf("Either, if %s does not need to see mounts from the host (or make its own visible), drop mountPropagation from its volumeMounts; or make the host mount shared on the node:", c.who()),
		fmt.Sprintf("On %s: mount --make-rshared %s   # and make it last: for Docker remove MountFlags=slave from docker.service (systemctl daemon-reload && systemctl restart docker)", shellQuote(node), shellQuote(mountPoint)),
	}
}

func runtimeNoSpaceWords(s *Snapshot, c containerStatus, msg string, m []string, f *Finding) {
	node := s.Pod.Spec.NodeName
	f.Summary = fmt.Sprintf("The disk of %s under the container runtime is full (no space left on device), so it cannot create %s.", node, c.who())
	f.Fix = []string{
		fmt.Sprintf("On %s: df -h /var/lib/%s /var/lib/kubelet; df -i /var/lib/%s", shellQuote(node), runtimeUnit(s), runtimeUnit(s)),
		fmt.Sprintf("On %s: crictl rmi --prune   # remove unused images, then find what else fills the disk", shellQuote(node)),
	}
}

func appArmorParserWords(s *Snapshot, c containerStatus, msg string, m []string, f *Finding) {
	node := s.Pod.Spec.NodeName
	f.Summary = fmt.Sprintf("The container runtime on %s cannot create %s because the node lacks apparmor_parser: containerd needs it to load its default AppArmor profile on a host where AppArmor is enabled. Nothing in the pod is wrong.", node, c.who())
	f.Fix = []string{
		fmt.Sprintf("On %s: install the AppArmor tools (apt-get install apparmor, or the node image's package), then the kubelet's next retry creates the container.", shellQuote(node)),
		"Or run containerd 1.7.x at a release that no longer needs apparmor_parser for the default profile, or set appArmorProfile type Unconfined on the container (it then runs without AppArmor).",
	}
}

func readOnlyHostWords(s *Snapshot, c containerStatus, msg string, m []string, f *Finding) {
	pod := s.Pod
	node := pod.Spec.NodeName
	dir := m[1]
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil && (v.HostPath.Path == dir || strings.HasPrefix(dir, strings.TrimSuffix(v.HostPath.Path, "/")+"/")) {
			f.Evidence = append(f.Evidence, Evidence{Object: podObject(pod), Field: "spec.volumes[" + v.Name + "].hostPath", Message: v.HostPath.Path})
		}
	}
	f.Summary = fmt.Sprintf("The container runtime on %s cannot create %s on the host for %s: the node's filesystem there is read-only (an immutable node OS such as Talos, Flatcar or Bottlerocket keeps / read-only).", node, dir, c.who())
	f.Fix = []string{
		fmt.Sprintf("Point the hostPath at a writable place on the node (under /var, e.g. /var/lib/%s), or create %s in the node's image or machine config.", strings.TrimPrefix(path.Base(dir), "."), dir),
	}
}
