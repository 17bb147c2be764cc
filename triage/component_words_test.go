package triage

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// These tables check that a component's own words (a CNI plugin's, a CSI driver's, a
// runtime's, the AWS VPC CNI's settings, a registry name) become the cause in the answer's
// first sentence, with the fix that addresses it, and that reads the rule needs but could not
// make leave it saying so instead of guessing.

// firstSentence is the summary up to its first ". ".
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

func TestSandboxWordsNameTheComponent(t *testing.T) {
	creating := func() *corev1.Pod { return testPod(pending("ContainerCreating", "")) }
	sandbox := func(msg string) Event { return warning("FailedCreatePodSandBox", msg, 40, 20*time.Second) }
	tests := []struct {
		name     string
		msg      string
		want     Code
		first    string // in the first sentence
		fix      string // in some fix line
		restarts bool   // the pod was restarted in place (phase Running, old lastState)
	}{
		{"a bridge that kept its old subnet, after the node came back", `NetworkPlugin cni failed to set up pod "app_shop" network: failed to set bridge addr: "cni0" already has an IP address different from 10.244.7.1/24`,
			CodeSandboxCreationFailed, "bridge cni0 still carries an address from an older pod subnet", "ip link delete cni0", true},
		{"the sandbox image", `failed to get sandbox image "registry.k8s.io/pause:3.9": failed to pull image "registry.k8s.io/pause:3.9": dial tcp 34.96.108.209:443: i/o timeout`,
			CodeSandboxCreationFailed, "cannot get its sandbox (pause) image registry.k8s.io/pause:3.9", "crictl pull registry.k8s.io/pause:3.9", false},
		{"a CNI binary missing", `plugin type="portmap" failed (add): failed to find plugin "portmap" in path [/opt/cni/bin]`,
			CodeSandboxCreationFailed, `names plugin "portmap", but its binary is not in /opt/cni/bin`, "ls /opt/cni/bin", false},
		{"flannel without its lease", `plugin type="flannel" failed (add): loadFlannelSubnetEnv failed: open /run/flannel/subnet.env: no such file or directory`,
			CodeSandboxCreationFailed, "finds no subnet lease", "flannel", false},
		{"a generic message still names the plugin and quotes it", `plugin type="kube-ovn" failed (add): RPC failed; request ip return 500 no address allocated to pod`,
			CodeSandboxCreationFailed, `The CNI plugin "kube-ovn" on node-1 cannot set up the pod's network`, "journalctl", false},
		{"cilium multi-pool", `plugin type="cilium-cni" failed (add): unable to allocate IP via local cilium agent: [POST /ipam][502] postIpamFailure "all CIDR ranges are exhausted"`,
			CodeCNIIPRangeExhausted, "The Cilium agent on node-1 has no free pod address", "kubectl delete pod -n kube-system cilium-abcde   # stop-gap: the DaemonSet restarts the agent, which rebuilds its allocator from the CiliumNode; until it is Ready again no new pod on the node gets networking, while running pods keep theirs", false},
		{"cilium cluster-pool", `plugin type="cilium-cni" failed (add): unable to allocate IP via local cilium agent: [POST /ipam][502] postIpamFailure  range is full`,
			CodeCNIIPRangeExhausted, "The Cilium agent on node-1 has no free pod address", "CiliumPodIPPool", false},
		{"azure CNI", `plugin type="azure-vnet" failed (add): IPAM Invoker Add failed with error: Failed to allocate pool: Failed to delegate: Failed to allocate address: No available addresses`,
			CodeCNIIPRangeExhausted, `The IPAM of CNI plugin "azure-vnet" has no free pod address for node-1`, "kubectl get pods -A -o wide --field-selector spec.nodeName=node-1", false},
		{"antrea's agent down", `plugin type="antrea" failed (add): rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial unix /var/run/antrea/cni.sock: connect: connection refused"`,
			CodeSandboxCreationFailed, "The antrea CNI plugin on node-1 cannot reach its node agent", "grep -i antrea", false},
		{"a cgroup driver mismatch", `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error setting cgroup config for procHooks process: unable to freeze`,
			CodeSandboxCreationFailed, "runc on node-1 cannot apply the pod sandbox's cgroups", "SystemdCgroup", false},
		{"calico on a windows node", `plugin type="calico" failed (add): global strict affinity should not be false for Windows node`,
			CodeCalicoWindowsStrictAffinity, "IPAM strictAffinity is false", `"strictAffinity":true`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := creating()
			if tt.restarts {
				pod.Status.Phase = corev1.PodRunning
				st := status(pod, "app")
				st.RestartCount = 2
				st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 255, Reason: "Error", FinishedAt: metav1.NewTime(clock0.Add(-96 * time.Hour))}}
			}
			s := testSnapshot(pod, sandbox(tt.msg))
			agent := testPod()
			agent.Namespace, agent.Name, agent.Labels, agent.Spec.HostNetwork = "kube-system", "cilium-abcde", map[string]string{"k8s-app": "cilium"}, true
			s.PodsByNode["node-1"] = []*corev1.Pod{agent}
			got := checkCodes(t, networkRules, s, tt.want)
			if first := firstSentence(got[0].Summary); !strings.Contains(first, tt.first) {
				t.Errorf("first sentence = %q, want it to say %q", first, tt.first)
			}
			if !strings.Contains(strings.Join(got[0].Fix, "\n"), tt.fix) {
				t.Errorf("fix = %q, want %q in it", got[0].Fix, tt.fix)
			}
			if !looksFirst(got[0].Fix) {
				t.Errorf("fix acts before it looks:\n%s", strings.Join(got[0].Fix, "\n"))
			}
			// What decides the change is read (and the case said) before the change.
			for _, o := range map[string][][2]string{
				"a bridge that kept its old subnet, after the node came back": {{"ip -4 addr show cni0", "If the address of cni0 is not the gateway 10.244.7.1/24"}, {"If the address of cni0", "ip link delete cni0"}},
				"cilium multi-pool":        {{"kubectl get ciliumnode", "cilium-dbg status"}, {"cilium-dbg status", "If the agent holds fewer CIDRs"}, {"If the agent holds fewer CIDRs", "kubectl delete pod -n kube-system cilium-abcde"}},
				"calico on a windows node": {{"kubectl get installations.operator.tigera.io", "Either, with the Tigera operator"}, {"Either, with the Tigera operator", `"strictAffinity":true`}},
			}[tt.name] {
				checkBefore(t, got[0].Fix, o[0], o[1])
			}
		})
	}
}

