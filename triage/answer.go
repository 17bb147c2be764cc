package triage

import "encoding/json"

// Answer is the answer to one why-pending question (a Target): exactly one of Pod, Workload
// and Namespace is set. Notes say how the question was read when that needs saying: a bare
// name that named a workload, or a TYPE/NAME that could also be read as NAMESPACE/POD.
type Answer struct {
	Pod       *Diagnosis
	Workload  *WorkloadDiagnosis
	Namespace *NamespaceDiagnosis
	// Notes are sentences for the person who asked, e.g. "Read deploy/checkout as Deployment
	// checkout in namespace default; for pod checkout in namespace deploy, ask: -n deploy
	// checkout".
	Notes []string
}

// MarshalJSON writes the answer that is set, so `why-pending -o json` prints a Diagnosis, a
// WorkloadDiagnosis or a NamespaceDiagnosis. Each has findings[0].code as its primary cause
// (a NamespaceDiagnosis has causes instead).
func (a Answer) MarshalJSON() ([]byte, error) {
	switch {
	case a.Pod != nil:
		return json.Marshal(a.Pod)
	case a.Workload != nil:
		return json.Marshal(a.Workload)
	default:
		return json.Marshal(a.Namespace)
	}
}

// Code is the answer's primary code: the pod's or the workload's Findings[0].Code, or for a
// namespace the largest cause's code ("" when nothing is stuck).
func (a Answer) Code() Code {
	switch {
	case a.Pod != nil:
		return a.Pod.Primary().Code
	case a.Workload != nil:
		return a.Workload.Primary().Code
	case a.Namespace != nil && a.Namespace.NotFound:
		return CodeNamespaceNotFound
	case a.Namespace != nil && len(a.Namespace.Causes) > 0:
		return a.Namespace.Causes[0].Code
	}
	return ""
}

// Partial reports whether the API server refused some of the answer's reads (RBAC): it rests
// on what could be read, and says what was refused.
func (a Answer) Partial() bool {
	switch {
	case a.Pod != nil:
		return a.Pod.Partial
	case a.Workload != nil:
		return a.Workload.Partial
	case a.Namespace != nil:
		return a.Namespace.Partial
	}
	return false
}

// NotFound reports whether the pod, workload or namespace asked about does not exist. A
// not-found answer whose lookups the API server refused (its finding Uncertain) is not: the
// object may exist.
func (a Answer) NotFound() bool {
	c := a.Code()
	if a.Pod != nil && a.Pod.Primary().Uncertain || a.Workload != nil && a.Workload.Primary().Uncertain {
		return false
	}
	return c == CodePodNotFound || c == CodeWorkloadNotFound || c == CodeNamespaceNotFound
}
