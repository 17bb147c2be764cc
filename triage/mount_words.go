package triage

import (
	"fmt"
	"regexp"
	"strings"
)

// This file reads what the kubelet, a CSI driver or a mount helper wrote into a FailedMount or
// FailedAttachVolume event when it names its cause but no code of its own: an NFS server that
// refuses or does not answer, a mount helper the node lacks, a CSI node plugin registered but
// not answering on its socket, an attacher that never attaches, a damaged filesystem. The code
// stays volume-mount-failed, but the answer names the component and what its words mean.

// mountWords is one message shape of a mount or attach failure.
type mountWords struct {
	re      *regexp.Regexp
	explain func(s *Snapshot, e Event, m []string, volume string, f *Finding)
}

// mountTable lists the mount messages with a known meaning, most specific first.
var mountTable = []mountWords{
	// A hostPath whose type check failed: the node lacks the path, or has another kind there.
	{regexp.MustCompile(`hostPath type check failed: (\S+) is not an? (directory|file|socket file|character device|block device)`), func(s *Snapshot, e Event, m []string, volume string, f *Finding) {
		node := s.Pod.Spec.NodeName
		f.Summary = fmt.Sprintf("The hostPath %s of volume %s is not a %s on %s, as the volume's hostPath.type requires (%s %s): the node lacks it, or something else is at that path.", m[1], orUnknownVolume(volume), m[2], node, e.Reason, eventSeen(s, e))
		f.Fix = []string{
			fmt.Sprintf("On %s: ls -ld %s", shellQuote(node), shellQuote(m[1])),
			fmt.Sprintf("Create %s on every node the pod may run on (or the agent that should), or set hostPath.type to DirectoryOrCreate/FileOrCreate if an empty one will do.", m[1]),
		}
	}},
	{regexp.MustCompile(`mount\.nfs4?: access denied by server while mounting ([^\s]+)`), func(s *Snapshot, e Event, m []string, volume string, f *Finding) {
		node := s.Pod.Spec.NodeName
		f.Summary = fmt.Sprintf("The NFS server refuses to export %s to %s (access denied by server), so the kubelet cannot mount volume %s (%s %s).", m[1], node, orUnknownVolume(volume), e.Reason, eventSeen(s, e))
		f.Fix = []string{
			fmt.Sprintf("On %s: showmount -e %s   # what the server exports to this node", shellQuote(node), shellQuote(strings.Split(m[1], ":")[0])),
			fmt.Sprintf("On the NFS server: exportfs -v   # %s must be exported to %s's address (or its subnet), with the options the pod needs", m[1], node),
		}
	}},
	{regexp.MustCompile(`mount\.nfs4?: (Connection timed out|No route to host|Connection refused|Network is unreachable)`), func(s *Snapshot, e Event, m []string, volume string, f *Finding) {
		node := s.Pod.Spec.NodeName
		f.Summary = fmt.Sprintf("%s cannot reach the NFS server of volume %s (mount.nfs: %s), so the kubelet cannot mount it (%s %s): the server is down, or a firewall blocks NFS (2049/tcp) from the node.", node, orUnknownVolume(volume), m[1], e.Reason, eventSeen(s, e))
		server := nfsServer(s, volume)
		f.Fix = []string{fmt.Sprintf("On %s: nc -vz %s 2049; rpcinfo -p %s   # the NFS server from the volume's spec", shellQuote(node), shellQuote(server), shellQuote(server))}
		if server == "" {
			f.Fix = []string{
				"kubectl get pv -o custom-columns=NAME:.metadata.name,CLAIM:.spec.claimRef.name,NFS:.spec.nfs.server   # the NFS server of the pod's volume",
				fmt.Sprintf("On %s: check that that server answers on 2049/tcp (nc -vz SERVER 2049).", node),
			}
		}
	}},
	{regexp.MustCompile(`you might need a /sbin/mount\.<type> helper program|mount: wrong fs type, bad option, bad superblock on ([^,\s]+), missing codepage or helper program`), func(s *Snapshot, e Event, m []string, volume string, f *Finding) {
		node := s.Pod.Spec.NodeName
		if strings.Contains(e.Message, "helper program") && (strings.Contains(e.Message, "nfs") || strings.Contains(e.Message, "cifs") || strings.Contains(e.Message, "mount.<type>")) {
			f.Summary = fmt.Sprintf("%s lacks the mount helper for volume %s (the mount says it needs a /sbin/mount.<type> helper): the NFS or CIFS client tools are not installed on the node (%s %s).", node, orUnknownVolume(volume), e.Reason, eventSeen(s, e))
			f.Fix = []string{
				fmt.Sprintf("On %s: ls /sbin/mount.*   # the mount helpers the node has: mount.nfs for NFS, mount.cifs for SMB", shellQuote(node)),
				fmt.Sprintf("On %s: install the client tools (nfs-common or nfs-utils for NFS, cifs-utils for SMB), then the kubelet's next retry mounts it.", shellQuote(node)),
			}
			return
		}
		f.Summary = fmt.Sprintf("The filesystem of volume %s cannot be mounted on %s (wrong fs type, bad option or bad superblock): the volume's fsType does not match what is on it, or the filesystem is damaged (%s %s).", orUnknownVolume(volume), node, e.Reason, eventSeen(s, e))
		f.Fix = []string{fmt.Sprintf("On %s: dmesg | tail -20   # the kernel's own reason for the refused mount", shellQuote(node)), "Check the StorageClass's or PV's fsType against the filesystem on the volume; run fsck on it from a node where it is attached but not mounted."}
	}},
	{regexp.MustCompile(`/var/lib/kubelet/plugins/([^/\s]+)/[^\s"]*\.sock: connect: (connection refused|no such file or directory)`), func(s *Snapshot, e Event, m []string, volume string, f *Finding) {
		node := s.Pod.Spec.NodeName
		f.Summary = fmt.Sprintf("CSI driver %s is registered on %s, but its node plugin does not answer on its socket (%s), so the kubelet cannot mount volume %s (%s %s): the driver's node pod there is down or restarting.", m[1], node, m[2], orUnknownVolume(volume), e.Reason, eventSeen(s, e))
		f.Fix = []string{
			fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s | grep -i csi   # the driver's node pod on the node", shellQuote(node)),
			"Read that pod's logs (all containers: the driver and its node-driver-registrar) and restart it if it hangs.",
		}
	}},
	{regexp.MustCompile(`timed out waiting for external-attacher of (\S+) CSI driver to attach volume`), func(s *Snapshot, e Event, m []string, volume string, f *Finding) {
		f.Summary = fmt.Sprintf("No attacher of CSI driver %s attaches volume %s to %s (%s %s): the driver's controller (its csi-attacher sidecar) is not running, or its cloud API refuses the attach.", m[1], orUnknownVolume(volume), s.Pod.Spec.NodeName, e.Reason, eventSeen(s, e))
		f.Fix = []string{
			fmt.Sprintf("kubectl get volumeattachments -o wide | grep %s   # the attach request and its error", shellQuote(s.Pod.Spec.NodeName)),
			fmt.Sprintf("kubectl get pods -A | grep -i %s   # the driver's controller pod; its csi-attacher container's log says why", shellQuote(strings.Split(m[1], ".")[0])),
		}
	}},
	{regexp.MustCompile(`(UnauthorizedOperation|AccessDenied|is not authorized to perform)`), func(s *Snapshot, e Event, m []string, volume string, f *Finding) {
		f.Summary = fmt.Sprintf("The cloud API refuses the CSI driver's request for volume %s (%s): the driver's cloud identity (its IAM role or service account) lacks the permission (%s %s).", orUnknownVolume(volume), m[1], e.Reason, eventSeen(s, e))
		f.Fix = []string{"Grant the CSI driver's controller identity the permission its error names (for EBS: the AmazonEBSCSIDriverPolicy on the role of its ServiceAccount), then the next retry attaches the volume."}
	}},
}

