package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// schemaField is the field of P/meta that holds SchemaVersion (the
// cluster package owns "shards"); settingsField holds Options.Settings.
const (
	schemaField   = "schema"
	settingsField = "settings"
)

// Open checks o, the schema version and the cluster-wide settings in
// P/meta (writing those missing, keeping the fields others wrote there),
// and returns the store. A schema this build does not know is
// ErrSchemaVersion; settings other than the cluster's are ErrSettings. Transient etcd
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
		cli:          o.Client,
		keys:         keys{prefix: o.Prefix},
		fence:        o.Fence,
		leading:      o.Leading,
		membership:   o.Membership,
		compact:      o.Compact,
		log:          o.Logger.With("replica", o.ReplicaID),
		clock:        o.Clock,
		timeout:      o.RequestTimeout,
		firstAttempt: o.AttemptTimeout,
		instance:     hex.EncodeToString(nonce[:]),
		settings:     o.Settings,
	}
	s.id, s.writers = o.ReplicaID, newWriters(s.keys.writer(o.ReplicaID))
	s.ctx, s.close = context.WithCancel(context.Background())
	if err := s.checkSchema(ctx); err != nil {
		s.close()
		return nil, err
	}
	err := s.retry(ctx, "open", func(rctx context.Context) error {
		return s.writers.read(rctx, s.cli)
	})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("etcd store: read %s: %w", s.writers.base, err)
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
			// The cluster or another replica wrote it first: add what is
			// missing.
			unchanged = clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
		}
		missing, err := s.checkFields(key, fields)
		if err != nil || !missing {
			return err
		}
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
			s.log.Info("etcd store: schema version and cluster-wide settings written", "key", key, "schema", SchemaVersion, "settings", s.settings)
			return nil
		}
	}
}

// checkFields checks the schema version and the settings fields of
// P/meta, adding to fields those absent (missing true).
func (s *Store) checkFields(key string, fields map[string]json.RawMessage) (missing bool, err error) {
	if raw, ok := fields[schemaField]; ok {
		var v int
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, corrupt(key, "%s: %v", schemaField, err)
		}
		switch {
		case v > SchemaVersion:
			return false, fmt.Errorf("%w: %s says schema %d, this probed knows up to %d (a newer probed wrote it)",
				ErrSchemaVersion, key, v, SchemaVersion)
		case v < 1:
			return false, corrupt(key, "%s %d is no schema version", schemaField, v)
		}
	} else {
		fields[schemaField], _ = json.Marshal(SchemaVersion)
		missing = true
	}
	if len(s.settings) == 0 {
		return missing, nil
	}
	raw, ok := fields[settingsField]
	if !ok {
		fields[settingsField], _ = json.Marshal(s.settings)
		return true, nil
	}
	var theirs map[string]string
	if err := json.Unmarshal(raw, &theirs); err != nil {
		return false, corrupt(key, "%s: %v", settingsField, err)
	}
	if diff := settingsDiff(theirs, s.settings); diff != "" {
		return false, fmt.Errorf("%w: %s", ErrSettings, diff)
	}
	return missing, nil
}

// settingsDiff names every setting whose value differs between the
// cluster's and this replica's ("" when none does).
func settingsDiff(cluster, mine map[string]string) string {
	names := slices.Sorted(maps.Keys(cluster))
	for name := range mine {
		if _, ok := cluster[name]; !ok {
			names = append(names, name)
		}
	}
	var diffs []string
	for _, name := range names {
		c, inCluster := cluster[name]
		m, inMine := mine[name]
		switch {
		case !inCluster:
			diffs = append(diffs, fmt.Sprintf("%s: the cluster has none, this replica %q", name, m))
		case !inMine:
			diffs = append(diffs, fmt.Sprintf("%s: the cluster's is %q, this replica has none", name, c))
		case c != m:
			diffs = append(diffs, fmt.Sprintf("%s: the cluster's is %q, this replica's %q", name, c, m))
		}
	}
	return strings.Join(diffs, "; ")
}
