// Package thread delivers one ledger entry's thread to its chat platform: the root message,
// the replies under it in order, and edits of the root, each post and edit made once across
// retries, replicas and restarts (ledger.Store.Send and Edit). The features that post unasked
// (the Alertmanager receiver, the watch) say what the thread should show, as a Thread rendered
// from the entry; this package makes the platform show it.
//
// A message is rendered only by the process that claimed its post (Message.Render runs after
// the claim), so two replicas never both compute a diagnosis for the same reply, and an edit
// is rendered from the entry of the revision it brings the root to. Every message carries a
// mark (Mark: the entry's name and the message's key) where the platform can find it again:
// Slack's message metadata, a Discord nonce and the footer. After a crash between a post and
// its record, Platform.Find looks for the mark before anything is posted again.
package thread

import (
	"context"
	"fmt"
	"time"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/ledger"
)

// Platform is one chat platform as a thread sees it. The Slack and Discord adapters implement
// it (their Threads types).
type Platform interface {
	// Post posts m in channel, as a reply in the thread named thread when it is not empty,
	// marked with mark where Find can see it, and returns where the message is. A root's Ref
	// has Thread set to where its replies go.
	Post(ctx context.Context, channel, thread, mark string, m chat.Message) (ledger.Ref, error)
	// Find looks for a message marked with mark, posted in channel (in thread when it is not
	// empty) no earlier than since. found is false when the platform shows none.
	Find(ctx context.Context, channel, thread, mark string, since time.Time) (ref ledger.Ref, found bool, err error)
	// Edit replaces the message at ref, posted with mark, with m.
	Edit(ctx context.Context, ref ledger.Ref, mark string, m chat.Message) error
}

// Platforms are the connected platforms by name (ledger.Key.Platform: "slack", "discord").
type Platforms map[string]Platform

// Message is one message of a thread.
type Message struct {
	// Key names the message in the entry (ledger.Entry.Messages): "root", or the feature's
	// key of a reply. It never changes once the message is posted.
	Key string
	// Render makes the message. It is called by the process that posts or edits the message,
	// after its claim, and may do slow work (a diagnosis).
	Render func(ctx context.Context) (chat.Message, error)
}

// Thread is what a feature wants one entry's thread to show.
type Thread struct {
	// Root is the first message, in the channel. Its Render is called for the post and for
	// each edit, from the entry of that revision.
	Root Message
	// Replies go under the root, posted in this order: a reply is posted only once every
	// reply before it is. Keep the order stable (append only), so a reply never waits on
	// one that a later render leaves out.
	Replies []Message
}

// Render is what a feature wants the thread of entry e to show.
type Render func(e *ledger.Entry) Thread

// Mark is the mark of message key of the entry named entry.
func Mark(entry, key string) string { return entry + "/" + key }

// Deliver makes the thread of e show what render says: it posts the root once (recorded as
// showing e.Revision), edits it once per later revision (rendered from the entry of that
// revision), then posts each reply once, in order, in the root's thread. It stops at the
// first error and returns it (ledger.ErrBusy, wrapped, when another process is posting a
// message now), so calling it again goes on where it stopped. Messages e already records
// cost no request, and each step starts from the entry the step before wrote (e at first),
// so a message costs two requests (its claim and its record). The last step's record also
// clears e's pending mark when the thread is then done. It returns the entry as it last read
// or wrote it, for the caller's next write to start from: when that is still Pending, the
// caller clears the mark (Deliver had nothing to post, or another writer came in between).
func Deliver(ctx context.Context, s *ledger.Store, p Platforms, e *ledger.Entry, render Render) (*ledger.Entry, error) {
	pl, ok := p[e.Platform]
	if !ok {
		return nil, fmt.Errorf("notification %s: chat platform %q is not connected", e.Name(), e.Platform)
	}
	name := e.Name()
	th := render(e)
	rootKey := th.Root.Key
	var replies []Message
	for _, r := range th.Replies {
		if _, ok := e.Messages[r.Key]; !ok {
			replies = append(replies, r)
		}
	}
	// finish goes with the last step planned; a step that was not planned (an edit after a
	// root another replica posted) leaves the mark to the caller.
	finish := func(ce *ledger.Entry) {
		if Done(ce, render(ce)) {
			ce.Pending = false
		}
	}
	last := func(isLast bool) func(*ledger.Entry) {
		if isLast {
			return finish
		}
		return nil
	}
	cur := e
	root, posted := e.Messages[rootKey]
	edit := posted && root.Shows < e.Revision
	if !posted {
		ref, out, err := s.SendFrom(ctx, cur, rootKey, e.Revision, poster{pl, e.Channel, "", Mark(name, rootKey), th.Root.Render}, last(len(replies) == 0))
		if err != nil {
			return nil, err
		}
		root, cur = ledger.Posted{Ref: ref, Shows: e.Revision}, out
		if m, ok := out.Messages[rootKey]; ok {
			root = m // found posted by another replica: it shows what that one rendered
		}
	}
	if root.Shows < e.Revision {
		out, err := s.EditFrom(ctx, cur, rootKey, func(ctx context.Context, ce *ledger.Entry, ref ledger.Ref) error {
			now := render(ce).Root
			if now.Key != rootKey {
				return nil // the thread moved on to another root; this one is not edited again
			}
			m, err := now.Render(ctx)
			if err != nil {
				return err
			}
			return pl.Edit(ctx, ref, Mark(name, rootKey), m)
		}, last(edit && len(replies) == 0))
		if err != nil {
			return nil, err
		}
		cur = out
	}
	for i, r := range replies {
		_, out, err := s.SendFrom(ctx, cur, r.Key, 0, poster{pl, e.Channel, root.Ref.Thread, Mark(name, r.Key), r.Render}, last(i == len(replies)-1))
		if err != nil {
			return nil, err
		}
		cur = out
	}
	return cur, nil
}

// Done reports whether e's thread shows what th says: the root is posted and shows
// e.Revision, and every reply is posted.
func Done(e *ledger.Entry, th Thread) bool {
	root, ok := e.Messages[th.Root.Key]
	if !ok || root.Shows < e.Revision {
		return false
	}
	for _, r := range th.Replies {
		if _, ok := e.Messages[r.Key]; !ok {
			return false
		}
	}
	return true
}

// poster is one message of a thread as ledger.Send posts it.
type poster struct {
	pl                    Platform
	channel, thread, mark string
	render                func(ctx context.Context) (chat.Message, error)
}

func (p poster) Post(ctx context.Context, _ string) (ledger.Ref, error) {
	m, err := p.render(ctx)
	if err != nil {
		return ledger.Ref{}, err
	}
	return p.pl.Post(ctx, p.channel, p.thread, p.mark, m)
}

func (p poster) Find(ctx context.Context, _ string, since time.Time) (ledger.Ref, bool, error) {
	return p.pl.Find(ctx, p.channel, p.thread, p.mark, since)
}
