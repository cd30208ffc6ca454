// Package cluster is probed's cluster mode membership over etcd: which
// replicas are alive and which of them should own which shard of the
// targets, and the keys that say so.
//
// Targets are split into a fixed number of shards by a hash of their name
// (ShardOf). Every replica keeps a member key on its lease; each shard's
// owner holds the shard's owner key on its lease; rendezvous hashing over
// the settled members names each shard's desired owner, which claims the
// shard when its key is free, while an owner that is no longer the
// desired one releases it (Release: its engine stops probing the shard's
// targets and flushes their writes, then the key is deleted). The lease is
// renewed only while the replica makes progress (Heartbeat), so a replica
// that is stuck loses its shards. The owner keys are all there is to
// ownership: the replica's etcd store follows them in the same stream as
// the events, tells its engine which targets to probe, and fences its
// writes with them (store/etcd). docs/cluster.md is the design.
//
// # Structure
//
//   - Cluster (cluster.go): options, accessors for the server (Owner,
//     Members, Stats) and the store (Instance, Leading).
//   - Run (run.go): join, serve, leave, rejoin after a lost lease.
//   - The lease (lease.go): renewal gated by Heartbeat (progress.go: the
//     heartbeats run beside the renewals), and the watchdog that declares
//     the lease lost after a TTL without renewal.
//   - The view (view.go) of the member and shard keys, loaded at each join
//     and then fed by Observe (stream.go) from the replica's one etcd
//     watch, the etcd store's Follow; and the assignment (assign.go)
//     computed from it.
//   - Claims and releases (shards.go), the shard count pinned in P/meta
//     (meta.go), the compaction leader (leader.go).
//
// # Goroutines
//
// Run owns every goroutine and waits for all of them before it returns:
// the control loop (Run's own goroutine: the view's updates, claims,
// releases and every Release and Keep call), and per lease the heartbeats
// (progress.go), the renewer and the watchdog; the election of the
// compaction leader runs beside them for the whole Run. Observe runs on
// its caller's goroutine (the engine's follow) and only queues.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

// Defaults of Options.
const (
	DefaultPrefix   = keyspace.DefaultPrefix
	DefaultLeaseTTL = 5 * time.Second
	DefaultShards   = keyspace.DefaultShards
	// MinLeaseTTL is etcd's smallest lease at its default timing (its
	// minimum TTL is 1.5 × the election timeout of 1 s, rounded up).
	MinLeaseTTL = 2 * time.Second
	// MaxShards bounds Options.Shards.
	MaxShards = keyspace.MaxShards
)

// Errors.
var (
	// ErrInvalid: Options have a bad field (the error names it).
	ErrInvalid = errors.New("cluster: invalid options")
	// ErrShardCount: the cluster's P/meta pins another number of shards
	// than Options.Shards.
	ErrShardCount = keyspace.ErrShardCount
)

