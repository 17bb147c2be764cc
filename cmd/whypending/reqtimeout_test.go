package main

import (
	"strings"
	"testing"
	"time"
)

// TestRequestTimeoutIsNotDoubled: against a listener that completes the TLS handshake and
// never answers, --request-timeout 3s took 6 s (the /readyz probe that tells a hung etcd
// from a hung API server ran after the request had given up, with its own 3 s). The probe
// now runs inside the request's wait: the command ends after about 3 s.
func TestRequestTimeoutIsNotDoubled(t *testing.T) {
	_, kubeconfig := silentServer(t)
	for _, args := range [][]string{{"ipam", "check"}, {"why-pending", "web"}} {
		start := time.Now()
		code, _, errOut := runCLI(t, append(args, "--request-timeout", "3s", "--kubeconfig", kubeconfig)...)
		took := time.Since(start)
		t.Logf("%v: %s", args, took)
		if code != 1 || !strings.Contains(errOut, "did not answer within 3s") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
		if took < 3*time.Second || took > 4500*time.Millisecond {
			t.Errorf("%v took %s with --request-timeout 3s, want 3s (up to 4.5s under load)", args, took)
		}
	}
}
