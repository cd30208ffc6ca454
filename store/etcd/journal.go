package etcd

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/keyspace"
	"github.com/probed/probed/store/codec"
)

// The journal of applies (issue 30, item 6; engine.ApplyJournal). An
// ApplyTargets over etcd is many transactions (at most 41 creates in
// each), so a replica that dies in the middle of one leaves part of it
// written. Before the first write, the applying replica takes the set's
// lock (P/targetsets/<owner>@lock, put on its lease if absent) and
// records the desired list under it: the list in chunks
// (P/targetsets/<owner>@chunks/<gen>/<k>, each a few hundred KiB, a few
// per transaction), then the record (P/targetsets/<owner>, which names
// the chunks' generation) in one transaction, which also drops the
// chunks of any earlier generation. Every write of the journal compares
// the lock with the replica's lease, and so does every create of the
// apply (Change.Apply): once the lock is gone with the lease, nothing of
// the apply is written by that replica any more (its updates and prunes
// of its own targets are fenced by its shards, on the same lease). When
// the apply ends, the record, the chunks and the lock go in one
// transaction. A record whose lock is gone is an interrupted apply: a
// replica takes the lock (if still absent) and applies the recorded list
// again (engine.ResumeApply). The keys are outside the range Follow
// watches: the record of a 20,000-target set does not go through every
// replica's watch.

// Journal bounds.
const (
	headVersion   = 1
	chunkVersion  = 1
	chunkBytes    = 256 << 10 // a chunk's value holds about this much
	chunksPerTxn  = 3         // under etcd's 1.5 MiB request
	maxSetRecords = 100       // sets InterruptedApplies lists at most
)

// applyHead is the record of an apply (P/targetsets/<owner>).
type applyHead struct {
	Version  int               `json:"version"`
	Gen      string            `json:"gen"`
	Chunks   int               `json:"chunks"`
	Targets  int               `json:"targets"`
	Selector map[string]string `json:"selector,omitempty"`
	Client   string            `json:"client,omitempty"`
	// By is the replica that began it.
	By string `json:"by"`
}

var _ engine.ApplyJournal = (*Store)(nil)

// Journals reports whether the store keeps applies: with Options.Lease.
func (s *Store) Journals() bool { return s.lease != nil }

// myLease is this replica's lease; an error wrapping engine.ErrSuspended
// while it has none.
func (s *Store) myLease() (clientv3.LeaseID, error) {
	if s.lease != nil {
		if l := s.lease(); l != 0 {
			return l, nil
		}
	}
	return 0, fmt.Errorf("etcd store: this replica holds no lease now: %w", engine.ErrSuspended)
}

// ApplyBegun reports whether owner's set has an apply recorded.
func (s *Store) ApplyBegun(ctx context.Context, owner string) (bool, error) {
	if err := s.usable(); err != nil {
		return false, err
	}
	var resp *clientv3.GetResponse
	err := s.retry(ctx, "apply", func(rctx context.Context) (err error) {
		resp, err = s.cli.Get(rctx, s.keys.SetHead(owner), clientv3.WithKeysOnly())
		return err
	})
	if err != nil {
		return false, fmt.Errorf("etcd store: read %s: %w", s.keys.SetHead(owner), err)
	}
	return len(resp.Kvs) > 0, nil
}

