package triage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSortEventsNewestFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	events := []Event{
		{Reason: "Scheduled", LastSeen: t0},
		{Reason: "FailedScheduling", LastSeen: t0.Add(2 * time.Minute)},
		{Reason: "BackOff", LastSeen: t0.Add(time.Minute)},
		{Reason: "Pulled", LastSeen: t0.Add(time.Minute)},
	}
	SortEvents(events)
	var got []string
	for _, e := range events {
		got = append(got, e.Reason)
	}
	want := []string{"FailedScheduling", "BackOff", "Pulled", "Scheduled"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SortEvents() order mismatch (-want +got):\n%s", diff)
	}
}
