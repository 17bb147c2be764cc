package triage

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// This file explains aws-vpc-cni-ip-exhausted from the AWS VPC CNI's own settings (the
// aws-node DaemonSet's env): "failed to assign an IP address to container" has more than one
// cause. Without prefix delegation the node's ENIs hold a fixed number of secondary IPs, and a
// kubelet max-pods above that number leaves the last pods without one. With prefix delegation
// the node gets /28 prefixes, and the usual cause is a subnet with no free contiguous /28
// (EC2's InsufficientCidrBlocks): fragmentation, not the ENIs. With custom networking the pods
// use the ENIConfig's subnet, not the node's. The advice never turns on what is already on.

// awsSettings is the part of the aws-node env the answer reads.
type awsSettings struct {
	known            bool   // the node's aws-node pod or the DaemonSet was read
	source           string // where the settings come from: "Pod kube-system/aws-node-x" or "DaemonSet kube-system/aws-node"
	prefixDelegation bool
	customNetworking bool
	warm             []string // WARM_IP_TARGET=…, MINIMUM_IP_TARGET=…, WARM_ENI_TARGET=…, WARM_PREFIX_TARGET=…
	envLine          string   // the env the answer quotes
	containerName    string   // the aws-node container
	// tooOld is the CNI's image tag when it predates prefix delegation (v1.9.0); "" otherwise.
	tooOld string
	// templateDiffers is the DaemonSet template's env line when it differs from the node's
	// pod's (a change not rolled out to the node yet); "" otherwise.
	templateDiffers string
	// templatePrefixDelegation is whether the DaemonSet's template turns prefix delegation on.
	templatePrefixDelegation bool
}

// NeedsAWSNode reports whether the Collector should read the aws-node DaemonSet
// (Snapshot.AWSNode) and the node's aws-node pod (AWSNodePodName): a current sandbox event of
// the pod is the AWS VPC CNI's IP exhaustion.
func NeedsAWSNode(s *Snapshot) bool {
	pod := s.Pod
	if pod == nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !awaitingSandbox(pod) {
		return false
	}
	for _, e := range currentEvents(s, eventsWithReason(s, "FailedCreatePodSandBox", "FailedCreatePodSandbox")) {
		if sandboxCode(e.Message) == CodeAWSVPCCNIIPExhausted {
			return true
		}
	}
	return false
}

// AWSNodePodName returns the name of the aws-node pod (kube-system, label k8s-app=aws-node)
// bound to the pod's node, from Snapshot.PodsByNode; "" when there is none. Its spec is what
// the node's ipamd runs with, so the Collector reads it whole (Snapshot.AWSNodePod).
func AWSNodePodName(s *Snapshot) string {
	if s.Pod == nil {
		return ""
	}
	for _, p := range s.Bound().On(s.Pod.Spec.NodeName) {
		if p.Namespace == metav1.NamespaceSystem && p.Labels["k8s-app"] == "aws-node" {
			return p.Name
		}
	}
	return ""
}

// readAWSSettings reads the aws-node container's env: from the node's aws-node pod when it
// was read (what ipamd on the node runs with), else from the DaemonSet's template.
func readAWSSettings(s *Snapshot) awsSettings {
	st := awsSettings{}
	var dsEnv string
	if ds := s.AWSNode; ds != nil {
		st = awsContainerSettings(ds.Spec.Template.Spec.Containers)
		st.source = "DaemonSet kube-system/aws-node"
		dsEnv = st.envLine
		st.templatePrefixDelegation = st.prefixDelegation
	}
	if p := s.AWSNodePod; p != nil {
		tpd := st.templatePrefixDelegation
		st = awsContainerSettings(p.Spec.Containers)
		st.source, st.templatePrefixDelegation = "Pod kube-system/"+p.Name, tpd
		if s.AWSNode != nil && dsEnv != st.envLine {
			st.templateDiffers = orDefault(dsEnv, "none of them set")
		}
	}
	return st
}

