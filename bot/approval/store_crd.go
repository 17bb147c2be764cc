package approval

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/chat"
)

// RemediationRequestGVR is the RemediationRequest resource (charts/whypending/crds/
// whypending.io_remediationrequests.yaml).
var RemediationRequestGVR = schema.GroupVersionResource{Group: "whypending.io", Version: "v1alpha1", Resource: "remediationrequests"}

// Labels the CRD store sets on every RemediationRequest, for selectors.
const (
	// LabelState is the approval state ("Pending", "Succeeded", …).
	LabelState = "whypending.io/state"
	// LabelKind is the action kind.
	LabelKind = "whypending.io/kind"
	// LabelCluster is the target cluster's configured name.
	LabelCluster = "whypending.io/cluster"
)

// CRDStore keeps approval records as RemediationRequest objects in one namespace, so
// `kubectl get remediationrequests` is the audit trail and every bot replica sees the same
// records. Update is a compare-and-set on metadata.resourceVersion (Record.Version).
type CRDStore struct {
	client    dynamic.Interface
	namespace string
}

var _ Store = (*CRDStore)(nil)

// NewCRDStore returns a store writing RemediationRequests into namespace.
func NewCRDStore(client dynamic.Interface, namespace string) *CRDStore {
	return &CRDStore{client: client, namespace: namespace}
}

func (s *CRDStore) res() dynamic.ResourceInterface {
	return s.client.Resource(RemediationRequestGVR).Namespace(s.namespace)
}

// Ping checks that a record could be written now, for /readyz: it creates a probe
// RemediationRequest with dryRun=All (validated and admitted, never stored), which needs no
// permission beyond the store's own. A missing namespace, a missing CRD or an RBAC refusal is
// an *UnavailableError saying so by name; anything else (the API server unreachable) is
// returned wrapped.
func (s *CRDStore) Ping(ctx context.Context) error {
	probe := &Record{
		Plan: actions.Plan{ID: "whypending-readyz-probe", Kind: actions.KindUnlockDatastore, Cluster: "readyz",
			Fingerprint: "0", CreatedAt: time.Unix(0, 0).UTC(), ExpiresAt: time.Unix(0, 0).UTC()},
		State: StatePending, RequestedBy: chat.Principal{Platform: "readyz", ID: "readyz"},
	}
	obj, err := toObject(probe, s.namespace)
	if err != nil {
		return err
	}
	_, err = s.res().Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return s.errorf("create", "", err)
	}
	return nil
}

// errorf wraps an API error of verb on RemediationRequest id ("" for the collection). The
// three problems a person must fix (the namespace or the CRD is missing, RBAC forbids it)
// become an *UnavailableError whose text says what to do.
func (s *CRDStore) errorf(verb, id string, err error) error {
	what := "remediationrequests"
	if id != "" {
		what = "remediationrequest " + id
	}
	var st apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err) && errors.As(err, &st) && st.Status().Details != nil && st.Status().Details.Kind == "namespaces":
		return &chat.UnavailableError{Err: err, Text: fmt.Sprintf(
			"The approval store is not ready: namespace %q does not exist (create it, or set store.namespace).", s.namespace)}
	case apierrors.IsNotFound(err) && (errors.As(err, &st) && (st.Status().Details == nil || st.Status().Details.Name == "")):
		return &chat.UnavailableError{Err: err, Text: "The approval store is not ready: the RemediationRequest CRD " +
			RemediationRequestGVR.GroupResource().String() + " is not installed (apply charts/whypending/crds)."}
	case apierrors.IsForbidden(err):
		return &chat.UnavailableError{Err: err, Text: fmt.Sprintf(
			"The approval store is not ready: the bot may not %s RemediationRequests in namespace %q (RBAC).", verb, s.namespace)}
	}
	return fmt.Errorf("%s %s in %s: %w", verb, what, s.namespace, err)
}

// Create implements Store.
func (s *CRDStore) Create(ctx context.Context, a *Record) error {
	obj, err := toObject(a, s.namespace)
	if err != nil {
		return err
	}
	out, err := s.res().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return s.errorf("create", a.Plan.ID, err)
	}
	a.Version, a.raw = out.GetResourceVersion(), out
	return nil
}

