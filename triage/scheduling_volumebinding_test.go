package triage

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// withBoundClaim gives s's pod claim "data" bound to PV pv-1, whose node affinity requires
// label key to be one of values.
func withBoundClaim(key string, values ...string) func(*Snapshot) {
	return func(s *Snapshot) {
		s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data": {
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: s.Pod.Namespace},
			Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}}
		s.PVs = map[string]*corev1.PersistentVolume{"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
			Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}}}
	}
}

// withWaitingClaim gives s's pod an unbound claim "data" of a WaitForFirstConsumer class that
// may only provision where label key is one of values.
func withWaitingClaim(key string, values ...string) func(*Snapshot) {
	return func(s *Snapshot) {
		wffc := storagev1.VolumeBindingWaitForFirstConsumer
		s.StorageClasses = map[string]*storagev1.StorageClass{"zonal": {ObjectMeta: metav1.ObjectMeta{Name: "zonal"},
			Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc,
			AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: key, Values: values}}}}}}
		s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data": {
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: s.Pod.Namespace},
			Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("zonal")},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}}
	}
}

func TestVolumeBindingReasons(t *testing.T) {
	zone := func(z string) func(*corev1.Node) { return withLabel("topology.kubernetes.io/zone", z) }
	testFilterReasons(t, "VolumeBinding", []reasonsCase{
		{name: "a bound PV pinned to another zone", pod: podRequesting("db"), node: node("n1", zone("a")),
			snap: withBoundClaim("topology.kubernetes.io/zone", "b"), want: []NodeReason{{Code: CodeVolumeNodeAffinityConflict}}},
		{name: "a bound PV in the node's zone", pod: podRequesting("db"), node: node("n1", zone("b")),
			snap: withBoundClaim("topology.kubernetes.io/zone", "b")},
		{name: "a waiting claim whose class may not provision in the node's zone", pod: podRequesting("db"), node: node("n1", zone("a")),
			snap: withWaitingClaim("topology.kubernetes.io/zone", "b"), want: []NodeReason{{Code: CodePVCUnbound}}},
		{name: "a waiting claim whose class may provision there", pod: podRequesting("db"), node: node("n1", zone("b")),
			snap: withWaitingClaim("topology.kubernetes.io/zone", "b", "c")},
	})
}

func TestVolumeZoneReasons(t *testing.T) {
	zoneLabeled := func(zones string) func(*Snapshot) {
		return func(s *Snapshot) {
			s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data": {
				ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: s.Pod.Namespace},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"},
				Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}}
			s.PVs = map[string]*corev1.PersistentVolume{"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1",
				Labels: map[string]string{"failure-domain.beta.kubernetes.io/zone": zones}}}}
		}
	}
	zone := func(z string) func(*corev1.Node) { return withLabel("topology.kubernetes.io/zone", z) }
	testFilterReasons(t, "VolumeZone", []reasonsCase{
		{name: "a PV labelled with another zone (beta label, GA node label)", pod: podRequesting("db"), node: node("n1", zone("a")),
			snap: zoneLabeled("b"), want: []NodeReason{{Code: CodeVolumeNodeAffinityConflict}}},
		{name: "one of the PV's zones", pod: podRequesting("db"), node: node("n1", zone("a")), snap: zoneLabeled("b__a")},
		{name: "a node without zone labels is not judged", pod: podRequesting("db"), node: node("n1"), snap: zoneLabeled("b")},
	})
}

