package collect

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/whypending/whypending/triage"
)

// Events reach the rules as triage.Event, whichever API and backend they were read from:
// core/v1 and events.k8s.io/v1 objects are normalised here.

// eventFromCore normalises a core/v1 triage.Event.
func eventFromCore(e *corev1.Event) triage.Event {
	out := triage.Event{
		Type:      e.Type,
		Reason:    e.Reason,
		Message:   e.Message,
		FieldPath: e.InvolvedObject.FieldPath,
		Source:    e.Source.Component,
	}
	if out.Source == "" {
		out.Source = e.ReportingController
	}
	var seriesLast time.Time
	var seriesCount int32
	if e.Series != nil {
		seriesLast, seriesCount = e.Series.LastObservedTime.Time, e.Series.Count
	}
	setSeen(&out, e.Count, e.FirstTimestamp.Time, e.LastTimestamp.Time, e.EventTime.Time, seriesLast, seriesCount)
	return out
}

// eventFromEventsV1 normalises an events.k8s.io/v1 triage.Event (note is the message; the deprecated*
// fields hold what a core/v1 writer set).
func eventFromEventsV1(e *eventsv1.Event) triage.Event {
	out := triage.Event{
		Type:      e.Type,
		Reason:    e.Reason,
		Message:   e.Note,
		FieldPath: e.Regarding.FieldPath,
		Source:    e.ReportingController,
	}
	if e.DeprecatedSource.Component != "" {
		out.Source = e.DeprecatedSource.Component
	}
	var seriesLast time.Time
	var seriesCount int32
	if e.Series != nil {
		seriesLast, seriesCount = e.Series.LastObservedTime.Time, e.Series.Count
	}
	setSeen(&out, e.DeprecatedCount, e.DeprecatedFirstTimestamp.Time, e.DeprecatedLastTimestamp.Time, e.EventTime.Time, seriesLast, seriesCount)
	return out
}

// setSeen fills out's Count, FirstSeen and LastSeen from the time fields both event APIs share:
// LastSeen is the series' last observation, else lastTimestamp, else eventTime, else
// firstTimestamp; Count is the larger of count and series.count, at least 1.
func setSeen(out *triage.Event, count int32, first, last, eventTime, seriesLast time.Time, seriesCount int32) {
	out.FirstSeen = first
	if out.FirstSeen.IsZero() {
		out.FirstSeen = eventTime
	}
	switch {
	case !seriesLast.IsZero():
		out.LastSeen = seriesLast
	case !last.IsZero():
		out.LastSeen = last
	case !eventTime.IsZero():
		out.LastSeen = eventTime
	default:
		out.LastSeen = first
	}
	out.Count = max(count, seriesCount, 1)
}
