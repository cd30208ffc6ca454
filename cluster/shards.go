package cluster

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// batch is the number of shards one transaction claims or releases: a
// nested transaction per shard, one operation each. etcd's --max-txn-ops
// (default 128) bounds the operations of a transaction at the outer
// level, and what a nested one may hold by what is left: 127 at most. A
// cluster configured lower refuses a batch with ErrTooManyOps; the batch
// is halved then, for good.
const batch = 127

// perShard runs a transaction per batch of shards, each shard's
// operation (op) a nested transaction, and calls done, with mu held, for
// each shard with its outcome and the batch's revision. It stops at the
// first error.
func (c *Cluster) perShard(ctx context.Context, shards []int, op func(sh int) clientv3.Op, done func(sh int, ok bool, rev int64)) error {
	for len(shards) > 0 {
		n := min(len(shards), int(c.batch.Load()))
		ops := make([]clientv3.Op, n)
		for i, sh := range shards[:n] {
			ops[i] = op(sh)
		}
		resp, err := c.opts.Client.Txn(ctx).Then(ops...).Commit()
		if errors.Is(err, rpctypes.ErrTooManyOps) && n > 1 {
			c.batch.CompareAndSwap(int32(n), int32(n/2))
			continue
		}
		if err != nil {
			return err
		}
		c.mu.Lock()
		for i, r := range resp.Responses {
			done(shards[i], r.GetResponseTxn().GetSucceeded(), resp.Header.Revision)
		}
		c.mu.Unlock()
		shards = shards[n:]
	}
	return nil
}

// claim claims free shards on the session's lease: for each,
// If(CreateRevision(key) = 0) Then(Put(key, id, lease)), so that each
// batch has one revision and each shard its own outcome (a shard somebody
// else claimed first is simply not claimed). It returns the claimed
// shards, the revision of the last batch that claimed any, and the first
// error.
func (c *Cluster) claim(ctx context.Context, s *session, shards []int) (claimed []int, rev int64, err error) {
	err = c.perShard(ctx, shards, func(sh int) clientv3.Op {
		key := c.keys.Shard(sh)
		return clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(key, c.opts.ReplicaID, clientv3.WithLease(s.lease))},
			nil)
	}, func(sh int, ok bool, r int64) {
		if ok {
			c.view.setOwner(sh, owner{id: c.opts.ReplicaID, lease: s.lease, rev: r})
			claimed = append(claimed, sh)
			rev = r
		}
	})
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		c.fail(s, errLeaseExpired)
	}
	return claimed, rev, err
}

// release hands shards over: Release announces it to the engine, which
// stops their probes and flushes their writes (still fenced in: the keys
// are on the lease), then each owner key is deleted if it is still on the
// session's lease: If(LeaseValue(key) = lease) Then(Delete(key)). The
// flush precedes the delete's revision, so the next owner, which takes
// the shard at its claim's, starts from it. It returns the shards whose
// key could not be deleted (etcd failed): the engine keeps them released
// until a later release deletes them or Keep takes them back.
func (c *Cluster) release(s *session, shards []int) (stalled []int, err error) {
	lctx, cancel := c.timeout(s.ctx, c.ttl)
	if err := c.opts.Release(lctx, shards); err != nil {
		// The probes are stopped regardless (Release's contract); some
		// writes may not be flushed, and fencing refuses them from now.
		c.log.Warn("Release failed; releasing the shards anyway", "shards", len(shards), "err", err)
	}
	cancel()
	dctx, cancel := c.timeout(s.ctx, c.ttl)
	defer cancel()
	released, handled := 0, 0
	err = c.perShard(dctx, shards, func(sh int) clientv3.Op {
		key := c.keys.Shard(sh)
		return clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", s.lease)},
			[]clientv3.Op{clientv3.OpDelete(key)},
			nil)
	}, func(sh int, ok bool, rev int64) {
		handled++
		if ok {
			c.view.setOwner(sh, owner{rev: rev})
			released++
		}
		// Not ok: the key is no longer on this lease, lost. Either way
		// the engine's stream shows it leaving, which ends its release.
	})
	c.releases.Add(uint64(released))
	return shards[handled:], err
}