// Options configure a Cluster. Client, ReplicaID, AdvertiseAddr and
// Release are required. The Cluster does not watch etcd itself: its view
// of the other replicas' member and shard keys is what Observe is handed
// (in probed, by the etcd store's Follow). Nor does it tell the engine
// which shards it owns: the engine's store follows that in the same
// stream (store/etcd Options.Shards, with Instance).
type Options struct {
	// Client talks to etcd; the caller closes it after Run returned.
	Client *clientv3.Client
	// Prefix of every key of the cluster; default "/probed/". A missing
	// trailing slash is added.
	Prefix string
	// ReplicaID names this replica: unique among the live replicas, no
	// "/" nor control characters, at most 128 bytes. A replica restarted
	// under the same ID joins once its previous lease is gone.
	ReplicaID string
	// AdvertiseAddr is how other replicas reach this one's gRPC API.
	AdvertiseAddr string
	// LeaseTTL of the member lease, a whole number of seconds (etcd's
	// unit), at least 2s; default 5s. It is renewed every LeaseTTL/3. A
	// replica that has not renewed it for LeaseTTL less a margin (a
	// tenth, at least 500 ms) stops probing, before etcd can expire it;
	// the others take its shards over once etcd expires it (or at once,
	// when the replica can still revoke it).
	LeaseTTL time.Duration
	// Shards is the number of shards, default 4096, at most 65536. The
	// first replica pins it in P/meta; Run refuses a different value
	// (ErrShardCount).
	Shards int
	// Settle: a member takes shards from others only after being a member
	// this long; default 2 × LeaseTTL.
	Settle time.Duration
	// Clock drives every timer of the package (not etcd's lease clock,
	// which is etcd's own); default the real clock.
	Clock  clockwork.Clock
	Logger *slog.Logger
	// Heartbeat proves that the replica makes progress (the engine passes
	// a one-shot timer through its timer wheel). It is called every
	// LeaseTTL/6 while the replica holds a lease, beside the renewals: a
	// renewal attempt is sent only while the latest call returned nil
	// within LeaseTTL/3, less than LeaseTTL/3 ago; a lost lease is rejoined
	// only after a call returned nil. It must return when its context
	// ends. nil: always progressing (tests and tools; probed passes one).
	Heartbeat func(ctx context.Context) error
	// Release is called with shards this replica stops owning (sorted),
	// to stop probing them: shards it is about to give up (a release to
	// the member that should own them, or a leave: their owner keys are
	// deleted once Release returned, so it returns once their probes
	// stopped and their writes are flushed; bounded by LeaseTTL, as a
	// crash would be), or every shard it held when its lease is lost (not
	// renewed for a TTL, expired, or its member key deleted). It is
	// called from Run's goroutine, never concurrently with itself. A shard
	// whose key the stream shows taken from this replica's lease behind
	// its back is not Release's: the engine sees that in its own stream
	// (store/etcd Options.Shards).
	Release func(ctx context.Context, shards []int) error
	// Keep, when set, is called with shards whose release stalled (their
	// keys could not be deleted) and that this replica is to own again
	// after all: their targets are probed again. From Run's goroutine.
	Keep func(shards []int)
	// Observed, when set, is the highest etcd revision the replica has
	// seen besides this package's keys (its view of the events): a
	// renewal answered at a lower revision (confirmed by a linearizable
	// read) means that etcd went back in time — restored from a backup —,
	// and the replica leaves and rejoins (Suspend, Release, then Resume,
	// whose caller reloads its view).
	Observed func() int64
	// Suspend, when set, is called as soon as the lease is known lost
	// (not renewed for LeaseTTL less the margin — etcd unreachable, or the
	// replica stuck —, expired, or the member key deleted), before Release,
	// from any of Run's goroutines: the replica's view of what the others
	// write may be stale from then on, so it stops vouching for it (stops
	// serving reads and watches, reports itself not serving).
	Suspend func(cause error)
	// Resume, when set, is called from Run's goroutine after each join
	// with the join's etcd revision, and again after LeaseTTL/3 until it
	// returns nil: the caller makes its view catch up with rev, then
	// serves again (ends a Suspend). rewound: the replica left because
	// etcd went back in time (see Observed): the caller reloads its view,
	// whose revisions may by now be reached again by other changes.
	Resume func(ctx context.Context, rev int64, rewound bool) error
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
	if err := keyspace.CheckReplicaID(o.ReplicaID); err != "" {
		bad("ReplicaID", "%s", err)
	}
	if o.AdvertiseAddr == "" {
		bad("AdvertiseAddr", "required (how other replicas reach this one)")
	}
	switch {
	case o.LeaseTTL == 0:
		o.LeaseTTL = DefaultLeaseTTL
	case o.LeaseTTL < MinLeaseTTL:
		bad("LeaseTTL", "%v is below etcd's minimum of %v", o.LeaseTTL, MinLeaseTTL)
	case o.LeaseTTL%time.Second != 0:
		bad("LeaseTTL", "%v is not a whole number of seconds (etcd's unit)", o.LeaseTTL)
	}
	switch {
	case o.Shards == 0:
		o.Shards = DefaultShards
	case o.Shards < 0 || o.Shards > MaxShards:
		bad("Shards", "%d is not between 1 and %d", o.Shards, MaxShards)
	}
	switch {
	case o.Settle == 0:
		o.Settle = 2 * o.LeaseTTL
	case o.Settle < 0:
		bad("Settle", "%v is negative", o.Settle)
	}
	if o.Release == nil {
		bad("Release", "required")
	}
	if o.Keep == nil {
		o.Keep = func([]int) {}
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return errors.Join(errs...)
}

// Member is a live replica.
type Member struct {
	ID   string
	Addr string // its advertised gRPC address
	// Joined is when it joined, by its own clock.
	Joined time.Time
	// Shards is the number of shards it owns.
	Shards int
}

// Stats are counters for metrics and the status page.
type Stats struct {
	Shards  int              // shards this replica owns now
	Members int              // live members
	Lease   clientv3.LeaseID // this replica's lease; 0 when not a member
	// Revision is the etcd revision of the member and shard keys the
	// replica has caught up with and acted on.
	Revision int64
	// Current is etcd's revision in the latest answer to a join or a
	// renewal (a revision the replica's view of etcd should reach).
	Current         int64
	Renewals        uint64 // lease renewals
	RenewalsSkipped uint64 // renewals not attempted: Heartbeat failed or was late
	RenewalErrors   uint64 // renewal attempts etcd did not answer (each is retried)
	LeaseLosses     uint64 // leases lost (not renewed for a TTL, or gone in etcd)
	Claims          uint64 // shards claimed
	Releases        uint64 // shards released gracefully
	Losses          uint64 // shards lost with the lease or a deleted key
	Leading         bool   // this replica compacts etcd's history (see Leading)
}

// Cluster is this replica's membership. Create it with New, then call
// Run; the accessors may be called at any time (before Run has joined,
// nothing is owned).
type Cluster struct {
	opts  Options
	keys  keyspace.Keys
	clock clockwork.Clock
	log   *slog.Logger
	ttl   time.Duration

	// stream queues what Observe is handed for Run's goroutine.
	stream *stream

	// instance names this process in its member key (Instance).
	instance string

	mu sync.RWMutex
	// view of the member and shard keys (the claims' and releases'
	// answers, and the stream): the assignment's, Owner's and Members'.
	// Written by Run's goroutine with mu held.
	view *view
	// lease is this replica's current lease, 0 when it has none (not
	// joined yet, or lost: set to 0 as soon as the loss is noticed).
	lease clientv3.LeaseID

	batch   atomic.Int32 // shards per claim or release transaction
	runOnce atomic.Bool
	leading atomic.Bool

	renewals, skipped, renewErrors, leaseLosses atomic.Uint64
	claims, releases, losses                    atomic.Uint64
	revision                                    atomic.Int64

	// current is the session of the latest join (LeaseValid); nil
	// before the first.
	current atomic.Pointer[session]
	// clusterID is etcd's cluster ID as first seen (sameHistory).
	clusterID atomic.Uint64
	// newest is the highest revision a renewal's answer carried
	// (sameHistory).
	newest atomic.Int64
	// rewound: the last session ended because etcd went back in time;
	// cleared once Resume succeeded.
	rewound atomic.Bool
}

// New checks opts and returns a Cluster; it does not talk to etcd (Run
// does).
func New(opts Options) (*Cluster, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	k := keyspace.New(opts.Prefix, opts.Shards)
	c := &Cluster{
		opts:     opts,
		keys:     k,
		clock:    opts.Clock,
		log:      opts.Logger.With("replica", opts.ReplicaID),
		ttl:      opts.LeaseTTL,
		instance: hex.EncodeToString(nonce[:]),
		view:     newView(k),
		stream:   newStream(),
	}
	c.batch.Store(batch)
	c.view.bad = func(id string, err error) {
		c.log.Warn("unreadable member key: the member counts, with no address", "member", id, "err", err)
	}
	return c, nil
}

// ShardCount is the number of shards targets are spread over.
func (c *Cluster) ShardCount() int { return c.opts.Shards }

// ShardOf is the shard of the named target: fnv-1a of the name modulo
// Options.Shards.
func (c *Cluster) ShardOf(name string) int {
	return c.keys.ShardOf(name)
}

// Instance names this process in its member key (random, new with each
// Cluster): the etcd store of the same process owns the shards held on
// the lease of the member key that names it (store/etcd Options.Instance).
func (c *Cluster) Instance() string { return c.instance }

// Owner is the replica that owns the named target's shard, from the
// watched keys (for forwarding API calls); false when the shard has no
// owner or its owner is not a known member. It may be this replica.
func (c *Cluster) Owner(name string) (Member, bool) {
	s := c.ShardOf(name)
	c.mu.RLock()
	defer c.mu.RUnlock()
	o := c.view.owners[s]
	if o.id == "" {
		return Member{}, false
	}
	m, ok := c.view.members[o.id]
	if !ok || m.lease != o.lease {
		return Member{}, false
	}
	return c.memberLocked(m), true
}

// OwnedSince is the etcd revision of the claim of the named target's
// shard by its owner in the view (Owner), 0 when the shard has no owner:
// the revision at which the owner's engine takes the shard's targets.
func (c *Cluster) OwnedSince(name string) int64 {
	s := c.ShardOf(name)
	c.mu.RLock()
	defer c.mu.RUnlock()
	if o := c.view.owners[s]; o.id != "" {
		return o.rev
	}
	return 0
}

// Members are the live replicas, sorted by ID.
func (c *Cluster) Members() []Member {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ms := make([]Member, 0, len(c.view.members))
	for _, m := range c.view.sorted() {
		ms = append(ms, c.memberLocked(m))
	}
	return ms
}

// memberLocked describes m; mu held.
func (c *Cluster) memberLocked(m *member) Member {
	return Member{ID: m.id, Addr: m.addr, Joined: m.joined, Shards: c.view.heldBy(m.lease)}
}

// Leading reports whether this replica is the one that compacts etcd's
// history: the winner of a concurrency.Election under P/leader/, which
// Run campaigns in for its whole life.
//
// The election runs on a concurrency.Session of its own, not on the
// member lease that fences writes: the Session's automatic keep-alive
// would renew the fenced lease without the Heartbeat, and a stuck replica
// would keep its shards — the failure fencing exists for. Compaction
// needs no fence (a second compactor is harmless: compacting a compacted
// revision is an error etcd reports and nothing more; a missing one only
// lets history grow for a while), and a replica that loses and rejoins
// its member lease does not make the leadership flap. So Leading may be
// true for a moment after this replica lost its member lease or the
// election's session expired; use it for compaction only.
func (c *Cluster) Leading() bool { return c.leading.Load() }

// Stats returns the counters.
func (c *Cluster) Stats() Stats {
	c.mu.RLock()
	st := Stats{Members: len(c.view.members), Lease: c.lease}
	if c.lease != 0 {
		st.Shards = c.view.heldBy(c.lease)
	}
	c.mu.RUnlock()
	st.Revision = c.revision.Load()
	st.Current = c.newest.Load()
	st.Renewals = c.renewals.Load()
	st.RenewalsSkipped = c.skipped.Load()
	st.RenewalErrors = c.renewErrors.Load()
	st.LeaseLosses = c.leaseLosses.Load()
	st.Claims = c.claims.Load()
	st.Releases = c.releases.Load()
	st.Losses = c.losses.Load()
	st.Leading = c.leading.Load()
	return st
}
