package triage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLogCandidates(t *testing.T) {
	s := testSnapshot(testPod(crashLoop("app", 3, 0, "Completed", ""), crashLoop("sidecar", 2, 1, "Error", "")))
	got := LogCandidates(s)
	if want := []string{"app", "sidecar"}; !cmp.Equal(got, want) {
		t.Errorf("LogCandidates() = %v, want %v", got, want)
	}
	if got := LogCandidates(testSnapshot(testPod())); len(got) != 0 {
		t.Errorf("LogCandidates(healthy pod) = %v, want none", got)
	}
}

func TestNeedsIPAM(t *testing.T) {
	creating := testPod(pending("ContainerCreating", ""))
	tests := []struct {
		name string
		snap *Snapshot
		want bool
	}{
		{"calico IPAM failure", testSnapshot(creating, warning("FailedCreatePodSandBox", msgIPAMExhausted, 3, time.Minute)), true},
		{"AWS CNI failure", testSnapshot(creating, warning("FailedCreatePodSandBox", msgAWS, 3, time.Minute)), false},
		{"image pull failure", testSnapshot(testPod(pending("ErrImagePull", "quota exceeded"))), false},
		{"healthy pod", testSnapshot(testPod()), false},
	}
	for _, tt := range tests {
		if got := NeedsIPAM(tt.snap); got != tt.want {
			t.Errorf("%s: NeedsIPAM() = %t, want %t", tt.name, got, tt.want)
		}
	}
}