// BeginApply takes the lock of rec.Owner's set, waiting while another
// live replica holds it, and records rec under it.
func (s *Store) BeginApply(ctx context.Context, rec *engine.ApplyRecord) (engine.ApplyTicket, error) {
	if err := s.usable(); err != nil {
		return engine.ApplyTicket{}, err
	}
	lease, err := s.myLease()
	if err != nil {
		return engine.ApplyTicket{}, err
	}
	chunks, err := encodeChunks(rec.Targets)
	if err != nil {
		return engine.ApplyTicket{}, err
	}
	if err := s.lockSet(ctx, rec.Owner, lease); err != nil {
		return engine.ApplyTicket{}, err
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return engine.ApplyTicket{}, fmt.Errorf("etcd store: %w", err)
	}
	gen := hex.EncodeToString(nonce[:])
	for i := 0; i < len(chunks); i += chunksPerTxn {
		var ops []clientv3.Op
		for j := i; j < min(i+chunksPerTxn, len(chunks)); j++ {
			ops = append(ops, clientv3.OpPut(s.keys.SetChunk(rec.Owner, gen, j), string(chunks[j])))
		}
		if _, err := s.underLock(ctx, rec.Owner, lease, ops...); err != nil {
			return engine.ApplyTicket{}, err
		}
	}
	head, _ := json.Marshal(applyHead{Version: headVersion, Gen: gen, Chunks: len(chunks), Targets: len(rec.Targets),
		Selector: rec.Selector, Client: rec.Client, By: s.id})
	all, mine := s.keys.SetChunks(rec.Owner), s.keys.SetChunks(rec.Owner)+gen+"/"
	resp, err := s.underLock(ctx, rec.Owner, lease,
		clientv3.OpPut(s.keys.SetHead(rec.Owner), string(head)),
		// The chunks of any other generation: an earlier record's, or
		// those of an apply that died before it recorded them.
		clientv3.OpDelete(all, clientv3.WithRange(mine)),
		clientv3.OpDelete(clientv3.GetPrefixRangeEnd(mine), clientv3.WithRange(clientv3.GetPrefixRangeEnd(all))),
		clientv3.OpGet(s.keys.Events(), clientv3.WithKeysOnly()))
	if err != nil {
		return engine.ApplyTicket{}, err
	}
	return engine.ApplyTicket{Owner: rec.Owner, Token: int64(lease), Position: eventsPosition(resp.Responses[3])}, nil
}

// eventsPosition is the position of P/events's last write, from a read
// of it (0: never written): a view there holds every change before.
func eventsPosition(r *etcdserverpb.ResponseOp) uint64 {
	if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
		return keyspace.Position(kvs[0].ModRevision)
	}
	return 0
}

// lockSet puts owner's lock on lease, waiting while another lease holds
// it. A lock already on lease is taken as it is: it was left by an apply
// of this replica that did not end (the engine runs one apply at a time).
func (s *Store) lockSet(ctx context.Context, owner string, lease clientv3.LeaseID) error {
	lock := s.keys.SetLock(owner)
	var b backoff
	logged := false
	for {
		var resp *clientv3.TxnResponse
		err := s.retry(ctx, "apply", func(rctx context.Context) (err error) {
			resp, err = s.cli.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(lock), "=", 0)).
				Then(clientv3.OpPut(lock, s.id, clientv3.WithLease(lease))).
				Else(clientv3.OpGet(lock)).Commit()
			return err
		})
		if err != nil {
			return fmt.Errorf("etcd store: lock %s: %w", lock, err)
		}
		if resp.Succeeded {
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		switch {
		case len(kvs) == 0:
			continue // released meanwhile
		case kvs[0].Lease == int64(lease):
			return nil
		}
		if !logged {
			s.log.Info("etcd store: waiting for another replica's apply of the set to end (or its lease to expire)", "owner", owner, "replica", string(kvs[0].Value))
			logged = true
		}
		if !s.wait(ctx, &b) {
			return fmt.Errorf("etcd store: waiting for the lock %s, held by %s: %w", lock, kvs[0].Value, s.done(ctx))
		}
	}
}

// underLock runs ops in a transaction that compares owner's lock with
// lease; an error wrapping engine.ErrAborted when the lock is not there.
func (s *Store) underLock(ctx context.Context, owner string, lease clientv3.LeaseID, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	lock := s.keys.SetLock(owner)
	var resp *clientv3.TxnResponse
	err := s.retry(ctx, "apply", func(rctx context.Context) (err error) {
		resp, err = s.cli.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(lock), "=", lease)).Then(ops...).Commit()
		return err
	})
	switch {
	case tooLarge(err):
		return nil, fmt.Errorf("etcd store: recording the apply of %q: more than etcd takes in one request (--max-request-bytes): %w: %w", owner, err, engine.ErrResourceExhausted)
	case err != nil:
		return nil, fmt.Errorf("etcd store: recording the apply of %q: %w", owner, err)
	case !resp.Succeeded:
		return nil, fmt.Errorf("etcd store: the apply of %q: %s is not on this replica's lease %x any more: %w", owner, lock, int64(lease), engine.ErrAborted)
	}
	return resp, nil
}

