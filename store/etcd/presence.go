package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

// Present reports whether the named target exists in etcd now, from a
// linearizable read of its spec's key (a quorum read: no write etcd
// acknowledged before it is missed), and the position a follower must
// have reached to have seen that spec's last write: the whole transaction
// of its ModRevision (engine.PresenceReader). One request, with the
// store's request timeout and no retry: the caller answers the client
// either way.
func (s *Store) Present(ctx context.Context, name string) (pos uint64, ok bool, err error) {
	if err := s.usable(); err != nil {
		return 0, false, err
	}
	var resp *clientv3.GetResponse
	err = s.request1(ctx, func(rctx context.Context) error {
		var err error
		resp, err = s.cli.Get(rctx, s.keys.Spec(name), clientv3.WithKeysOnly())
		return err
	})
	switch {
	case err != nil:
		return 0, false, err
	case len(resp.Kvs) == 0:
		return 0, false, nil
	}
	return keyspace.Position(resp.Kvs[0].ModRevision), true, nil
}
