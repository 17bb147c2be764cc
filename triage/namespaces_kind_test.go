package triage

import (
	"strings"
	"testing"
)

// TestNamespaceNamedLikeAKind: "svc/web" in a cluster without namespace svc says the asker
// named a kind whypending does not diagnose, and how to look at it; a namespace that is no
// kind word still gets the closest names.
func TestNamespaceNamedLikeAKind(t *testing.T) {
	f := namespaceNotFoundFinding(&MissingNamespace{Name: "svc", Existing: []string{"shop", "svc-a"}}, "pod web", "web")
	want := `Namespace "svc" does not exist, so there is no pod web in it. svc/web reads as pod web in namespace svc: svc is kubectl's name of the Service kind, which whypending does not diagnose. It explains pods and the workloads that own them (po, deploy, sts, ds, job, cj, rs): ask about the pods or the workload behind Service web.`
	if f.Code != CodeNamespaceNotFound || f.Summary != want {
		t.Errorf("summary\n got %q\nwant %q", f.Summary, want)
	}
	if got := strings.Join(f.Fix, "; "); got != "kubectl get namespaces; kubectl describe service web" {
		t.Errorf("fix = %q", got)
	}
	// "svc/web -n seed-crash-app": the Service is looked for in the namespace -n names.
	f = namespaceNotFoundFinding(&MissingNamespace{Name: "svc", Flag: "seed-crash-app"}, "pod web", "web")
	if got := strings.Join(f.Fix, "; "); got != "kubectl get namespaces; kubectl describe service web -n seed-crash-app" {
		t.Errorf("fix with -n = %q", got)
	}
	f = namespaceNotFoundFinding(&MissingNamespace{Name: "shopp", Existing: []string{"shop", "svc"}}, "pod web", "web")
	if !strings.Contains(f.Summary, "Did you mean namespace shop?") || strings.Contains(f.Summary, "kubectl's name") {
		t.Errorf("a mistyped namespace: %q", f.Summary)
	}
}