// explainMount fills f from the table row matching e's message; ok is false when none does.
func explainMount(s *Snapshot, e Event, volume string, f *Finding) bool {
	for _, w := range mountTable {
		if m := w.re.FindStringSubmatch(e.Message); m != nil {
			w.explain(s, e, m, volume, f)
			return true
		}
	}
	return false
}

// nfsServer is the NFS server of the pod's volume named volume (or of its claim's PV): nfs.server,
// or a CSI driver's "server" attribute; "" when unknown.
func nfsServer(s *Snapshot, volume string) string {
	pod := s.Pod
	for _, v := range pod.Spec.Volumes {
		if v.NFS != nil && (volume == "" || v.Name == volume) {
			return v.NFS.Server
		}
	}
	for _, pv := range s.PVs {
		if pv == nil {
			continue
		}
		if volume != "" && pv.Name != volume && (pv.Spec.ClaimRef == nil || claimOf(pod, volume) != pv.Spec.ClaimRef.Name) {
			continue
		}
		switch {
		case pv.Spec.NFS != nil:
			return pv.Spec.NFS.Server
		case pv.Spec.CSI != nil && pv.Spec.CSI.VolumeAttributes["server"] != "":
			return pv.Spec.CSI.VolumeAttributes["server"]
		}
	}
	return ""
}
