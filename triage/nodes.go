package triage

import (
	"fmt"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// maxKubeletSkew is how many minor versions a kubelet may be older than the API server under
// the Kubernetes version skew policy (n-3 since v1.28; it was n-2 before).
const maxKubeletSkew = 3

// nodeContextRules adds context about the pod's node: it is not Ready (node-not-ready), or its
// kubelet is outside the supported version skew of the API server (kubelet-version-skew).
// Neither is a primary cause on its own; pods not yet scheduled are left to the scheduling
// rules, which judge every candidate node.
func nodeContextRules(s *Snapshot) []Finding {
	pod := s.Pod
	if pod == nil || pod.Spec.NodeName == "" {
		return nil
	}
	node := s.Node(pod.Spec.NodeName)
	if node == nil {
		return nil
	}
	var out []Finding
	if !NodeReady(node) {
		out = append(out, nodeNotReadyFinding(s, node))
	}
	if f, ok := versionSkewFinding(s, node); ok {
		out = append(out, f)
	}
	return out
}

// nodeNotReadyFinding reports node-not-ready with the Ready condition and taints.
func nodeNotReadyFinding(s *Snapshot, node *corev1.Node) Finding {
	c := nodeReadyCondition(node)
	f := Finding{
		Code:     CodeNodeNotReady,
		Severity: SeverityWarning,
		Summary:  fmt.Sprintf("Node %s is not Ready.", node.Name),
	}
	if c == nil {
		f.Summary = fmt.Sprintf("Node %s has no Ready condition: its kubelet has never reported.", node.Name)
	} else {
		f.Summary = fmt.Sprintf("Node %s has been Ready=%s (%s) for %s: %s", node.Name, c.Status, c.Reason, FormatAge(age(s, c.LastTransitionTime.Time)), c.Message)
		f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node.Name), Field: "status.conditions[Ready]", Reason: c.Reason,
			Message: fmt.Sprintf("status %s: %s (last heartbeat %s ago)", c.Status, c.Message, FormatAge(age(s, c.LastHeartbeatTime.Time))), LastSeen: c.LastHeartbeatTime.Time})
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node.Name), Field: "spec.taints", Message: fmt.Sprintf("%s:%s", t.Key, t.Effect)})
		}
	}
	f.Fix = []string{
		fmt.Sprintf("kubectl describe node %s", shellQuote(node.Name)),
		fmt.Sprintf("On %s: systemctl status kubelet containerd; journalctl -u kubelet --since -30m | tail -50", shellQuote(node.Name)),
	}
	return f
}

// reMinor reads major and minor from a version such as "v1.33.5", "v1.23.6+k3s1",
// "v1.16.8-eks-e16311" or "1.29".
var reMinor = regexp.MustCompile(`^v?(\d+)\.(\d+)`)

// minorOf parses the major and minor version; ok is false when v does not start with them.
func minorOf(v string) (major, minor int, ok bool) {
	m := reMinor.FindStringSubmatch(v)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}

// serverMinor reads the API server's major and minor from /version. It uses the Major and
// Minor fields ("1", "37" or "27+"), not gitVersion, which a source build leaves as
// "v0.0.0-master+$Format:%H$".
func serverMinor(s *Snapshot) (major, minor int, ok bool) {
	v := s.ServerVersion
	if v == nil {
		return 0, 0, false
	}
	digits := func(x string) (int, bool) {
		for i, r := range x {
			if r < '0' || r > '9' {
				x = x[:i]
				break
			}
		}
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	maj, ok1 := digits(v.Major)
	mnr, ok2 := digits(v.Minor)
	if ok1 && ok2 {
		return maj, mnr, true
	}
	return minorOf(v.GitVersion)
}

// versionSkewFinding reports kubelet-version-skew when the node's kubelet is newer than the API
// server or more than maxKubeletSkew minor versions older.
func versionSkewFinding(s *Snapshot, node *corev1.Node) (Finding, bool) {
	kv := node.Status.NodeInfo.KubeletVersion
	kMaj, kMin, ok := minorOf(kv)
	if !ok {
		return Finding{}, false
	}
	sMaj, sMin, ok := serverMinor(s)
	if !ok || kMaj != sMaj {
		return Finding{}, false
	}
	server := fmt.Sprintf("v%d.%d", sMaj, sMin)
	var summary string
	switch diff := sMin - kMin; {
	case diff < 0:
		summary = fmt.Sprintf("Node %s runs kubelet %s, newer than the API server (%s); a kubelet must never be newer than kube-apiserver.", node.Name, kv, server)
	case diff > maxKubeletSkew:
		summary = fmt.Sprintf("Node %s runs kubelet %s, %d minor versions behind the API server (%s); the supported skew is at most %d, so the kubelet may fail to talk to the control plane.", node.Name, kv, diff, server, maxKubeletSkew)
	default:
		return Finding{}, false
	}
	f := Finding{
		Code:     CodeKubeletVersionSkew,
		Severity: SeverityWarning,
		Summary:  summary,
		Evidence: []Evidence{
			{Object: nodeObject(node.Name), Field: "status.nodeInfo.kubeletVersion", Message: kv},
			{Object: "APIServer", Field: "/version", Message: fmt.Sprintf("major %s, minor %s (%s)", s.ServerVersion.Major, s.ServerVersion.Minor, s.ServerVersion.GitVersion)},
		},
		Fix: []string{
			fmt.Sprintf("kubectl get node %s -o jsonpath='{.status.nodeInfo.kubeletVersion}'", shellQuote(node.Name)),
			fmt.Sprintf("Upgrade the kubelet on %s to within %d minor versions of %s (one minor version at a time), or drain and replace the node.", node.Name, maxKubeletSkew, server),
		},
	}
	return f, true
}
