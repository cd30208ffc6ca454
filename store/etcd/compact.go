package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Compact deletes the events below before, when this replica compacts
// (Options.Leading): it compacts etcd's history at the etcd revision C of
// the event before, which deletes every revision below C (of every key
// under every prefix: the whole etcd's) and keeps every event at or above
// before. etcd deletes whole transactions, so events of C below before
// stay — unless none of C's events is at or above before, when C+1 is
// compacted instead, if it exists (etcd never compacts beyond its current
// revision, so the newest transaction's events stay until a later one).
// Stored.Compacted then reads C<<10 - 1. A revision etcd compacted
// already is no error.
func (s *Store) Compact(ctx context.Context, before uint64) error {
	if err := s.usable(); err != nil {
		return err
	}
	if s.leading != nil && !s.leading() {
		return nil
	}
	ctx, cancel := s.bind(ctx)
	defer cancel()
	rev := etcdRevision(before)
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
	err := s.request1(ctx, func(rctx context.Context) error {
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
		resp, err = s.cli.Get(rctx, s.keys.events(), clientv3.WithRev(rev))
		return err
	})
	switch {
	case errors.Is(err, rpctypes.ErrCompacted), errors.Is(err, rpctypes.ErrFutureRev):
		return false, 0, nil // compacted already, or nothing to compact
	case err != nil:
		return false, 0, fmt.Errorf("etcd store: compact: read %s at revision %d: %w", s.keys.events(), rev, err)
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
