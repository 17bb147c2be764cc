package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Follow starts an informer over the Notifications of sources, which UpdateCached,
// UpdateFromCopy, GetCached and Copy read instead of the API server. It lists and watches
// through the store's current connection, so a replaced connection is picked up at the
// informer's next relist. It runs until ctx ends; then the store reads the API server again.
func (s *Store) Follow(ctx context.Context, sources ...string) {
	sel := LabelSource + " in (" + strings.Join(sources, ",") + ")"
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			res, err := s.res()
			if err != nil {
				return nil, err
			}
			o.LabelSelector = sel
			return res.list(ctx, s.namespace, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			res, err := s.res()
			if err != nil {
				return nil, err
			}
			o.LabelSelector = sel
			return res.watch(ctx, s.namespace, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &notification{}, 0, cache.Indexers{})
	s.mu.Lock()
	s.followed = inf
	s.mu.Unlock()
	go func() {
		inf.RunWithContext(ctx)
		// A stopped informer's copy would only grow older.
		s.mu.Lock()
		if s.followed == inf {
			s.followed = nil
		}
		s.mu.Unlock()
	}()
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

// fromCopy decodes a followed copy, leaving the informer's object as it is (fromObject
// only reads it).
func fromCopy(obj any) (*Entry, error) {
	n, ok := obj.(*notification)
	if !ok {
		return nil, fmt.Errorf("notification cached as %T", obj)
	}
	return fromObject(n)
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
	return s.update(ctx, k, fn, readCopy)
}

// UpdateFromCopy is Update whose first attempt calls fn on the followed copy of the entry (or
// on a new entry when the copy has none), for any fn: a write from a copy that was behind
// fails its compare-and-set (a conflict, or the entry exists already) and the next attempt
// reads the API server, and an ErrUnchanged on the copy is checked there too. With a current
// copy a change costs one request instead of two.
func (s *Store) UpdateFromCopy(ctx context.Context, k Key, fn func(e *Entry) error) (*Entry, error) {
	return s.update(ctx, k, fn, readCopyConfirm)
}

// GetCached is Get from the followed copy when the copy holds the entry, else from the API
// server, so an ErrNotFound is always the API server's word. The copy may be behind: decide
// on it only what a compare-and-set write checks again, or what may wait a resync.
func (s *Store) GetCached(ctx context.Context, name string) (*Entry, error) {
	if e, found, err := s.copyOf(name); err == nil && found {
		return e, nil
	}
	return s.Get(ctx, name)
}

// Exists reports whether the entry named name exists: from the followed copy when it has
// synced (no request), else from the API server. The copy may be behind by moments, so a
// "no" may be wrong for an entry just written: use it only where a wrong "no" is caught by
// the compare-and-set that follows (UpdateFromCopy finds the entry when it creates it).
func (s *Store) Exists(ctx context.Context, name string) (bool, error) {
	if inf := s.syncedCopy(); inf != nil {
		// Presence only: nothing is decoded.
		if _, found, err := inf.GetStore().GetByKey(s.namespace + "/" + name); err == nil {
			return found, nil
		}
	}
	_, err := s.Get(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Copy is the followed copy of the entry named name, with no request: found is false when
// there is no synced copy or it does not hold the entry. For what may be stale (when to look
// again), never for a decision to write.
func (s *Store) Copy(name string) (e *Entry, found bool) {
	e, found, err := s.copyOf(name)
	return e, err == nil && found
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
