package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/internal/keyspace"
)

// Commit writes the changes in one etcd transaction, all or none, and
// records each change's revision (etcd's revision of the transaction <<
// 10 | the change's index) with Change.SetRevision.
//
// The transaction compares: for a Create, that the target's spec key does
// not exist (and, with Change.Apply, that the apply's lock is on its
// lease: journal.go); with Options.Fence, for every other change, that
// its shard's key is on this replica's lease; that the writer key it
// holds (P/writers/<id>, or P/writers/<id>/<k> while other Commits are in
// flight) is as this store last wrote it; and, when it creates or removes
// targets, that the counts it updates are as this store last saw them
// (usage.go: a create that would pass a limit is refused before sending,
// a reason wrapping engine.ErrResourceExhausted). Then it puts each target's spec
// (SpecChanged) and status, or deletes both (Delete), puts the batch in
// P/events, and puts its own value in that writer key. Up to
// MaxCommitsInFlight Commits may run at once (CommitsInFlight); etcd
// applies them in an order of its own, so the caller gives concurrent
// Commits no target in common. A refused compare writes nothing: the
// error is an *engine.ConflictError naming each refused target with a
// reason wrapping engine.ErrAlreadyExists or engine.ErrOwnershipLost. A
// target whose Fence says this replica does not own it is refused so
// without a round trip, and so is a batch larger than etcd takes (a
// reason wrapping engine.ErrResourceExhausted: see BatchLimits).
//
// Transient etcd failures are retried with backoff until ctx ends or the
// store closes (the error is then ctx's or ErrClosed, and whether the
// transaction was applied is unknown); a retry finds out whether a previous attempt was applied, so
// a transaction is never applied twice. A change with no name, or without
// a Target (and its Spec) when it is not a delete, fails the Commit before
// anything is sent.
func (s *Store) Commit(ctx context.Context, changes []*engine.Change) error {
	if err := s.usable(); err != nil {
		return err
	}
	if len(changes) == 0 {
		return nil
	}
	if len(changes) > MaxBatch {
		return fmt.Errorf("etcd store: commit: %d changes, more than the %d one transaction may carry", len(changes), MaxBatch)
	}
	for i, c := range changes {
		if err := c.Check(); err != nil {
			return fmt.Errorf("etcd store: commit: change %d: %w", i, err)
		}
	}
	p, refused, err := s.plan(changes)
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		return &engine.ConflictError{Refused: refused}
	}
	// p.ops and p.checks, P/writers/<id>'s put and compare, and the
	// counts' puts and compares.
	ops, cmps := len(p.ops)+1, len(p.checks)+1
	if p.counts != nil {
		ops, cmps = ops+len(p.counts.keys), cmps+len(p.counts.keys)
	}
	if ops > etcdMaxTxnOps || cmps > etcdMaxTxnOps {
		return p.refuseAll(fmt.Sprintf("%d operations and %d compares, more than etcd's --max-txn-ops (default %d) allows",
			ops, cmps, etcdMaxTxnOps))
	}

	ctx, cancel := s.bind(ctx) // Close ends the retries too
	defer cancel()
	w, err := s.writers.take(ctx)
	if err != nil {
		return fmt.Errorf("etcd store: commit: %w", s.done(ctx))
	}
	defer s.writers.give(w)
	if p.counts != nil {
		// One counting Commit at a time: two would compare the same
		// counts and refuse each other.
		s.usage.mu.Lock()
		defer s.usage.mu.Unlock()
	}
	mine := fmt.Sprintf("%s:%d", s.instance, s.seq.Add(1))
	for {
		if p.counts != nil {
			over, err := s.overLimitsLocked(ctx, p.counts)
			if err != nil {
				return err
			}
			if len(over) > 0 {
				return &engine.ConflictError{Refused: over}
			}
		}
		var resp *clientv3.TxnResponse
		err := s.retry(ctx, "commit", func(rctx context.Context) (err error) {
			resp, err = s.txn(rctx, p, w, mine).Commit()
			return err
		})
		if err != nil {
			switch {
			case tooLarge(err):
				return p.refuseAll(fmt.Sprintf("about %d bytes, more than etcd takes (--max-request-bytes): %v", p.bytes, err))
			case errors.Is(err, rpctypes.ErrTooManyOps):
				return fmt.Errorf("etcd store: commit: etcd's --max-txn-ops is below %d, which probed needs: %w", etcdMaxTxnOps, err)
			}
			return fmt.Errorf("etcd store: commit: %w", err)
		}
		rev, err := s.outcome(p, w, mine, resp)
		if err != nil {
			return err
		}
		if rev == 0 {
			continue // the writer key or a count moved: again, comparing their new revisions
		}
		if p.counts != nil {
			s.countedLocked(p.counts, rev)
		}
		for i, c := range changes {
			c.SetRevision(keyspace.Revision(rev, i))
		}
		return nil
	}
}