// TakeOverApply takes the lock of owner's recorded apply if no live
// replica holds it (or this replica does) and returns the record.
func (s *Store) TakeOverApply(ctx context.Context, owner string) (*engine.ApplyRecord, engine.ApplyTicket, bool, error) {
	var none engine.ApplyTicket
	if err := s.usable(); err != nil {
		return nil, none, false, err
	}
	lease, err := s.myLease()
	if err != nil {
		return nil, none, false, err
	}
	headKey, lock := s.keys.SetHead(owner), s.keys.SetLock(owner)
	var resp *clientv3.TxnResponse
	err = s.retry(ctx, "apply", func(rctx context.Context) (err error) {
		resp, err = s.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(headKey), ">", 0), clientv3.Compare(clientv3.CreateRevision(lock), "=", 0)).
			Then(clientv3.OpPut(lock, s.id, clientv3.WithLease(lease)), clientv3.OpGet(headKey), clientv3.OpGet(s.keys.Events(), clientv3.WithKeysOnly())).
			Else(clientv3.OpGet(lock)).Commit()
		return err
	})
	if err != nil {
		return nil, none, false, fmt.Errorf("etcd store: lock %s: %w", lock, err)
	}
	var head, events *etcdserverpb.ResponseOp
	if resp.Succeeded {
		head, events = resp.Responses[1], resp.Responses[2]
	} else {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 || kvs[0].Lease != int64(lease) {
			return nil, none, false, nil // nothing recorded, or another replica applies it
		}
		// Left by an apply of this replica that did not end.
		again, err := s.underLock(ctx, owner, lease, clientv3.OpGet(headKey), clientv3.OpGet(s.keys.Events(), clientv3.WithKeysOnly()))
		if err != nil {
			return nil, none, false, err
		}
		head, events = again.Responses[0], again.Responses[1]
	}
	t := engine.ApplyTicket{Owner: owner, Token: int64(lease), Position: eventsPosition(events)}
	kvs := head.GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, none, false, s.EndApply(ctx, t) // ended meanwhile
	}
	rec, err := s.readRecord(ctx, owner, kvs[0])
	switch {
	case errors.Is(err, ErrCorrupt):
		// A record that cannot be read is applied by nobody: dropped.
		if eerr := s.EndApply(ctx, t); eerr != nil {
			err = errors.Join(err, eerr)
		}
		return nil, none, false, err
	case err != nil:
		return nil, none, false, err // the lock stays on this lease: taken again next time
	}
	return rec, t, true, nil
}

// readRecord reads the record of owner's apply whose head is kv, and its
// chunks (as they are now: under the lock, a record's chunks do not
// change, and a read at an older revision could find it compacted).
func (s *Store) readRecord(ctx context.Context, owner string, kv *mvccpb.KeyValue) (*engine.ApplyRecord, error) {
	var h applyHead
	if err := json.Unmarshal(kv.Value, &h); err != nil {
		return nil, corrupt(string(kv.Key), "not an apply's record: %v", err)
	}
	if h.Version != headVersion {
		return nil, corrupt(string(kv.Key), "record version %d, this probed knows %d", h.Version, headVersion)
	}
	rec := &engine.ApplyRecord{Owner: owner, Selector: h.Selector, Client: h.Client}
	chunks := 0
	prefix := s.keys.SetChunks(owner) + h.Gen + "/"
	err := s.readRange(ctx, prefix, clientv3.GetPrefixRangeEnd(prefix), 0, func(kv *mvccpb.KeyValue) error {
		chunks++
		var err error
		rec.Targets, err = decodeChunk(kv.Value, rec.Targets)
		if err != nil {
			return corrupt(string(kv.Key), "%v", err)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case chunks != h.Chunks || len(rec.Targets) != h.Targets:
		return nil, corrupt(string(kv.Key), "%d chunks of %d targets under %s, the record says %d of %d", chunks, len(rec.Targets), prefix, h.Chunks, h.Targets)
	}
	return rec, nil
}

// EndApply removes the record, the chunks and the lock of t's apply, if
// t's lease still holds the lock.
func (s *Store) EndApply(ctx context.Context, t engine.ApplyTicket) error {
	if err := s.usable(); err != nil {
		return err
	}
	lock, chunks := s.keys.SetLock(t.Owner), s.keys.SetChunks(t.Owner)
	err := s.retry(ctx, "apply", func(rctx context.Context) error {
		_, err := s.cli.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(lock), "=", t.Token)).
			Then(clientv3.OpDelete(s.keys.SetHead(t.Owner)), clientv3.OpDelete(chunks, clientv3.WithPrefix()), clientv3.OpDelete(lock)).
			Commit()
		return err
	})
	if err != nil {
		return fmt.Errorf("etcd store: end the apply of %q: %w", t.Owner, err)
	}
	return nil
}

