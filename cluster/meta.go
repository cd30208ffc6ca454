package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// P/meta is a JSON object. The cluster owns its "shards" field: the first
// replica pins it (create-if-absent), the others check it. Other fields
// (the store's schema version) are kept as they are.

// pinShards pins Options.Shards in P/meta, or checks it against the
// pinned value (ErrShardCount). Errors of etcd are worth retrying; the
// others are permanent.
func (c *Cluster) pinShards(ctx context.Context) error {
	key := c.keys.meta()
	want := c.opts.Shards
	for {
		fresh, _ := json.Marshal(map[string]int{"shards": want})
		resp, err := c.opts.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(fresh))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return fmt.Errorf("pin the shard count in %s: %w", key, err)
		}
		if resp.Succeeded {
			c.log.Info("pinned the shard count", "key", key, "shards", want)
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue // deleted in between
		}
		fields := map[string]json.RawMessage{}
		if err := json.Unmarshal(kvs[0].Value, &fields); err != nil {
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
		// Written by the store first: add the field, if nobody changed
		// the key meanwhile.
		fields["shards"], _ = json.Marshal(want)
		merged, _ := json.Marshal(fields)
		resp, err = c.opts.Client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, string(merged))).
			Commit()
		if err != nil {
			return fmt.Errorf("pin the shard count in %s: %w", key, err)
		}
		if resp.Succeeded {
			c.log.Info("pinned the shard count", "key", key, "shards", want)
			return nil
		}
	}
}