// CommitsInFlight returns MaxCommitsInFlight: Commit may be called from
// that many goroutines at once (engine.PipelinedStore). Each takes a
// writer key of its own; etcd applies concurrent transactions in an order
// of its own, which their revisions and Follow's order are.
func (s *Store) CommitsInFlight() int { return MaxCommitsInFlight }

// txn is the transaction of p, putting mine into the writer key w.
func (s *Store) txn(ctx context.Context, p *plan, w *writer, mine string) clientv3.Txn {
	cmps := make([]clientv3.Cmp, 0, len(p.checks)+1)
	reads := make([]clientv3.Op, 0, len(p.checks)+1)
	for _, chk := range p.checks {
		cmps = append(cmps, chk.cmp())
		if chk.create {
			reads = append(reads, clientv3.OpGet(chk.key, clientv3.WithKeysOnly()))
		} else {
			// Not keys-only: that leaves the lease out, and every
			// fence read so would look moved.
			reads = append(reads, clientv3.OpGet(chk.key))
		}
	}
	cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(w.key), "=", w.rev))
	reads = append(reads, clientv3.OpGet(w.key))
	ops := append(p.ops[:len(p.ops):len(p.ops)], clientv3.OpPut(w.key, mine))
	if p.counts != nil {
		ccmps, cputs, creads := s.countOpsLocked(p.counts)
		cmps, ops, reads = append(cmps, ccmps...), append(ops, cputs...), append(reads, creads...)
	}
	return s.cli.Txn(ctx).If(cmps...).Then(ops...).Else(reads...)
}

// outcome reads the answer to p's transaction, which put mine into the
// writer key w: the etcd revision it was applied at, 0 when it must be
// tried again (w was written by another store of this replica ID), or
// the conflicts that refused it.
func (s *Store) outcome(p *plan, w *writer, mine string, resp *clientv3.TxnResponse) (int64, error) {
	if resp.Succeeded {
		w.rev = resp.Header.Revision
		return resp.Header.Revision, nil
	}
	want := len(p.checks) + 1
	if p.counts != nil {
		want += len(p.counts.keys)
	}
	if len(resp.Responses) != want {
		return 0, fmt.Errorf("etcd store: commit: %d answers to %d reads", len(resp.Responses), want)
	}
	var writerRev int64
	if kvs := resp.Responses[len(p.checks)].GetResponseRange().GetKvs(); len(kvs) > 0 {
		if string(kvs[0].Value) == mine {
			// An attempt whose answer was lost was applied.
			w.rev = kvs[0].ModRevision
			return kvs[0].ModRevision, nil
		}
		writerRev = kvs[0].ModRevision
		if writerRev != w.rev {
			who := "another store with this replica ID (two replicas with one --replica-id?)"
			if strings.HasPrefix(string(kvs[0].Value), s.instance+":") {
				who = "a transaction of this store whose Commit gave up before knowing its outcome"
			}
			s.log.Warn("etcd store: "+w.key+" was written by "+who, "value", string(kvs[0].Value))
		}
	}
	refused := make(map[string]error)
	for i, chk := range p.checks {
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		var conflict bool
		if chk.create {
			conflict = len(kvs) > 0 // the target exists
		} else {
			conflict = len(kvs) == 0 || kvs[0].Lease != int64(chk.lease) // the shard moved
		}
		if conflict {
			for _, name := range chk.names {
				refused[name] = chk.refusal(name)
			}
		}
	}
	moved := writerRev != w.rev
	w.rev = writerRev
	if p.counts != nil {
		for i, key := range p.counts.keys {
			if s.learnLocked(key, resp.Responses[len(p.checks)+1+i].GetResponseRange().GetKvs()) {
				moved = true // another replica counted meanwhile
			}
		}
	}
	switch {
	case len(refused) > 0:
		return 0, &engine.ConflictError{Refused: refused}
	case moved:
		return 0, nil
	}
	return 0, fmt.Errorf("etcd store: commit: etcd refused the transaction, yet every compare holds")
}

// refuseAll refuses every change of p as too large for one transaction.
func (p *plan) refuseAll(why string) error {
	refused := make(map[string]error, len(p.names))
	for _, name := range p.names {
		refused[name] = fmt.Errorf("target %q: the transaction has %s: %w", name, why, engine.ErrResourceExhausted)
	}
	return &engine.ConflictError{Refused: refused}
}
