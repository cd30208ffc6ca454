package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// schemaField is the field of P/meta that holds SchemaVersion (the
// cluster package owns "shards").
const schemaField = "schema"

// Open checks o and the schema version in P/meta (writing it into a new
// prefix, keeping the fields others wrote there), and returns the store.
// A schema this build does not know is ErrSchemaVersion. Transient etcd
// failures are retried until ctx ends. The caller must Close the store.
func Open(ctx context.Context, o Options) (*Store, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("etcd store: %w", err)
	}
	s := &Store{
		cli:      o.Client,
		keys:     keys{prefix: o.Prefix},
		fence:    o.Fence,
		leading:  o.Leading,
		compact:  o.Compact,
		log:      o.Logger.With("replica", o.ReplicaID),
		clock:    o.Clock,
		timeout:  o.RequestTimeout,
		instance: hex.EncodeToString(nonce[:]),
	}
	s.id, s.writer = o.ReplicaID, s.keys.writer(o.ReplicaID)
	s.ctx, s.close = context.WithCancel(context.Background())
	if err := s.checkSchema(ctx); err != nil {
		s.close()
		return nil, err
	}
	err := s.retry(ctx, "open", func(rctx context.Context) error {
		resp, err := s.cli.Get(rctx, s.writer)
		if err != nil {
			return err
		}
		if len(resp.Kvs) > 0 {
			s.writerRev = resp.Kvs[0].ModRevision
		}
		return nil
	})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("etcd store: read %s: %w", s.writer, err)
	}
	return s, nil
}

// checkSchema checks SchemaVersion against P/meta, or writes it there.
func (s *Store) checkSchema(ctx context.Context) error {
	key := s.keys.meta()
	for {
		var resp *clientv3.GetResponse
		err := s.retry(ctx, "open", func(rctx context.Context) (err error) {
			resp, err = s.cli.Get(rctx, key)
			return err
		})
		if err != nil {
			return fmt.Errorf("etcd store: read %s: %w", key, err)
		}
		fields := map[string]json.RawMessage{}
		// Written only if nobody wrote the key meanwhile.
		unchanged := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if len(resp.Kvs) > 0 {
			kv := resp.Kvs[0]
			if err := json.Unmarshal(kv.Value, &fields); err != nil {
				return corrupt(key, "not a JSON object: %v", err)
			}
			if raw, ok := fields[schemaField]; ok {
				var v int
				if err := json.Unmarshal(raw, &v); err != nil {
					return corrupt(key, "%s: %v", schemaField, err)
				}
				switch {
				case v > SchemaVersion:
					return fmt.Errorf("%w: %s says schema %d, this probed knows up to %d (a newer probed wrote it)",
						ErrSchemaVersion, key, v, SchemaVersion)
				case v < 1:
					return corrupt(key, "%s %d is no schema version", schemaField, v)
				}
				return nil
			}
			// The cluster wrote it first: add the field.
			unchanged = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
		}
		fields[schemaField], _ = json.Marshal(SchemaVersion)
		val, _ := json.Marshal(fields)
		var put *clientv3.TxnResponse
		err = s.retry(ctx, "open", func(rctx context.Context) (err error) {
			put, err = s.cli.Txn(rctx).If(unchanged).Then(clientv3.OpPut(key, string(val))).Commit()
			return err
		})
		if err != nil {
			return fmt.Errorf("etcd store: write %s: %w", key, err)
		}
		if put.Succeeded {
			s.log.Info("etcd store: schema version written", "key", key, "schema", SchemaVersion)
			return nil
		}
	}
}
