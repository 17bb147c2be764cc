package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// TestTyposAndMissingFiles is issue 22 item 10: a KUBECONFIG that names a missing file says
// so (it said "no kubeconfig found: pass --kubeconfig, set KUBECONFIG…"), and a typo'd ipam
// subcommand gets "Did you mean this?" (only root commands did).
func TestTyposAndMissingFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope", "kubeconfig")
	t.Setenv("KUBECONFIG", missing)
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	code, _, errOut := runCLI(t, "why-pending", "web")
	if want := "KUBECONFIG names " + missing + ", which does not exist"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
	code, _, errOut = runCLI(t, "ipam", "chek")
	if code != 1 || !strings.Contains(errOut, "Did you mean this?\n\tcheck") {
		t.Errorf("ipam chek: exit %d, stderr %q; want a suggestion of check", code, errOut)
	}
}

// TestTypoedNamespace is issue 22 item 10: a namespace that does not exist but is close to
// one that does gets "did you mean" (item 8's answer, from main), in the CLI too.
func TestTypoedNamespace(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", c.KubeconfigPath, "-n", "seed-ipam-leakd", "--all")
	if want := "Did you mean namespace seed-ipam-leaked?"; code != exitPodNotFound || !strings.Contains(out+errOut, want) {
		t.Errorf("exit %d, output %q%q; want %d and %q", code, out, errOut, exitPodNotFound, want)
	}
}
