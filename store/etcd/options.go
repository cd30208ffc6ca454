package etcd

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

// Defaults of Options.
const (
	DefaultPrefix         = keyspace.DefaultPrefix
	DefaultRequestTimeout = 5 * time.Second
	DefaultAttemptTimeout = time.Second
)

// ErrInvalid: Options have a bad field (the error names it).
var ErrInvalid = errors.New("etcd store: invalid options")

// Options configure a Store. Client and ReplicaID are required.
type Options struct {
	// Client talks to etcd; the caller closes it after the store.
	Client *clientv3.Client
	// Prefix of every key; default "/probed/", the cluster's (they share
	// P/meta). A missing trailing slash is added.
	Prefix string
	// Shards is the cluster's number of shards (P/meta pins it: Open
	// checks it, or pins it first): the store is one replica of a cluster
	// and follows which shards it owns — those whose owner keys are held
	// on the lease of its process's member key (Instance) — in its log:
	// Load and Follow tell the engine (engine.Ownership), and Commit
	// refuses the changes of targets the log does not show owned
	// (ErrOwnershipLost, without a round trip) and compares, for the
	// others, that the shard key is still on that lease. Creates are not
	// fenced: any replica registers a target. 0: the store is the only
	// writer (tools, tests): it owns every target and fences nothing.
	Shards int
	// Instance names this process in its member key (keyspace.Member;
	// cluster.Cluster.Instance): required with Shards.
	Instance string
	// Membership, when set, is handed what Follow sees of the keys it
	// watches besides P/events (the cluster's members and shards, P/meta,
	// P/leader/),
	// so that the cluster's view and the engine's follow one etcd watch
	// (cluster.Observe): in order, Membership(after, rev, events) for
	// each etcd revision with changes of those keys (events: the
	// changes at rev), and for the last revision of each watch answer or
	// progress notification (events possibly none: the revisions without
	// such changes are folded), after the revision of the previous call
	// made by the same Follow; each Follow first calls Membership(after,
	// after, nil) with the revision it starts after. A consumer whose view
	// is below after missed the revisions between (a Follow from a later
	// position, after the engine reloaded its view).
	// It is called on Follow's goroutine, once the engine's view has
	// reached rev (that revision's changes and ownership delivered, and
	// none after it). It must not block.
	Membership func(after, rev int64, events []*clientv3.Event)
	// Leading says whether this replica compacts etcd's history
	// (cluster.Leading); nil: it does.
	Leading func() bool
	// Lease is this replica's lease (cluster.Stats().Lease), 0 while it
	// has none. With it the store keeps every Apply's desired list until
	// the apply ends, under a lock of the set on that lease
	// (engine.ApplyJournal, journal.go); nil: it does not.
	Lease func() clientv3.LeaseID
	// Compact opts in to compacting etcd's history (Store.Compact);
	// false, the default, compacts nothing and leaves the history to
	// etcd's own --auto-compaction-*. etcd compaction is global: it
	// deletes the old revisions of every key of the etcd, under every
	// prefix, and breaks every other client's watch from before it. With
	// Compact, each replica records what it still needs
	// (P/watermarks/<id>) and the leader never compacts below the lowest
	// need of a live member.
	Compact bool
	// Settings are the cluster-wide settings (a flag's name → its value):
	// those that change what a stored spec means, which every replica must
	// share (the floors of periods and timeouts, feature gates). The first
	// replica records them in P/meta; Open refuses other values, or other
	// names, with ErrSettings naming each difference. Empty: not checked.
	Settings map[string]string
	// ReplicaID names this writer's key P/writers/<ReplicaID> (the
	// idempotency of its transactions): unique among the replicas writing
	// at a time, no "/" nor control characters, at most 128 bytes.
	ReplicaID string
	// RequestTimeout bounds one etcd request (a transaction whose answer
	// does not come in time is retried, never applied twice); default 5s;
	// negative: none (a request ends with its context).
	RequestTimeout time.Duration
	// AttemptTimeout bounds the first attempt of a write (a Commit, a
	// claim of P/meta): each timeout doubles the next attempt's, up to
	// RequestTimeout. A transaction in flight when etcd's leader fails is
	// answered by no one: it is sent again after AttemptTimeout, about
	// when etcd has elected a new leader (its default election timeout
	// is 1 s), rather than after RequestTimeout. Default 1s; negative:
	// RequestTimeout from the first attempt (as with no RequestTimeout).
	AttemptTimeout time.Duration
	Logger         *slog.Logger
	// Clock times the backoff between retries and RequestTimeout; default
	// the real clock.
	Clock clockwork.Clock
}

func (o *Options) setDefaults() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...)))
	}
	if o.Client == nil {
		bad("Client", "required")
	}
	o.Prefix = keyspace.Prefix(o.Prefix)
	if why := keyspace.CheckReplicaID(o.ReplicaID); why != "" {
		bad("ReplicaID", "%s (it names this replica's key P/writers/<id>)", why)
	}
	switch {
	case o.Shards < 0 || o.Shards > keyspace.MaxShards:
		bad("Shards", "%d is not between 0 and %d", o.Shards, keyspace.MaxShards)
	case o.Shards > 0 && o.Instance == "":
		bad("Instance", "required with Shards (it names this process in its member key)")
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	return errors.Join(errs...)
}
