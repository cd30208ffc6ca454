package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/probed/probed/internal/keyspace"
)

// Open checks o, the schema version, the cluster-wide settings and (with
// Options.Shards) the number of shards in P/meta (writing those missing,
// keeping the fields others wrote there),
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
		keys:         keyspace.New(o.Prefix, max(o.Shards, 1)),
		process:      o.Instance,
		leading:      o.Leading,
		lease:        o.Lease,
		membership:   o.Membership,
		compact:      o.Compact,
		log:          o.Logger.With("replica", o.ReplicaID),
		clock:        o.Clock,
		timeout:      o.RequestTimeout,
		firstAttempt: o.AttemptTimeout,
		instance:     hex.EncodeToString(nonce[:]),
		settings:     o.Settings,
	}
	s.id, s.writers = o.ReplicaID, newWriters(s.keys, o.ReplicaID)
	if o.Shards > 0 {
		s.fence = s.fenceOf
	}
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

// checkSchema checks SchemaVersion and the settings against P/meta, or
// writes them there (keeping the fields others wrote).
func (s *Store) checkSchema(ctx context.Context) error {
	key := s.keys.Meta()
	wrote := false
	err := keyspace.UpdateMeta(ctx, s.cli, key, func(ctx context.Context, do func(context.Context) error) error {
		return s.retry(ctx, "open", do)
	}, func(fields keyspace.Meta) (bool, error) {
		missing, err := s.checkFields(key, fields)
		if err != nil {
			return false, &fieldError{err}
		}
		if s.fence != nil {
			pinned, err := keyspace.PinShards(key, s.keys.ShardCount())(fields)
			if err != nil {
				return false, &fieldError{fmt.Errorf("etcd store: %w", err)}
			}
			missing = missing || pinned
		}
		wrote = missing
		return missing, nil
	})
	var mine *fieldError
	switch {
	case errors.As(err, &mine):
		return mine.err
	case errors.Is(err, keyspace.ErrMeta):
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	case err != nil:
		return fmt.Errorf("etcd store: %w", err)
	}
	if wrote {
		s.log.Info("etcd store: schema version and cluster-wide settings written", "key", key, "schema", SchemaVersion, "settings", s.settings)
	}
	return nil
}

// fieldError is checkFields' verdict on P/meta, as UpdateMeta returns it.
type fieldError struct{ err error }

func (e *fieldError) Error() string { return e.err.Error() }

// checkFields checks the schema version and the settings fields of
// P/meta, adding to fields those absent (missing true).
func (s *Store) checkFields(key string, fields keyspace.Meta) (missing bool, err error) {
	if raw, ok := fields[keyspace.MetaSchema]; ok {
		var v int
		if err := json.Unmarshal(raw, &v); err != nil {
			return false, corrupt(key, "%s: %v", keyspace.MetaSchema, err)
		}
		switch {
		case v > SchemaVersion:
			return false, fmt.Errorf("%w: %s says schema %d, this probed knows up to %d (a newer probed wrote it)",
				ErrSchemaVersion, key, v, SchemaVersion)
		case v < 1:
			return false, corrupt(key, "%s %d is no schema version", keyspace.MetaSchema, v)
		}
	} else {
		fields[keyspace.MetaSchema], _ = json.Marshal(SchemaVersion)
		missing = true
	}
	if len(s.settings) == 0 {
		return missing, nil
	}
	raw, ok := fields[keyspace.MetaSettings]
	if !ok {
		fields[keyspace.MetaSettings], _ = json.Marshal(s.settings)
		return true, nil
	}
	var theirs map[string]string
	if err := json.Unmarshal(raw, &theirs); err != nil {
		return false, corrupt(key, "%s: %v", keyspace.MetaSettings, err)
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