func TestAWSAdviceReadsTheCNISettings(t *testing.T) {
	msg := `plugin type="aws-cni" name="aws-cni" failed (add): add cmd: failed to assign an IP address to container`
	node := testNode("node-1", true, "v1.37.2")
	node.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("58")}
	awsNode := func(env ...corev1.EnvVar) *appsv1.DaemonSet {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-node"}}
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "aws-node", Env: env}}
		return ds
	}
	nodePod := func(image string, env ...corev1.EnvVar) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-node-q4pbj", Labels: map[string]string{"k8s-app": "aws-node"}}}
		p.Spec.NodeName = "node-1"
		p.Spec.Containers = []corev1.Container{{Name: "aws-node", Image: image, Env: env}}
		return p
	}
	pd := corev1.EnvVar{Name: "ENABLE_PREFIX_DELEGATION", Value: "true"}
	tests := []struct {
		name          string
		ds            *appsv1.DaemonSet
		err           error
		says, fix     string
		mustNotAdvise string
		pod           *corev1.Pod // the node's aws-node pod
	}{
		{"prefix delegation already on: a fragmented subnet, never 'enable it'", awsNode(corev1.EnvVar{Name: "ENABLE_PREFIX_DELEGATION", Value: "true"}, corev1.EnvVar{Name: "WARM_PREFIX_TARGET", Value: "1"}), nil,
			"Prefix delegation is already on", "create-subnet-cidr-reservation", "ENABLE_PREFIX_DELEGATION=true", nil},
		{"prefix delegation off: the ENIs and max-pods", awsNode(corev1.EnvVar{Name: "WARM_ENI_TARGET", Value: "1"}), nil,
			"prefix delegation is off", "kubectl set env daemonset/aws-node -n kube-system -c aws-node ENABLE_PREFIX_DELEGATION=true", "", nil},
		{"settings not readable: both readings, no write", nil, errString("daemonsets.apps \"aws-node\" is forbidden"),
			"could not be read", "With prefix delegation already on", "kubectl set env", nil},
		{"the DaemonSet not readable, the node's pod is: its env decides", nil, errString("daemonsets.apps \"aws-node\" is forbidden"),
			"Prefix delegation is already on", "create-subnet-cidr-reservation", "kubectl set env", nodePod("602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.18.3", pd)},
		{"on in the template, not yet on the node: replace the pod, never 'turn it on'", awsNode(pd), nil,
			"prefix delegation is off", "replace it, then raise max-pods to match. Until the new aws-node pod is Ready no new pod on the node gets an IP, while running pods keep theirs.\nkubectl delete pod aws-node-q4pbj -n kube-system   #", "kubectl set env", nodePod("602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.18.3")},
		{"a CNI older than prefix delegation: upgrade it first", awsNode(), nil,
			"prefix delegation is off", "older than v1.9.0", "kubectl set env", nodePod("602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni:v1.6.0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(testPod(pending("ContainerCreating", "")), warning("FailedCreatePodSandBox", msg, 12, time.Minute))
			s.Nodes = []*corev1.Node{node}
			s.AWSNode, s.AWSNodeErr = tt.ds, tt.err
			if tt.pod != nil {
				s.PodsByNode = map[string][]*corev1.Pod{"node-1": {tt.pod}}
				if AWSNodePodName(s) != tt.pod.Name {
					t.Fatalf("AWSNodePodName = %q, want the node's aws-node pod", AWSNodePodName(s))
				}
				s.AWSNodePod = tt.pod
			}
			got := checkCodes(t, networkRules, s, CodeAWSVPCCNIIPExhausted)
			fix := strings.Join(got[0].Fix, "\n")
			if !strings.Contains(got[0].Summary, tt.says) || !strings.Contains(fix, tt.fix) {
				t.Errorf("summary %q / fix %q: want %q and %q", got[0].Summary, fix, tt.says, tt.fix)
			}
			if tt.mustNotAdvise != "" && strings.Contains(fix, tt.mustNotAdvise) {
				t.Errorf("fix advises %q: %q", tt.mustNotAdvise, fix)
			}
			if !looksFirst(got[0].Fix) {
				t.Errorf("fix acts before it looks:\n%s", fix)
			}
			if i := stepIndex(got[0].Fix, "do not lower it"); i >= 0 {
				checkBefore(t, got[0].Fix, "do not lower it", "create-subnet-cidr-reservation")
			}
			if stepIndex(got[0].Fix, "Or,") >= 0 && stepIndex(got[0].Fix, "Either set the kubelet's max-pods") < 0 {
				t.Errorf("fix offers another way (Or, …) after max-pods without saying max-pods is one of two:\n%s", fix)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestCSIDriverNotRegisteredNamesItsNodeDaemonSet(t *testing.T) {
	const driver = "ebs.csi.aws.com"
	mount := warning("FailedMount", `MountVolume.MountDevice failed for volume "pvc-1" : kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver name ebs.csi.aws.com not found in the list of registered CSI drivers`, 30, time.Minute)
	pod := testPod(pending("ContainerCreating", ""))
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ebs-csi-node", UID: "uid-ebs"}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node-driver-registrar", Args: []string{"--kubelet-registration-path=/var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock"}}}
	ds.Status.DesiredNumberScheduled = 3
	tests := []struct {
		name  string
		setup func(s *Snapshot)
		says  string
		fix   string
	}{
		{"refused by Pod Security: the namespace label, never removing privileged", func(s *Snapshot) {
			s.CSIPlugin.Events["uid-ebs"] = []Event{warning("FailedCreate", `Error creating: pods "ebs-csi-node-x" is forbidden: violates PodSecurity "baseline:latest": privileged (container "ebs-plugin" must not set securityContext.privileged=true)`, 9, time.Minute)}
			s.CSIPlugin.Namespaces["kube-system"] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}
		}, `Pod Security "baseline:latest" refuses its pods`, "kubectl label namespace kube-system pod-security.kubernetes.io/enforce=privileged --overwrite"},
		{"refused by admission: retried at once by touching the DaemonSet, restarting none of its running pods", func(s *Snapshot) {
			s.CSIPlugin.Events["uid-ebs"] = []Event{warning("FailedCreate", `Error creating: pods "ebs-csi-node-x" is forbidden: violates PodSecurity "baseline:latest": privileged (container "ebs-plugin" must not set securityContext.privileged=true)`, 9, time.Minute)}
			s.CSIPlugin.Namespaces["kube-system"] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}
		}, `Pod Security "baseline:latest" refuses its pods`, `kubectl annotate daemonset/ebs-csi-node -n kube-system whypending.io/retry="$(date +%s)" --overwrite`},
		{"a taint its tolerations miss", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}, "does not tolerate taint dedicated=gpu:NoSchedule", "kubectl patch daemonset -n kube-system ebs-csi-node"},
		{"its pod on the node is not ready", func(s *Snapshot) {
			p := testPod(crashLoop("ebs-plugin", 4, 1, "Error", "boom"))
			p.Namespace, p.Name = "kube-system", "ebs-csi-node-abcde"
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ebs-csi-node", UID: "uid-ebs", Controller: isTrue()}}
			s.PodsByNode["node-1"] = []*corev1.Pod{p}
		}, "has pod ebs-csi-node-abcde on the node, but it is CrashLoopBackOff", "kubectl logs -n kube-system ebs-csi-node-abcde --all-containers"},
		{"no DaemonSet runs the driver", func(s *Snapshot) { s.CSIPlugin.DaemonSets = nil },
			"No DaemonSet in the cluster runs a node plugin for ebs.csi.aws.com", "kubectl get daemonsets -A"},
		{"DaemonSets not readable", func(s *Snapshot) { s.CSIPlugin.DaemonSets, s.CSIPlugin.DaemonSetsErr = nil, errString("forbidden") },
			"could not be read", "kubectl get daemonsets -A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(pod, mount)
			s.CSIPlugin = &CSIPlugin{Driver: driver, DaemonSets: CSIPluginDaemonSets([]*appsv1.DaemonSet{ds}, driver), Events: map[types.UID][]Event{}, Namespaces: map[string]*corev1.Namespace{},
				CSINode: &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}}
			tt.setup(s)
			if got := NeedsCSIPlugin(s); got != driver {
				t.Fatalf("NeedsCSIPlugin = %q, want %q", got, driver)
			}
			got := checkCodes(t, volumeRules, s, CodeCSIDriverNotRegistered)
			fix := strings.Join(got[0].Fix, "\n")
			if !strings.HasPrefix(got[0].Summary, "The kubelet on node-1 has no registration for CSI driver ebs.csi.aws.com") || !strings.Contains(got[0].Summary, tt.says) {
				t.Errorf("summary = %q, want the driver first and %q", got[0].Summary, tt.says)
			}
			if !strings.Contains(fix, tt.fix) {
				t.Errorf("fix = %q, want %q", fix, tt.fix)
			}
			if strings.Contains(fix, "kubectl rollout restart daemonset/") {
				t.Errorf("fix restarts the DaemonSet's Ready pods on every node: %q", fix)
			}
			if strings.Contains(fix, "remove securityContext.privileged") {
				t.Errorf("fix removes privileged from a CSI node plugin: %q", fix)
			}
			if !looksFirst(got[0].Fix) {
				t.Errorf("fix acts before it looks:\n%s", fix)
			}
			// The refusal (the DaemonSet's newest FailedCreate) or the node's taints are read
			// before the change that answers them.
			switch {
			case strings.Contains(fix, "kubectl label namespace"):
				checkBefore(t, got[0].Fix, "kubectl describe daemonset -n kube-system ebs-csi-node", "kubectl label namespace")
			case strings.Contains(fix, "kubectl patch daemonset"):
				checkBefore(t, got[0].Fix, "kubectl get node node-1 -o jsonpath='{.spec.taints}'", "kubectl patch daemonset")
			}
		})
	}
}

