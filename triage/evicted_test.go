package triage

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEvictedRules(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []Code
	}{
		{"a running pod is neither evicted nor lost", testPod(), nil},
		{"status.reason Evicted", testPod(statusReason("Evicted", "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.", corev1.PodFailed)), []Code{CodeEvicted}},
		{"status.reason Evicted for disk", testPod(statusReason("Evicted", "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 2Gi.", corev1.PodFailed)), []Code{CodeEvicted}},
		{"status.reason NodeLost", testPod(statusReason("NodeLost", "Node node-1 which was running pod app is unresponsive", corev1.PodRunning)), []Code{CodeNodeLost}},
		{"phase Unknown", testPod(statusReason("", "", corev1.PodUnknown)), []Code{CodeNodeLost}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, evictedRules, testSnapshot(tt.pod), tt.want...)
			for _, f := range got {
				if !hasField(f, "status.reason") {
					t.Errorf("%s evidence lacks status.reason", f.Code)
				}
				if !looksFirst(f.Fix) {
					t.Errorf("%s fix acts before it looks: %q", f.Code, f.Fix)
				}
				// A full disk is measured before anything on it is removed.
				if stepIndex(f.Fix, "crictl rmi --prune") >= 0 {
					checkBefore(t, f.Fix, "df -h /var/lib/kubelet", "crictl rmi --prune")
					if strings.Contains(f.Fix[stepIndex(f.Fix, "df -h")], "crictl") {
						t.Errorf("the disk is measured and pruned in one step: %q", f.Fix[stepIndex(f.Fix, "df -h")])
					}
				}
			}
		})
	}
}

func TestParseEviction(t *testing.T) {
	tests := []struct {
		msg  string
		want eviction
	}{
		{"The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container app was using 1Gi, request is 512Mi, has larger consumption of memory. ",
			eviction{scope: evictionNodePressure, resource: "memory", condition: "MemoryPressure", threshold: "100Mi", available: "50Mi", usage: []containerUsage{{"app", "1Gi", "512Mi"}}}},
		{"The node was low on resource: ephemeral-storage. Container prometheus was using 20Ki, which exceeds its request of 0. Container thanos was using 16Ki, which exceeds its request of 0.",
			eviction{scope: evictionNodePressure, resource: "ephemeral-storage", condition: "DiskPressure", usage: []containerUsage{{"prometheus", "20Ki", "0"}, {"thanos", "16Ki", "0"}}}},
		{"Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. ",
			eviction{scope: evictionOwnLimit, resource: "ephemeral-storage", condition: "DiskPressure", limit: "1Gi", limitOf: "the pod's containers together"}},
		{`Container build exceeded its local ephemeral storage limit "2Gi". `,
			eviction{scope: evictionOwnLimit, resource: "ephemeral-storage", condition: "DiskPressure", limit: "2Gi", limitOf: `container "build"`, container: "build"}},
		{`Usage of EmptyDir volume "cache" exceeds the limit "500Mi". `,
			eviction{scope: evictionOwnLimit, resource: "ephemeral-storage", condition: "DiskPressure", limit: "500Mi", limitOf: `emptyDir volume "cache"`}},
		{"The node had condition: [DiskPressure]. ", eviction{scope: evictionAdmission, condition: "DiskPressure"}},
		{"The node was low on resource: pids. Threshold quantity: 1000, available: 712. ", eviction{scope: evictionNodePressure, resource: "pids", condition: "PIDPressure", threshold: "1000", available: "712"}},
		{"something else", eviction{}},
	}
	for _, tt := range tests {
		if got := parseEviction(tt.msg); !cmp.Equal(got, tt.want, cmp.AllowUnexported(eviction{}, containerUsage{})) {
			t.Errorf("parseEviction(%q) = %+v, want %+v", tt.msg, got, tt.want)
		}
	}
}

