package calico

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/whypending/whypending/internal/proc"
)

// LockAnnotation is the ClusterInformation "default" annotation that marks a datastore lock
// taken by whypending; its value is a JSON LockMarker.
const LockAnnotation = "whypending.io/datastore-lock"

// DefaultLockTTL is the lock lifetime when LockOptions.TTL is zero.
const DefaultLockTTL = 10 * time.Minute

// unlockTimeout bounds Unlock, which ignores its context's cancellation.
const unlockTimeout = 30 * time.Second

// LockMarker says who locked the datastore, for what, and until when. It is stored in
// LockAnnotation so that the owner can always find and undo its own lock.
type LockMarker struct {
	// Owner identifies the locking party across restarts, e.g. "whypending-cli:alice@host"
	// or "whypending-bot:whypending/whypending". RecoverLocks undoes only its owner's locks.
	Owner string `json:"owner"`
	// Operation is what the lock is for, e.g. "release-ips".
	Operation string `json:"operation"`
	// Acquired is when the lock was taken; Deadline when it expires (after which the owner's
	// next start unlocks it).
	Acquired time.Time `json:"acquired"`
	Deadline time.Time `json:"deadline"`
	// Identity is the locking process, under the JSON keys host, pid and pidStart that
	// markers have always had (pidStart is the process start time, to detect PID reuse); a
	// Detached lock names its host only. A marker whose process is gone from this host is
	// stale before its deadline.
	proc.Identity
}

// LockOptions configure Lock.
type LockOptions struct {
	// Owner is required: see LockMarker.Owner.
	Owner string
	// Operation is recorded in the marker.
	Operation string
	// TTL is how long the lock may be held; zero means DefaultLockTTL.
	TTL time.Duration
	// Detached records no process in the marker, so the lock outlives this process and only
	// its deadline (or an unlock) ends it: `whypending ipam lock` takes such a lock for an
	// operator's manual procedure. Without it, RecoverLocks undoes the lock as soon as the
	// locking process is gone.
	Detached bool
}

// Lock is a datastore lock held by this process. Always Unlock it (defer).
type Lock struct {
	c      *Client
	marker LockMarker
	// Revision is ClusterInformation default's resourceVersion right after locking.
	Revision string
}

// Marker returns the lock's marker.
func (l *Lock) Marker() LockMarker { return l.marker }

// LockStatus is the datastore lock state.
type LockStatus struct {
	// Ready is ClusterInformation default spec.datastoreReady (true when unset, as Calico
	// treats it). False means locked: CNI ADD/DEL fail and no pod can start.
	Ready bool
	// Marker is the whypending marker, if any.
	Marker *LockMarker
	// Revision is ClusterInformation default's resourceVersion.
	Revision string
	// SetBy and SetAt are, from ClusterInformation default's managedFields, the field
	// manager that last wrote spec.datastoreReady (the writing client's name, e.g.
	// "calicoctl") and when: who holds a lock that carries no marker, and since when. Empty
	// when the managedFields do not say.
	SetBy string
	SetAt time.Time
}

// Notice is one sentence saying that the datastore is locked, by whom, and what that means,
// or "" when it is not locked: `ipam check`, `ipam show` and `why-pending` print it.
func (s *LockStatus) Notice() string {
	if s.Ready {
		return ""
	}
	return "The Calico datastore is locked (ClusterInformation default datastoreReady=false; " + s.Holder() +
		"): no pod can get or release an IP address until it is unlocked (whypending ipam unlock)."
}

// Holder describes who holds a lock (Ready false): the marker's owner, operation and
// acquisition time, or that it carries no whypending marker, with the field manager that set
// datastoreReady and when, where the managedFields say.
func (s *LockStatus) Holder() string {
	if s.Marker != nil {
		return fmt.Sprintf("%s (%s, since %s, until %s)", s.Marker.Owner, s.Marker.Operation,
			s.Marker.Acquired.UTC().Format(time.DateTime+"Z"), s.Marker.Deadline.UTC().Format(time.DateTime+"Z"))
	}
	h := "no whypending marker"
	if s.SetBy != "" {
		h += fmt.Sprintf("; datastoreReady set to false by %q", s.SetBy)
		if !s.SetAt.IsZero() {
			h += " at " + s.SetAt.UTC().Format(time.DateTime+"Z")
		}
	}
	return h
}

