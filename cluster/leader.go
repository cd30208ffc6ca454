package cluster

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// The compaction leader; Leading says why it has a session of its own.

// lead campaigns for the whole Run, again after a lost session, and
// resigns (revokes its session) when ctx ends.
func (c *Cluster) lead(ctx context.Context) {
	backoff := c.ttl / 3
	for ctx.Err() == nil {
		err := c.leadOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("compaction leader election: retrying", "err", err, "in", backoff)
		if !c.sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, c.ttl)
	}
}

// leadOnce is one session of the election: it campaigns, then leads
// until the session or ctx ends.
func (c *Cluster) leadOnce(ctx context.Context) error {
	gctx, cancel := c.timeout(ctx, c.ttl)
	g, err := c.opts.Client.Grant(gctx, int64(c.ttl/time.Second))
	cancel()
	if err != nil {
		return err
	}
	// The session's context outlives ctx so that Close can revoke the
	// lease (at most a TTL), but not the client: a shutdown that closes
	// the client (etcd unreachable past the grace period) ends the revoke.
	sessCtx, stopSess := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSess()
	defer context.AfterFunc(c.opts.Client.Ctx(), stopSess)()
	sess, err := concurrency.NewSession(c.opts.Client,
		concurrency.WithLease(g.ID), concurrency.WithTTL(int(c.ttl/time.Second)),
		concurrency.WithContext(sessCtx))
	if err != nil {
		c.revoke(ctx, g.ID)
		return err
	}
	defer func() { _ = sess.Close() }()
	campaign, stop := context.WithCancel(sess.Ctx())
	defer stop()
	defer context.AfterFunc(ctx, stop)()
	e := concurrency.NewElection(sess, c.keys.Election())
	if err := e.Campaign(campaign, c.opts.ReplicaID); err != nil {
		return err
	}
	select {
	case <-sess.Done():
		return errors.New("election session ended while campaigning")
	default:
	}
	c.leading.Store(true)
	c.log.Info("leading: this replica compacts etcd's history")
	select {
	case <-ctx.Done():
	case <-sess.Done():
	}
	c.leading.Store(false)
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("election session ended: no longer leading")
}
