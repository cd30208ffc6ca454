package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// P/meta is a JSON object. The cluster owns its "shards" field: the first
// replica pins it, the others check it. Other fields (the store's schema
// version) are kept as they are.

// pinShards pins Options.Shards in P/meta, or checks it against the
// pinned value (ErrShardCount). Errors of etcd are worth retrying; the
// others are permanent.
func (c *Cluster) pinShards(ctx context.Context) error {
	key := c.keys.meta()
	want := c.opts.Shards
	for {
		resp, err := c.opts.Client.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		fields := map[string]json.RawMessage{}
		// Written only if nobody wrote the key meanwhile.
		unchanged := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if len(resp.Kvs) > 0 {
			kv := resp.Kvs[0]
			if err := json.Unmarshal(kv.Value, &fields); err != nil {
				return permanent{fmt.Errorf("cluster: %s is not a JSON object: %w", key, err)}
			}
			if raw, ok := fields["shards"]; ok {
				var got int
				if err := json.Unmarshal(raw, &got); err != nil {
					return permanent{fmt.Errorf("cluster: %s: shards: %w", key, err)}
				}
				if got != want {
					return permanent{fmt.Errorf("%w: %s pins %d shards, Options.Shards is %d (every replica of a cluster uses the same count)", ErrShardCount, key, got, want)}
				}
				return nil
			}
			// The store wrote it first: add the field.
			unchanged = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
		}
		fields["shards"], _ = json.Marshal(want)
		val, _ := json.Marshal(fields)
		put, err := c.opts.Client.Txn(ctx).If(unchanged).Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		if put.Succeeded {
			c.log.Info("pinned the shard count", "key", key, "shards", want)
			return nil
		}
	}
}
