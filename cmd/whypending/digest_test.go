package main

import (
	"strings"
	"testing"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

func TestDigestCommand(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")

	code, out, errOut := runCLI(t, "digest", "--kubeconfig", c.KubeconfigPath, "--name", "prod-eu")
	if code != 0 {
		t.Fatalf("digest exit code = %d, want 0; stderr: %s", code, errOut)
	}
	t.Logf("digest output:\n%s", out)
	title, _, _ := strings.Cut(out, "\n")
	if want := "! IPAM digest for prod-eu: 181 leaked IPs, 0 empty blocks, pool default-ipv4-ippool 100% allocated"; title != want {
		t.Errorf("first line = %q, want %q", title, want)
	}
	for _, want := range []string{"  - worker-2: 128\n", "  - worker-1: 53\n", "  [1] Release 181 leaked IPs\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}

	code, _, errOut = runCLI(t, "digest", "--kubeconfig", c.KubeconfigPath+".missing")
	if code != 1 || errOut == "" {
		t.Errorf("digest with a missing kubeconfig = exit %d, stderr %q; want exit 1 and one error line", code, errOut)
	}
}