// DatastoreReady reports ClusterInformation default spec.datastoreReady (true when unset).
func (c *Client) DatastoreReady(ctx context.Context) (bool, error) {
	s, err := c.LockStatus(ctx)
	if err != nil {
		return false, err
	}
	return s.Ready, nil
}

// LockStatus reads ClusterInformation default.
func (c *Client) LockStatus(ctx context.Context) (*LockStatus, error) {
	obj, err := c.getClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	ready, _ := readyOf(obj)
	s := &LockStatus{Ready: ready, Marker: markerOf(obj), Revision: obj.GetResourceVersion()}
	s.SetBy, s.SetAt = readyWriter(obj)
	return s, nil
}

// readyWriter returns the field manager of obj's managedFields that owns spec.datastoreReady
// (the last to write it) and the time of its entry.
func readyWriter(obj *unstructured.Unstructured) (manager string, at time.Time) {
	for _, mf := range obj.GetManagedFields() {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(mf.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, ok := fields.Spec["f:datastoreReady"]; !ok {
			continue
		}
		if mf.Time != nil && mf.Time.After(at) || manager == "" {
			manager = mf.Manager
			if mf.Time != nil {
				at = mf.Time.Time
			}
		}
	}
	return manager, at
}

// Lock locks the Calico datastore like `calicoctl datastore migrate lock`: ClusterInformation
// default spec.datastoreReady=false, written with compare-and-set together with a LockMarker
// annotation. While locked, Calico CNI refuses ADD and DEL (no pod starts or stops networking),
// Felix pauses and kube-controllers skips IPAM GC.
//
// It returns ErrDatastoreLocked when the datastore is already locked by someone else, or by a
// live process of the same owner. A lock of the same owner whose deadline passed or whose
// process is gone is taken over.
func (c *Client) Lock(ctx context.Context, opts LockOptions) (*Lock, error) {
	if opts.Owner == "" {
		return nil, fmt.Errorf("lock datastore: empty owner")
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = DefaultLockTTL
	}
	for attempt := 1; ; attempt++ {
		obj, err := c.getClusterInfo(ctx)
		if err != nil {
			return nil, fmt.Errorf("lock datastore: %w", err)
		}
		ready, set := readyOf(obj)
		if set && !ready {
			m := markerOf(obj)
			if m == nil {
				return nil, fmt.Errorf("lock datastore: datastoreReady is false with no whypending marker (calicoctl or a migration?): %w", ErrDatastoreLocked)
			}
			if m.Owner == opts.Owner && m.live(time.Now()) {
				return nil, &heldError{fmt.Sprintf("lock datastore: already locked by this owner, %s (%s, since %s, until %s%s); unlock it first (whypending ipam unlock --owner %s)",
					m.Owner, m.Operation, m.Acquired.UTC().Format(time.RFC3339), m.Deadline.UTC().Format(time.RFC3339), m.where(), m.Owner)}
			}
			if m.Owner != opts.Owner {
				return nil, fmt.Errorf("lock datastore: held by %s for %s since %s, until %s%s: %w",
					m.Owner, m.Operation, m.Acquired.UTC().Format(time.RFC3339), m.Deadline.UTC().Format(time.RFC3339), m.where(), ErrDatastoreLocked)
			}
			// Our own stale lock: take it over.
		}
		now := time.Now().UTC().Truncate(time.Second)
		m := selfMarker(opts.Owner, opts.Operation, now, now.Add(ttl))
		if opts.Detached {
			m.PID, m.Start = 0, 0
		}
		if err := setLockState(obj, false, &m); err != nil {
			return nil, fmt.Errorf("lock datastore: %w", err)
		}
		out, err := c.res(resClusterInfo).Update(ctx, obj, metav1.UpdateOptions{})
		if isConflict(err) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lock datastore: update clusterinformation: %w", err)
		}
		return &Lock{c: c, marker: m, Revision: out.GetResourceVersion()}, nil
	}
}