// InterruptedApplies names the sets with a record and no lock, or a lock
// on this replica's lease (an apply of this replica that did not end).
// It also drops the chunks that no record names and no lock guards
// (an apply that died before it recorded them).
func (s *Store) InterruptedApplies(ctx context.Context) ([]string, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	lease, err := s.myLease()
	if err != nil {
		return nil, nil //nolint:nilerr // not a member now: nothing to take over, which is not an error
	}
	var resp *clientv3.GetResponse
	err = s.retry(ctx, "apply", func(rctx context.Context) (err error) {
		resp, err = s.cli.Get(rctx, s.keys.TargetSets(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("etcd store: read %s: %w", s.keys.TargetSets(), err)
	}
	type set struct {
		head, chunks, locked bool
		lock                 int64 // the lease of its lock
	}
	sets := make(map[string]*set)
	var locks []clientv3.Op
	var locked []*set
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), s.keys.TargetSets())
		owner, part, _ := strings.Cut(rest, "@")
		st := sets[owner]
		if st == nil {
			st = &set{}
			sets[owner] = st
		}
		switch {
		case part == "":
			st.head = true
		case part == "lock":
			// A keys-only read leaves the lease out: read it.
			st.locked = true
			locks = append(locks, clientv3.OpGet(string(kv.Key)))
			locked = append(locked, st)
		case strings.HasPrefix(part, "chunks/"):
			st.chunks = true
		}
	}
	for i := 0; i < len(locks); i += etcdMaxTxnOps {
		ops := locks[i:min(i+etcdMaxTxnOps, len(locks))]
		var lr *clientv3.TxnResponse
		err = s.retry(ctx, "apply", func(rctx context.Context) (err error) {
			lr, err = s.cli.Txn(rctx).Then(ops...).Commit()
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("etcd store: read the locks under %s: %w", s.keys.TargetSets(), err)
		}
		for j, r := range lr.Responses {
			if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
				locked[i+j].lock = kvs[0].Lease
			} else {
				locked[i+j].locked = false // released meanwhile
			}
		}
	}
	var out []string
	for _, owner := range slices.Sorted(maps.Keys(sets)) {
		st := sets[owner]
		switch {
		case st.head && (!st.locked || st.lock == int64(lease)):
			if len(out) < maxSetRecords {
				out = append(out, owner)
			}
		case !st.head && !st.locked && st.chunks:
			s.dropChunks(ctx, owner)
		}
	}
	return out, nil
}

// dropChunks deletes owner's chunks if no record and no lock are there.
func (s *Store) dropChunks(ctx context.Context, owner string) {
	err := s.retry(ctx, "apply", func(rctx context.Context) error {
		_, err := s.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(s.keys.SetHead(owner)), "=", 0), clientv3.Compare(clientv3.CreateRevision(s.keys.SetLock(owner)), "=", 0)).
			Then(clientv3.OpDelete(s.keys.SetChunks(owner), clientv3.WithPrefix())).Commit()
		return err
	})
	if err != nil {
		s.log.Warn("etcd store: could not drop the chunks of an apply that died before recording them", "owner", owner, "err", err)
	}
}

// encodeChunks encodes specs into chunks of about chunkBytes: a version
// byte, then each spec (store/codec) after its length (uvarint). An
// empty list is one chunk.
func encodeChunks(specs []*target.Spec) ([][]byte, error) {
	var chunks [][]byte
	cur := []byte{chunkVersion}
	for _, spec := range specs {
		b, err := codec.MarshalSpec(spec)
		if err != nil {
			return nil, fmt.Errorf("etcd store: record target %q: %w", spec.Name, err)
		}
		if len(cur) > 1 && len(cur)+len(b)+binary.MaxVarintLen64 > chunkBytes {
			chunks = append(chunks, cur)
			cur = []byte{chunkVersion}
		}
		cur = binary.AppendUvarint(cur, uint64(len(b)))
		cur = append(cur, b...)
	}
	return append(chunks, cur), nil
}

// decodeChunk appends the specs of chunk to specs.
func decodeChunk(chunk []byte, specs []*target.Spec) ([]*target.Spec, error) {
	if len(chunk) == 0 || chunk[0] != chunkVersion {
		return nil, errors.New("not a chunk of this probed's (version byte)")
	}
	for b := chunk[1:]; len(b) > 0; {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, errors.New("truncated")
		}
		spec := &target.Spec{}
		if err := codec.UnmarshalSpec(b[w:w+int(n)], spec); err != nil {
			return nil, err
		}
		specs = append(specs, spec)
		b = b[w+int(n):]
	}
	return specs, nil
}
