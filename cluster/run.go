package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

// errMemberTaken: the replica ID's member key is on another lease.
var errMemberTaken = errors.New("replica ID in use by another lease")

// permanent marks an error Run does not retry.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Run is this replica's membership until ctx ends: it pins the shard
// count (an error if the cluster's differs), joins with a lease, keeps it
// (renewed only after a successful Heartbeat), follows the member and
// shard keys, claims and releases shards as the assignment says (a
// release calls Release before it deletes the keys), and after losing
// its lease stops probing at once (Release of every shard it held) and
// rejoins with a new one (once a heartbeat succeeds). When ctx ends it
// leaves: its member key goes first (so that the others stop counting
// it), then every shard is released gracefully (Release, then the key is
// deleted), then the lease is revoked. It returns nil then, having waited
// for every goroutine it started. Errors of etcd are logged and retried;
// Run returns an error only for a different shard count, an unreadable
// P/meta, or a closed client.
func (c *Cluster) Run(ctx context.Context) error {
	if !c.runOnce.CompareAndSwap(false, true) {
		return errors.New("cluster: Run called twice")
	}
	if err := c.retry(ctx, "pin the shard count", c.pinShards); err != nil {
		return err
	}
	leadCtx, stopLead := context.WithCancel(ctx)
	leadDone := make(chan struct{})
	go func() {
		defer close(leadDone)
		c.lead(leadCtx)
	}()
	defer func() {
		stopLead()
		<-leadDone
	}()

	backoff := c.ttl / 3
	for {
		s, err := c.join(ctx)
		if err == nil {
			backoff = c.ttl / 3
			err = c.serve(ctx, s)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, new(permanent)):
			return err
		case s != nil:
			continue // lost: rejoin at once (join waits for a heartbeat)
		}
		c.log.Warn("cannot join the cluster; retrying", "err", err, "in", backoff)
		if !c.sleep(ctx, backoff) {
			return nil
		}
		backoff = min(2*backoff, c.ttl)
	}
}

// retry calls f until it succeeds, fails permanently (ErrShardCount and
// other permanent errors) or ctx ends.
func (c *Cluster) retry(ctx context.Context, what string, f func(context.Context) error) error {
	backoff := c.ttl / 3
	for {
		fctx, cancel := c.timeout(ctx, c.ttl)
		err := f(fctx)
		cancel()
		if err == nil || errors.As(err, new(permanent)) {
			return err
		}
		if c.opts.Client.Ctx().Err() != nil {
			return fmt.Errorf("cluster: %s: etcd client closed: %w", what, err)
		}
		c.log.Warn("etcd request failed; retrying", "op", what, "err", err, "in", backoff)
		if !c.sleep(ctx, backoff) {
			return nil
		}
		backoff = min(2*backoff, c.ttl)
	}
}

// sleep waits d on the clock; false if ctx ended first.
func (c *Cluster) sleep(ctx context.Context, d time.Duration) bool {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}

// join grants a lease (after a heartbeat: a stuck replica does not join),
// creates the member key on it and loads the view, in one transaction,
// and starts the lease's heartbeats, renewer and watchdog.
func (c *Cluster) join(ctx context.Context) (*session, error) {
	if c.opts.Client.Ctx().Err() != nil {
		return nil, permanent{errors.New("cluster: etcd client closed")}
	}
	if err := c.heartbeat(ctx); err != nil {
		c.skipped.Add(1)
		return nil, fmt.Errorf("heartbeat failed: %w", err)
	}
	start := c.clock.Now()
	// A join is a write: its revision is above every one etcd had
	// before it, unless etcd went back in time (restored from a backup).
	seen := c.seen()
	gctx, cancel := c.timeout(ctx, c.ttl)
	defer cancel()
	g, err := c.opts.Client.Grant(gctx, int64(c.ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("grant a lease: %w", err)
	}
	key := c.keys.Member(c.opts.ReplicaID)
	val := keyspace.Member{Addr: c.opts.AdvertiseAddr, Joined: c.clock.Now(), Instance: c.instance}.Encode()
	from, end := c.keys.Membership()
	resp, err := c.opts.Client.Txn(gctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val, clientv3.WithLease(g.ID)), clientv3.OpGet(from, clientv3.WithRange(end))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err == nil && !resp.Succeeded {
		err = errMemberTaken
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			err = fmt.Errorf("%w: %s is on lease %x (a previous run of this replica, until it expires, or another replica with the same ID)", errMemberTaken, key, kvs[0].Lease)
		}
	}
	if err != nil {
		c.revoke(ctx, g.ID)
		return nil, err
	}
	if rev := resp.Header.Revision; rev <= seen {
		c.log.Error("etcd's history is not the one this replica followed: reloading it", "err",
			fmt.Errorf("%w: a join at revision %d, this replica saw %d", errRewound, rev, seen))
		c.rewound.Store(true)
	}
	c.newest.Store(resp.Header.Revision)
	s := &session{lease: g.ID, start: start, progress: newProgress(start)}
	s.ctx, s.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	rev := resp.Header.Revision
	c.mu.Lock()
	c.view.load(resp.Responses[1].GetResponseRange().Kvs, rev, 0)
	c.lease = s.lease
	members := len(c.view.members)
	c.mu.Unlock()
	c.revision.Store(rev)
	c.current.Store(s)
	s.wg.Go(func() { c.beat(s) })
	s.wg.Go(func() { c.renew(s) })
	s.wg.Go(func() { c.watchdog(s) })
	c.log.Info("joined the cluster", "lease", int64(s.lease), "ttl", c.ttl, "members", members, "revision", rev)
	return s, nil
}