func TestRuntimeWordsPointAtTheField(t *testing.T) {
	mk := func(msg string, mutate func(p *corev1.Pod)) *Snapshot {
		p := testPod(waiting("app", "CreateContainerError", msg))
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "app-7d9f8b6c4", Controller: isTrue()}}
		p.Labels = map[string]string{"pod-template-hash": "7d9f8b6c4"}
		p.Name = "app-7d9f8b6c4-abcde"
		if mutate != nil {
			mutate(p)
		}
		return testSnapshot(p)
	}
	localhost := "localhost/profile.json"
	bidirectional := corev1.MountPropagationBidirectional
	tests := []struct {
		name      string
		snap      *Snapshot
		says, fix string
	}{
		{"a seccomp profile in the annotation's form", mk(`failed to create containerd container: cannot load seccomp profile "/var/lib/kubelet/seccomp/localhost/profile.json": open /var/lib/kubelet/seccomp/localhost/profile.json: no such file or directory`, func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &localhost}}
		}), `the "localhost/" prefix becomes a directory`, `kubectl patch deployment/app -n shop -p '{"spec":{"template":{"spec":{"containers":[{"name":"app","securityContext":{"seccompProfile":{"type":"Localhost","localhostProfile":"profile.json"}}}]}}}}'`},
		{"a mount propagation the host does not allow", mk(`Error response from daemon: linux mounts: path /var/lib/kubelet/pods is mounted on /var/lib/kubelet but it is not a shared mount`, func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "pods", MountPath: "/var/lib/kubelet/pods", MountPropagation: &bidirectional}}
		}), "Bidirectional (volume \"pods\" at /var/lib/kubelet/pods)", "mount --make-rshared /var/lib/kubelet"},
		{"an AppArmor profile not loaded", mk(`failed to create containerd container: apparmor profile "k8s-restricted" not found`, nil), `AppArmor profile "k8s-restricted"`, "apparmor_parser -r /etc/apparmor.d/k8s-restricted"},
		{"containerd without apparmor_parser is the node's, not the image's", mk(`failed to create containerd container: get apparmor_parser version: exec: "apparmor_parser": executable file not found in $PATH`, nil), "the node lacks apparmor_parser", "apt-get install apparmor"},
		{"a hostPath on a read-only node filesystem", mk(`failed to generate container "x" spec: failed to apply OCI options: failed to mkdir "/opt/agent": mkdir /opt/agent: read-only file system`, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "agent", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/opt/agent"}}}}
		}), "the node's filesystem there is read-only", "under /var"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, containerConfigRules, tt.snap, CodeCreateContainerError)
			if got[0].Uncertain {
				t.Error("a runtime message the table reads is not uncertain")
			}
			if !strings.HasPrefix(got[0].Summary, "The container runtime on node-1") || !strings.Contains(got[0].Summary, tt.says) {
				t.Errorf("summary = %q, want the runtime first and %q", got[0].Summary, tt.says)
			}
			if fix := strings.Join(got[0].Fix, "\n"); !strings.Contains(fix, tt.fix) {
				t.Errorf("fix = %q, want %q", fix, tt.fix)
			}
			if !looksFirst(got[0].Fix) {
				t.Errorf("fix acts before it looks:\n%s", strings.Join(got[0].Fix, "\n"))
			}
			// The node's profiles are listed before the patch that names one, and the
			// alternatives (patch, or the profile where the runtime looks) are said first.
			for _, o := range map[string][][2]string{
				"a seccomp profile in the annotation's form":  {{"ls -l /var/lib/kubelet/seccomp", "Either point localhostProfile"}, {"Either point localhostProfile", "kubectl patch deployment/app"}},
				"a mount propagation the host does not allow": {{"findmnt", "Either, if"}, {"Either, if", "mount --make-rshared"}},
			}[tt.name] {
				checkBefore(t, got[0].Fix, o[0], o[1])
			}
		})
	}
}

