// Package replica binds a replica's cluster membership (package cluster)
// to its engine: a release of shards is announced to the engine before
// their keys go, the loss of its lease releases everything, suspends the
// engine's view and its rejoin resumes it, and the lease is renewed only
// while the engine gets its work done. Which shards the engine probes is
// not the Binding's: the engine's etcd store follows the owner keys in its
// log (store/etcd Options.Shards). cmd/probed only wires a Binding
// between the cluster's options, the etcd store and the engine.
package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/probed/probed/cluster"
	"github.com/probed/probed/internal/keyspace"
)

// Engine is what membership asks of the replica's engine
// (*engine.Engine); its revisions are the etcd store's (keyspace.Position).
type Engine interface {
	// Sync waits until the view has caught up with revision rev.
	Sync(ctx context.Context, rev uint64) error
	// Release stops probing the targets of shards, once their runs ended
	// and their writes are durable; Keep ends a Release.
	Release(ctx context.Context, shards []int) error
	Keep(shards []int)
	// Stalled is an error when the engine's writes or its view do not
	// progress within bound (known: a revision the view should reach).
	Stalled(bound time.Duration, known uint64) error
	// Heartbeat returns once the scheduler has run a timer.
	Heartbeat(ctx context.Context) error
	// Revision is the revision the view has reached.
	Revision() uint64
	// Suspend and Resume stop and restart vouching for the view.
	Suspend(cause error)
	Resume()
	// Reload reloads the view from the store.
	Reload(ctx context.Context) error
}

// Follower is the store whose Follow feeds both the engine's view and the
// cluster's (*store/etcd.Store, with Options.Membership set to the
// Cluster's Observe): one etcd watch per replica.
type Follower interface {
	// RequestProgress asks for a progress notification on the watch, so
	// that the view reaches etcd's current revision although none of its
	// keys changed.
	RequestProgress(ctx context.Context) error
}

// Binding is one replica's membership bound to its engine. Make it with
// Bind, give Cluster's LeaseValid to the engine and its Instance, Leading
// and Observe to the store, then Run it with the engine.
type Binding struct {
	cl      *cluster.Cluster
	ttl     time.Duration
	log     *slog.Logger
	serving func(bool)
	// eng is set by Run before the cluster runs (and so before any of
	// the cluster's hooks is called).
	eng     Engine
	store   Follower
	running atomic.Bool
}

// Bind makes the replica's Cluster with opts, whose hooks (Heartbeat,
// Release, Keep, Observed, Suspend, Resume) it sets. serving, when not nil,
// is told false when the replica stops vouching for its view (its lease
// is lost) and true once it serves again; it is called from the
// cluster's goroutines.
func Bind(opts cluster.Options, serving func(bool)) (*Binding, error) {
	b := &Binding{ttl: opts.LeaseTTL, log: opts.Logger, serving: serving}
	if b.ttl == 0 {
		b.ttl = cluster.DefaultLeaseTTL
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.serving == nil {
		b.serving = func(bool) {}
	}
	opts.Heartbeat = b.heartbeat
	opts.Release = b.release
	opts.Keep = b.keep
	opts.Observed = b.observed
	opts.Suspend = b.suspend
	opts.Resume = b.resume
	cl, err := cluster.New(opts)
	if err != nil {
		return nil, err
	}
	b.cl = cl
	return b, nil
}

// Cluster is the replica's membership: LeaseValid for the engine,
// Instance, Leading and Observe for the store, Owner and Members for the
// server.
func (b *Binding) Cluster() *cluster.Cluster { return b.cl }

// Run runs the membership (cluster.Cluster.Run) with eng as the engine
// it drives, until ctx ends. eng must be running (engine.Engine.Run) over
// store: the hooks wait for its scheduler and its view.
func (b *Binding) Run(ctx context.Context, eng Engine, store Follower) error {
	if !b.running.CompareAndSwap(false, true) {
		return errors.New("replica: Run called twice")
	}
	b.eng, b.store = eng, store
	return b.cl.Run(ctx)
}

// heartbeat renews the lease only while the replica gets its work done:
// its scheduler runs, its writes go through and its view follows etcd,
// within a lease TTL.
//
// The view must reach, within the TTL, etcd's revision in the latest
// renewal's answer. The view and the cluster's keys come through one
// watch, so the revision the cluster has seen says nothing of the view's
// progress; etcd's does, once the watch is asked for a progress
// notification (an etcd shared with other clients moves its revision
// without any change the watch would deliver).
func (b *Binding) heartbeat(ctx context.Context) error {
	// The view's progress counts while the replica holds a lease: the
	// revision of an answer before a loss may belong to a history etcd no
	// longer has (a restore).
	var known uint64
	if b.cl.LeaseValid() {
		if cur := b.cl.Stats().Current; cur > 0 {
			known = keyspace.Position(cur)
			if keyspace.EtcdRevision(b.eng.Revision()) < cur {
				if err := b.store.RequestProgress(ctx); err != nil {
					b.log.Debug("cannot ask etcd for the watch's progress", "err", err)
				}
			}
		}
	}
	if err := b.eng.Stalled(b.ttl, known); err != nil {
		return err
	}
	return b.eng.Heartbeat(ctx)
}

// release stops probing the targets of shards: once it returns their
// probes have stopped and their writes are durable.
func (b *Binding) release(ctx context.Context, shards []int) error {
	return b.eng.Release(ctx, shards)
}

// keep probes the targets of shards again after a stalled release.
func (b *Binding) keep(shards []int) { b.eng.Keep(shards) }

// observed is the etcd revision the engine's view has reached.
func (b *Binding) observed() int64 {
	return keyspace.EtcdRevision(b.eng.Revision())
}

// suspend: a replica that lost its lease (etcd unreachable, or itself
// stuck) cannot vouch for its view: NOT_SERVING, reads and watches
// Unavailable until it rejoined and caught up.
func (b *Binding) suspend(cause error) {
	b.eng.Suspend(cause)
	b.serving(false)
}

// resume serves again once the view has caught up with the join's
// revision rev, reloading it first when etcd went back in time.
func (b *Binding) resume(ctx context.Context, rev int64, rewound bool) error {
	// The cluster saw etcd go back in time (restored from a backup): the
	// view followed a history etcd no longer has.
	if rewound {
		b.log.Error("etcd is not the one this replica's view followed (restored from a backup?): reloading the view", "revision", rev, "view", b.eng.Revision())
		if err := b.eng.Reload(ctx); err != nil {
			return err
		}
	}
	if err := b.eng.Sync(ctx, keyspace.Position(rev)); err != nil {
		return err
	}
	b.eng.Resume()
	b.serving(true)
	return nil
}
