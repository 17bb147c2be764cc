package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/whypending/whypending/internal/proc"
)

// GVR is the Notification resource (charts/whypending/crds/whypending.io_notifications.yaml).
var GVR = schema.GroupVersionResource{Group: "whypending.io", Version: "v1alpha1", Resource: "notifications"}

// Labels on every Notification, for selectors.
const (
	LabelSource   = "whypending.io/source"
	LabelPlatform = "whypending.io/platform"
	LabelPending  = "whypending.io/pending"
	LabelCluster  = "whypending.io/cluster"
)

var (
	// ErrNotFound is returned (wrapped) for an entry that does not exist.
	ErrNotFound = errors.New("notification not found")
	// ErrUnchanged, returned by an Update function, skips the write.
	ErrUnchanged = errors.New("unchanged")
	// ErrBusy is returned (wrapped) when another live process holds the claim on a post or
	// edit: it is doing it now, so the caller should look again later.
	ErrBusy = errors.New("another process is posting this message")
)

// DefaultClaimTTL is how long a claim keeps others off a post or edit. A post's own timeout is
// half of it, so a claim outlives the attempt that made it.
const DefaultClaimTTL = 2 * time.Minute

// Store reads and writes Notifications in one namespace.
type Store struct {
	client    dynamic.Interface
	connect   func() (dynamic.Interface, error)
	namespace string
	self      proc.Identity
	now       func() time.Time
	claimTTL  time.Duration
	// locks serialise Send and Edit per message within this process, striped by a hash of
	// the entry and message key (see lock).
	locks [64]sync.Mutex

	mu sync.Mutex
	// followed is the informer Follow started (nil: none), read by UpdateCached.
	followed cache.SharedIndexInformer
}

// Options configures New.
type Options struct {
	// Self identifies this process in claims (zero: proc.Self()).
	Self proc.Identity
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// ClaimTTL (0: DefaultClaimTTL).
	ClaimTTL time.Duration
	// Connect, when New is given no client, returns the client of each call: the store
	// cluster's current connection, which may be down (its error is returned) or replaced
	// after an outage (serve passes fleet.Cluster.Dynamic).
	Connect func() (dynamic.Interface, error)
}

// New returns a store of Notifications in namespace.
func New(client dynamic.Interface, namespace string, opts Options) *Store {
	s := &Store{client: client, connect: opts.Connect, namespace: namespace, self: opts.Self, now: opts.Now, claimTTL: opts.ClaimTTL}
	if s.self == (proc.Identity{}) {
		s.self = proc.Self()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.claimTTL <= 0 {
		s.claimTTL = DefaultClaimTTL
	}
	return s
}

// Namespace is the namespace the store writes in.
func (s *Store) Namespace() string { return s.namespace }

func (s *Store) res() (dynamic.ResourceInterface, error) {
	client := s.client
	if client == nil {
		var err error
		if client, err = s.connect(); err != nil {
			return nil, err
		}
	}
	return client.Resource(GVR).Namespace(s.namespace), nil
}

// Get reads the entry named name (ErrNotFound when there is none).
func (s *Store) Get(ctx context.Context, name string) (*Entry, error) {
	res, err := s.res()
	if err != nil {
		return nil, fmt.Errorf("get notification %s in %s: %w", name, s.namespace, err)
	}
	obj, err := res.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get notification %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get notification %s in %s: %w", name, s.namespace, err)
	}
	return fromObject(obj)
}

// maxAttempts bounds the compare-and-set loops: each conflict means another writer made
// progress, so a handful is plenty.
const maxAttempts = 16