func TestRegistryThatDoesNotResolveIsANameProblem(t *testing.T) {
	msg := `failed to pull and unpack image "kind-regsitry:5000/app:1": failed to resolve reference "kind-regsitry:5000/app:1": failed to do request: Head "https://kind-regsitry:5000/v2/app/manifests/1": dial tcp: lookup kind-regsitry on 10.96.0.10:53: no such host`
	published := map[string]string{"localRegistryHosting.v1": "host: \"localhost:5001\"\nhostFromContainerRuntime: \"kind-registry:5000\"\nhelp: https://kind.sigs.k8s.io/docs/user/local-registry/\n"}
	hosting, err := ParseRegistryHosting(published)
	if err != nil || hosting.HostFromContainerRuntime != "kind-registry:5000" {
		t.Fatalf("ParseRegistryHosting = %+v, %v", hosting, err)
	}
	tests := []struct {
		name    string
		hosting *RegistryHosting
		image   string
		others  []string
		says    string
		fix     string
	}{
		{"a close spelling of the published registry", hosting, "kind-regsitry:5000/app:1", nil,
			"the nodes' container runtime reaches it as kind-registry:5000", "kubectl set image deployment/app app=kind-registry:5000/app:1 -n shop"},
		{"the name pods use, which the node's runtime cannot resolve", &RegistryHosting{Host: "localhost:5001", HostFromContainerRuntime: "localhost:5001", HostFromClusterNetwork: "kind-registry:5000"}, "kind-registry:5000/app:1", nil,
			"reaches it as localhost:5001, not kind-registry:5000", "app=localhost:5001/app:1"},
		{"a typo of a registry the node's pods use", nil, "registy.example.com/shop/app:1", []string{"registry.example.com/shop/web:2"},
			"close spelling of registry.example.com", "app=registry.example.com/shop/app:1"},
		{"nothing close: the name first, then DNS", nil, "nowhere.invalid/app:1", []string{"registry.example.com/shop/web:2"},
			"does not resolve on node-1 (no such host)", "check the spelling of nowhere.invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := imageRef(tt.image).registry
			m := strings.ReplaceAll(msg, "kind-regsitry:5000/app:1", tt.image)
			m = strings.ReplaceAll(m, "kind-regsitry", hostOnly(host))
			m = strings.ReplaceAll(m, "https://"+hostOnly(host)+":5000", "https://"+host)
			p := testPod(pending("ErrImagePull", m))
			p.Spec.Containers[0].Image = tt.image
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "app-7d9f8b6c4", Controller: isTrue()}}
			p.Labels = map[string]string{"pod-template-hash": "7d9f8b6c4"}
			s := testSnapshot(p)
			for _, img := range tt.others {
				o := testPod()
				o.Name, o.Spec.Containers[0].Image = "web", img
				s.PodsByNode["node-1"] = append(s.PodsByNode["node-1"], o)
			}
			if !NeedsRegistryHosting(s) {
				t.Fatal("NeedsRegistryHosting = false for a host that does not resolve")
			}
			s.RegistryHosting = tt.hosting
			got := checkCodes(t, imageRules, s, CodeRegistryUnreachable)
			fix := strings.Join(got[0].Fix, "\n")
			if !strings.Contains(got[0].Summary, tt.says) || !strings.Contains(fix, tt.fix) {
				t.Errorf("summary %q\nfix %q\nwant %q and %q", got[0].Summary, fix, tt.says, tt.fix)
			}
			if strings.Contains(firstSentence(got[0].Summary), "firewall") {
				t.Errorf("a name that does not resolve is blamed on the network first: %q", got[0].Summary)
			}
			// Look before acting: the fix asks the node whether a name resolves before it
			// changes anything, and claims it of no name nobody has checked there.
			if first := ParseFixStep(got[0].Fix[0]); first.Node != "node-1" || !strings.HasPrefix(first.Command, "getent hosts ") {
				t.Errorf("fix starts with %q, want the node's getent hosts", got[0].Fix[0])
			}
			if strings.Contains(fix, "it resolves") {
				t.Errorf("fix claims a name resolves before anything checked it:\n%s", fix)
			}
			pull := slices.IndexFunc(got[0].Fix, func(l string) bool { return strings.Contains(l, "crictl pull") })
			set := slices.IndexFunc(got[0].Fix, func(l string) bool { return strings.HasPrefix(l, "kubectl set image") })
			if set >= 0 && (pull < 0 || pull > set) {
				t.Errorf("the image is set (step %d) before the node pulls it by the new name (step %d):\n%s", set, pull, fix)
			}
		})
	}
}

