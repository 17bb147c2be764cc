package triage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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
	// A container waiting for its sandbox again after a node reboot, and one whose last attempt
	// never started a process, have no previous log worth a request.
	rebooted := testPod(crashLoop("app", 3, 255, "Unknown", ""), pending("ContainerCreating", ""))
	neverRan := testPod(crashLoop("app", 4, 128, "StartError", `exec: "x": executable file not found in $PATH`))
	for name, p := range map[string]*corev1.Pod{"rebooted": rebooted, "never ran": neverRan} {
		if got := LogCandidates(testSnapshot(p)); len(got) != 0 {
			t.Errorf("LogCandidates(%s) = %v, want none", name, got)
		}
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