// awsContainerSettings reads the settings from the aws-node container of containers (the only
// container when there is one).
func awsContainerSettings(containers []corev1.Container) awsSettings {
	st := awsSettings{known: true}
	for _, c := range containers {
		if c.Name != "aws-node" && len(containers) > 1 {
			continue
		}
		st.containerName = c.Name
		if tag := imageTag(c.Image); tag != "" {
			if v, err := version.ParseGeneric(tag); err == nil && v.LessThan(version.MajorMinor(1, 9)) {
				st.tooOld = tag
			}
		}
		var parts []string
		for _, e := range c.Env {
			switch e.Name {
			case "ENABLE_PREFIX_DELEGATION":
				st.prefixDelegation = strings.EqualFold(e.Value, "true")
			case "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG":
				st.customNetworking = strings.EqualFold(e.Value, "true")
			case "WARM_IP_TARGET", "MINIMUM_IP_TARGET", "WARM_ENI_TARGET", "WARM_PREFIX_TARGET":
				if e.Value != "" {
					st.warm = append(st.warm, e.Name+"="+e.Value)
				}
			default:
				continue
			}
			parts = append(parts, e.Name+"="+e.Value)
		}
		st.envLine = strings.Join(parts, ", ")
		break
	}
	return st
}

// imageTag returns the tag of an image reference ("" without one, or with only a digest).
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return ""
}

