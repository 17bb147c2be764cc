package ledger

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Poster makes one new message for Send and can tell whether it made it.
type Poster interface {
	// Post makes the message. It must mark it with key where Find can see it (Slack's message
	// metadata, a Discord nonce), and return within the context's deadline.
	Post(ctx context.Context, key string) (Ref, error)
	// Find looks for a message that Post made with key no earlier than since. found is false
	// when the platform shows no such message: then Send posts it.
	Find(ctx context.Context, key string, since time.Time) (ref Ref, found bool, err error)
}

// findMargin widens Find's window for clock skew between replicas and the platform.
const findMargin = time.Minute

// Send posts the message key of the thread named name, once. A message already recorded is
// returned as it is. Before posting, Send claims the key in the entry (a compare-and-set), so
// two replicas never both post it; after posting it records the message's reference. A claim
// whose process is gone, is older than the claim TTL, or whose post failed with an
// unknown outcome, is taken over only after Poster.Find says the message was not made (when
// Find finds it, that message is recorded). A live claim of another process returns ErrBusy.
func (s *Store) Send(ctx context.Context, name, key string, p Poster) (Ref, error) {
	return s.SendRevision(ctx, name, key, 0, p)
}

// SendRevision is Send for a message rendered from revision rev of the entry (a thread's root,
// which Edit keeps up to date): the message is recorded as showing rev, so Edit changes it
// only once the entry's Revision passes rev. A message that Find recovers after an unfinished
// post is recorded as showing revision 0, since nobody knows what it was rendered from.
func (s *Store) SendRevision(ctx context.Context, name, key string, rev int64, p Poster) (Ref, error) {
	ref, _, err := s.sendFrom(ctx, name, nil, key, rev, p, nil)
	return ref, err
}

// SendFrom is SendRevision starting from e, the entry as the caller last read or wrote it,
// instead of reading it again (an e that is behind fails the claim's compare-and-set, and
// the next attempt reads). It also returns the entry as Send last read or wrote it (nil when
// a write failed), for the caller's next step to start from. also, when not nil, is applied
// to the entry in the same write that records the message (the caller's last change, such
// as clearing Pending, made without a request of its own); it must be a function of the
// entry it is given.
func (s *Store) SendFrom(ctx context.Context, e *Entry, key string, rev int64, p Poster, also func(e *Entry)) (Ref, *Entry, error) {
	return s.sendFrom(ctx, e.Name(), e, key, rev, p, also)
}

func (s *Store) sendFrom(ctx context.Context, name string, e *Entry, key string, rev int64, p Poster, also func(e *Entry)) (Ref, *Entry, error) {
	defer s.lock(name, key)()
	given := e != nil
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if e == nil {
			var err error
			if e, err = s.Get(ctx, name); err != nil {
				return Ref{}, nil, err
			}
		}
		if m, ok := e.Messages[key]; ok {
			return m.Ref, e, nil
		}
		if c, ok := e.Claims[key]; ok {
			if given {
				// The caller's copy may show a claim that is over by now: read before acting on it.
				e, given = nil, false
				continue
			}
			if s.live(c) {
				return Ref{}, nil, fmt.Errorf("notification %s, message %s (claimed by %s at %s): %w",
					name, key, c.By.Host, c.At.Format(time.RFC3339), ErrBusy)
			}
			ref, found, err := p.Find(ctx, key, c.At.Add(-findMargin))
			if err != nil {
				return Ref{}, nil, fmt.Errorf("notification %s: find message %s after an unfinished post: %w", name, key, err)
			}
			if found {
				out, err := s.record(ctx, name, key, ref, 0, nil, also)
				return ref, out, err
			}
		}
		claimed, err := s.write(ctx, s.claimed(e, key), false)
		if isConflict(err) {
			e, given = nil, false
			continue
		}
		if err != nil {
			return Ref{}, nil, err
		}
		pctx, cancel := context.WithTimeout(ctx, s.claimTTL/2)
		ref, perr := p.Post(pctx, key)
		cancel()
		cctx, ccancel := settle(ctx)
		defer ccancel()
		if perr != nil {
			// The platform may have made the message anyway (a timeout after the write): keep
			// the claim, marked failed, so whoever tries next asks Find first.
			s.markFailed(cctx, claimed, key)
			return Ref{}, nil, fmt.Errorf("notification %s: post message %s: %w", name, key, perr)
		}
		out, err := s.record(cctx, name, key, ref, rev, claimed, also)
		return ref, out, err
	}
	return Ref{}, nil, fmt.Errorf("notification %s: claim message %s: still conflicting after %d attempts", name, key, maxAttempts)
}

// Edit brings message key of the thread named name up to the entry's Revision by calling
// edit with the entry it renders from and the message's reference, unless the message shows
// that revision already. Like Send it claims the edit first ("edit:" + key), so two replicas
// never race each other and leave the older text standing. An edit needs no Find: doing it
// again is harmless.
func (s *Store) Edit(ctx context.Context, name, key string, edit func(ctx context.Context, e *Entry, ref Ref) error) error {
	_, err := s.editFrom(ctx, name, nil, key, edit, nil)
	return err
}

// EditFrom is Edit starting from e, the entry as the caller last read or wrote it, and
// returns the entry as Edit last read or wrote it (nil when a write failed); also is applied
// in the write that records the edit, as in SendFrom.
func (s *Store) EditFrom(ctx context.Context, e *Entry, key string, edit func(ctx context.Context, e *Entry, ref Ref) error, also func(e *Entry)) (*Entry, error) {
	return s.editFrom(ctx, e.Name(), e, key, edit, also)
}

