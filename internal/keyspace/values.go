package keyspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The fields of P/meta, a JSON object. Each package owns its fields and
// keeps the others as it read them.
const (
	// MetaSchema is the store's schema version (store/etcd).
	MetaSchema = "schema"
	// MetaSettings are the cluster-wide settings, a flag's name → its
	// value (store/etcd).
	MetaSettings = "settings"
	// MetaShards is the cluster's number of shards (cluster, and
	// store/etcd when it follows ownership).
	MetaShards = "shards"
)

// ErrMeta: P/meta is not a JSON object.
var ErrMeta = errors.New("not a JSON object")

// Meta is P/meta's fields, each as its JSON.
type Meta map[string]json.RawMessage

// UpdateMeta applies update to P/meta, a read-modify-write: it reads the
// key (absent: no fields), hands its fields to update, which may change
// them (changed true) or end UpdateMeta with an error, and writes changed
// fields back only if nobody wrote P/meta since the read — else it reads
// again; a P/meta that is not a JSON object is ErrMeta. Each etcd request runs through request (the caller's timeouts
// and retries: it calls do until it is done with it); an etcd error that
// request returns ends UpdateMeta.
func UpdateMeta(ctx context.Context, kv clientv3.KV, key string,
	request func(ctx context.Context, do func(ctx context.Context) error) error,
	update func(fields Meta) (changed bool, err error)) error {
	for {
		var resp *clientv3.GetResponse
		err := request(ctx, func(rctx context.Context) (err error) {
			resp, err = kv.Get(rctx, key)
			return err
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		fields := Meta{}
		// Written only if nobody wrote the key meanwhile.
		unchanged := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if len(resp.Kvs) > 0 {
			kv := resp.Kvs[0]
			if err := json.Unmarshal(kv.Value, &fields); err != nil {
				return fmt.Errorf("%s: %w: %w", key, ErrMeta, err)
			}
			unchanged = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
		}
		changed, err := update(fields)
		if err != nil || !changed {
			return err
		}
		val, err := json.Marshal(fields)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		var put *clientv3.TxnResponse
		err = request(ctx, func(rctx context.Context) (err error) {
			put, err = kv.Txn(rctx).If(unchanged).Then(clientv3.OpPut(key, string(val))).Commit()
			return err
		})
		if err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		if put.Succeeded {
			return nil
		}
	}
}

// Member is the value of a member key (JSON).
type Member struct {
	// Addr is how other replicas reach the replica's gRPC API.
	Addr string `json:"addr"`
	// Joined is when it joined, by its own clock.
	Joined time.Time `json:"joined"`
	// Instance names the process that wrote the key (random, new at each
	// start): the store of that process owns the shards held on the
	// key's lease, and no other process that has the same replica ID
	// (one restarted before its previous lease expired, or a duplicate).
	Instance string `json:"instance,omitempty"`
}

// Encode is m as a member key's value.
func (m Member) Encode() string {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // strings and a time always marshal
	}
	return string(b)
}

// DecodeMember reads a member key's value.
func DecodeMember(value []byte) (Member, error) {
	var m Member
	err := json.Unmarshal(value, &m)
	return m, err
}

// A shard key's value is its owner's replica ID, as is.

// ErrShardCount: P/meta pins another number of shards.
var ErrShardCount = errors.New("shard count differs from the cluster's")

// PinShards is an update of P/meta (UpdateMeta) that pins shards as the
// cluster's number of shards (the first replica's), or checks it against
// the pinned one: an error wrapping ErrShardCount when it differs.
func PinShards(key string, shards int) func(Meta) (bool, error) {
	return func(fields Meta) (bool, error) {
		raw, ok := fields[MetaShards]
		if !ok {
			fields[MetaShards], _ = json.Marshal(shards)
			return true, nil
		}
		var got int
		if err := json.Unmarshal(raw, &got); err != nil {
			return false, fmt.Errorf("%s: %s: %w", key, MetaShards, err)
		}
		if got != shards {
			return false, fmt.Errorf("%w: %s pins %d shards, this replica has %d (every replica of a cluster uses the same count)", ErrShardCount, key, got, shards)
		}
		return false, nil
	}
}