// Unlock sets datastoreReady=true and removes the marker, with compare-and-set. It ignores the
// cancellation of ctx (a deferred Unlock must run after Ctrl-C) and gives itself 30 s.
// It returns ErrLockLost, leaving the datastore alone, when another owner's marker replaced
// this lock. If the marker is gone but the datastore is still locked (a non-whypending writer
// rewrote the object), it unlocks: this process took the lock and must not leave it.
func (l *Lock) Unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		obj, err := l.c.getClusterInfo(ctx)
		if err != nil {
			return fmt.Errorf("unlock datastore: %w", err)
		}
		ready, _ := readyOf(obj)
		m := markerOf(obj)
		if m != nil && !m.same(&l.marker) {
			return fmt.Errorf("unlock datastore: marker of %s (%s): %w", m.Owner, m.Operation, ErrLockLost)
		}
		if ready && m == nil {
			return nil
		}
		if err := setLockState(obj, true, nil); err != nil {
			return fmt.Errorf("unlock datastore: %w", err)
		}
		_, err = l.c.res(resClusterInfo).Update(ctx, obj, metav1.UpdateOptions{})
		if isConflict(err) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("unlock datastore: update clusterinformation: %w", err)
		}
		return nil
	}
}

// RecoverLocks undoes a lock that owner took and could not release: its marker names owner
// and its deadline has passed or its process is gone from this host. Call it when a whypending
// process starts. recovered is true when it set datastoreReady back to true. A marker left on
// an unlocked datastore is just removed. Locks of other owners are never touched.
func (c *Client) RecoverLocks(ctx context.Context, owner string) (recovered bool, err error) {
	recovered, err = c.unlockIf(ctx, "recover datastore lock", func(_ bool, m *LockMarker) (bool, error) {
		return m != nil && m.Owner == owner && !m.live(time.Now()), nil
	})
	if isNotFoundErr(err) {
		return false, nil
	}
	return recovered, err
}

// UnlockOwner unlocks a lock whose marker names owner, whatever its deadline or process (the
// operator's "unlock my lock"), with compare-and-set. It returns false, and changes nothing,
// when the datastore is not locked by owner; a lock without a marker or with another owner's
// gives ErrDatastoreLocked.
func (c *Client) UnlockOwner(ctx context.Context, owner string) (unlocked bool, err error) {
	return c.unlockIf(ctx, "unlock datastore", func(ready bool, m *LockMarker) (bool, error) {
		switch {
		case ready && m == nil:
			return false, nil
		case m == nil:
			return false, fmt.Errorf("unlock datastore: locked without a whypending marker: %w", ErrDatastoreLocked)
		case m.Owner != owner:
			return false, fmt.Errorf("unlock datastore: locked by %s (%s): %w", m.Owner, m.Operation, ErrDatastoreLocked)
		}
		return true, nil
	})
}

// UnlockMarker unlocks the datastore if the lock is still the one m describes (same owner,
// acquisition time, host and process), with compare-and-set. It is how a bot replica undoes
// the lock of a plan whose executor died, whatever its deadline or host. unlocked is false,
// and nothing changes, when the datastore is not locked under m (unlocked already, or locked
// by someone else since).
func (c *Client) UnlockMarker(ctx context.Context, m LockMarker) (unlocked bool, err error) {
	return c.unlockIf(ctx, "unlock datastore", func(_ bool, cur *LockMarker) (bool, error) {
		return cur != nil && cur.same(&m), nil
	})
}

// ForceUnlock sets datastoreReady=true whoever locked it (calicoctl, another whypending) and
// removes any marker. It is the operator's `unlock --force`.
func (c *Client) ForceUnlock(ctx context.Context) error {
	_, err := c.unlockIf(ctx, "force unlock datastore", func(bool, *LockMarker) (bool, error) { return true, nil })
	return err
}

