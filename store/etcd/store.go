// Package etcd is the engine.SharedStore of cluster mode: several probed
// replicas keep their targets and one event log in an etcd cluster, and
// etcd decides what exists, who may write a target and the order of
// events (docs/cluster.md is the design).
//
// # Keys
//
// Under the prefix P (default "/probed/", the cluster's too; the layout is
// internal/keyspace's):
//
//	P/meta             a JSON object: "schema" (SchemaVersion, this package's),
//	                   "settings" (Options.Settings, the first replica's),
//	                   "shards" (the cluster's); each keeps the other's fields
//	P/specs/<name>     a target's spec (store/codec)
//	P/status/<name>    its durable status (store/codec), whose revision field
//	                   holds the index of its last change in its transaction
//	P/events           the changes of the last transaction (codec.MarshalBatch);
//	                   rewritten by every transaction, so etcd's history of this
//	                   key is the event log
//	P/writers/<id>     the last transaction of the replica <id> (idempotency),
//	P/writers/<id>/<k> and of its k-th other Commit in flight at once (k < 16)
//	P/watermarks/<id>  the oldest revision the replica <id> still needs
//	                   (only with Options.Compact)
//	P/usage/...        the counts of targets (usage.go), and
//	P/targetsets/...   the applies begun and not finished (journal.go):
//	                   both laid out in internal/keyspace
//
// # Revisions
//
// A Commit is one etcd transaction, and etcd gives a transaction one
// revision R. The i-th change of the transaction (at most 1,024 of them)
// gets the revision R<<10 | i: strictly increasing, not contiguous, the
// same on every replica. The position after a whole etcd revision R is
// R<<10 | 1023 (Stored.Revision, what Follow delivers); an etcd
// compaction at revision C deletes the events of every revision below C,
// so Stored.Compacted is C<<10 - 1.
//
// # Writes
//
// A Commit compares, in the same transaction: that each created target's
// spec key does not exist; with Options.Shards, that each written target's
// shard key is on this replica's lease as its log shows it (own.go); and that P/writers/<id> is what
// this store last wrote there (or in the writer key P/writers/<id>/<k> the
// Commit holds: up to MaxCommitsInFlight Commits run at once, each on a key
// of its own, and etcd orders them). When a compare fails, nothing is written
// and the transaction's other branch reads the compared keys, which says
// which changes conflict (*engine.ConflictError). Transient etcd failures
// (no leader, a timeout, an unreachable member) are retried with backoff
// until the Commit's context ends; a transaction whose outcome was unknown
// is never applied twice: each carries a value of its own for
// its writer key, and a retry that finds it there has succeeded already.
//
// # Goroutines
//
// The store starts none: Follow runs on its caller's goroutine, and the
// client is the caller's. Close ends a running Follow and fails every
// later call with ErrClosed.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/keyspace"
)

// Errors.
var (
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("etcd store: closed")
	// ErrSchemaVersion: P/meta names a schema this build does not know
	// (a newer probed wrote the data).
	ErrSchemaVersion = errors.New("etcd store: unknown schema version")
	// ErrSettings: the cluster's settings in P/meta differ from this
	// replica's (Options.Settings); the error names each difference.
	ErrSettings = errors.New("etcd store: settings differ from the cluster's")
	// ErrCorrupt: a key under the prefix holds something probed did not
	// write.
	ErrCorrupt = errors.New("etcd store: corrupt data")
)

// SchemaVersion is the layout of the keys and values; P/meta records it.
const SchemaVersion = 1

// Store is the etcd engine.SharedStore. Commit serialises its calls; the
// other methods may run concurrently with everything.
type Store struct {
	cli  *clientv3.Client
	keys keyspace.Keys
	// fence is fenceOf with Options.Shards (the store follows its
	// replica's ownership: own.go), nil without.
	fence func(name string) (string, clientv3.LeaseID, bool)
	// process is Options.Instance: the process's name in its member key.
	process string
	leading func() bool
	lease   func() clientv3.LeaseID // Options.Lease (nil: no journal)
	// membership is Options.Membership (nil: none).
	membership func(after, rev int64, events []*clientv3.Event)
	compact    bool // Options.Compact
	// settings are Options.Settings.
	settings map[string]string
	// recorded is the watermark this replica last wrote (Compact).
	recorded atomic.Uint64
	log      *slog.Logger
	clock    clockwork.Clock
	// timeout bounds one etcd request (Options.RequestTimeout);
	// firstAttempt the first attempt of a retried one
	// (Options.AttemptTimeout).
	timeout, firstAttempt time.Duration

	// ctx ends when the store is closed.
	ctx   context.Context
	close context.CancelFunc

	// id is Options.ReplicaID; writers are its writer keys
	// (P/writers/<id> and P/writers/<id>/<k>), one per Commit in flight.
	id      string
	writers *writers
	// instance names this Store's transactions in its writer keys
	// (random: a restarted replica never repeats a predecessor's).
	instance string
	seq      atomic.Uint64 // transactions attempted
	// usage is the counts of targets (usage.go).
	usage usage

	mu sync.Mutex
	// loaded is the specs (and, with Options.Shards, the member and shard
	// keys) Load read, kept for a Follow from the same revision (which
	// needs the spec of each target to deliver status-only changes whole,
	// and the keys to follow ownership); guarded by mu.
	loaded *specsAt
	// leases is the lease each shard is owned on as of the log, which
	// Commit fences writes with (fenceOf); guarded by mu.
	leases []clientv3.LeaseID
}

var (
	_ engine.SharedStore  = (*Store)(nil)
	_ engine.BatchLimiter = (*Store)(nil)
)

// specsAt is every target's spec at an etcd revision, and with
// Options.Shards the ownership there.
type specsAt struct {
	rev    int64
	specs  map[string]*target.Spec
	owners *owners
}

// ReplicaID is Options.ReplicaID.
func (s *Store) ReplicaID() string { return s.id }

// Close ends a running Follow and makes the store unusable. It does not
// close the client (the caller's) and writes nothing.
func (s *Store) Close() error {
	s.close()
	s.mu.Lock()
	s.loaded = nil
	s.mu.Unlock()
	return nil
}

// usable returns ErrClosed once the store is closed.
func (s *Store) usable() error {
	if s.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

// bind returns ctx, also cancelled when the store closes.
func (s *Store) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// errRequestTimeout is the cause of a request cancelled after
// Options.RequestTimeout.
var errRequestTimeout = errors.New("etcd request timed out")

// request returns the context of one etcd request: cancelled when ctx
// ends, when the store closes, or after d on the store's clock (cause
// errRequestTimeout; d <= 0: never). It has no deadline of its own, so a
// fake clock never leaks into gRPC's wall-clock deadlines.
func (s *Store) request(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	var t clockwork.Timer
	if d > 0 {
		t = s.clock.AfterFunc(d, func() { cancel(errRequestTimeout) })
	}
	return clientv3.WithRequireLeader(rctx), func() {
		if t != nil {
			t.Stop()
		}
		stop()
		cancel(context.Canceled)
	}
}

// done returns the error of an operation whose context ended: ErrClosed
// if the store closed, ctx's error otherwise.
func (s *Store) done(ctx context.Context) error {
	if s.ctx.Err() != nil {
		return ErrClosed
	}
	return ctx.Err()
}

// corrupt is an ErrCorrupt naming key.
func corrupt(key string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, key, fmt.Sprintf(format, args...))
}