func (s *Store) editFrom(ctx context.Context, name string, e *Entry, key string, edit func(ctx context.Context, e *Entry, ref Ref) error, also func(e *Entry)) (*Entry, error) {
	ck := "edit:" + key
	defer s.lock(name, ck)()
	given := e != nil
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if e == nil {
			var err error
			if e, err = s.Get(ctx, name); err != nil {
				return nil, err
			}
		}
		m, ok := e.Messages[key]
		if !ok && given {
			e, given = nil, false // the caller's copy may be behind the post: read
			continue
		}
		if !ok {
			return nil, fmt.Errorf("notification %s: edit message %s: it was not posted", name, key)
		}
		if m.Shows >= e.Revision {
			return e, nil
		}
		if _, ok := e.Claims[ck]; ok && given {
			e, given = nil, false // a claim seen in the caller's copy may be over: read
			continue
		}
		if c, ok := e.Claims[ck]; ok && s.live(c) {
			return nil, fmt.Errorf("notification %s, edit of %s (claimed by %s at %s): %w",
				name, key, c.By.Host, c.At.Format(time.RFC3339), ErrBusy)
		}
		claimed, err := s.write(ctx, s.claimed(e, ck), false)
		if isConflict(err) {
			e, given = nil, false
			continue
		}
		if err != nil {
			return nil, err
		}
		ectx, cancel := context.WithTimeout(ctx, s.claimTTL/2)
		eerr := edit(ectx, claimed, m.Ref)
		cancel()
		shows := claimed.Revision
		cctx, ccancel := settle(ctx)
		out, werr := s.modifyFrom(cctx, name, claimed, func(e *Entry) error {
			if c, ok := e.Claims[ck]; ok && c.By.Same(s.self) {
				delete(e.Claims, ck)
			}
			if eerr == nil {
				m := e.Messages[key]
				if m.Shows < shows {
					m.Shows = shows
					e.Messages[key] = m
				}
				if also != nil {
					also(e)
				}
			}
			return nil
		})
		ccancel()
		if eerr != nil {
			return nil, fmt.Errorf("notification %s: edit message %s: %w", name, key, eerr)
		}
		return out, werr
	}
	return nil, fmt.Errorf("notification %s: claim edit of %s: still conflicting after %d attempts", name, key, maxAttempts)
}

// settleTimeout bounds the writes that settle an attempt (record the post, release or mark
// the claim).
const settleTimeout = 10 * time.Second

// settle is the context of the writes that settle an attempt: they run even when ctx was
// cancelled meanwhile (serve shutting down), so a replica that stops mid-post or mid-edit
// leaves a recorded message or a released (or failed) claim, not a claim that keeps every
// other replica off that message for ClaimTTL.
func settle(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}

// live reports whether claim c keeps others off: it is recent, its process is not known to
// be gone, and its post did not fail.
func (s *Store) live(c Claim) bool {
	if c.Failed || c.By.Gone() {
		return false
	}
	if c.By.Same(s.self) {
		// Our own claim: the caller holds s.lock for it, so the attempt that made it is over.
		return false
	}
	return s.now().Sub(c.At) < s.claimTTL
}

// lock serialises Send and Edit of one message within this process (claims do it across
// processes) and returns the unlock.
func (s *Store) lock(name, key string) func() {
	h := fnv.New32a()
	h.Write([]byte(name + "\x00" + key))
	mu := &s.locks[h.Sum32()%uint32(len(s.locks))]
	mu.Lock()
	return mu.Unlock
}

// claimed returns a copy of e with key claimed by this process.
func (s *Store) claimed(e *Entry, key string) *Entry {
	c := *e
	c.Claims = make(map[string]Claim, len(e.Claims)+1)
	for k, v := range e.Claims {
		c.Claims[k] = v
	}
	c.Claims[key] = Claim{By: s.self, At: s.now().UTC()}
	return &c
}

// record writes the posted message key, showing revision shows, and drops its claim (and
// applies also, if not nil), starting from claimed (the entry as the claim wrote it; nil
// reads it). It retries with back-off until it is written or ctx ends: a post that is made
// but not recorded is found again by Find, but only after the claim TTL.
func (s *Store) record(ctx context.Context, name, key string, ref Ref, shows int64, claimed *Entry, also func(e *Entry)) (*Entry, error) {
	var last error
	var out *Entry
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 8, Cap: 10 * time.Second},
		func(ctx context.Context) (bool, error) {
			from := claimed
			claimed = nil
			out, last = s.modifyFrom(ctx, name, from, func(e *Entry) error {
				if e.Messages == nil {
					e.Messages = map[string]Posted{}
				}
				if _, ok := e.Messages[key]; !ok {
					e.Messages[key] = Posted{Ref: ref, At: s.now().UTC(), Shows: shows}
				}
				delete(e.Claims, key)
				if also != nil {
					also(e)
				}
				return nil
			})
			return last == nil, nil
		})
	if err != nil {
		if last == nil {
			last = err
		}
		return nil, fmt.Errorf("notification %s: record message %s (posted as %s): %w", name, key, ref.ID, last)
	}
	return out, nil
}

// markFailed marks this process's claim on key as failed, best effort: if the write fails,
// the claim ages out and is resolved with Find all the same.
func (s *Store) markFailed(ctx context.Context, e *Entry, key string) {
	_, _ = s.modify(ctx, e.Name(), func(e *Entry) error {
		c, ok := e.Claims[key]
		if !ok || !c.By.Same(s.self) {
			return ErrUnchanged
		}
		c.Failed = true
		e.Claims[key] = c
		return nil
	})
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }
