package triage

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	msgIPAMExhausted = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "7b35": plugin type="calico" failed (add): failed to request 1 IPv4 addresses. IPAM allocated only 0`
	msgBlockLimit    = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "41e1": plugin type="calico" failed (add): cannot allocate new block due to per host block limit`
	msgLocked        = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "aa": plugin type="calico" failed (add): Calico is currently not ready to process requests`
	msgAWS           = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to set up sandbox container "d70f" network for pod "w": NetworkPlugin cni failed to set up pod "w_ns" network: add cmd: failed to assign an IP address to container`
	msgNoCNI         = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "bb": network plugin is not ready: cni config uninitialized`
	msgNodename      = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "cc": plugin type="calico" failed (add): stat /var/lib/calico/nodename: no such file or directory: check that the calico/node container is running and has mounted /var/lib/calico/`
	msgOther         = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create containerd task: failed to mount rootfs`
)

// calicoNode is a calico-node pod in ns on node-1, ready or crash-looping.
func calicoNode(ns string, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "calico-node-x", Labels: map[string]string{"k8s-app": "calico-node"}}}
	p.Spec.NodeName = "node-1"
	p.Spec.Containers = []corev1.Container{{Name: "calico-node"}}
	p.Status.Phase = corev1.PodRunning
	cond := corev1.ConditionTrue
	st := corev1.ContainerStatus{Name: "calico-node", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if !ready {
		cond = corev1.ConditionFalse
		st = corev1.ContainerStatus{Name: "calico-node", RestartCount: 37,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "Unable to autoassign an address - pools are likely exhausted."}}}
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	return p
}

func TestNetworkRules(t *testing.T) {
	creating := testPod(pending("ContainerCreating", ""))
	later := ev(corev1.EventTypeNormal, "SandboxChanged", "", "Pod sandbox changed, it will be killed and re-created.", 37, time.Second)
	tests := []struct {
		name   string
		snap   *Snapshot
		want   []Code
		action string
	}{
		{"a running pod has no sandbox problem", testSnapshot(testPod(), warning("FailedCreatePodSandBox", msgIPAMExhausted, 3, time.Hour)), nil, ""},
		{"IPAM allocated only 0", testSnapshot(creating, warning("FailedCreatePodSandBox", msgIPAMExhausted, 74, 20*time.Second)), []Code{CodeCalicoIPAMExhausted}, ""},
		{"a later Normal event does not hide the sandbox failure", testSnapshot(creating, warning("FailedCreatePodSandBox", msgAWS, 38, 14*time.Second), later), []Code{CodeAWSVPCCNIIPExhausted}, ""},
		{"per host block limit", testSnapshot(creating, warning("FailedCreatePodSandBox", msgBlockLimit, 42, time.Minute)), []Code{CodeCalicoIPAMBlockLimit}, ""},
		{"datastore locked offers the unlock", testSnapshot(creating, warning("FailedCreatePodSandBox", msgLocked, 5, time.Minute)), []Code{CodeCalicoDatastoreLocked}, actionUnlockDatastore},
		{"cni config uninitialized", testSnapshot(creating, warning("FailedCreatePodSandBox", msgNoCNI, 5, time.Minute)), []Code{CodeCNINotInitialized}, ""},
		{"calico nodename missing", testSnapshot(creating, warning("FailedCreatePodSandBox", msgNodename, 5, time.Minute)), []Code{CodeCalicoNodeNotReady}, ""},
		{"any other sandbox failure", testSnapshot(creating, warning("FailedCreatePodSandBox", msgOther, 5, time.Minute)), []Code{CodeSandboxCreationFailed}, ""},
		{"a specific older message beats a generic newer one", testSnapshot(creating, warning("FailedCreatePodSandBox", msgOther, 1, time.Second), warning("FailedCreatePodSandBox", msgBlockLimit, 4, time.Minute)), []Code{CodeCalicoIPAMBlockLimit}, ""},
		{"a crash-looping calico-node in kube-system (manifest install) adds calico-node-not-ready", func() *Snapshot {
			s := testSnapshot(creating, warning("FailedCreatePodSandBox", msgIPAMExhausted, 74, 20*time.Second))
			s.CalicoNodePods = []*corev1.Pod{calicoNode("kube-system", false)}
			return s
		}(), []Code{CodeCalicoIPAMExhausted, CodeCalicoNodeNotReady}, ""},
		{"a healthy calico-node in calico-system (operator install) adds nothing", func() *Snapshot {
			s := testSnapshot(creating, warning("FailedCreatePodSandBox", msgIPAMExhausted, 74, 20*time.Second))
			s.CalicoNodePods = []*corev1.Pod{calicoNode("calico-system", true)}
			return s
		}(), []Code{CodeCalicoIPAMExhausted}, ""},
		{"no event yet, calico-node crash-looping", func() *Snapshot {
			s := testSnapshot(creating)
			s.CalicoNodePods = []*corev1.Pod{calicoNode("calico-system", false)}
			return s
		}(), []Code{CodeCalicoNodeNotReady}, ""},
		{"no event, node reports NetworkPluginNotReady", func() *Snapshot {
			s := testSnapshot(creating)
			s.Nodes[0].Status.Conditions[0].Status = corev1.ConditionFalse
			s.Nodes[0].Status.Conditions[0].Message = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
			return s
		}(), []Code{CodeCNINotInitialized}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, networkRules, tt.snap, tt.want...)
			if tt.action != "" && (len(got) == 0 || len(got[0].Actions) == 0 || got[0].Actions[0].Kind != tt.action) {
				t.Errorf("actions = %v, want %s", got[0].Actions, tt.action)
			}
			for _, f := range got {
				if !looksFirst(f.Fix) {
					t.Errorf("%s fix acts before it looks:\n%s", f.Code, strings.Join(f.Fix, "\n"))
				}
				switch f.Code {
				case CodeCalicoIPAMExhausted:
					// The two ways to release leaks are one choice, made after the check.
					checkBefore(t, f.Fix, "whypending ipam check --show-problem-ips", "one of the two, not both")
					checkBefore(t, f.Fix, "one of the two, not both", "whypending ipam release-ips")
				case CodeCalicoDatastoreLocked:
					checkBefore(t, f.Fix, "either with whypending or with calicoctl", "whypending ipam unlock")
				}
			}
		})
	}
}

func TestNetworkRulesCorrelateIPAM(t *testing.T) {
	creating := testPod(pending("ContainerCreating", ""))
	s := testSnapshot(creating, warning("FailedCreatePodSandBox", msgBlockLimit, 42, time.Minute))
	s.IPAM = &IPAMState{
		MaxBlocksPerHost: 4, StrictAffinity: true,
		NodeBlocks:        map[string]int{"node-1": 4},
		EmptyBlocks:       1,
		EmptyBlocksByNode: map[string]int{"node-1": 1},
		LeaksChecked:      true,
		LeakedIPs:         86,
		LeakedIPsByNode:   map[string]int{"node-1": 86},
		Pools:             []PoolUsage{{Name: "default", CIDR: "172.24.0.0/16", BlockSize: 26, Total: 65536, InUse: 256}},
	}
	f := networkRules(s)[0]
	want := []ActionRef{
		{Kind: actionReleaseEmptyBlocks, Label: "Release 1 empty block on node-1", Args: map[string]string{"node": "node-1"}},
		{Kind: actionReleaseLeakedIPs, Label: "Release 86 leaked IPs"},
	}
	if len(f.Actions) != len(want) {
		t.Fatalf("actions = %v, want %v", f.Actions, want)
	}
	for i := range want {
		if f.Actions[i].Kind != want[i].Kind || f.Actions[i].Label != want[i].Label || f.Actions[i].Args["node"] != want[i].Args["node"] {
			t.Errorf("actions[%d] = %+v, want %+v", i, f.Actions[i], want[i])
		}
	}
	if !hasField(f, "BlockAffinity") {
		t.Errorf("evidence %v lacks the node's BlockAffinity count", f.Evidence)
	}
	// Releasing comes before raising the limit, which the fix says is for when releasing frees
	// no block.
	checkBefore(t, f.Fix, "whypending ipam release-ips", "If releasing frees no block of node-1")
	checkBefore(t, f.Fix, "If releasing frees no block of node-1", "maxBlocksPerHost")

	s = testSnapshot(creating, warning("FailedCreatePodSandBox", msgIPAMExhausted, 74, time.Minute))
	s.IPAMErr = errors.New("the collector has no Calico access (built without WithCalico)")
	f = networkRules(s)[0]
	if f.Code != CodeCalicoIPAMExhausted || f.Evidence[len(f.Evidence)-1].Object != "Calico IPAM" {
		t.Errorf("without IPAM: code %s, evidence %v; want calico-ipam-exhausted saying IPAM was not read", f.Code, f.Evidence)
	}
}

func TestSandboxCode(t *testing.T) {
	tests := []struct {
		msg  string
		want Code
	}{
		{msgIPAMExhausted, CodeCalicoIPAMExhausted},
		{"Unable to autoassign an address - pools are likely exhausted.", CodeCalicoIPAMExhausted},
		{msgBlockLimit, CodeCalicoIPAMBlockLimit},
		{msgLocked, CodeCalicoDatastoreLocked},
		{msgAWS, CodeAWSVPCCNIIPExhausted},
		{msgNoCNI, CodeCNINotInitialized},
		{msgNodename, CodeCalicoNodeNotReady},
		{msgOther, CodeSandboxCreationFailed},
		{"403 Forbidden: quota exceeded", CodeSandboxCreationFailed},
	}
	for _, tt := range tests {
		if got := sandboxCode(tt.msg); got != tt.want {
			t.Errorf("sandboxCode(%q) = %s, want %s", tt.msg, got, tt.want)
		}
	}
}

func TestIPAMExhaustedAfterRepairSaysTheFailureIsHistory(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.PodSpec{NodeName: "worker-1"}}
	s := &Snapshot{Pod: pod, IPAM: &IPAMState{
		Pools:        []PoolUsage{{Name: "default", CIDR: "172.16.0.0/24", Total: 256, InUse: 75}},
		NodeBlocks:   map[string]int{"worker-1": 2},
		LeaksChecked: true,
	}}
	f := Finding{Code: CodeCalicoIPAMExhausted, Summary: "Calico IPAM could not give the pod an IP address."}
	ipamExhaustedDetail(s, &f)
	if !strings.Contains(f.Summary, "now have 181 free addresses") {
		t.Errorf("Summary = %q, want it to say the pools now have 181 free addresses", f.Summary)
	}
	for _, fix := range f.Fix {
		if strings.Contains(fix, "release-ips") || strings.Contains(fix, "really is full") {
			t.Errorf("Fix %q offers a repair for a pool that has room", fix)
		}
	}
	if len(f.Actions) != 0 {
		t.Errorf("Actions = %v, want none", f.Actions)
	}
}

// TestSandboxMessagesAreRead is issue 12's kind 6: a full node-local IPAM range and a CNI
// plugin that cannot reach the API server are read from the sandbox message, for any CNI.
func TestSandboxMessagesAreRead(t *testing.T) {
	creating := testPod(pending("ContainerCreating", ""))
	running := func(n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			p := testPod()
			p.Name = fmt.Sprintf("other-%d", i)
			out = append(out, p)
		}
		return out
	}
	withNode := func(s *Snapshot, podCIDR string, pods []*corev1.Pod) *Snapshot {
		s.Nodes[0].Spec.PodCIDR = podCIDR
		s.PodsByNode = map[string][]*corev1.Pod{"node-1": pods}
		return s
	}
	sandbox := func(msg string) Event { return warning("FailedCreatePodSandBox", msg, 40, 20*time.Second) }
	tests := []struct {
		name string
		snap *Snapshot
		want Code
		says string
	}{
		{
			name: "flannel host-local range with the range in the message and few pods: leaked reservations",
			snap: withNode(testSnapshot(creating, sandbox(`Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "9a1c": plugin type="flannel" failed (add): failed to delegate add: failed to allocate for range 0: no IP addresses available in range set: 10.244.1.1-10.244.1.254`)), "10.244.1.0/24", running(12)),
			want: CodeCNIIPRangeExhausted, says: "leaked",
		},
		{
			name: "canal without the range in the message: the node's podCIDR gives the size",
			snap: withNode(testSnapshot(creating, sandbox(`networkPlugin cni failed to set up pod "web_shop" network: failed to allocate for range 0: no IP addresses available in range set`)), "10.42.3.0/24", running(30)),
			want: CodeCNIIPRangeExhausted, says: "253 addresses",
		},
		{
			name: "bridge plugin with a tiny range really full",
			snap: withNode(testSnapshot(creating, sandbox(`plugin type="bridge" failed (add): failed to allocate for range 0: no IP addresses available in range set: 10.88.0.2-10.88.0.6`)), "", running(5)),
			want: CodeCNIIPRangeExhausted, says: "really is full",
		},
		{
			name: "Calico CNI through a proxy that answers 503 (containerd with HTTP_PROXY)",
			snap: testSnapshot(creating, sandbox(`Failed create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "1faa": error getting ClusterInformation: Get https://[10.96.0.1]:443/apis/crd.projectcalico.org/v1/clusterinformations/default: Service Unavailable`)),
			want: CodeSandboxCreationFailed, says: "NO_PROXY",
		},
		{
			name: "Multus through a proxy it cannot connect to",
			snap: testSnapshot(creating, sandbox(`plugin type="multus" name="multus-cni-network" failed (add): Multus: [shop/app/1f2e]: error getting pod: Get "https://[10.43.0.1]:443/api/v1/namespaces/shop/pods/app?timeout=1m0s": proxyconnect tcp: dial tcp 10.0.0.5:3128: connect: connection refused`)),
			want: CodeSandboxCreationFailed, says: "NO_PROXY",
		},
		{
			name: "Calico CNI token expired",
			snap: testSnapshot(creating, sandbox(`plugin type="calico" failed (add): error getting ClusterInformation: connection is unauthorized: Unauthorized`)),
			want: CodeSandboxCreationFailed, says: "expired",
		},
		{
			name: "the service IP unreachable from the node",
			snap: testSnapshot(creating, sandbox(`plugin type="cilium-cni" failed (add): unable to connect to Cilium daemon: Get "https://10.96.0.1:443/api/v1/namespaces/kube-system": dial tcp 10.96.0.1:443: i/o timeout`)),
			want: CodeSandboxCreationFailed, says: "kube-proxy",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, networkRules, tt.snap, tt.want)
			if !strings.Contains(got[0].Summary, tt.says) {
				t.Errorf("summary lacks %q: %s", tt.says, got[0].Summary)
			}
			if !looksFirst(got[0].Fix) {
				t.Errorf("fix acts before it looks:\n%s", strings.Join(got[0].Fix, "\n"))
			}
			if stepIndex(got[0].Fix, "leaked") >= 0 && stepIndex(got[0].Fix, "If the reservations far outnumber the pods") < 0 {
				t.Errorf("fix says reservations leaked without the count that shows it:\n%s", strings.Join(got[0].Fix, "\n"))
			}
		})
	}
}

// TestOldSandboxEventsAreHistory: a sandbox or mount failure last seen before the containers'
// last run ended belongs to an earlier attempt and is not what blocks the pod now.
func TestOldSandboxEventsAreHistory(t *testing.T) {
	rerun := testPod(pending("ContainerCreating", ""), func(p *corev1.Pod) {
		st := status(p, "app")
		st.RestartCount = 2
		st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 255, Reason: "Unknown",
			FinishedAt: metav1.NewTime(clock0.Add(-10 * time.Minute))}}
	})
	old := warning("FailedCreatePodSandBox", msgIPAMExhausted, 5, 40*time.Minute)
	fresh := warning("FailedCreatePodSandBox", msgIPAMExhausted, 5, time.Minute)
	if got := networkRules(testSnapshot(rerun, old)); len(got) != 0 {
		t.Errorf("networkRules(only a sandbox failure from before the last run) = %v, want nothing", codesOf(got))
	}
	checkCodes(t, networkRules, testSnapshot(rerun, old, fresh), CodeCalicoIPAMExhausted)
	oldMount := warning("FailedMount", `MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`, 5, 40*time.Minute)
	if got := volumeRules(testSnapshot(rerun, oldMount)); len(got) != 0 {
		t.Errorf("volumeRules(only a mount failure from before the last run) = %v, want nothing", codesOf(got))
	}
}