// backoff waits a jittered while that grows with attempt after a conflict, so a slow fn (a
// large group's merge) is not starved by a fast writer of the same entry (the thread's
// posting marks).
func backoff(ctx context.Context, attempt int) error {
	t := time.NewTimer(rand.N(time.Duration(attempt+1) * 10 * time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Update creates the entry for k if there is none, or reads it, and then calls fn on it and
// writes the result with a compare-and-set on its resourceVersion. On a conflict (another
// replica wrote in between) it reads again and calls fn again, so fn must be a function of the
// entry it is given. fn may return ErrUnchanged to skip the write; any other error is returned
// as it is. The entry returned is the one stored.
func (s *Store) Update(ctx context.Context, k Key, fn func(e *Entry) error) (*Entry, error) {
	return s.update(ctx, k, fn, readAPI)
}

// How update's first attempt reads the entry; every later attempt reads the API server.
type readFrom int

const (
	readAPI         readFrom = iota // the API server (Update)
	readCopy                        // the followed copy; fn's ErrUnchanged on it is final (UpdateCached)
	readCopyConfirm                 // the followed copy; fn's ErrUnchanged on it is checked on the API server (UpdateFromCopy)
)

func (s *Store) update(ctx context.Context, k Key, fn func(e *Entry) error, from readFrom) (*Entry, error) {
	name := k.Name()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var e *Entry
		found, err := false, errNoCopy
		if from != readAPI && attempt == 0 {
			e, found, err = s.copyOf(name)
		}
		copied := err == nil && attempt == 0 && from != readAPI
		if err != nil { // no copy to read (or an unreadable one): read the API server
			e, err = s.Get(ctx, name)
			found = err == nil
			if errors.Is(err, ErrNotFound) {
				err = nil
			}
		}
		create := err == nil && !found
		switch {
		case create:
			e = &Entry{Key: k, name: name}
		case err != nil:
			return nil, err
		case e.Key != k:
			return nil, fmt.Errorf("notification %s belongs to %s, not %s (hash collision?)", name, e.Key, k)
		}
		if err := fn(e); errors.Is(err, ErrUnchanged) {
			if copied && from == readCopyConfirm {
				continue // the copy may be behind: ask the API server before writing nothing
			}
			if create {
				return nil, fmt.Errorf("get notification %s: %w", name, ErrNotFound)
			}
			return e, nil
		} else if err != nil {
			return nil, err
		}
		out, err := s.write(ctx, e, create)
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			if err := backoff(ctx, attempt); err != nil {
				return nil, err
			}
			continue
		}
		return out, err
	}
	return nil, fmt.Errorf("update notification %s: still conflicting after %d attempts", name, maxAttempts)
}

// UpdateFrom is Update of an entry that exists, whose first attempt calls fn on from (the
// entry as this process last read or wrote it) instead of reading it: with no other writer
// in between that saves a request, and a from that is behind fails the compare-and-set, so
// the next attempt reads. An ErrUnchanged on from is checked on the API server too. A
// deleted entry is ErrNotFound.
func (s *Store) UpdateFrom(ctx context.Context, from *Entry, fn func(e *Entry) error) (*Entry, error) {
	return s.modifyFrom(ctx, from.Name(), from, fn)
}

// modify is Update for an entry that must exist already.
func (s *Store) modify(ctx context.Context, name string, fn func(e *Entry) error) (*Entry, error) {
	return s.modifyFrom(ctx, name, nil, fn)
}

// modifyFrom is modify whose first attempt starts from from, an entry as this process last
// wrote it (the claim a post was made under), instead of reading it again: with no other
// writer in between it saves a request, and with one the compare-and-set fails and the next
// attempt reads. from is changed; nil reads.
func (s *Store) modifyFrom(ctx context.Context, name string, from *Entry, fn func(e *Entry) error) (*Entry, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		e, err := from, error(nil)
		copied := from != nil
		from = nil
		if e == nil {
			e, err = s.Get(ctx, name)
		}
		if err != nil {
			return nil, err
		}
		if err := fn(e); errors.Is(err, ErrUnchanged) {
			if copied {
				continue // from may be behind: ask the API server before writing nothing
			}
			return e, nil
		} else if err != nil {
			return nil, err
		}
		out, err := s.write(ctx, e, false)
		if apierrors.IsConflict(err) {
			if err := backoff(ctx, attempt); err != nil {
				return nil, err
			}
			continue
		}
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("update notification %s: %w", name, ErrNotFound)
		}
		return out, err
	}
	return nil, fmt.Errorf("update notification %s: still conflicting after %d attempts", name, maxAttempts)
}

// write stores e: a create, or an update conditioned on the resourceVersion e was read at.
func (s *Store) write(ctx context.Context, e *Entry, create bool) (*Entry, error) {
	now := s.now().UTC()
	if create {
		e.Created = now
	}
	e.Updated = now
	obj, err := toObject(e, s.namespace)
	if err != nil {
		return nil, err
	}
	res, err := s.res()
	if err != nil {
		return nil, fmt.Errorf("write notification %s in %s: %w", e.Name(), s.namespace, err)
	}
	var out *unstructured.Unstructured
	if create {
		out, err = res.Create(ctx, obj, metav1.CreateOptions{})
	} else {
		out, err = res.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		verb := "update"
		if create {
			verb = "create"
		}
		return nil, fmt.Errorf("%s notification %s in %s: %w", verb, e.Name(), s.namespace, err)
	}
	return fromObject(out)
}

