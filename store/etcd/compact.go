package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

// Compact deletes the events below before, when compaction is on
// (Options.Compact; off, it does nothing) and this replica compacts
// (Options.Leading).
//
// A replica that does not lead records before as the oldest revision it
// still needs (P/watermarks/<id>, when it changed). The leader lowers before to the lowest
// watermark of the live members (P/members/<id>), and compacts nothing
// while a live member has recorded none: a replica's history in memory,
// and what a restarted replica reloads, is never cut below what another
// replica still serves.
//
// It compacts etcd's history at the etcd revision C of the event before,
// which deletes every revision below C (of every key under every prefix:
// the whole etcd's) and keeps every event at or above before. etcd
// deletes whole transactions, so events of C below before stay — unless
// none of C's events is at or above before, when C+1 is compacted
// instead, if it exists (etcd never compacts beyond its current revision,
// so the newest transaction's events stay until a later one).
// Stored.Compacted then reads C<<10 - 1. A revision etcd compacted
// already is no error.
func (s *Store) Compact(ctx context.Context, before uint64) error {
	if err := s.usable(); err != nil {
		return err
	}
	if !s.compact {
		return nil
	}
	ctx, cancel := s.bind(ctx)
	defer cancel()
	if s.leading != nil && !s.leading() {
		if s.recorded.Swap(before) == before {
			return nil
		}
		err := s.request1(ctx, func(rctx context.Context) error {
			_, err := s.cli.Put(rctx, s.keys.Watermark(s.id), strconv.FormatUint(before, 10))
			return err
		})
		if err != nil {
			s.recorded.Store(0)
			return fmt.Errorf("etcd store: compact: record %s: %w", s.keys.Watermark(s.id), err)
		}
		return nil
	}
	before, ok, err := s.lowestNeed(ctx, before)
	if err != nil || !ok {
		return err
	}
	rev := keyspace.EtcdRevision(before)
	if index := int(before & (MaxBatch - 1)); index > 0 {
		below, current, err := s.allBelow(ctx, rev, index)
		if err != nil {
			return err
		}
		if below && rev < current {
			rev++
		}
	}
	if rev <= 1 {
		return nil
	}
	err = s.request1(ctx, func(rctx context.Context) error {
		_, err := s.cli.Compact(rctx, rev)
		return err
	})
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return nil
	case errors.Is(err, rpctypes.ErrFutureRev):
		return nil // before is beyond etcd's revision: nothing to delete
	case err != nil:
		return fmt.Errorf("etcd store: compact at revision %d: %w", rev, err)
	}
	s.log.Info("etcd store: compacted etcd's history", "revision", rev)
	return nil
}

// allBelow reports whether every event of etcd revision rev has an index
// below index (true too when rev has no events), and etcd's current
// revision.
func (s *Store) allBelow(ctx context.Context, rev int64, index int) (bool, int64, error) {
	var resp *clientv3.GetResponse
	err := s.request1(ctx, func(rctx context.Context) (err error) {
		resp, err = s.cli.Get(rctx, s.keys.Events(), clientv3.WithRev(rev))
		return err
	})
	switch {
	case errors.Is(err, rpctypes.ErrCompacted), errors.Is(err, rpctypes.ErrFutureRev):
		return false, 0, nil // compacted already, or nothing to compact
	case err != nil:
		return false, 0, fmt.Errorf("etcd store: compact: read %s at revision %d: %w", s.keys.Events(), rev, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != rev {
		return true, resp.Header.Revision, nil
	}
	changes, err := s.decodeBatch(rev, resp.Kvs[0].Value)
	if err != nil {
		return false, 0, fmt.Errorf("etcd store: compact: %w", err)
	}
	return len(changes) <= index, resp.Header.Revision, nil
}

// lowestNeed lowers before to the lowest watermark of the live members
// other than this one; ok false: a live member has recorded none (it
// needs everything it loaded), so nothing is compacted.
func (s *Store) lowestNeed(ctx context.Context, before uint64) (uint64, bool, error) {
	var resp *clientv3.TxnResponse
	err := s.request1(ctx, func(rctx context.Context) (err error) {
		resp, err = s.cli.Txn(rctx).Then(
			clientv3.OpGet(s.keys.Members(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			clientv3.OpGet(s.keys.Watermarks(), clientv3.WithPrefix()),
		).Commit()
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("etcd store: compact: read the watermarks: %w", err)
	}
	marks := make(map[string]uint64)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		id := strings.TrimPrefix(string(kv.Key), s.keys.Watermarks())
		v, err := strconv.ParseUint(string(kv.Value), 10, 64)
		if err != nil {
			return 0, false, corrupt(string(kv.Key), "not a revision: %v", err)
		}
		marks[id] = v
	}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		id := strings.TrimPrefix(string(kv.Key), s.keys.Members())
		if id == s.id {
			continue
		}
		mark, ok := marks[id]
		if !ok {
			s.log.Debug("etcd store: not compacting: a replica has not said what it needs", "replica", id)
			return 0, false, nil
		}
		before = min(before, mark)
	}
	return before, true, nil
}