func TestMountWordsNameTheComponent(t *testing.T) {
	tests := []struct {
		name, msg, says, fix string
	}{
		{"NFS export refused", `MountVolume.SetUp failed for volume "data" : mount failed: exit status 32 Mounting command: mount Mounting arguments: -t nfs nas.example.com:/export/data /var/lib/kubelet/pods/x/volumes/kubernetes.io~nfs/data Output: mount.nfs: access denied by server while mounting nas.example.com:/export/data`,
			"The NFS server refuses to export nas.example.com:/export/data to node-1", "showmount -e nas.example.com"},
		{"no NFS client on the node", `MountVolume.SetUp failed for volume "data" : mount failed: exit status 32 Output: mount: wrong fs type, bad option, bad superblock on nas.example.com:/export/data, missing codepage or helper program, or other error (for several filesystems (e.g. nfs, cifs) you might need a /sbin/mount.<type> helper program)`,
			"node-1 lacks the mount helper", "nfs-common"},
		{"a registered CSI plugin that does not answer", `MountVolume.MountDevice failed for volume "pvc-1" : rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial unix /var/lib/kubelet/plugins/driver.longhorn.io/csi.sock: connect: connection refused"`,
			"CSI driver driver.longhorn.io is registered on node-1, but its node plugin does not answer", "grep -i csi"},
		{"a hostPath that is not there", `MountVolume.SetUp failed for volume "sock" : hostPath type check failed: /run/agent/agent.sock is not a socket file`,
			"The hostPath /run/agent/agent.sock of volume \"sock\" is not a socket file on node-1", "ls -ld /run/agent/agent.sock"},
		{"an NFS server that does not answer, the volume's spec not read", `MountVolume.SetUp failed for volume "data" : mount failed: exit status 32 Output: mount.nfs: Connection timed out`,
			"cannot reach the NFS server of volume \"data\"", "kubectl get pv -o custom-columns=NAME:.metadata.name,CLAIM:.spec.claimRef.name,NFS:.spec.nfs.server"},
		{"an unknown message is quoted", `MountVolume.SetUp failed for volume "data" : something the rules do not know`,
			`It says: "something the rules do not know"`, "kubectl describe pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(testPod(pending("ContainerCreating", "")), warning("FailedMount", tt.msg, 12, time.Minute))
			got := checkCodes(t, volumeRules, s, CodeVolumeMountFailed)
			if !strings.Contains(got[0].Summary, tt.says) || !strings.Contains(strings.Join(got[0].Fix, "\n"), tt.fix) {
				t.Errorf("summary %q / fix %q: want %q and %q", got[0].Summary, got[0].Fix, tt.says, tt.fix)
			}
			if !looksFirst(got[0].Fix) {
				t.Errorf("fix acts before it looks:\n%s", strings.Join(got[0].Fix, "\n"))
			}
			if tt.name == "no NFS client on the node" {
				checkBefore(t, got[0].Fix, "ls /sbin/mount.*", "install the client tools")
			}
		})
	}
}

func TestRunAsNonRootNamesTheUser(t *testing.T) {
	p := testPod(waiting("app", "CreateContainerConfigError", "container has runAsNonRoot and image will run as root (pod: \"app_shop(uid)\", container: app)"))
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "app-7d9f8b6c4", Controller: isTrue()}}
	p.Labels = map[string]string{"pod-template-hash": "7d9f8b6c4"}
	got := checkCodes(t, containerConfigRules, testSnapshot(p), CodeCreateContainerError)
	if !strings.Contains(got[0].Summary, "runAsNonRoot: true, but the image runs as root") || !strings.Contains(strings.Join(got[0].Fix, "\n"), `kubectl patch deployment/app -n shop -p '{"spec":{"template":{"spec":{"containers":[{"name":"app","securityContext":{"runAsUser":1000}}]}}}}'`) {
		t.Errorf("summary %q fix %q", got[0].Summary, got[0].Fix)
	}
	// Which UID the image can run as is read from its USER before the patch sets one.
	checkBefore(t, got[0].Fix, "crane config registry.example.com/shop/app:1.0 | jq .config.User", `"runAsUser":1000`)
}
