package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/probed/probed/internal/keyspace"
)

// P/meta is a JSON object. The cluster owns its "shards" field: the first
// replica pins it, the others check it. Other fields (the store's schema
// version) are kept as they are.

// pinShards pins Options.Shards in P/meta, or checks it against the
// pinned value (ErrShardCount). Errors of etcd are worth retrying; the
// others are permanent.
func (c *Cluster) pinShards(ctx context.Context) error {
	key := c.keys.Meta()
	pinned := false
	pin := keyspace.PinShards(key, c.opts.Shards)
	err := keyspace.UpdateMeta(ctx, c.opts.Client, key, func(ctx context.Context, do func(context.Context) error) error {
		return do(ctx)
	}, func(fields keyspace.Meta) (bool, error) {
		changed, err := pin(fields)
		if err != nil {
			return false, permanent{fmt.Errorf("cluster: %w", err)}
		}
		pinned = changed
		return changed, nil
	})
	if errors.Is(err, keyspace.ErrMeta) {
		return permanent{fmt.Errorf("cluster: %w", err)}
	}
	if err == nil && pinned {
		c.log.Info("pinned the shard count", "key", key, "shards", c.opts.Shards)
	}
	return err
}