// awsDetail fills an aws-vpc-cni-ip-exhausted finding from the aws-node settings and the pods
// on the node that hold a VPC IP.
func awsDetail(s *Snapshot, e Event, f *Finding) {
	pod := s.Pod
	nodeName := pod.Spec.NodeName
	node := s.Node(nodeName)
	withIP := 0
	for _, p := range s.Bound().On(nodeName) {
		if !p.Spec.HostNetwork && p.Status.PodIP != "" {
			withIP++
		}
	}
	var capacity int64
	instance := ""
	if node != nil {
		capacity = node.Status.Capacity.Pods().Value()
		instance = node.Labels[corev1.LabelInstanceTypeStable]
		msg := fmt.Sprintf("%d pods on the node hold a VPC IP; kubelet max-pods is %d", withIP, capacity)
		if instance != "" {
			msg += "; instance type " + instance
		}
		f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(nodeName), Field: "status.capacity.pods", Message: msg})
	}
	st := readAWSSettings(s)
	seen := eventSeen(s, e)
	ipamdLog := fmt.Sprintf("On %s: grep -E 'IP pool stats|InsufficientCidrBlocks|InsufficientFreeAddresses' /var/log/aws-routed-eni/ipamd.log | tail -5", shellQuote(nodeName))
	switch {
	case !st.known:
		why := "it does not exist in kube-system"
		if s.AWSNodeErr != nil {
			why = "it could not be read: " + s.AWSNodeErr.Error()
		}
		f.Evidence = append(f.Evidence, Evidence{Object: "DaemonSet kube-system/aws-node", Field: "spec.template.spec.containers[aws-node].env", Message: "not readable: " + why})
		f.Summary = fmt.Sprintf("The AWS VPC CNI (ipamd) on %s has no free IP for the pod (FailedCreatePodSandBox %s). Its settings (the aws-node DaemonSet's env) could not be read, so which limit is hit is not known: without prefix delegation it is the ENIs' secondary IPs (%d pods hold one against max-pods %d); with prefix delegation, a subnet with no free contiguous /28.", nodeName, seen, withIP, capacity)
		f.Fix = []string{
			"kubectl get daemonset aws-node -n kube-system -o jsonpath='{.spec.template.spec.containers[0].env}'   # ENABLE_PREFIX_DELEGATION, AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG, WARM_*_TARGET decide which reading applies",
			ipamdLog,
			"Without prefix delegation: set the kubelet's max-pods to the instance type's ENI limit (eni-max-pods.txt), or enable prefix delegation on the aws-node DaemonSet (Nitro instances).",
			"With prefix delegation already on: free or reserve contiguous /28 blocks in the node's subnet (aws ec2 create-subnet-cidr-reservation --reservation-type prefix) or give the nodes a less fragmented subnet.",
		}
	case st.prefixDelegation:
		f.Summary = fmt.Sprintf("The AWS VPC CNI (ipamd) on %s has no free IP for the pod (FailedCreatePodSandBox %s). Prefix delegation is already on (ENABLE_PREFIX_DELEGATION=true), so the node gets /28 prefixes rather than single IPs: the usual cause is a subnet with no free contiguous /28 (EC2 InsufficientCidrBlocks), a fragmented subnet rather than full ENIs.", nodeName, seen)
		if st.customNetworking {
			f.Summary += " Custom networking is on too, so the prefixes come from the ENIConfig's subnet for the node's zone, not the node's own subnet."
		}
		f.Fix = []string{ipamdLog + "   # InsufficientCidrBlocks confirms the subnet has no free /28"}
		if capacity > 0 && withIP < int(capacity) {
			f.Fix = append(f.Fix, fmt.Sprintf("%d pods hold an IP against max-pods %d: this is not the max-pods limit; do not lower it.", withIP, capacity))
		}
		f.Fix = append(f.Fix, "Reserve room for prefixes in the subnet (aws ec2 create-subnet-cidr-reservation --subnet-id <subnet> --cidr <free range> --reservation-type prefix), or move the nodes (or the ENIConfig) to a subnet with free contiguous space.")
	default:
		f.Summary = fmt.Sprintf("The AWS VPC CNI (ipamd) on %s has no free secondary IP for the pod (FailedCreatePodSandBox %s): prefix delegation is off, so the node's ENIs hold a fixed number of IPs, and %d pods already hold one against kubelet max-pods %d.", nodeName, seen, withIP, capacity)
		if st.customNetworking {
			f.Summary += " Custom networking is on: pod IPs come from the ENIConfig's subnet, and the node's primary ENI carries none, which lowers the limit."
		}
		f.Fix = []string{
			ipamdLog,
			fmt.Sprintf("Either set the kubelet's max-pods to the ENI limit of %s (eni-max-pods.txt, or max-pods-calculator.sh), so the scheduler stops placing pods the ENIs cannot address.", orDefault(instance, "the instance type")),
		}
		switch {
		case st.templatePrefixDelegation:
			// On in the template already: the node's pod has not been replaced since.
			f.Fix = append(f.Fix, "Or let prefix delegation reach the node: the aws-node DaemonSet's template already sets ENABLE_PREFIX_DELEGATION=true, but the node's pod predates it; replace it, then raise max-pods to match. Until the new aws-node pod is Ready no new pod on the node gets an IP, while running pods keep theirs.",
				fmt.Sprintf("kubectl delete pod %s -n kube-system   # the DaemonSet recreates it from its template", shellQuote(strings.TrimPrefix(st.source, "Pod kube-system/"))))
		case st.tooOld != "":
			// The setting exists from v1.9.0: on an older CNI it would change nothing.
			f.Fix = append(f.Fix, fmt.Sprintf("Or, on Nitro instances, prefix delegation: the VPC CNI here is %s, older than v1.9.0, which added it; upgrade the CNI (the vpc-cni add-on) first, then set ENABLE_PREFIX_DELEGATION=true on the aws-node DaemonSet and raise max-pods to match.", st.tooOld))
		default:
			f.Fix = append(f.Fix, "Or, on Nitro instances, turn on prefix delegation, then raise max-pods to match:",
				fmt.Sprintf("kubectl set env daemonset/aws-node -n kube-system -c %s ENABLE_PREFIX_DELEGATION=true", shellQuote(orDefault(st.containerName, "aws-node"))))
		}
	}
	if st.known {
		env := st.envLine
		if env == "" {
			env = "none of ENABLE_PREFIX_DELEGATION, AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG or WARM_*_TARGET is set (the defaults: prefix delegation off, WARM_ENI_TARGET=1)"
		}
		field := "spec.template.spec.containers[" + orDefault(st.containerName, "aws-node") + "].env"
		if strings.HasPrefix(st.source, "Pod ") {
			field = "spec.containers[" + orDefault(st.containerName, "aws-node") + "].env"
		}
		f.Evidence = append(f.Evidence, Evidence{Object: st.source, Field: field, Message: env})
		if st.templateDiffers != "" {
			f.Evidence = append(f.Evidence, Evidence{Object: "DaemonSet kube-system/aws-node", Field: "spec.template.spec.containers[" + orDefault(st.containerName, "aws-node") + "].env",
				Message: st.templateDiffers + ": the template differs from the node's pod, so a change is not rolled out to the node yet; the pod's env is what ipamd runs with"})
		}
		if len(st.warm) > 0 {
			f.Fix = append(f.Fix, fmt.Sprintf("Warm pool settings %s: ipamd keeps only that many spare addresses, so a burst of pods waits for the next EC2 allocation; raise them if the failures come in bursts and clear on their own.", strings.Join(st.warm, ", ")))
		}
	}
}
