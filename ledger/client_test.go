package ledger

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestToObjectKeepsWhatItDoesNotOwn: keys of spec and status that a newer bot wrote (the
// chart's CRD prunes them today, so this is not reachable through the API server test),
// labels and annotations survive a write; owned keys left empty are dropped, and the
// informer's object the entry was read from is not changed.
func TestToObjectKeepsWhatItDoesNotOwn(t *testing.T) {
	stored := &notification{
		ObjectMeta: metav1.ObjectMeta{Name: testKey.Name(), ResourceVersion: "7", Labels: map[string]string{"owner": "sre"}, Annotations: map[string]string{"team": "shop"}},
		Spec:       json.RawMessage(`{"source":"alert","platform":"slack","channel":"C1","subject":"s","tier":"gold"}`),
		Status:     json.RawMessage(`{"state":"firing","summary":"old","revision":3,"data":{"a":1},"newer":{"b":[1,2]},"createdAt":"2026-12-01T00:00:00Z","updatedAt":"2026-12-01T00:00:00Z"}`),
	}
	before := string(stored.Status)
	e, err := fromObject(stored)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != "firing" || e.Revision != 3 || string(e.Data) != `{"a":1}` || e.Channel != "C1" {
		t.Fatalf("decoded %+v", e)
	}
	e.State, e.Summary = "resolved", ""
	n, err := toObject(e, "wp")
	if err != nil {
		t.Fatal(err)
	}
	var spec, status map[string]any
	if err := json.Unmarshal(n.Spec, &spec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(n.Status, &status); err != nil {
		t.Fatal(err)
	}
	if spec["tier"] != "gold" || spec["channel"] != "C1" {
		t.Errorf("spec = %v, want tier kept", spec)
	}
	if _, ok := status["newer"]; !ok || status["state"] != "resolved" || status["revision"] != float64(3) {
		t.Errorf("status = %v, want newer kept, state resolved", status)
	}
	if _, ok := status["summary"]; ok {
		t.Errorf("status = %v: the emptied summary is still there", status)
	}
	if n.Labels["owner"] != "sre" || n.Annotations["team"] != "shop" || n.Labels[LabelSource] != "alert" || n.ResourceVersion != "7" || n.Namespace != "wp" {
		t.Errorf("metadata = %+v", n.ObjectMeta)
	}
	if string(stored.Status) != before || len(stored.Labels) != 1 {
		t.Errorf("the stored object changed: %s %v", stored.Status, stored.Labels)
	}
}
