package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Follow starts an informer over the Notifications of source, which UpdateCached reads
// instead of the API server. It lists and watches through the store's current connection, so
// a replaced connection is picked up at the informer's next relist. It runs until ctx ends.
func (s *Store) Follow(ctx context.Context, source string) {
	sel := LabelSource + "=" + source
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			res, err := s.res()
			if err != nil {
				return nil, err
			}
			o.LabelSelector = sel
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			res, err := s.res()
			if err != nil {
				return nil, err
			}
			o.LabelSelector = sel
			return res.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	s.mu.Lock()
	s.followed = inf
	s.mu.Unlock()
	go inf.RunWithContext(ctx)
}

// errNoCopy says there is no followed copy to read: no Follow, or its informer has not synced.
var errNoCopy = errors.New("no followed copy")

// copyOf is the followed copy of the entry named name; found is false when the synced copy
// does not hold it, and the error errNoCopy when there is no synced copy.
func (s *Store) copyOf(name string) (e *Entry, found bool, err error) {
	inf := s.syncedCopy()
	if inf == nil {
		return nil, false, errNoCopy
	}
	obj, exists, err := inf.GetStore().GetByKey(s.namespace + "/" + name)
	if err != nil || !exists {
		return nil, false, err
	}
	e, err = fromCopy(obj)
	return e, err == nil, err
}

// syncedCopy is Follow's informer once it has synced, else nil.
func (s *Store) syncedCopy() cache.SharedIndexInformer {
	s.mu.Lock()
	inf := s.followed
	s.mu.Unlock()
	if inf == nil || !inf.HasSynced() {
		return nil
	}
	return inf
}

// fromCopy decodes a followed copy, leaving the informer's object as it is.
func fromCopy(obj any) (*Entry, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("notification cached as %T", obj)
	}
	return fromObject(u.DeepCopy())
}

// UpdateCached is Update for a delivery that is acknowledged on its word: its first attempt
// calls fn on the followed copy of the entry (see Follow), or on a new entry when the copy has
// none, and writes with one request; a copy that was stale (a conflict, or the entry exists
// already) makes the next attempt read the API server, as Update does. A redelivery that
// changes nothing sends no request at all.
//
// That is safe only for an fn that is monotone: when it returns ErrUnchanged for an entry it
// would for every later version of it (the entry already holds what the delivery brings, and
// later writes only add to it). The copy was stored at some point, so a delivery fn finds in
// it was recorded, even if the copy is behind.
func (s *Store) UpdateCached(ctx context.Context, k Key, fn func(e *Entry) error) (*Entry, error) {
	return s.update(ctx, k, fn, true)
}

// ListFollowed is List(ctx, source, false) from the followed copies when Follow's informer has
// synced (no request), else from the API server. The copies may be behind: use it to find
// entries to look at, and decide on a live read (Update) before writing.
func (s *Store) ListFollowed(ctx context.Context, source string) ([]*Entry, error) {
	inf := s.syncedCopy()
	if inf == nil {
		return s.List(ctx, source, false)
	}
	var out []*Entry
	for _, obj := range inf.GetStore().List() {
		e, err := fromCopy(obj)
		if err != nil {
			return nil, err
		}
		if e.Source == source {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}
