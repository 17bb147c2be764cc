package collect

import (
	"crypto/sha256"
	"runtime"
	"sync"
	"weak"
)

// internTable shares equal immutable values between cached objects: the pods of one
// ReplicaSet have the same spec, labels and owner, and keeping one copy for all of them is
// most of what makes the lean pod cache small. Entries are weak: a value lives as long as some
// cached object points at it, and its entry is dropped after the garbage collector frees it.
// Values handed out are shared and must be treated as read-only.
type internTable[T any] struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]weak.Pointer[T]
}

func newInternTable[T any]() *internTable[T] {
	return &internTable[T]{m: map[[sha256.Size]byte]weak.Pointer[T]{}}
}

// get returns the value stored under the hash of key (a canonical encoding of the value), or
// stores and returns build() when there is none.
func (t *internTable[T]) get(key []byte, build func() *T) *T {
	sum := sha256.Sum256(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	if wp, ok := t.m[sum]; ok {
		if v := wp.Value(); v != nil {
			return v
		}
	}
	v := build()
	t.m[sum] = weak.Make(v)
	runtime.AddCleanup(v, t.drop, sum)
	return v
}

// drop removes the entry of a freed value, unless a newer value took its place.
func (t *internTable[T]) drop(sum [sha256.Size]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if wp, ok := t.m[sum]; ok && wp.Value() == nil {
		delete(t.m, sum)
	}
}

// len is the number of live entries (for tests and metrics).
func (t *internTable[T]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
