package authz

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// apiReviewer sends SubjectAccessReviews with the admin client, counting them.
type apiReviewer struct {
	client kubernetes.Interface
	mu     sync.Mutex
	sent   int
}

func (r *apiReviewer) ReviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	r.mu.Lock()
	r.sent++
	r.mu.Unlock()
	out, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	return out.Status, nil
}

func (r *apiReviewer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent
}

// clock is a settable clock for the decision cache.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The people of the RBAC tests, as Slack knows them.
var (
	dev      = chat.Principal{Platform: "slack", Team: "T1", ID: "U0DEV", Name: "dev"}
	sre      = chat.Principal{Platform: "slack", Team: "T1", ID: "U0SRE", Name: "sre"}
	stranger = chat.Principal{Platform: "slack", Team: "T1", ID: "U0STRANGER", Name: "stranger"}
)

// calicoWrites are the permissions a release of leaked IPs uses (actions.Runner.Access).
var calicoWrites = []authorizationv1.ResourceAttributes{
	{Verb: "update", Group: "crd.projectcalico.org", Resource: "ipamblocks"},
	{Verb: "update", Group: "crd.projectcalico.org", Resource: "ipamhandles"},
	{Verb: "delete", Group: "crd.projectcalico.org", Resource: "ipamhandles"},
	{Verb: "update", Group: "crd.projectcalico.org", Resource: "clusterinformations"},
}

// rbacCluster starts a cluster with namespaces shop and payments, a Role in shop that gets
// pods bound to the developer, and a ClusterRole of the Calico writes bound to group sre.
func rbacCluster(t *testing.T) (*testenv.Cluster, *apiReviewer) {
	t.Helper()
	c := testcluster.Start(t, testenv.Options{})
	ctx := t.Context()
	for _, ns := range []string{"shop", "payments"} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rbac := c.Client.RbacV1()
	if _, err := rbac.Roles("shop").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings("shop").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev-reads-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dev@example.com"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "calico-ipam-repair"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"crd.projectcalico.org"}, Resources: []string{"ipamblocks", "ipamhandles"}, Verbs: []string{"update", "delete"}},
			{APIGroups: []string{"crd.projectcalico.org"}, Resources: []string{"clusterinformations"}, Verbs: []string{"update"}},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sre-repairs-ipam"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "calico-ipam-repair"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "sre"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rv := &apiReviewer{client: c.Client}
	// The API server's RBAC authorizer learns of new bindings through its informers: wait
	// until it allows both, so that no test's first question races the bindings.
	waitForRBAC(t, rv, authorizationv1.SubjectAccessReviewSpec{User: "dev@example.com",
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "shop"}}, true)
	for _, w := range calicoWrites {
		waitForRBAC(t, rv, authorizationv1.SubjectAccessReviewSpec{User: "sre-member", Groups: []string{"sre"}, ResourceAttributes: &w}, true)
	}
	rv.sent = 0
	return c, rv
}