// TestLeakEvidenceNamesTheWorstNodesOnly: a cluster leaking on hundreds of nodes gets the ten
// worst by name and a count of the rest, not one line with every node.
func TestLeakEvidenceNamesTheWorstNodesOnly(t *testing.T) {
	ipam := &IPAMState{LeakedIPsByNode: map[string]int{}}
	for i := range 300 {
		n := 1 + i%7
		ipam.LeakedIPsByNode[fmt.Sprintf("node-%03d", i)] = n
		ipam.LeakedIPs += n
	}
	msg := leakEvidence(ipam, "node-006").Message
	if got := strings.Count(msg, "node-"); got != maxLeakNodes {
		t.Errorf("names %d nodes, want %d: %s", got, maxLeakNodes, msg)
	}
	for _, want := range []string{fmt.Sprintf("%d addresses allocated", ipam.LeakedIPs), "node-006 7, node-013 7,", "and 290 more nodes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("lacks %q: %s", want, msg)
		}
	}
	// The asked-about pod's node is named even when it leaks less than the ten worst.
	msg = leakEvidence(ipam, "node-000").Message
	for _, want := range []string{"node-000 (the pod's node) 1, and 289 more nodes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("lacks %q: %s", want, msg)
		}
	}
	if got := strings.Count(msg, "node-"); got != maxLeakNodes+1 {
		t.Errorf("names %d nodes, want %d: %s", got, maxLeakNodes+1, msg)
	}
}

