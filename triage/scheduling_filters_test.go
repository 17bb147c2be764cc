package triage

import (
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
)

// reasonsCase is one row of a filter's table test: the pod judged against node, in a cluster
// of node, others and the bound pods.
type reasonsCase struct {
	name   string
	pod    *corev1.Pod
	node   *corev1.Node
	others []*corev1.Node
	bound  []*corev1.Pod
	// snap, when set, adds what else the filter reads (claims, PVs, CSINodes, classes).
	snap func(*Snapshot)
	// want are the reasons, compared without their prose (Message).
	want []NodeReason
}

// testFilterReasons runs a filter's table test: its row's reasons against each case.
func testFilterReasons(t *testing.T, plugin string, tests []reasonsCase) {
	t.Helper()
	row := filterNamed(t, plugin)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snap(tt.pod, append([]*corev1.Node{tt.node}, tt.others...), tt.bound)
			if tt.snap != nil {
				tt.snap(s)
			}
			got := row.reasons(newDemand(s), tt.node, newCluster(s))
			if diff := cmp.Diff(tt.want, got, ignoreProse, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s reasons mismatch (-want +got):\n%s", plugin, diff)
			}
			for _, r := range got {
				if r.Message == "" {
					t.Errorf("%s reason %s has no message", plugin, r.Code)
				}
			}
		})
	}
}

// filterNamed returns the row of plugin.
func filterNamed(t *testing.T, plugin string) filter {
	t.Helper()
	for _, f := range filters {
		if f.plugin == plugin {
			return f
		}
	}
	t.Fatalf("no filter row for plugin %s", plugin)
	return filter{}
}

// pendingCodesDocumented returns the slugs of the "Pending (not scheduled)" table of
// docs/triage-codes.md.
func pendingCodesDocumented(t *testing.T) []Code {
	t.Helper()
	doc, err := os.ReadFile("../docs/triage-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Pending (not scheduled)\n")
	if !ok {
		t.Fatal("docs/triage-codes.md has no Pending section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var out []Code
	for _, m := range regexp.MustCompile(`(?m)^\| ([a-z0-9 /-]+) \|`).FindAllStringSubmatch(section, -1) {
		for _, slug := range regexp.MustCompile(`[a-z0-9-]+`).FindAllString(m[1], -1) {
			if slug != "code" {
				out = append(out, Code(slug))
			}
		}
	}
	return out
}

// TestEveryPendingCodeHasARow: each code of the Pending family in docs/triage-codes.md is
// found before any node (podLevelCodes) or is the verdict of a filter row, so it has a filter
// rank, a tie-break rank, the scheduler's words and prose; and every row's code is documented
// as Pending.
func TestEveryPendingCodeHasARow(t *testing.T) {
	documented := pendingCodesDocumented(t)
	if len(documented) == 0 {
		t.Fatal("no codes in the Pending section of docs/triage-codes.md")
	}
	for _, c := range documented {
		if !slices.Contains(podLevelCodes, c) && filterOf(c) == nil {
			t.Errorf("Pending code %s has no filter row and is not pod-level: add it to its filter's row in scheduling_filters.go", c)
		}
		if !c.Pending() {
			t.Errorf("Pending code %s: Code.Pending() = false", c)
		}
	}
	for _, f := range filters {
		for _, c := range f.codes {
			if !slices.Contains(documented, c) {
				t.Errorf("filter %s's code %s is not in the Pending section of docs/triage-codes.md", f.plugin, c)
			}
		}
	}
}

// TestFilterRows checks the rows against each other: the default profile's filters in its
// order, every code with the scheduler's words, every phrase with a row's code, prose for
// every modelled filter, and each code once in the tie-break order.
func TestFilterRows(t *testing.T) {
	// The filter plugins of the default profile of kube-scheduler v1.37, in order
	// (pkg/scheduler/apis/config/v1/default_plugins.go; DynamicResources, NodeDeclaredFeatures
	// and the gang plugins come with feature gates).
	profile := []string{"NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
		"VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity"}
	var plugins []string
	for _, f := range filters {
		plugins = append(plugins, f.plugin)
	}
	if diff := cmp.Diff(profile, plugins); diff != "" {
		t.Errorf("filter rows are not the default profile's filters in its order (-want +got):\n%s", diff)
	}
	worded := map[Code]bool{}
	for _, f := range filters {
		for _, p := range f.phrases {
			worded[p.code] = true
			if filterOf(p.code) == nil {
				t.Errorf("filter %s: phrase %q maps to %s, which no row lists", f.plugin, p.words, p.code)
			}
			if p.words != strings.ToLower(p.words) {
				t.Errorf("filter %s: phrase %q is not lower-case", f.plugin, p.words)
			}
		}
		if f.reasons != nil && f.describe == nil {
			t.Errorf("filter %s judges nodes but has no prose (describe)", f.plugin)
		}
	}
	for _, f := range filters {
		for _, c := range f.codes {
			if !worded[c] {
				t.Errorf("filter %s: code %s has no phrase: the scheduler's words for it are unknown", f.plugin, c)
			}
		}
	}
	seen := map[Code]int{}
	for _, c := range schedulingOrder {
		seen[c]++
	}
	for c, n := range seen {
		if n != 1 {
			t.Errorf("code %s is %d times in schedulingOrder", c, n)
		}
	}
	for _, f := range filters {
		for _, c := range f.codes {
			if seen[c] == 0 {
				t.Errorf("filter %s: code %s has no tie-break rank", f.plugin, c)
			}
		}
	}
}

// TestFilterReasonsCarryTheirRowsCodes judges random clusters with each row alone: a row's
// reasons carry only its own codes (or context codes), and nodeReasons is the rows' reasons in
// row order.
func TestFilterReasonsCarryTheirRowsCodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		s := randomSchedulingSnapshot(rng)
		d, c := newDemand(s), newCluster(s)
		for _, n := range s.Nodes {
			var joined []NodeReason
			for _, f := range filters {
				if f.reasons == nil {
					continue
				}
				rs := f.reasons(d, n, c)
				for _, r := range rs {
					if !slices.Contains(f.codes, r.Code) && !slices.Contains(contextCodes, r.Code) {
						t.Fatalf("case %d: filter %s gave node %s a reason of %s, not one of its codes %v", i, f.plugin, n.Name, r.Code, f.codes)
					}
				}
				joined = append(joined, rs...)
			}
			if diff := cmp.Diff(joined, nodeReasons(d, n, c), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("case %d: nodeReasons(%s) is not the rows' reasons in order:\n%s", i, n.Name, diff)
			}
		}
	}
}