// revoke revokes lease, best effort (bounded by a TTL): its keys go at
// once rather than when it expires.
func (c *Cluster) revoke(ctx context.Context, lease clientv3.LeaseID) {
	rctx, cancel := c.timeout(context.WithoutCancel(ctx), c.ttl)
	defer cancel()
	if _, err := c.opts.Client.Revoke(rctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		c.log.Warn("cannot revoke the lease; it expires by itself", "lease", int64(lease), "err", err)
	}
}

// loop is the state of Run's goroutine during one session.
type loop struct {
	c   *Cluster
	s   *session
	run context.Context // Run's
	// work is cancelled when the lease is lost or Run's ctx ends: the
	// context of Resume and of claims.
	work context.Context

	// reloadAt: the view's keys could not be reloaded after a gap in
	// the stream; try again then (zero: no reload pending).
	reloadAt time.Time

	// gone are shards the view saw deleted in the change that also
	// deleted the member key: lost() passes them to Release with the rest.
	gone []int

	// stalled are the shards whose release stalled: Released, but their
	// keys could not be deleted (etcd failed). The next plan releases
	// them again or, when they are to stay, Keeps them.
	stalled map[int]bool

	// resumeRev is the join's revision while Options.Resume has not
	// succeeded for this session (0: it has).
	resumeRev int64

	retryAt   time.Time // no claim or release before (etcd failed)
	refusedAt int64     // the view's revision when a claim found shards taken

	wake  chan struct{}
	timer clockwork.Timer
}

// serve runs the session until its lease is lost (an error) or ctx ends
// (nil, after leaving).
func (c *Cluster) serve(ctx context.Context, s *session) error {
	defer s.stop()
	work, cancelWork := context.WithCancel(s.ctx)
	defer cancelWork()
	defer context.AfterFunc(ctx, cancelWork)()
	l := &loop{c: c, s: s, run: ctx, work: work, wake: make(chan struct{}, 1), resumeRev: c.revision.Load(), stalled: make(map[int]bool)}
	defer func() {
		if l.timer != nil {
			l.timer.Stop()
		}
	}()
	for {
		if s.ctx.Err() != nil {
			return l.lost()
		}
		if ctx.Err() != nil {
			return l.leave()
		}
		if c.opts.Client.Ctx().Err() != nil {
			return permanent{errors.New("cluster: etcd client closed")}
		}
		l.arm(l.reconcile())
		select {
		case <-ctx.Done():
		case <-s.ctx.Done():
		case <-l.wake:
		case <-c.stream.wake:
		}
		l.follow()
	}
}

