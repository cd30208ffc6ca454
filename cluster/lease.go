package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine/timeout"
)

// Why a lease ends.
var (
	errNotRenewed   = errors.New("lease not renewed for a TTL")
	errLeaseExpired = errors.New("etcd: lease expired")
	errMemberGone   = errors.New("member key deleted")
	errSessionEnd   = errors.New("session ended")
	errRewound      = errors.New("etcd went back in time (restored from a backup?) or was replaced")
)

// session is one lease of this replica, from its join to its loss or
// its leave. Its context ends, with the cause, as soon as the lease is
// known lost (fail); its heartbeats, renewer and watchdog stop then, or when
// stop is called, and stop waits for them.
type session struct {
	lease  clientv3.LeaseID
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time // clock time of the grant request
	// renewed is the clock time of the last renewal etcd accepted, as its
	// offset from start: the time its request was sent, which is no later
	// than etcd's own renewal, so the lease lives at least a TTL from it.
	renewed atomic.Int64
	// suspended: Options.Suspend was called for this session's loss.
	suspended atomic.Bool
	progress  *progress
	wg        sync.WaitGroup
}

// deadline is when the lease counts as lost unless renewed again: a TTL
// after the last renewal was sent, less a margin, so that this replica
// stops probing before etcd may expire the lease even when the process is
// scheduled late.
func (s *session) deadline(ttl time.Duration) time.Time {
	return s.start.Add(time.Duration(s.renewed.Load()) + ttl - margin(ttl))
}

// LeaseValid reports whether this replica holds a lease that is valid by
// its local deadline (the watchdog's: a TTL less the margin after the
// last renewal was sent, on the monotonic clock), whether or not the
// watchdog has run yet. A process that wakes from a pause (SIGSTOP, a
// long GC) past the deadline sees false at once, before it probes
// (engine.Options.MayProbe), although the watchdog's timer and the timer
// wheel's fire together.
func (c *Cluster) LeaseValid() bool {
	s := c.current.Load()
	return s != nil && s.ctx.Err() == nil && c.clock.Now().Before(s.deadline(c.ttl))
}

// margin is how long before etcd may expire a lease the replica counts it
// lost: a tenth of the TTL, at least 500 ms. Renewals come every TTL/3,
// so two of them still fail before the replica gives up.
func margin(ttl time.Duration) time.Duration {
	return max(ttl/10, 500*time.Millisecond)
}

// fail ends the session because its lease is lost (the first cause
// counts). Run's goroutine calls Release when it notices.
func (c *Cluster) fail(s *session, cause error) {
	c.mu.Lock()
	if c.lease == s.lease {
		c.lease = 0
	}
	c.mu.Unlock()
	s.cancel(cause)
	if !errors.Is(cause, errSessionEnd) && c.opts.Suspend != nil && s.suspended.CompareAndSwap(false, true) {
		c.opts.Suspend(cause)
	}
}

// stop ends the session's goroutines and waits for them.
func (s *session) stop() {
	s.cancel(errSessionEnd)
	s.wg.Wait()
}

// renew renews the session's lease every TTL/3, while the replica makes
// progress (progressing: the heartbeats, which run beside it), until the
// session ends. A lease etcd no longer knows fails the session; one it
// does not answer about is the watchdog's business.
func (c *Cluster) renew(s *session) {
	t := c.clock.NewTicker(c.ttl / 3)
	defer t.Stop()
	stuck := false
	var failed uint64 // the last failed heartbeat progressing returned
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.Chan():
		}
		sent, resp, attempts, err := c.renewOnce(s, &failed)
		var noProgress errNoProgress
		switch {
		case errors.As(err, &noProgress):
			c.skipped.Add(1)
			if !stuck && s.ctx.Err() == nil {
				c.log.Warn("heartbeat failed; not renewing the lease", "err", noProgress.error)
			}
			stuck = true
			continue
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			c.fail(s, errLeaseExpired)
			return
		case err != nil:
			continue // the session ended
		}
		if stuck {
			c.log.Info("heartbeat succeeded again; renewing the lease")
			stuck = false
		}
		c.renewals.Add(1)
		s.renewed.Store(int64(sent))
		if attempts > 1 {
			c.log.Info("lease renewed after retries", "attempts", attempts)
		}
		if err := c.sameHistory(s.ctx, resp.ResponseHeader); err != nil {
			c.log.Error("etcd's history is not the one this replica followed: leaving and rejoining to reload it", "err", err)
			c.rewound.Store(true)
			c.fail(s, err)
			return
		}
	}
}

// errNoProgress is a heartbeat's error that stopped a renewal.
type errNoProgress struct{ error }