// Get implements Store.
func (s *CRDStore) Get(ctx context.Context, id string) (*Record, error) {
	obj, err := s.res().Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		err = s.errorf("get", id, err)
		var ue *chat.UnavailableError
		if apierrors.IsNotFound(err) && !errors.As(err, &ue) {
			return nil, fmt.Errorf("get remediationrequest %s: %w", id, ErrNotFound)
		}
		return nil, err
	}
	return fromObject(obj)
}

// Update implements Store. It writes onto the object the record was read from, so labels,
// annotations and fields the bot does not know survive.
func (s *CRDStore) Update(ctx context.Context, a *Record) error {
	obj, err := toObject(a, s.namespace)
	if err != nil {
		return err
	}
	if read, ok := a.raw.(*unstructured.Unstructured); ok {
		merged := read.DeepCopy()
		merged.Object["spec"], merged.Object["status"] = obj.Object["spec"], obj.Object["status"]
		labels := merged.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range obj.GetLabels() {
			labels[k] = v
		}
		merged.SetLabels(labels)
		obj = merged
	}
	obj.SetResourceVersion(a.Version)
	out, err := s.res().Update(ctx, obj, metav1.UpdateOptions{})
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("update remediationrequest %s: %w", a.Plan.ID, ErrConflict)
	case err != nil:
		err = s.errorf("update", a.Plan.ID, err)
		var ue *chat.UnavailableError
		if apierrors.IsNotFound(err) && !errors.As(err, &ue) {
			return fmt.Errorf("update remediationrequest %s: %w", a.Plan.ID, ErrNotFound)
		}
		return err
	}
	a.Version, a.raw = out.GetResourceVersion(), out
	return nil
}

// List implements Store (label selector whypending.io/state=<state>).
func (s *CRDStore) List(ctx context.Context, state State) ([]*Record, error) {
	var out []*Record
	opts := metav1.ListOptions{LabelSelector: LabelState + "=" + string(state), Limit: 500}
	for {
		list, err := s.res().List(ctx, opts)
		if err != nil {
			return nil, s.errorf("list", "", err)
		}
		for i := range list.Items {
			a, err := fromObject(&list.Items[i])
			if err != nil {
				return nil, err
			}
			if a.State == state {
				out = append(out, a)
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Plan.CreatedAt.Before(out[j].Plan.CreatedAt) })
	return out, nil
}

// rrSpec is RemediationRequest.spec: the plan as shown for approval.
type rrSpec struct {
	Kind        actions.Kind    `json:"kind"`
	Cluster     string          `json:"cluster"`
	Node        string          `json:"node,omitempty"`
	Blocks      []string        `json:"blocks,omitempty"`
	AllowLast   bool            `json:"allowLastBlock,omitempty"`
	Fingerprint string          `json:"fingerprint"`
	Basis       string          `json:"basis,omitempty"`
	Warning     string          `json:"warning,omitempty"`
	Second      bool            `json:"secondApprover,omitempty"`
	Total       int             `json:"total"`
	CreatedAt   time.Time       `json:"createdAt"`
	ExpiresAt   time.Time       `json:"expiresAt"`
	RequestedBy chat.Principal  `json:"requestedBy"`
	RequestedAs *authz.Identity `json:"requestedAs,omitempty"`
	// Requester is RequestedBy's display name or ID, for kubectl's column: never blank.
	Requester string         `json:"requester"`
	Channel   string         `json:"channel,omitempty"`
	Items     []actions.Item `json:"items,omitempty"`
}

// rrStatus is RemediationRequest.status: decisions, result and history.
type rrStatus struct {
	State      State           `json:"state"`
	ApprovedBy *chat.Principal `json:"approvedBy,omitempty"`
	DeniedBy   *chat.Principal `json:"deniedBy,omitempty"`
	DecidedAs  *authz.Identity `json:"decidedAs,omitempty"`
	DecidedAt  *time.Time      `json:"decidedAt,omitempty"`
	// Decider is the approver's or denier's display name or ID, "-" while nobody decided:
	// kubectl's Decided By column is never blank.
	Decider string `json:"decidedBy"`
	// Done is Result.Done, 0 before the plan ran: kubectl's Done column is never blank.
	Done        int               `json:"done"`
	MessageRef  string            `json:"messageRef,omitempty"`
	Error       string            `json:"error,omitempty"`
	FailureCode string            `json:"failureCode,omitempty"`
	Result      *actions.Result   `json:"result,omitempty"`
	Heartbeat   *Heartbeat        `json:"heartbeat,omitempty"`
	Recovery    *actions.Recovery `json:"recovery,omitempty"`
	History     []AuditRecord     `json:"history,omitempty"`
}

// toObject maps an approval record onto a RemediationRequest.
func toObject(a *Record, namespace string) (*unstructured.Unstructured, error) {
	spec := rrSpec{
		Kind: a.Plan.Kind, Cluster: a.Plan.Cluster, Node: a.Plan.Node, Blocks: a.Plan.Blocks, AllowLast: a.Plan.AllowLastBlock,
		Fingerprint: a.Plan.Fingerprint, Basis: a.Plan.Basis, Warning: a.Plan.Warning, Second: a.Plan.SecondApprover,
		Total: a.Plan.Total, CreatedAt: a.Plan.CreatedAt, ExpiresAt: a.Plan.ExpiresAt,
		RequestedBy: a.RequestedBy, RequestedAs: a.RequestedAs, Requester: a.RequestedBy.Display(), Channel: a.Channel, Items: a.Plan.Items,
	}
	status := rrStatus{State: a.State, MessageRef: a.MessageRef, Error: a.Error, FailureCode: a.FailureCode,
		Result: a.Result, Heartbeat: a.Heartbeat, Recovery: a.Recovery, History: a.History, DecidedAs: a.DecidedAs, Decider: "-"}
	if a.Result != nil {
		status.Done = a.Result.Done
	}
	if a.DecidedBy != nil {
		if a.State == StateDenied {
			status.DeniedBy = a.DecidedBy
		} else {
			status.ApprovedBy = a.DecidedBy
		}
		t := a.DecidedAt
		status.DecidedAt = &t
		status.Decider = a.DecidedBy.Display()
	}
	specMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		return nil, fmt.Errorf("encode remediationrequest %s spec: %w", a.Plan.ID, err)
	}
	statusMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return nil, fmt.Errorf("encode remediationrequest %s status: %w", a.Plan.ID, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": RemediationRequestGVR.GroupVersion().String(),
		"kind":       "RemediationRequest",
		"spec":       specMap,
		"status":     statusMap,
	}}
	obj.SetName(a.Plan.ID)
	obj.SetNamespace(namespace)
	obj.SetLabels(map[string]string{
		LabelState: string(a.State), LabelKind: string(a.Plan.Kind), LabelCluster: a.Plan.Cluster,
	})
	return obj, nil
}

