package calico

import (
	"os"
	"testing"
)

func TestCheckSeedIPAMLeaked(t *testing.T) {
	_, cl := startCluster(t, "seed-ipam-leaked")
	res, err := cl.Check(t.Context(), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res.WriteText(os.Stdout, Summary)
	if got, want := len(res.LeakedIPs), 181; got != want {
		t.Errorf("leaked = %d, want %d", got, want)
	}
}
