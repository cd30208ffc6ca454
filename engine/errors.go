package engine

import (
	"errors"
	"fmt"

	"github.com/probed/probed/engine/field"
)

// Sentinel errors. Errors returned by the engine wrap one of these (check
// with errors.Is); the gRPC adapter maps each to one status code.
var (
	// ErrInvalid: the request is invalid; errors.As(err, **field.ListError)
	// gives every field violation.
	ErrInvalid = field.ErrInvalid
	// ErrNotFound: no target (or probe) by that name.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a target by that name exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrFailedPrecondition: the target is not in a state that allows the
	// operation (e.g. updating a terminating target).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrResourceExhausted: a limit was reached (max targets, a watcher's
	// buffer).
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrCompacted: a watch asked for history older than what is retained;
	// errors.As(err, **CompactedError) gives the oldest retained revision.
	ErrCompacted = errors.New("revision compacted")
	// ErrSuspended: this replica cannot vouch for its view right now
	// (it lost its lease: etcd may be unreachable); another replica can
	// answer (see Suspend).
	ErrSuspended = errors.New("suspended")
	// ErrClosed: the engine is shutting down.
	ErrClosed = errors.New("engine closed")
	// ErrOwnershipLost: the store no longer lets this engine write some
	// targets (another replica owns them); the engine stops probing them.
	ErrOwnershipLost = errors.New("ownership lost")
	// ErrNotOwned: the target is probed by another replica; calls that
	// change its state go to that replica (see *NotOwnedError).
	ErrNotOwned = errors.New("not owned")
	// ErrUnavailable: the store cannot write for now (its disk is full);
	// nothing was written. A Store's Commit returns it for a failure
	// that may pass by itself: the engine then holds what it must record
	// and retries with back-off, and refuses creates, updates, resets and
	// deletes (with the store's error, which wraps this) until a retry
	// succeeds. See Engine.StoreError.
	ErrUnavailable = errors.New("store unavailable")
)

// CompactedError says which revisions a watch can still start from.
type CompactedError struct {
	Requested uint64 // the revision asked for
	Oldest    uint64 // the oldest revision still retained; resume from here or re-snapshot
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("revision %d has been compacted; the oldest retained revision is %d", e.Requested, e.Oldest)
}

// Is reports ErrCompacted.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// SlowWatcherError ends a watcher that fell too far behind.
type SlowWatcherError struct {
	// LastRevision is the revision of the last event the watcher was
	// given; resume from LastRevision+1.
	LastRevision uint64
	// Buffer is the watcher's bound of pending events.
	Buffer int
	// Exceeded says which bound the watcher passed, e.g. "more than
	// 16777216 bytes of events pending (--watch-buffer-bytes)"; empty
	// means more than Buffer events.
	Exceeded string
}

func (e *SlowWatcherError) Error() string {
	exceeded := e.Exceeded
	if exceeded == "" {
		exceeded = fmt.Sprintf("more than %d events pending (--watch-buffer)", e.Buffer)
	}
	return fmt.Sprintf("watcher too slow: %s; last delivered revision %d, resume from %d",
		exceeded, e.LastRevision, e.LastRevision+1)
}

// Is reports ErrResourceExhausted.
func (e *SlowWatcherError) Is(target error) bool { return target == ErrResourceExhausted }

// OwnershipLostError names the targets the store refused to write.
type OwnershipLostError struct {
	Names []string
}

func (e *OwnershipLostError) Error() string {
	return fmt.Sprintf("ownership lost for %d target(s)", len(e.Names))
}

// Is reports ErrOwnershipLost.
func (e *OwnershipLostError) Is(target error) bool { return target == ErrOwnershipLost }

// ConflictError is what a SharedStore returns when it wrote nothing because
// some changes of the batch conflict with what others wrote: Refused maps
// each refused change's target to the reason, an error wrapping
// ErrAlreadyExists (a create of a target that exists) or ErrOwnershipLost
// (a fenced write of a shard this replica no longer owns). The committer
// fails those changes with their reason and writes the others again.
type ConflictError struct {
	Refused map[string]error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%d change(s) refused by the store", len(e.Refused))
}

// NotOwnedError says that a target exists but this engine does not probe
// it (another replica owns it): Update, Delete, Reset and Trigger must go
// to its owner. It wraps ErrNotOwned.
type NotOwnedError struct {
	Name string
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("target %q is probed by another replica", e.Name)
}

// Is reports ErrNotOwned.
func (e *NotOwnedError) Is(target error) bool { return target == ErrNotOwned }
