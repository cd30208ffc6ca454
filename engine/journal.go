package engine

import (
	"context"
	"errors"

	"github.com/probed/probed/engine/target"
)

// ErrAborted: an apply this replica was writing was taken from it (its
// lease expired, and another replica finishes the apply); nothing of its
// later creates was written. Retry the call.
var ErrAborted = errors.New("aborted")

// An ApplyJournal is a SharedStore that keeps the desired list of every
// Apply from before its first write until it is finished (issue 30, item
// 6): over etcd an Apply is many transactions, so a replica that dies in
// the middle of one leaves part of it written, and another replica
// finishes it from the list. A set's applies run one at a time in the
// whole cluster, under a lock of the set (per Owner) held on the applying
// replica's lease: a replica that dies or loses its lease loses the lock
// with it.
type ApplyJournal interface {
	SharedStore
	// Journals reports whether the store keeps applies (over etcd: when
	// it knows this replica's lease).
	Journals() bool
	// ApplyBegun reports whether an apply of owner's set is recorded:
	// begun and not finished, by any replica.
	ApplyBegun(ctx context.Context, owner string) (bool, error)
	// BeginApply waits until no other live replica holds the lock of
	// rec.Owner's set (or ctx ends), takes it for this replica and
	// records rec as the set's apply, replacing one that was not
	// finished. Its ticket goes on the apply's creates (Change.Apply).
	BeginApply(ctx context.Context, rec *ApplyRecord) (ApplyTicket, error)
	// TakeOverApply takes the lock of owner's recorded apply when no live
	// replica holds it (or this replica does, from an apply that did not
	// end: the caller runs no apply meanwhile), and returns the record;
	// ok false when there is none to take.
	TakeOverApply(ctx context.Context, owner string) (rec *ApplyRecord, t ApplyTicket, ok bool, err error)
	// EndApply forgets the apply of t (its record and its lock) if t
	// still holds the lock.
	EndApply(ctx context.Context, t ApplyTicket) error
	// InterruptedApplies names the sets whose apply is recorded and
	// whose lock no live replica but this one holds.
	InterruptedApplies(ctx context.Context) ([]string, error)
}

// ApplyRecord is what an ApplyJournal keeps of an Apply: enough to run
// it again as its caller.
type ApplyRecord struct {
	Owner    string
	Selector map[string]string
	// Client is the caller's identity (WithClient).
	Client  string
	Targets []*target.Spec
}

// ApplyTicket is an apply's hold of its set's lock.
type ApplyTicket struct {
	Owner string
	// Token is the store's (over etcd, the lease the lock is on).
	Token int64
	// Position is what the view must have reached to hold every write
	// made under the lock before it was taken.
	Position uint64
}