// List reads the entries of source ("" for every source), only those with work outstanding
// when pending is set, oldest first.
func (s *Store) List(ctx context.Context, source string, pending bool) ([]*Entry, error) {
	sel := ""
	if source != "" {
		sel = LabelSource + "=" + source
	}
	if pending {
		if sel != "" {
			sel += ","
		}
		sel += LabelPending + "=true"
	}
	var out []*Entry
	opts := metav1.ListOptions{LabelSelector: sel, Limit: 500}
	for {
		res, err := s.res()
		if err != nil {
			return nil, fmt.Errorf("list notifications in %s: %w", s.namespace, err)
		}
		list, err := res.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list notifications in %s: %w", s.namespace, err)
		}
		for i := range list.Items {
			e, err := fromObject(&list.Items[i])
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Delete removes the entry named name, if it is still at the version e was read at.
func (s *Store) Delete(ctx context.Context, e *Entry) error {
	rv := e.version
	res, err := s.res()
	if err != nil {
		return fmt.Errorf("delete notification %s: %w", e.Name(), err)
	}
	err = res.Delete(ctx, e.Name(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete notification %s: %w", e.Name(), err)
	}
	return nil
}

// nSpec and nStatus are the Notification's spec and status as stored.
type nSpec struct {
	Key
	Cluster string `json:"cluster,omitempty"`
}

type nStatus struct {
	State    string            `json:"state,omitempty"`
	Summary  string            `json:"summary,omitempty"`
	Revision int64             `json:"revision,omitempty"`
	Pending  bool              `json:"pending,omitempty"`
	Messages map[string]Posted `json:"messages,omitempty"`
	Claims   map[string]Claim  `json:"claims,omitempty"`
	Data     json.RawMessage   `json:"data,omitempty"`
	Created  time.Time         `json:"createdAt"`
	Updated  time.Time         `json:"updatedAt"`
}

// toObject renders e as a Notification. It writes onto the object e was read from, so
// labels, annotations and fields the bot does not know survive.
func toObject(e *Entry, namespace string) (*unstructured.Unstructured, error) {
	spec, err := toMap(nSpec{Key: e.Key, Cluster: e.Cluster})
	if err != nil {
		return nil, err
	}
	status, err := toMap(nStatus{State: e.State, Summary: e.Summary, Revision: e.Revision, Pending: e.Pending,
		Messages: e.Messages, Claims: e.Claims, Data: e.Data, Created: e.Created, Updated: e.Updated})
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	if e.raw != nil {
		obj.Object = e.raw
		obj = obj.DeepCopy()
	}
	obj.SetAPIVersion(GVR.GroupVersion().String())
	obj.SetKind("Notification")
	obj.SetName(e.Name())
	obj.SetNamespace(namespace)
	obj.SetResourceVersion(e.version)
	mergeInto(obj.Object, "spec", spec)
	mergeInto(obj.Object, "status", status)
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelSource] = e.Source
	labels[LabelPlatform] = e.Platform
	labels[LabelPending] = fmt.Sprint(e.Pending)
	if e.Cluster != "" && len(validation.IsValidLabelValue(e.Cluster)) == 0 {
		labels[LabelCluster] = e.Cluster
	}
	obj.SetLabels(labels)
	return obj, nil
}

// mergeInto sets obj[field] to m, keeping the keys of the stored map that m does not set
// (fields a newer bot wrote) and dropping the ones this bot owns but left empty.
func mergeInto(obj map[string]any, field string, m map[string]any) {
	old, _ := obj[field].(map[string]any)
	out := map[string]any{}
	for k, v := range old {
		if !ownedFields[field][k] {
			out[k] = v
		}
	}
	for k, v := range m {
		out[k] = v
	}
	obj[field] = out
}

// ownedFields are the JSON keys this package writes, per top-level field.
var ownedFields = map[string]map[string]bool{
	"spec": {"source": true, "platform": true, "channel": true, "subject": true, "cluster": true},
	"status": {"state": true, "summary": true, "revision": true, "pending": true, "messages": true,
		"claims": true, "data": true, "createdAt": true, "updatedAt": true},
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

func fromObject(obj *unstructured.Unstructured) (*Entry, error) {
	var spec nSpec
	var status nStatus
	for field, into := range map[string]any{"spec": &spec, "status": &status} {
		v, ok := obj.Object[field]
		if !ok {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, into); err != nil {
			return nil, fmt.Errorf("notification %s: decode %s: %w", obj.GetName(), field, err)
		}
	}
	return &Entry{
		Key: spec.Key, Cluster: spec.Cluster,
		State: status.State, Summary: status.Summary, Revision: status.Revision, Pending: status.Pending,
		Messages: status.Messages, Claims: status.Claims, Data: status.Data,
		Created: status.Created, Updated: status.Updated,
		name: obj.GetName(), version: obj.GetResourceVersion(), raw: obj.Object,
	}, nil
}