// TestEvictionScope covers kind 13 of issue 12: an eviction for node pressure is fixed on the
// node and with the pod's requests, and names the node condition; one for the pod's own limit
// is fixed by that limit. A pod with no limit is never told to raise it.
func TestEvictionScope(t *testing.T) {
	storageLimits := func(limit string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}
		}
	}
	emptyDir := func(p *corev1.Pod) {
		size := resource.MustParse("500Mi")
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}})
	}
	owned := func(p *corev1.Pod) {
		yes := true
		p.Labels = map[string]string{"pod-template-hash": "6f9c"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "shop-6f9c", Controller: &yes}}
	}
	// pressure sets the node's condition: true now, or cleared ago.
	pressure := func(cond corev1.NodeConditionType, now bool, ago time.Duration) func(*Snapshot) {
		return func(s *Snapshot) {
			st := corev1.ConditionFalse
			if now {
				st = corev1.ConditionTrue
			}
			s.Nodes[0].Status.Conditions = append(s.Nodes[0].Status.Conditions, corev1.NodeCondition{Type: cond, Status: st, Reason: "KubeletHas" + string(cond), LastTransitionTime: metav1.NewTime(clock0.Add(-ago))})
		}
	}
	tests := []struct {
		name   string
		msg    string
		opts   []podOpt
		node   func(*Snapshot)
		inSumm []string // the summary must say these
		inFix  string   // the fix must say this
		notFix string   // and must not say this
	}{
		{"node disk pressure, kubelet 1.15 wording, two containers with no request",
			"The node was low on resource: ephemeral-storage. Container app was using 20Ki, which exceeds its request of 0. Container sidecar was using 16Ki, which exceeds its request of 0.",
			nil, pressure(corev1.NodeDiskPressure, true, 3*time.Minute),
			[]string{"ran low on ephemeral-storage", "DiskPressure condition, True now", "request of 0", "not a limit"}, "requests.ephemeral-storage on app, sidecar", "limits.ephemeral-storage"},
		{"node disk pressure, current wording, condition cleared since",
			"The node was low on resource: ephemeral-storage. Threshold quantity: 46993491787, available: 45494108Ki. Container kibana was using 108Ki, request is 0, has larger consumption of ephemeral-storage. ",
			nil, pressure(corev1.NodeDiskPressure, false, 12*time.Minute),
			[]string{"DiskPressure condition, cleared 12m ago", "threshold 46993491787, 45494108Ki available"}, "crictl rmi --prune", "--limits"},
		{"node memory pressure with a request",
			"The node was low on resource: memory. Threshold quantity: 750Mi, available: 225800Ki. Container nginx was using 4395616Ki, request is 128Mi, has larger consumption of memory.",
			nil, pressure(corev1.NodeMemoryPressure, true, time.Minute),
			[]string{"ran low on memory", "MemoryPressure"}, "memory requests of nginx", "ephemeral-storage"},
		{"node PID pressure",
			"The node was low on resource: pids. Threshold quantity: 1000, available: 712. ",
			nil, pressure(corev1.NodePIDPressure, true, time.Minute),
			[]string{"PIDPressure"}, "podPidsLimit", "limits"},
		{"admitted onto a node with DiskPressure",
			"The node had condition: [DiskPressure]. ",
			nil, pressure(corev1.NodeDiskPressure, true, time.Hour),
			[]string{"rejected the pod", "DiskPressure", "never ran there"}, "df -h", "--limits"},
		{"the pod's own total limit",
			"Pod ephemeral local storage usage exceeds the total limit of containers 10Gi. ",
			[]podOpt{storageLimits("10Gi"), owned}, func(*Snapshot) {},
			[]string{"its own limit (10Gi of the pod's containers together)", "not node pressure"}, "kubectl set resources deployment/shop -n shop -c app --limits=ephemeral-storage=20Gi", "crictl"},
		{"one container's own limit",
			`Container app exceeded its local ephemeral storage limit "2Gi". `,
			[]podOpt{storageLimits("2Gi")}, func(*Snapshot) {},
			[]string{`2Gi of container "app"`}, `limits.ephemeral-storage of container "app"`, "crictl"},
		{"an emptyDir's sizeLimit",
			`Usage of EmptyDir volume "cache" exceeds the limit "500Mi". `,
			[]podOpt{emptyDir}, func(*Snapshot) {},
			[]string{`emptyDir volume "cache"`}, "sizeLimit", "limits.ephemeral-storage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(append(tt.opts, statusReason("Evicted", tt.msg, corev1.PodFailed))...)
			s := testSnapshot(pod, warning("Evicted", tt.msg, 1, 20*time.Minute))
			tt.node(s)
			f := checkCodes(t, evictedRules, s, CodeEvicted)[0]
			for _, want := range tt.inSumm {
				if !strings.Contains(f.Summary, want) {
					t.Errorf("summary %q lacks %q", f.Summary, want)
				}
			}
			fix := strings.Join(f.Fix, "\n")
			if !strings.Contains(fix, tt.inFix) {
				t.Errorf("fix %q lacks %q", fix, tt.inFix)
			}
			if strings.Contains(fix, tt.notFix) {
				t.Errorf("fix %q says %q", fix, tt.notFix)
			}
		})
	}
}