// waitForRBAC polls the API server, uncached, until it answers want for spec.
func waitForRBAC(t *testing.T, rv *apiReviewer, spec authorizationv1.SubjectAccessReviewSpec, want bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := rv.ReviewAccess(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if st.Allowed == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server still answers allowed=%v for %+v 30s on", st.Allowed, spec.ResourceAttributes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAllowOnTheRealAPIServer asks the real API server's RBAC authorizer: a developer who may
// only get pods in shop may ask about shop and not about payments, and is refused the Calico
// writes with the exact verb; the SRE group may make them; an unmapped person is refused with
// the reason; each refusal is an audit record; repeated questions come from the cache, and a
// RoleBinding removed mid-session takes effect once the TTL has passed.
func TestAllowOnTheRealAPIServer(t *testing.T) {
	c, rv := rbacCluster(t)
	clk := &clock{now: time.Now()}
	var logs bytes.Buffer
	metrics := NewMetrics(nil)
	a := New(Options{
		Mode: ModeAll,
		Mappings: map[string]Mapping{"slack": {
			Users:  map[string]Identity{"U0DEV": {User: "dev@example.com"}},
			Groups: map[string][]string{"S0SRE": {"sre"}},
		}},
		Directories: map[string]Directory{"slack": directory{"S0SRE": {"U0SRE"}}},
		Clusters:    map[string]Reviewer{"test": rv},
		Metrics:     metrics,
		Log:         slog.New(slog.NewJSONHandler(&logs, nil)),
		Now:         clk.Now,
	})
	ctx := t.Context()
	ask := func(who chat.Principal, scope Scope, perms ...authorizationv1.ResourceAttributes) (*Identity, error) {
		return a.Allow(ctx, Request{Who: who, Scope: scope, Cluster: "test", What: "test", Permissions: perms})
	}
	refusal := func(t *testing.T, err error) *Refusal {
		t.Helper()
		var ref *Refusal
		if !errors.As(err, &ref) {
			t.Fatalf("err = %v, want a *Refusal", err)
		}
		return ref
	}

	t.Run("the developer may ask about shop", func(t *testing.T) {
		id, err := ask(dev, Reads, InNamespace("get", "", "pods", "shop"))
		if err != nil || id == nil || id.User != "dev@example.com" {
			t.Fatalf("Allow = %v, %v; want allowed as dev@example.com", id, err)
		}
	})
	t.Run("the developer may not ask about payments, and learns only that", func(t *testing.T) {
		_, err := ask(dev, Reads, InNamespace("get", "", "pods", "payments"))
		ref := refusal(t, err)
		want := "Kubernetes RBAC does not allow you to get pods in namespace payments on cluster test (checked as user dev@example.com). Nothing was done."
		if ref.Text != want || ref.Reason != ReasonDenied || ref.Denied.Namespace != "payments" || ref.Denied.Verb != "get" {
			t.Errorf("refusal = %+v\nwant text %q", ref, want)
		}
		if a.Visible(ctx, dev, "test", "payments") || !a.Visible(ctx, dev, "test", "shop") {
			t.Error("Visible: want shop visible and payments not")
		}
	})
	t.Run("the developer's repair is refused, naming the verb", func(t *testing.T) {
		_, err := ask(dev, Changes, calicoWrites...)
		ref := refusal(t, err)
		want := "Kubernetes RBAC does not allow you to update ipamblocks.crd.projectcalico.org (cluster-wide) on cluster test (checked as user dev@example.com). Nothing was done."
		if ref.Text != want {
			t.Errorf("refusal text\n got %q\nwant %q", ref.Text, want)
		}
	})
	t.Run("the SRE group may make every Calico write", func(t *testing.T) {
		id, err := ask(sre, Changes, calicoWrites...)
		if err != nil || id == nil || strings.Join(id.Groups, ",") != "sre" {
			t.Fatalf("Allow = %v, %v; want allowed as groups sre", id, err)
		}
	})
	t.Run("an unmapped person is refused with the reason", func(t *testing.T) {
		_, err := ask(stranger, Reads, InNamespace("get", "", "pods", "shop"))
		if ref := refusal(t, err); ref.Reason != ReasonUnmapped || !strings.Contains(ref.Text, "Slack user U0STRANGER is not in authorization.slack.users") {
			t.Errorf("refusal = %+v", ref)
		}
	})

	t.Run("repeated questions are answered from the cache", func(t *testing.T) {
		before := rv.count()
		for range 50 {
			if _, err := ask(dev, Reads, InNamespace("get", "", "pods", "shop")); err != nil {
				t.Fatal(err)
			}
			if _, err := ask(dev, Reads, InNamespace("get", "", "pods", "payments")); err == nil {
				t.Fatal("payments allowed")
			}
		}
		if n := rv.count() - before; n != 0 {
			t.Errorf("100 repeated questions sent %d SubjectAccessReviews, want 0", n)
		}
		hits := testutil.ToFloat64(metrics.reviews.WithLabelValues("cache", "allowed")) + testutil.ToFloat64(metrics.reviews.WithLabelValues("cache", "denied"))
		misses := testutil.ToFloat64(metrics.reviews.WithLabelValues("api", "allowed")) + testutil.ToFloat64(metrics.reviews.WithLabelValues("api", "denied"))
		t.Logf("decisions: %v from the cache, %v from the API server (%d SubjectAccessReviews sent in all)", hits, misses, rv.count())
		if misses != float64(rv.count()) || hits < 100 {
			t.Errorf("metrics: %v hits, %v misses; want at least 100 hits and misses = %d reviews sent", hits, misses, rv.count())
		}
	})

	t.Run("a RoleBinding removed mid-session takes effect within the TTL", func(t *testing.T) {
		if err := c.Client.RbacV1().RoleBindings("shop").Delete(ctx, "dev-reads-pods", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The API server's RBAC authorizer sees the deletion through its informers: wait
		// until it answers no, uncached.
		waitForRBAC(t, rv, authorizationv1.SubjectAccessReviewSpec{User: "dev@example.com",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Namespace: "shop"}}, false)
		if _, err := ask(dev, Reads, InNamespace("get", "", "pods", "shop")); err != nil {
			t.Errorf("within the TTL the cached decision still allows: %v", err)
		}
		clk.add(DefaultTTL + time.Second)
		_, err := ask(dev, Reads, InNamespace("get", "", "pods", "shop"))
		if ref := refusal(t, err); ref.Denied.Namespace != "shop" {
			t.Errorf("refusal = %+v", ref)
		}
	})

	t.Run("every refusal is an audit record with the denied verb", func(t *testing.T) {
		var found bool
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			if rec["msg"] != "authorization refused" || rec["audit"] != true {
				t.Errorf("log line %s: want an audit record of a refusal", line)
			}
			if rec["verb"] == "update" && rec["resource"] == "ipamblocks" && rec["as"] == "user dev@example.com" && rec["actor"] == "slack:T1/U0DEV" {
				found = true
			}
		}
		if !found {
			t.Errorf("no audit record of the developer's refused update of ipamblocks:\n%s", logs.String())
		}
	})
}
