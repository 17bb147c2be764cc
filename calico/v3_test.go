package calico

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// v3CRDs writes projectcalico.org/v3 versions of the v1 CRDs (Calico's "no API server" mode):
// the group and version change, BlockAffinity spec.deleted is a bool and IPAMConfig is
// IPAMConfiguration.
func v3CRDs(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, testenv.CalicoCRDDir)
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), "crd.projectcalico.org", "projectcalico.org")
		s = strings.ReplaceAll(s, "- name: v1\n", "- name: v3\n")
		s = strings.ReplaceAll(s, "ipamconfigs", "ipamconfigurations")
		s = strings.ReplaceAll(s, "ipamconfig\n", "ipamconfiguration\n")
		s = strings.ReplaceAll(s, "IPAMConfigList", "IPAMConfigurationList")
		s = strings.ReplaceAll(s, "kind: IPAMConfig\n", "kind: IPAMConfiguration\n")
		if strings.Contains(e.Name(), "blockaffinities") {
			s = strings.Replace(s, "deleted:\n                  type: string", "deleted:\n                  type: boolean", 1)
		}
		if err := os.WriteFile(filepath.Join(dst, strings.Replace(e.Name(), "crd.projectcalico.org", "projectcalico.org", 1)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestV3Mode runs check, release, block release and lock against projectcalico.org/v3 CRDs
// (selected with CALICO_API_GROUP, since the test cluster also serves the v1 group).
func TestV3Mode(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	dir := v3CRDs(t)
	if err := c.InstallCRDs(t.Context(), os.DirFS(dir), "."); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CALICO_API_GROUP", "projectcalico.org/v3")
	cl, err := NewClient(t.Context(), c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if got := cl.APIGroup(); got != "projectcalico.org/v3" {
		t.Fatalf("APIGroup() = %s", got)
	}
	w := &world{t: t, ctx: t.Context(), c: c, cl: cl, kube: c.Client}
	w.post(resClusterInfo, map[string]any{"metadata": map[string]any{"name": "default"},
		"spec": map[string]any{"clusterGUID": "v3-guid", "datastoreReady": true}})
	w.ipamConfig(true, 7)
	w.pool("p", "10.60.0.0/24", 26, false)
	w.namespace("app")
	w.node("n1", nil)
	w.block("10.60.0.0/26", "host:n1", map[int]attr{0: podAttr("app", "live", "n1"), 1: podAttr("app", "gone", "n1")})
	w.block("10.60.0.64/26", "host:n1", nil)
	w.handle("k8s-pod-network.app.live", map[string]int{"10.60.0.0/26": 1})
	w.handle("k8s-pod-network.app.gone", map[string]int{"10.60.0.0/26": 1})
	w.pod("app", "live", "n1", []string{"10.60.0.0"}, nil)

	res, err := cl.Check(t.Context(), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"10.60.0.1"}, ips(res.LeakedIPs)); d != "" {
		t.Errorf("leaked (-want +got):\n%s", d)
	}
	rel, err := cl.ReleaseIPs(t.Context(), res.LeakedIPs, ReleaseOptions{})
	if err != nil || len(rel.Released) != 1 || rel.HandlesDeleted != 1 {
		t.Errorf("release: %v %+v", err, rel)
	}
	u, err := cl.Utilization(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if u.MaxBlocksPerHost != 7 || u.NodeBlocks["n1"] != 2 || len(u.EmptyBlocks) != 1 {
		t.Errorf("utilization: max %d, blocks %v, empty %d", u.MaxBlocksPerHost, u.NodeBlocks, len(u.EmptyBlocks))
	}
	br, err := cl.ReleaseEmptyBlocks(t.Context(), []netip.Prefix{netip.MustParsePrefix("10.60.0.64/26")}, BlockReleaseOptions{})
	if err != nil || len(br.Released) != 1 {
		t.Errorf("release block: %v %+v", err, br)
	}
	if _, err := cl.res(resAffinities).Get(t.Context(), AffinityName("n1", netip.MustParsePrefix("10.60.0.64/26")), metav1.GetOptions{}); !isNotFound(err) {
		t.Errorf("affinity not deleted: %v", err)
	}
	l, err := cl.Lock(t.Context(), LockOptions{Owner: "v3", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Lock(t.Context(), LockOptions{Owner: "other"}); !errors.Is(err, ErrDatastoreLocked) {
		t.Errorf("second lock: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	blockInvariants(t, cl)
}