// TestIPAMExhaustedWithAFailedCheckDoesNotSayNothingLeaks: when the leak check's reads failed
// (IPAMState.LeaksChecked false, the error in Snapshot.IPAMErr), the pools' free addresses do
// not make the failure history: the answer says the leak count is unknown, quotes the error
// and keeps the check and release fixes.
func TestIPAMExhaustedWithAFailedCheckDoesNotSayNothingLeaks(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.PodSpec{NodeName: "worker-1"}}
	s := &Snapshot{Pod: pod, IPAMErr: errors.New("check calico ipam: list pods: unexpected EOF"), IPAM: &IPAMState{
		Pools:      []PoolUsage{{Name: "default", CIDR: "172.16.0.0/24", Total: 256, InUse: 75}},
		NodeBlocks: map[string]int{"worker-1": 2},
	}}
	f := Finding{Code: CodeCalicoIPAMExhausted, Summary: "Calico IPAM could not give the pod an IP address."}
	ipamExhaustedDetail(s, &f)
	if strings.Contains(f.Summary, "nothing is leaked") || strings.Contains(f.Summary, "should succeed") {
		t.Errorf("Summary = %q: concludes from a failed check", f.Summary)
	}
	var ev []string
	for _, e := range f.Evidence {
		ev = append(ev, e.Message)
	}
	if !strings.Contains(strings.Join(ev, "\n"), "leak check failed, so how many addresses are leaked is unknown: check calico ipam: list pods: unexpected EOF") {
		t.Errorf("Evidence does not say the leak count is unknown, with the error:\n%s", strings.Join(ev, "\n"))
	}
	if !slices.ContainsFunc(f.Fix, func(s string) bool { return strings.Contains(s, "ipam release-ips") }) {
		t.Errorf("Fix = %q, want the check and release commands", f.Fix)
	}
}
