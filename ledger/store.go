package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
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
	client    *Client
	connect   func() (*Client, error)
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
	// after an outage (serve passes fleet.Cluster.Ledger).
	Connect func() (*Client, error)
}

// New returns a store of Notifications in namespace.
func New(client *Client, namespace string, opts Options) *Store {
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

func (s *Store) res() (*Client, error) {
	if s.client != nil {
		return s.client, nil
	}
	return s.connect()
}

// Get reads the entry named name (ErrNotFound when there is none).
func (s *Store) Get(ctx context.Context, name string) (*Entry, error) {
	res, err := s.res()
	if err != nil {
		return nil, fmt.Errorf("get notification %s in %s: %w", name, s.namespace, err)
	}
	obj, err := res.get(ctx, s.namespace, name)
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
	var out *notification
	if create {
		out, err = res.create(ctx, obj)
	} else {
		out, err = res.update(ctx, obj)
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
		list, err := res.list(ctx, s.namespace, opts)
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
		if opts.Continue = list.Continue; opts.Continue == "" {
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
	err = res.delete(ctx, s.namespace, e.Name(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
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
func toObject(e *Entry, namespace string) (*notification, error) {
	n := &notification{TypeMeta: metav1.TypeMeta{APIVersion: GVR.GroupVersion().String(), Kind: "Notification"}}
	var spec, status json.RawMessage
	if e.stored != nil {
		e.stored.ObjectMeta.DeepCopyInto(&n.ObjectMeta)
		spec, status = e.stored.Spec, e.stored.Status
	}
	n.Name, n.Namespace, n.ResourceVersion = e.Name(), namespace, e.version
	var err error
	if n.Spec, err = mergeInto(spec, "spec", nSpec{Key: e.Key, Cluster: e.Cluster}); err != nil {
		return nil, err
	}
	if n.Status, err = mergeInto(status, "status", nStatus{State: e.State, Summary: e.Summary, Revision: e.Revision, Pending: e.Pending,
		Messages: e.Messages, Claims: e.Claims, Data: e.Data, Created: e.Created, Updated: e.Updated}); err != nil {
		return nil, err
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[LabelSource] = e.Source
	n.Labels[LabelPlatform] = e.Platform
	n.Labels[LabelPending] = fmt.Sprint(e.Pending)
	if e.Cluster != "" && len(validation.IsValidLabelValue(e.Cluster)) == 0 {
		n.Labels[LabelCluster] = e.Cluster
	}
	return n, nil
}

// mergeInto is v's JSON object with the keys of the stored object old that v does not own
// (fields a newer bot wrote) kept, and the ones this bot owns but left empty dropped.
func mergeInto(old json.RawMessage, field string, v any) (json.RawMessage, error) {
	mine, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var kept map[string]json.RawMessage
	if len(old) > 0 {
		if err := json.Unmarshal(old, &kept); err != nil {
			return nil, fmt.Errorf("decode stored %s: %w", field, err)
		}
	}
	for k := range kept {
		if ownedFields[field][k] {
			delete(kept, k)
		}
	}
	if len(kept) == 0 {
		return mine, nil
	}
	var owned map[string]json.RawMessage
	if err := json.Unmarshal(mine, &owned); err != nil {
		return nil, err
	}
	maps.Copy(kept, owned)
	return json.Marshal(kept)
}

// ownedFields are the JSON keys this package writes, per top-level field.
var ownedFields = map[string]map[string]bool{
	"spec": {"source": true, "platform": true, "channel": true, "subject": true, "cluster": true},
	"status": {"state": true, "summary": true, "revision": true, "pending": true, "messages": true,
		"claims": true, "data": true, "createdAt": true, "updatedAt": true},
}

// fromObject decodes a Notification. The entry keeps n (toObject writes onto it), which must
// not change after: an informer's object is shared.
func fromObject(n *notification) (*Entry, error) {
	var spec nSpec
	var status nStatus
	for field, f := range map[string]struct {
		raw  json.RawMessage
		into any
	}{"spec": {n.Spec, &spec}, "status": {n.Status, &status}} {
		if len(f.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(f.raw, f.into); err != nil {
			return nil, fmt.Errorf("notification %s: decode %s: %w", n.Name, field, err)
		}
	}
	return &Entry{
		Key: spec.Key, Cluster: spec.Cluster,
		State: status.State, Summary: status.Summary, Revision: status.Revision, Pending: status.Pending,
		Messages: status.Messages, Claims: status.Claims, Data: status.Data,
		Created: status.Created, Updated: status.Updated,
		name: n.Name, version: n.ResourceVersion, stored: n,
	}, nil
}