// TestReasonCode maps the scheduler's own words, as v1.37 and older versions write them, to
// codes (the rows' phrases).
func TestReasonCode(t *testing.T) {
	tests := []struct {
		text string
		want Code
	}{
		{"Insufficient cpu", CodeInsufficientCPU},
		{"Insufficient memory", CodeInsufficientMemory},
		{"Insufficient ephemeral-storage", CodeInsufficientEphemeralStorage},
		{"Too many pods", CodeTooManyPods},
		{"Insufficient pods", CodeTooManyPods},
		{"Insufficient nvidia.com/gpu", CodeInsufficientExtendedResource},
		{"Insufficient hugepages-2Mi", CodeInsufficientExtendedResource},
		{"node(s) were unschedulable", CodeNodeUnschedulable},
		{"node(s) had untolerated taint(s)", CodeUntoleratedTaint},
		{"node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }", CodeUntoleratedTaint},
		{"node(s) had taint {node.kubernetes.io/not-ready: }, that the pod didn't tolerate", CodeUntoleratedTaint},
		{"node(s) had taints that the pod didn't tolerate", CodeUntoleratedTaint},
		{"node(s) didn't match Pod's node affinity/selector", CodeNodeSelectorMismatch},
		{"node(s) didn't match node selector", CodeNodeSelectorMismatch},
		{"node(s) didn't match the requested node name", CodeNodeSelectorMismatch},
		{"node(s) didn't have free ports for the requested pod ports", CodeHostPortConflict},
		{"node(s) exceed max volume count", CodeVolumeAttachLimit},
		{"node(s) had volume node affinity conflict", CodeVolumeNodeAffinityConflict},
		{"node(s) had no available volume zone", CodeVolumeNodeAffinityConflict},
		{"node(s) had volume zone conflict", CodeVolumeNodeAffinityConflict},
		{"node(s) didn't find available persistent volumes to bind", CodePVCUnbound},
		{"node(s) did not have enough free storage", CodePVCUnbound},
		{"node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)", CodePVCUnbound},
		{"pod has unbound immediate PersistentVolumeClaims", CodePVCUnbound},
		{`persistentvolumeclaim "data" not found`, CodePVCNotFound},
		{"node(s) didn't match pod topology spread constraints", CodeTopologySpreadUnsatisfiable},
		{"node(s) didn't match pod topology spread constraints (missing required label)", CodeTopologySpreadUnsatisfiable},
		{"node(s) didn't satisfy existing pods anti-affinity rules", CodePodAntiAffinityUnsatisfiable},
		{"node(s) didn't match pod anti-affinity rules", CodePodAntiAffinityUnsatisfiable},
		{"node(s) didn't match pod affinity rules", CodePodAffinityUnsatisfiable},
		// Not modelled: the table gives them to nodes verbatim (reconcile).
		{"node(s) had no available disk", ""},
		{"node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod", ""},
		{"cannot allocate all claims", ""},
		{"pod level request for cpu is insufficient to cover the aggregated container and node-allocatable DRA requests", ""},
		{"node(s) didn't satisfy plugin(s) [ExamplePlugin]", ""},
	}
	for _, tt := range tests {
		if got := reasonCode(tt.text); got != tt.want {
			t.Errorf("reasonCode(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}
