package cluster

import (
	"context"
	"sync"
	"time"
)

// progress is what a session's heartbeats found, kept up to date by
// their own goroutine (beat) beside the renewals: a renewal, and each of
// its retries, asks it (progressing) rather than running a heartbeat
// itself, so a renewal retried while etcd elects a leader never waits
// for a fresh heartbeat while the lease's deadline runs out (issue 22,
// item 8), and a replica that makes no progress still stops renewing
// (item 6).
type progress struct {
	mu sync.Mutex
	// ok is the clock time the last successful heartbeat returned, seq
	// the number of heartbeats that returned, failed the number of the
	// last one that failed (0: none) and err its error.
	ok     time.Time
	seq    uint64
	failed uint64
	err    error
	// done is closed, and replaced, when the next heartbeat returns.
	done chan struct{}
	// kick asks beat for a heartbeat at once (buffered: one pending).
	kick chan struct{}
}

// newProgress starts with the heartbeat that allowed the join (number
// 1), which returned at ok.
func newProgress(ok time.Time) *progress {
	return &progress{ok: ok, seq: 1, done: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// record stores a heartbeat's result, returned at now, and wakes those
// waiting for it.
func (p *progress) record(now time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	if err == nil {
		p.ok = now
	} else {
		p.failed, p.err = p.seq, err
	}
	close(p.done)
	p.done = make(chan struct{})
}

// heartbeatEvery is how often a session runs a heartbeat: a sixth of the
// TTL from the start of one to the start of the next (at once when one
// took longer), so that the last successful one returned less than TTL/3
// ago whenever heartbeats take less than TTL/3, as they must.
func heartbeatEvery(ttl time.Duration) time.Duration {
	return ttl / 6
}

// beat runs the session's heartbeats until it ends: one every
// heartbeatEvery, or at once when progressing asks for one.
func (c *Cluster) beat(s *session) {
	next := c.clock.Now() // the join's heartbeat
	for {
		t := c.clock.NewTimer(c.clock.Until(next.Add(heartbeatEvery(c.ttl))))
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		case <-s.progress.kick:
			t.Stop()
		}
		next = c.clock.Now()
		err := c.heartbeat(s.ctx)
		if s.ctx.Err() != nil {
			return
		}
		// Whoever asked for a heartbeat before this one returned is
		// answered by it.
		select {
		case <-s.progress.kick:
		default:
		}
		s.progress.record(c.clock.Now(), err)
	}
}

// progressing returns nil if the replica makes progress: the latest
// heartbeat succeeded, less than TTL/3 ago, and none failed since the
// caller last asked (*failed is the number of the last failed heartbeat
// it was told about). When the last success is older it asks for a
// heartbeat and waits for its result. So each failed heartbeat stops one
// renewal, even when the next one, run before the renewal asked,
// succeeded. It returns the session's cause when the session ends first.
func (c *Cluster) progressing(s *session, failed *uint64) error {
	p := s.progress
	for {
		p.mu.Lock()
		ok, seq, lastFailed, err, done := p.ok, p.seq, p.failed, p.err, p.done
		p.mu.Unlock()
		switch {
		case lastFailed > *failed:
			*failed = lastFailed
			return err
		case lastFailed != seq && c.clock.Since(ok) < c.ttl/3:
			return nil
		}
		select {
		case p.kick <- struct{}{}:
		default:
		}
		select {
		case <-s.ctx.Done():
			return context.Cause(s.ctx)
		case <-done:
		}
	}
}