// renewOnce renews the lease once: attempts of renewAttempt each, the
// next sent soon after one fails (the etcd client balances them over the
// members: one that does not answer, a paused etcd leader, costs an
// attempt, not the renewal), until etcd answers or the session ends (the
// watchdog's deadline). Each attempt is sent only while the replica makes
// progress (progressing: an errNoProgress ends the renewal), which the
// heartbeats running beside it tell without delaying the attempt. It
// returns when the last attempt was sent (as an offset from the
// session's start), how many were sent, and etcd's answer or the error
// that ended the renewal.
func (c *Cluster) renewOnce(s *session, failed *uint64) (sent time.Duration, resp *clientv3.LeaseKeepAliveResponse, attempts int, err error) {
	attempt := renewAttempt(c.ttl)
	for {
		if err := c.progressing(s, failed); err != nil {
			if s.ctx.Err() != nil {
				return sent, nil, attempts, err
			}
			return sent, nil, attempts, errNoProgress{err}
		}
		sent = c.clock.Since(s.start)
		attempts++
		ctx, cancel := c.timeout(s.ctx, attempt)
		resp, err = c.opts.Client.KeepAliveOnce(ctx, s.lease)
		cancel()
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) || s.ctx.Err() != nil {
			return sent, resp, attempts, err
		}
		c.renewErrors.Add(1)
		if attempts == 1 {
			c.log.Warn("lease renewal failed; retrying", "err", err)
		}
		// A member that fails at once is not asked in a loop.
		t := c.clock.NewTimer(attempt / 5)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return sent, nil, attempts, err
		case <-t.Chan():
		}
	}
}

// renewAttempt is how long one renewal attempt waits for etcd's answer:
// an eighth of the TTL, at least 100 ms, so that a renewal sent to a
// member that does not answer is sent again well within TTL/3.
func renewAttempt(ttl time.Duration) time.Duration {
	return max(ttl/8, 100*time.Millisecond)
}

// sameHistory checks an answer's header against what this replica saw
// of etcd: the same cluster ID, and a revision not below the view's nor
// below any renewal's answer before. A
// restored etcd (a backup: its revision went back, its later writes are
// gone) would otherwise leave every view frozen, waiting for revisions
// that will carry other changes. A follower may answer a little behind
// the member the view's watch reads from: a lower revision is checked
// with a linearizable read before it counts.
func (c *Cluster) sameHistory(ctx context.Context, h *etcdserverpb.ResponseHeader) error {
	if h == nil {
		return nil
	}
	if !c.clusterID.CompareAndSwap(0, h.ClusterId) {
		if id := c.clusterID.Load(); id != h.ClusterId {
			return fmt.Errorf("%w: its cluster ID is %x, it was %x", errRewound, h.ClusterId, id)
		}
	}
	seen := c.seen()
	if h.Revision >= seen {
		c.newest.Store(h.Revision)
		return nil
	}
	gctx, cancel := c.timeout(ctx, c.ttl/3)
	defer cancel()
	resp, err := c.opts.Client.Get(gctx, c.keys.Meta())
	if err != nil || resp.Header.Revision >= seen {
		return nil // no verdict, or a follower behind
	}
	return fmt.Errorf("%w: etcd is at revision %d, this replica saw %d", errRewound, resp.Header.Revision, seen)
}

// seen is the highest etcd revision this replica has seen: its view of
// the member and shard keys, renewals' and joins' answers, and
// Options.Observed.
func (c *Cluster) seen() int64 {
	seen := max(c.revision.Load(), c.newest.Load())
	if c.opts.Observed != nil {
		seen = max(seen, c.opts.Observed())
	}
	return seen
}

// heartbeat calls Options.Heartbeat and reports an error unless it
// returned nil within TTL/3.
func (c *Cluster) heartbeat(ctx context.Context) error {
	if c.opts.Heartbeat == nil {
		return nil
	}
	start := c.clock.Now()
	hctx, cancel := c.timeout(ctx, c.ttl/3)
	defer cancel()
	if err := c.opts.Heartbeat(hctx); err != nil {
		return err
	}
	if took := c.clock.Since(start); took > c.ttl/3 {
		return fmt.Errorf("heartbeat took %v, more than LeaseTTL/3 (%v)", took, c.ttl/3)
	}
	return nil
}

// watchdog fails the session when its lease has not been renewed for
// about a TTL (see deadline: a stuck heartbeat, or etcd unreachable), by
// the local clock, whatever the renewer is doing. The lease lives at
// least a TTL in etcd, so the replica stops probing before anybody else
// can take its shards.
func (c *Cluster) watchdog(s *session) {
	for {
		t := c.clock.NewTimer(c.clock.Until(s.deadline(c.ttl)))
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		}
		if !c.clock.Now().Before(s.deadline(c.ttl)) {
			c.fail(s, errNotRenewed)
			return
		}
	}
}

// timeout is ctx, cancelled after d on the injected clock, with no
// Deadline (see engine/timeout).
//
// It also ends when the etcd client closes: the etcd client's retries of
// a request do not end with its Close (a Revoke went on for seconds), and
// a shutdown whose grace period passed closes the client to end them.
func (c *Cluster) timeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := timeout.With(ctx, c.clock, d)
	stop := context.AfterFunc(c.opts.Client.Ctx(), cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}
