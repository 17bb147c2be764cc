package collect

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// TestAnswerKindNamedNamespaceWithFlag: "svc/web -n shop" gets the answer "svc/web" gets
// while no namespace svc exists (svc/ names the Service kind, which whypending does not
// diagnose), and is refused as naming two namespaces once namespace svc exists.
func TestAnswerKindNamedNamespaceWithFlag(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	ctx := t.Context()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	col := New(c.Client)
	target := func(t *testing.T, flag string) triage.Target {
		t.Helper()
		tg, err := triage.ParseTarget("svc/web", "shop", false)
		if err == nil && flag != "" {
			tg, err = tg.Given(flag)
		}
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	alone, err := Answer(ctx, col, target(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	withFlag, err := Answer(ctx, col, target(t, "shop"))
	if err != nil {
		t.Fatalf("Answer(svc/web -n shop) without namespace svc: %v, want the answer svc/web gets", err)
	}
	if got, want := withFlag.Pod.Primary(), alone.Pod.Primary(); got.Code != triage.CodeNamespaceNotFound || got.Summary != want.Summary {
		t.Errorf("svc/web -n shop = %s %q, want %s %q (what svc/web alone gets)", got.Code, got.Summary, want.Code, want.Summary)
	}
	if got, want := withFlag.Pod.Primary().Fix, "kubectl describe service web -n shop"; !slices.Contains(got, want) {
		t.Errorf("svc/web -n shop fix = %q, want %q (the Service in the namespace -n names)", got, want)
	}

	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "svc"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = Answer(ctx, col, target(t, "shop"))
	var two *triage.TwoNamespacesError
	if !errors.As(err, &two) {
		t.Errorf("Answer(svc/web -n shop) with namespace svc = %v, want *triage.TwoNamespacesError", err)
	}
}