// arm wakes the loop at t (if not zero).
func (l *loop) arm(t time.Time) {
	for _, at := range []time.Time{l.reloadAt, l.retryAt} {
		if !at.IsZero() && l.c.clock.Now().Before(at) && (t.IsZero() || at.Before(t)) {
			t = at
		}
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if t.IsZero() {
		return
	}
	l.timer = l.c.clock.AfterFunc(l.c.clock.Until(t), func() {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	})
}

// reconcile acts on the assignment: claims the free shards this replica
// should own (its engine takes their targets when the claims arrive in
// its stream), releases those another should own. It returns when the
// assignment may change by itself (a member settles).
func (l *loop) reconcile() time.Time {
	c, s := l.c, l.s
	now := c.clock.Now()
	p := c.view.assign(c.opts.ReplicaID, s.lease, now, c.opts.Settle)
	defer c.revision.Store(c.view.rev)
	if now.Before(l.retryAt) {
		return p.wake
	}
	l.retryAt = time.Time{}
	if l.resumeRev > 0 && c.opts.Resume != nil && l.work.Err() == nil {
		rctx, cancel := c.timeout(l.work, c.ttl)
		err := c.opts.Resume(rctx, l.resumeRev, c.rewound.Load())
		cancel()
		if err != nil {
			if l.work.Err() == nil {
				c.log.Warn("Resume failed; retrying", "revision", l.resumeRev, "err", err)
				l.retryAt = now.Add(c.ttl / 3)
			}
			return p.wake
		}
		l.resumeRev = 0
		c.rewound.Store(false)
	}
	l.keep(p)
	if len(p.claim) > 0 && c.view.rev != l.refusedAt {
		claimed, rev, err := c.claim(l.work, s, p.claim)
		if err == nil && len(claimed) < len(p.claim) {
			// Some were claimed by others meanwhile: the watch is about
			// to tell; claim again once it has.
			l.refusedAt = c.view.rev
		}
		if len(claimed) > 0 {
			c.claims.Add(uint64(len(claimed)))
			c.log.Debug("claimed shards", "shards", len(claimed), "revision", rev)
		}
		if err != nil && l.work.Err() == nil {
			c.log.Warn("cannot claim shards; retrying", "shards", len(p.claim), "claimed", len(claimed), "err", err)
			l.retryAt = now.Add(c.ttl / 3)
		}
	}
	// A shard is released once the stream has brought its claim: the
	// engine then owns it, and its release ends when the stream brings
	// the delete. (The claim's answer may come first: the stream, which
	// wakes the loop, brings the claim soon.)
	release := l.streamed(p.release)
	if len(release) > 0 && l.run.Err() == nil && s.ctx.Err() == nil {
		stalled, err := c.release(s, release)
		for _, sh := range release {
			delete(l.stalled, sh)
		}
		for _, sh := range stalled {
			l.stalled[sh] = true
		}
		if n := len(release) - len(stalled); n > 0 {
			c.log.Info("released shards", "shards", n, "to", p.releaseTo, "owned", c.Stats().Shards)
		}
		if err != nil && s.ctx.Err() == nil {
			c.log.Warn("cannot release shards; retrying", "shards", len(stalled), "err", err)
			l.retryAt = now.Add(c.ttl / 3)
		}
	}
	return p.wake
}

// streamed returns those of shards whose claim the stream has brought
// (the view's key is at or below its streamed revision), in order.
func (l *loop) streamed(shards []int) []int {
	c := l.c
	var out []int
	for _, sh := range shards {
		if c.view.owners[sh].rev <= c.view.rev {
			out = append(out, sh)
		}
	}
	return out
}

// awaitStreamed waits, at most a TTL, until the stream has brought the
// claims of shards (it applies the stream meanwhile, as the loop does).
func (l *loop) awaitStreamed(shards []int) {
	c := l.c
	t := c.clock.NewTimer(c.ttl)
	defer t.Stop()
	for len(l.streamed(shards)) < len(shards) {
		select {
		case <-c.stream.wake:
			l.follow()
		case <-t.Chan():
			return
		case <-l.s.ctx.Done():
			return
		}
	}
}

// keep takes back shards whose release stalled (their keys could not be
// deleted) and that this replica should own after all: Keep.
func (l *loop) keep(p plan) {
	var kept []int
	for _, sh := range p.keep {
		if l.stalled[sh] {
			delete(l.stalled, sh)
			kept = append(kept, sh)
		}
	}
	if len(kept) > 0 {
		l.c.opts.Keep(kept)
	}
}

// follow applies what the stream brought (Observe): each revision after
// the view's, in order. A revision whose predecessor in the stream is
// above the view's (the store's follow restarted later: the engine
// reloaded its view, or the queue overflowed) reloads the member and
// shard keys from etcd first, as a revision etcd compacted did for the
// cluster's own watch before.
func (l *loop) follow() {
	c := l.c
	if !l.reloadAt.IsZero() && c.clock.Now().Before(l.reloadAt) {
		return
	}
	entries := c.stream.take()
	if len(entries) == 0 {
		return
	}
	var lost []int
	defer func() { l.afterChange(lost) }()
	for i, o := range entries {
		c.mu.Lock()
		rev := c.view.rev
		c.mu.Unlock()
		if o.rev <= rev {
			continue
		}
		if o.after > rev {
			reloaded, ok := l.reload()
			if !ok {
				c.stream.putBack(entries[i:])
				return
			}
			lost = append(lost, reloaded...)
		}
		c.mu.Lock()
		for _, ev := range o.events {
			if ev.Kv.ModRevision <= c.view.rev {
				continue // in the view already (loaded at or after it)
			}
			if sh := c.view.apply(ev, l.s.lease); sh >= 0 {
				lost = append(lost, sh)
			}
		}
		c.view.rev = max(c.view.rev, o.rev)
		c.mu.Unlock()
	}
}

// reload replaces the view with etcd's member and shard keys; false
// (retried after TTL/3) when etcd did not answer.
func (l *loop) reload() (lost []int, ok bool) {
	c := l.c
	from, end := c.keys.Membership()
	gctx, cancel := c.timeout(l.s.ctx, c.ttl)
	resp, err := c.opts.Client.Get(gctx, from, clientv3.WithRange(end))
	cancel()
	if err != nil {
		c.log.Warn("cannot reload the member and shard keys; retrying", "err", err)
		l.reloadAt = c.clock.Now().Add(c.ttl / 3)
		return nil, false
	}
	l.reloadAt = time.Time{}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log.Info("reloaded the member and shard keys: the store's follow skipped revisions", "from", c.view.rev, "to", resp.Header.Revision)
	return c.view.load(resp.Kvs, resp.Header.Revision, l.s.lease), true
}

// afterChange handles what a change of the view took from this replica:
// its member key (the lease is then considered lost) or some shards
// (counted).
func (l *loop) afterChange(lost []int) {
	c := l.c
	c.mu.RLock()
	m, ok := c.view.members[c.opts.ReplicaID]
	c.mu.RUnlock()
	if !ok || m.lease != l.s.lease {
		l.gone = append(l.gone, lost...)
		c.fail(l.s, errMemberGone)
		return // lost() calls Lose
	}
	if len(lost) == 0 {
		return
	}
	// Their targets were dropped when the engine's stream brought the
	// change (the store follows the same keys).
	c.losses.Add(uint64(len(lost)))
}

// lost ends a session whose lease is lost: Release of every shard it
// held, then the lease is revoked, in case etcd still has it, so that the
// others take the shards now rather than at its expiry.
func (l *loop) lost() error {
	c, s := l.c, l.s
	cause := context.Cause(s.ctx)
	held := append(l.forget(), l.gone...)
	slices.Sort(held)
	held = slices.Compact(held)
	c.leaseLosses.Add(1)
	c.log.Warn("lease lost: this replica stops probing its shards", "lease", int64(s.lease), "cause", cause, "shards", len(held))
	if len(held) > 0 {
		c.losses.Add(uint64(len(held)))
		ctx, cancel := c.timeout(context.WithoutCancel(s.ctx), c.ttl)
		if err := c.opts.Release(ctx, held); err != nil {
			c.log.Warn("Release failed", "shards", len(held), "err", err)
		}
		cancel()
	}
	c.revoke(s.ctx, s.lease)
	return fmt.Errorf("cluster: %w", cause)
}

// leave ends the session because Run's ctx ended: the member key goes
// first, then every shard is released (Release, then the key is deleted),
// then the lease is revoked. The renewer keeps the lease meanwhile.
func (l *loop) leave() error {
	c, s := l.c, l.s
	c.mu.RLock()
	held := c.view.shardsOf(s.lease)
	c.mu.RUnlock()
	// Released once the engine has them: their claims streamed (while
	// the member key is still there, which the stream must not see go
	// first).
	l.awaitStreamed(held)
	key := c.keys.Member(c.opts.ReplicaID)
	ctx, cancel := c.timeout(s.ctx, c.ttl)
	_, err := c.opts.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", s.lease)).
		Then(clientv3.OpDelete(key)).
		Commit()
	cancel()
	if err != nil {
		c.log.Warn("cannot delete the member key", "err", err)
	}
	var stalled []int
	if len(held) > 0 {
		stalled, err = c.release(s, held)
		if err != nil {
			c.log.Warn("cannot release shards; they are freed when the lease is revoked or expires", "shards", len(stalled), "err", err)
		}
	}
	c.revoke(s.ctx, s.lease)
	l.forget()
	c.fail(s, errSessionEnd)
	c.log.Info("left the cluster", "released", len(held)-len(stalled))
	return nil
}

// forget drops the session's lease and empties the view, which nothing
// keeps current until the next session reloads it (so Owner and Members
// do not answer from stale keys), and returns the shards it held.
func (l *loop) forget() []int {
	c, s := l.c, l.s
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease == s.lease {
		c.lease = 0
	}
	held := c.view.shardsOf(s.lease)
	c.view.load(nil, c.view.rev, 0)
	return held
}