// TestVolumeZoneConflicts is issue 17's kind 7: a bound volume that rules out nodes is
// explained by why. A claim bound Immediate where the pod's own affinity excludes, or two
// claims in different zones, are fixed with the binding mode (WaitForFirstConsumer, or
// allowedTopologies) and a recreated claim, never "bring back a node in that zone"; that is the
// fix only when no node is left where the volume is.
func TestVolumeZoneConflicts(t *testing.T) {
	zone := func(z string) func(*corev1.Node) { return withLabel("topology.kubernetes.io/zone", z) }
	nodes := func() []*corev1.Node {
		return []*corev1.Node{node("a-1", zone("a")), node("a-2", zone("a")), node("b-1", zone("b")), node("b-2", zone("b"))}
	}
	immediate, wffc := storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer
	classes := func(s *Snapshot) {
		s.StorageClasses = map[string]*storagev1.StorageClass{
			"gp2":   {ObjectMeta: metav1.ObjectMeta{Name: "gp2"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &immediate},
			"gp3":   {ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &wffc},
			"other": {ObjectMeta: metav1.ObjectMeta{Name: "other"}, Provisioner: "ebs.csi.aws.com"},
		}
	}
	// bound gives the pod claims, each "claim=zone/class", bound to a PV in that zone.
	bound := func(claims ...string) func(*Snapshot) {
		return func(s *Snapshot) {
			s.PVCs, s.PVs = map[string]*corev1.PersistentVolumeClaim{}, map[string]*corev1.PersistentVolume{}
			for _, c := range claims {
				name, rest, _ := strings.Cut(c, "=")
				z, class, _ := strings.Cut(rest, "/")
				s.PVCs[name] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Pod.Namespace},
					Spec:   corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name, StorageClassName: ptr.To(class)},
					Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
				s.PVs["pv-"+name] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
					Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
							Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{z}}}}}}}}}
			}
			classes(s)
		}
	}
	inZone := func(z string) *corev1.Pod {
		p := podRequesting("db")
		p.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/zone": z}
		return p
	}
	affinityZone := func(z string) *corev1.Pod {
		p := podRequesting("db")
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{z}}}}}}}}
		return p
	}
	const bringBack = "Bring back a node"
	tests := []struct {
		name       string
		pod        *corev1.Pod
		nodes      []*corev1.Node
		claims     func(*Snapshot)
		msg        string
		want       Code
		summary    []string
		fix        []string
		notInFixes string
	}{
		{name: "a claim bound Immediate in zone a, the pod's nodeSelector zone b", pod: inZone("b"), nodes: nodes(), claims: bound("data=a/gp2"),
			msg:  "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 2 node(s) had volume node affinity conflict.",
			want: CodeVolumeNodeAffinityConflict, summary: []string{"excludes all of them (a-1, a-2)", "StorageClass gp2 binds Immediate"},
			fix: []string{"volumeBindingMode: WaitForFirstConsumer", "allowedTopologies limited to where the pod may run (topology.kubernetes.io/zone in b)", "recreate claim data"}, notInFixes: bringBack},
		{name: "the same with required node affinity and v1.37's words", pod: affinityZone("b"), nodes: nodes(), claims: bound("data=a/gp2"),
			msg:  "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 2 node(s) didn't match PersistentVolume's node affinity.",
			want: CodeVolumeNodeAffinityConflict, summary: []string{"excludes all of them"}, fix: []string{"WaitForFirstConsumer"}, notInFixes: bringBack},
		{name: "a class without a binding mode binds Immediate", pod: inZone("b"), nodes: nodes(), claims: bound("data=a/other"),
			want: CodeVolumeNodeAffinityConflict, summary: []string{"StorageClass other binds Immediate"}, fix: []string{"WaitForFirstConsumer"}, notInFixes: bringBack},
		{name: "two claims in different zones", pod: podRequesting("db"), nodes: nodes(), claims: bound("data=a/gp2", "logs=b/gp2"),
			msg:  "0/4 nodes are available: 4 node(s) had volume node affinity conflict.",
			want: CodeVolumeNodeAffinityConflict, summary: []string{"no node can use them all", "data (PersistentVolume pv-data, topology.kubernetes.io/zone in (a))"},
			fix: []string{"WaitForFirstConsumer", "so they follow claim data"}, notInFixes: bringBack},
		{name: "a claim that waited for its first consumer, in zone a; the pod now selects zone b: move the data", pod: inZone("b"), nodes: nodes(), claims: bound("data=a/gp3"),
			want: CodeVolumeNodeAffinityConflict, summary: []string{"already waits for the first consumer"},
			fix: []string{"already WaitForFirstConsumer: move the data of pv-data"}, notInFixes: "volumeBindingMode: WaitForFirstConsumer"},
		{name: "a volume in zone c, where no node is left: bring one back", pod: podRequesting("db"), nodes: nodes(), claims: bound("data=c/gp2"),
			msg:  "0/4 nodes are available: 4 node(s) had volume node affinity conflict.",
			want: CodeVolumeNodeAffinityConflict, summary: []string{"no node has that"}, fix: []string{bringBack + " with topology.kubernetes.io/zone in (c)"}},
		{name: "the volume's zone has nodes, but they are full: insufficient-cpu, not the volume", pod: podRequesting("db", "cpu=1"), nodes: nodes(), claims: bound("data=a/gp2"),
			want: CodeInsufficientCPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fill []*corev1.Pod
			if tt.want == CodeInsufficientCPU {
				fill = []*corev1.Pod{boundTo("a-1", "x", "cpu=3500m"), boundTo("a-2", "y", "cpu=3500m")}
			}
			var events []Event
			if tt.msg != "" {
				events = append(events, failedScheduling(tt.msg, 2))
			}
			s := snap(tt.pod, tt.nodes, fill, events...)
			tt.claims(s)
			if !NeedsStorageClasses(s) {
				t.Errorf("NeedsStorageClasses = false for an unscheduled pod with a bound zonal volume")
			}
			p := Evaluate(s).Primary()
			if p.Code != tt.want {
				t.Fatalf("primary = %s, want %s: %s", p.Code, tt.want, p.Summary)
			}
			t.Logf("%s\n%s", p.Summary, strings.Join(p.Fix, "\n"))
			for _, w := range tt.summary {
				if !strings.Contains(p.Summary, w) {
					t.Errorf("summary lacks %q: %s", w, p.Summary)
				}
			}
			all := strings.Join(p.Fix, "\n")
			for _, w := range tt.fix {
				if !strings.Contains(all, w) {
					t.Errorf("fixes lack %q:\n%s", w, all)
				}
			}
			if tt.notInFixes != "" && strings.Contains(all, tt.notInFixes) {
				t.Errorf("fixes say %q:\n%s", tt.notInFixes, all)
			}
		})
	}
}
