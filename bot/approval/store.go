package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/proc"
)

// ErrNotFound is returned by a Store for an unknown plan ID.
var ErrNotFound = errors.New("approval not found")

// ErrConflict is returned by Store.Update when the record changed since it was read (its
// Version is stale): re-read and decide again. This compare-and-set is what makes a plan run
// at most once when Approve is clicked twice or reaches two replicas.
var ErrConflict = errors.New("approval changed concurrently")

// Store keeps approval records. Implementations: MemoryStore (tests, demo) and CRDStore
// (RemediationRequest objects in a cluster, shared by every replica).
type Store interface {
	// Create stores a new record and sets its Version. The Plan.ID must be unused.
	Create(ctx context.Context, a *Record) error
	// Get returns the record for id (ErrNotFound if none).
	Get(ctx context.Context, id string) (*Record, error)
	// Update replaces the record if a.Version is still current and sets the new Version;
	// otherwise it returns ErrConflict and stores nothing.
	Update(ctx context.Context, a *Record) error
	// List returns the records in state, oldest plan first.
	List(ctx context.Context, state State) ([]*Record, error)
}

// State is where an approval record is in its life.
type State string

const (
	// StatePending waits for Approve or Deny until the plan expires.
	StatePending State = "Pending"
	// StateDenied was refused by an approver or withdrawn by the requester; nothing ran.
	StateDenied State = "Denied"
	// StateExpired was not decided before Plan.ExpiresAt; nothing ran.
	StateExpired State = "Expired"
	// StateRunning was approved and claimed by exactly one bot replica, which is executing it.
	StateRunning State = "Running"
	// StateSucceeded ran to the end; Result says what changed.
	StateSucceeded State = "Succeeded"
	// StateFailed ran and stopped on an error; Error says which, Result what was done.
	StateFailed State = "Failed"
	// StateInterrupted was Running when the bot process executing it died (SIGKILL, node
	// loss): another start found it, released its datastore lock and counted what was done
	// (Result). It is never re-run automatically; a fresh plan finishes the job.
	StateInterrupted State = "Interrupted"
)

// Final reports whether no further transition is possible.
func (s State) Final() bool {
	return s == StateDenied || s == StateExpired || s == StateSucceeded || s == StateFailed || s == StateInterrupted
}

// Heartbeat says which bot process executes a Running plan and when it last said it was
// alive. A record whose process is gone, or whose heartbeat is older than the staleness
// limit, is recovered as Interrupted (see Workflow.RecoverInterrupted).
type Heartbeat struct {
	// Process is the executing bot process (host, PID and start time).
	Process proc.Identity `json:"process"`
	// Time is when the process last renewed the heartbeat (bot clock, UTC).
	Time time.Time `json:"time"`
}

// Approval is the record of one plan's life: the plan, who asked, who decided, what ran, and
// every transition as an audit record.
type Record struct {
	// Plan is the dry run awaiting (or past) approval. Plan.ID keys the record.
	Plan actions.Plan `json:"plan"`
	// State is the current state.
	State State `json:"state"`
	// RequestedBy is who asked for the plan.
	RequestedBy chat.Principal `json:"requestedBy"`
	// RequestedAs is the Kubernetes identity RequestedBy was checked as before the plan was
	// made (Options.Authorize); nil when per-user authorization is off.
	RequestedAs *authz.Identity `json:"requestedAs,omitempty"`
	// Channel is the platform channel ID the plan was requested in.
	Channel string `json:"channel,omitempty"`
	// MessageRef says where the plan message was posted, in the adapter's own format after
	// its platform name ("slack:<channel>/<ts>", "discord:<channel>/<message>"); "" until the
	// adapter attaches it.
	MessageRef string `json:"messageRef,omitempty"`
	// DecidedBy is who approved or denied; nil while pending or when expired.
	DecidedBy *chat.Principal `json:"decidedBy,omitempty"`
	// DecidedAs is the Kubernetes identity DecidedBy was checked as (Options.Authorize); nil
	// when per-user authorization is off, and for a requester withdrawing their own plan.
	DecidedAs *authz.Identity `json:"decidedAs,omitempty"`
	// DecidedAt is when the decision was recorded.
	DecidedAt time.Time `json:"decidedAt,omitzero"`
	// Result is what Execute did (Succeeded, and Failed when it got that far).
	Result *actions.Result `json:"result,omitempty"`
	// Error is the execution error text for StateFailed, for operators (not shown in chat).
	Error string `json:"error,omitempty"`
	// FailureCode classifies Error for the chat message: "datastore-locked",
	// "approval-expired", "cluster-unavailable" or "error".
	FailureCode string `json:"failureCode,omitempty"`
	// Heartbeat names the process executing the plan and its last sign of life; set while
	// Running (kept afterwards, for the record).
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`
	// Recovery is what the recovery of an Interrupted plan found and did: how many planned
	// items were still to do, and what happened to the datastore lock.
	Recovery *actions.Recovery `json:"recovery,omitempty"`
	// History holds every transition, oldest first.
	History []AuditRecord `json:"history,omitempty"`
	// Version is the store's concurrency token (the resourceVersion for CRDStore); "" before
	// Create.
	Version string `json:"-"`

	// raw is the stored object this record was read from (CRDStore), so an update keeps the
	// labels, annotations and fields the bot does not know.
	raw any
}

// clone returns a deep copy of a.
func (a *Record) clone() *Record {
	b, err := json.Marshal(a)
	if err != nil {
		panic(fmt.Sprintf("marshal approval: %v", err)) // plain data: cannot fail
	}
	var c Record
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("unmarshal approval: %v", err))
	}
	c.Version = a.Version
	return &c
}

// MemoryStore is an in-process Store for tests and the demo. It is safe for concurrent use
// and implements compare-and-set like the API server: every Update bumps Version.
type MemoryStore struct {
	mu      sync.Mutex
	records map[string]*Record
	version int64
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{records: map[string]*Record{}}
}

var _ Store = (*MemoryStore)(nil)

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, a *Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[a.Plan.ID]; ok {
		return fmt.Errorf("create approval %s: already exists", a.Plan.ID)
	}
	s.version++
	a.Version = strconv.FormatInt(s.version, 10)
	s.records[a.Plan.ID] = a.clone()
	return nil
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, id string) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.records[id]
	if !ok {
		return nil, fmt.Errorf("get approval %s: %w", id, ErrNotFound)
	}
	return a.clone(), nil
}

// Update implements Store.
func (s *MemoryStore) Update(_ context.Context, a *Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[a.Plan.ID]
	if !ok {
		return fmt.Errorf("update approval %s: %w", a.Plan.ID, ErrNotFound)
	}
	if cur.Version != a.Version {
		return fmt.Errorf("update approval %s: %w", a.Plan.ID, ErrConflict)
	}
	s.version++
	a.Version = strconv.FormatInt(s.version, 10)
	s.records[a.Plan.ID] = a.clone()
	return nil
}

// List implements Store.
func (s *MemoryStore) List(_ context.Context, state State) ([]*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Record
	for _, a := range s.records {
		if a.State == state {
			out = append(out, a.clone())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Plan.CreatedAt.Before(out[j].Plan.CreatedAt) })
	return out, nil
}