// fromObject maps a RemediationRequest back onto an approval record.
func fromObject(obj *unstructured.Unstructured) (*Record, error) {
	var spec rrSpec
	var status rrStatus
	// The default converter keeps 64-bit integers exact (sequence numbers exceed 2^53).
	if m, ok := obj.Object["spec"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec); err != nil {
			return nil, fmt.Errorf("decode remediationrequest %s spec: %w", obj.GetName(), err)
		}
	}
	if m, ok := obj.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &status); err != nil {
			return nil, fmt.Errorf("decode remediationrequest %s status: %w", obj.GetName(), err)
		}
	}
	a := &Record{
		Plan: actions.Plan{
			ID: obj.GetName(), Kind: spec.Kind, Cluster: spec.Cluster, Node: spec.Node, Blocks: spec.Blocks, AllowLastBlock: spec.AllowLast,
			Items: spec.Items, Total: spec.Total,
			Fingerprint: spec.Fingerprint, Basis: spec.Basis, Warning: spec.Warning, SecondApprover: spec.Second,
			RequestedBy: spec.RequestedBy.String(),
			CreatedAt:   spec.CreatedAt, ExpiresAt: spec.ExpiresAt,
		},
		State: status.State, RequestedBy: spec.RequestedBy, RequestedAs: spec.RequestedAs, DecidedAs: status.DecidedAs,
		Channel: spec.Channel, MessageRef: status.MessageRef,
		Result: status.Result, Error: status.Error, FailureCode: status.FailureCode, Heartbeat: status.Heartbeat, Recovery: status.Recovery, History: status.History,
		Version: obj.GetResourceVersion(),
		raw:     obj,
	}
	if status.ApprovedBy != nil {
		a.DecidedBy = status.ApprovedBy
	}
	if status.DeniedBy != nil {
		a.DecidedBy = status.DeniedBy
	}
	if status.DecidedAt != nil {
		a.DecidedAt = *status.DecidedAt
	}
	return a, nil
}