// unlockIf sets datastoreReady=true and removes the marker of ClusterInformation default,
// with compare-and-set (re-reading on conflict), when may approves what it reads: may gets
// spec.datastoreReady and the marker (nil if none) and returns false to change nothing, or an
// error to stop with it. unlocked reports whether datastoreReady went from false to true.
// what starts the errors unlockIf makes.
func (c *Client) unlockIf(ctx context.Context, what string, may func(ready bool, m *LockMarker) (bool, error)) (unlocked bool, err error) {
	for attempt := 1; ; attempt++ {
		obj, err := c.getClusterInfo(ctx)
		if err != nil {
			return false, fmt.Errorf("%s: %w", what, err)
		}
		ready, _ := readyOf(obj)
		if ok, err := may(ready, markerOf(obj)); err != nil || !ok {
			return false, err
		}
		if err := setLockState(obj, true, nil); err != nil {
			return false, fmt.Errorf("%s: %w", what, err)
		}
		_, err = c.res(resClusterInfo).Update(ctx, obj, metav1.UpdateOptions{})
		if isConflict(err) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("%s: update clusterinformation: %w", what, err)
		}
		return !ready, nil
	}
}

func (c *Client) getClusterInfo(ctx context.Context) (*unstructured.Unstructured, error) {
	obj, err := c.res(resClusterInfo).Get(ctx, "default", metav1.GetOptions{})
	if isNotFound(err) {
		return nil, fmt.Errorf("get clusterinformation default: %w", ErrNotInitialized)
	}
	if err != nil {
		return nil, fmt.Errorf("get clusterinformation default: %w", err)
	}
	return obj, nil
}

func isNotFoundErr(err error) bool { return err != nil && errors.Is(err, ErrNotInitialized) }

// readyOf returns spec.datastoreReady (true when unset) and whether it is set.
func readyOf(obj *unstructured.Unstructured) (ready, set bool) {
	v, found, err := unstructured.NestedBool(obj.Object, "spec", "datastoreReady")
	if !found || err != nil {
		return true, false
	}
	return v, true
}

func markerOf(obj *unstructured.Unstructured) *LockMarker {
	s, ok := obj.GetAnnotations()[LockAnnotation]
	if !ok {
		return nil
	}
	var m LockMarker
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return &LockMarker{Owner: "unparseable marker: " + s}
	}
	return &m
}

// setLockState sets spec.datastoreReady and the marker annotation (removed when m is nil).
func setLockState(obj *unstructured.Unstructured, ready bool, m *LockMarker) error {
	if err := unstructured.SetNestedField(obj.Object, ready, "spec", "datastoreReady"); err != nil {
		return err
	}
	ann := obj.GetAnnotations()
	if m == nil {
		delete(ann, LockAnnotation)
	} else {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if ann == nil {
			ann = map[string]string{}
		}
		ann[LockAnnotation] = string(b)
	}
	obj.SetAnnotations(ann)
	return nil
}

func selfMarker(owner, op string, now, deadline time.Time) LockMarker {
	return LockMarker{Owner: owner, Operation: op, Acquired: now, Deadline: deadline, Identity: proc.Self()}
}

func (m *LockMarker) same(o *LockMarker) bool {
	return m.Owner == o.Owner && m.Acquired.Equal(o.Acquired) && m.PID == o.PID && m.Host == o.Host
}

// live reports whether the lock may still be in use: before its deadline and its process is
// not known to be gone (a process on another host is assumed alive).
func (m *LockMarker) live(now time.Time) bool {
	if !now.Before(m.Deadline) {
		return false
	}
	return !m.Identity.Gone()
}

// where names the marker's host, and its process when it has one (a Detached lock has none):
// ", on host h" or ", pid 123 on host h"; "" when the marker names no host.
func (m LockMarker) where() string {
	switch {
	case m.Host == "":
		return ""
	case m.PID == 0:
		return ", on host " + m.Host
	}
	return fmt.Sprintf(", pid %d on host %s", m.PID, m.Host)
}

// heldError is the ErrDatastoreLocked of a lock that the caller's own owner holds: its text
// says so instead of "locked by someone else".
type heldError struct{ text string }

func (e *heldError) Error() string        { return e.text }
func (e *heldError) Is(target error) bool { return target == ErrDatastoreLocked }
