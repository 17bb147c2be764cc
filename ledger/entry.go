package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/whypending/whypending/internal/proc"
)

// Key names one thread: where it is posted and what it is about.
type Key struct {
	// Source is the feature that posts it, a DNS label ("alert", "watch", "rollup").
	Source string `json:"source"`
	// Platform is the chat platform ("slack", "discord").
	Platform string `json:"platform"`
	// Channel is the platform's channel ID.
	Channel string `json:"channel"`
	// Subject is what the thread is about, unique within the source and channel: an
	// Alertmanager groupKey, a workload as cluster/Kind/namespace/name.
	Subject string `json:"subject"`
}

// Name is the Notification's object name: the source, then a hash of the platform, channel and
// subject. Every replica derives the same name for the same thread, so creating it is the
// compare-and-set that makes one of them first.
func (k Key) Name() string {
	h := sha256.Sum256([]byte(k.Platform + "\x00" + k.Channel + "\x00" + k.Subject))
	return k.Source + "-" + hex.EncodeToString(h[:10])
}

func (k Key) String() string {
	return fmt.Sprintf("%s %s/%s %q", k.Source, k.Platform, k.Channel, k.Subject)
}

// Ref is where a posted message lives on its platform.
type Ref struct {
	// Channel is the channel the message is in.
	Channel string `json:"channel"`
	// ID is the message: Slack's ts, Discord's message ID.
	ID string `json:"id"`
	// Thread is where replies to it go: Slack's thread_ts (the root's ts), Discord's thread
	// channel ID. Empty for a message that is itself a reply.
	Thread string `json:"thread,omitempty"`
}

// Posted is one message the thread has made.
type Posted struct {
	Ref Ref `json:"ref"`
	// At is when it was recorded.
	At time.Time `json:"at"`
	// Shows is the entry Revision the message's text was last rendered from (see Store.Edit).
	Shows int64 `json:"shows,omitempty"`
}

// Claim says that a process is posting or editing a message now.
type Claim struct {
	By proc.Identity `json:"by"`
	At time.Time     `json:"at"`
	// Failed is set when the claimant's post returned an error: the platform may or may not
	// have made the message, so whoever tries next asks it first (Poster.Find).
	Failed bool `json:"failed,omitempty"`
}

// Entry is one Notification: a thread and what the feature that owns it keeps about it.
type Entry struct {
	Key
	// Cluster is the configured cluster the thread is about, if one.
	Cluster string
	// State and Summary are for people reading `kubectl get notifications`: a word
	// ("firing", "resolved", "stuck", "recovered") and one line.
	State, Summary string
	// Revision counts changes to what the root message should say; Store.Edit brings a
	// posted message up to it. The owning feature bumps it.
	Revision int64
	// Pending marks an entry with work outstanding (a post, reply or edit not yet made), for
	// Worker's resync (label whypending.io/pending).
	Pending bool
	// Messages are the messages posted so far, by key ("root", or the feature's reply keys).
	Messages map[string]Posted
	// Claims are the posts and edits under way, by key (edits as "edit:" + key).
	Claims map[string]Claim
	// Data is the owning feature's own state (see DataInto and SetData).
	Data json.RawMessage
	// Created and Updated are when the entry was created and last written.
	Created, Updated time.Time

	name, version string
	stored        *notification // as read, for what toObject keeps
}

// Name is the entry's object name (Key.Name).
func (e *Entry) Name() string {
	if e.name == "" {
		return e.Key.Name()
	}
	return e.name
}

// Root is the root message, if it was posted.
func (e *Entry) Root() (Ref, bool) {
	p, ok := e.Messages[RootKey]
	return p.Ref, ok
}

// RootKey is the key of a thread's root message.
const RootKey = "root"

// DataInto decodes the feature's state into v; an entry without state leaves v as it is.
func (e *Entry) DataInto(v any) error {
	if len(e.Data) == 0 || string(e.Data) == "null" {
		return nil
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("notification %s: decode data: %w", e.Name(), err)
	}
	return nil
}

// SetData encodes v as the feature's state.
func (e *Entry) SetData(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("notification %s: encode data: %w", e.Name(), err)
	}
	e.Data = b
	return nil
}
