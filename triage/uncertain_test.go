package triage

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

// TestUnsureMeansUnsure is issue 12's kind 10: when the evidence conflicts or the blocking
// reason is not modelled, the diagnosis says it is uncertain, in its words and in its JSON, and
// shows what the cluster says instead of a confident generic cause.
func TestUnsureMeansUnsure(t *testing.T) {
	tests := []struct {
		name string
		snap *Snapshot
		want Code
	}{
		{
			name: "a scheduler reason the rules do not model",
			snap: snap(podRequesting("train"), []*corev1.Node{node("g1"), node("g2")}, nil,
				failedScheduling("0/2 nodes are available: 2 cannot allocate all claims.", 3)),
			want: CodeUnknown,
		},
		{
			name: "a waiting reason no rule knows",
			snap: testSnapshot(testPod(pending("SomeNewRuntimeReason", "the runtime says something new"))),
			want: CodeUnknown,
		},
		{
			name: "a claim whose class could not be read",
			snap: func() *Snapshot {
				s := claimSnapshot(pendingClaim(ptr.To("fast"), nil), nil,
					warning("FailedMount", "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: timed out waiting for the condition", 3, time.Minute))
				s.StorageClassesErr = errors.New("storageclasses.storage.k8s.io is forbidden")
				return s
			}(),
			want: CodePVCUnbound,
		},
		{
			name: "a claim waiting on a provisioner that says nothing",
			snap: claimSnapshot(pendingClaim(ptr.To("fast"), nil),
				[]*storagev1.StorageClass{storageClass("fast", "example.com/csi", storagev1.VolumeBindingImmediate, false)},
				warning("FailedMount", "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: timed out waiting for the condition", 3, time.Minute)),
			want: CodePVCUnbound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Evaluate(tt.snap)
			if got := d.Primary().Code; got != tt.want {
				t.Fatalf("primary = %s, want %s: %s", got, tt.want, d.Summary)
			}
			if !d.Uncertain || !d.Primary().Uncertain {
				t.Errorf("uncertain = %t (primary %t), want both true: %s", d.Uncertain, d.Primary().Uncertain, d.Summary)
			}
			raw, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), `"uncertain":true`) {
				t.Errorf("-o json lacks \"uncertain\":true: %s", raw)
			}
			if len(d.Primary().Evidence) == 0 {
				t.Errorf("an uncertain answer shows no evidence of what the cluster says")
			}
		})
	}
}
