package bolt

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/codec"
)

// upgradeCounts counts the values an upgrade rewrote.
type upgradeCounts struct {
	specs, statuses, events int
}

// upgrade brings a data file of an older schema to SchemaVersion, in one
// transaction (a crash leaves the old file whole, and the next Open starts
// over): every value of specs, statuses and events is decoded as its
// schema wrote it and encoded with store/codec, each bucket rebuilt with
// its pages full; meta keeps the revision and the compaction mark and gets
// the new schema version. A value that does not decode is ErrCorrupt
// naming it, and the file is left as it was. The start and the end are
// logged (an upgrade of a large file takes seconds).
func upgrade(db *bbolt.DB, path string, log *slog.Logger) error {
	var from uint64
	err := db.View(func(tx *bbolt.Tx) error {
		var err error
		from, err = checkLayout(tx, path)
		return err
	})
	if err != nil || from == SchemaVersion {
		return err
	}
	log.Info("upgrading the data file to the current schema", "file", path, "from_schema", from, "to_schema", SchemaVersion)
	start := time.Now()
	var n upgradeCounts
	err = readSafely(path, func() error {
		return db.Update(func(tx *bbolt.Tx) error {
			var err error
			n, err = rewrite(tx, path)
			return err
		})
	})
	if err != nil {
		return err
	}
	log.Info("upgraded the data file", "file", path, "from_schema", from, "to_schema", SchemaVersion,
		"targets", n.specs, "statuses", n.statuses, "events", n.events, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// rewrite does upgrade's work in tx.
func rewrite(tx *bbolt.Tx, path string) (upgradeCounts, error) {
	var n upgradeCounts
	version, err := checkLayout(tx, path)
	if err != nil {
		return n, err
	}
	from, ok := formats[version]
	if !ok {
		return n, fmt.Errorf("%s: %w: no upgrade from schema version %d", path, ErrSchemaVersion, version)
	}
	buckets := []struct {
		name  []byte
		fill  float64
		count *int
		// convert returns the new value of key k.
		convert func(k, v []byte) ([]byte, error)
	}{
		{bucketSpecs, bbolt.DefaultFillPercent, &n.specs, func(k, v []byte) ([]byte, error) {
			var s target.Spec
			if err := from.spec(v, &s); err != nil {
				return nil, corrupt(path, err, "schema %d spec of target %q", version, k)
			}
			return reencoded(path, fmt.Sprintf("spec of target %q", k))(codec.MarshalSpec(&s))
		}},
		{bucketStatuses, bbolt.DefaultFillPercent, &n.statuses, func(k, v []byte) ([]byte, error) {
			var s engine.Status
			if err := from.status(v, &s); err != nil {
				return nil, corrupt(path, err, "schema %d status of target %q", version, k)
			}
			return reencoded(path, fmt.Sprintf("status of target %q", k))(codec.MarshalStatus(&s))
		}},
		{bucketEvents, eventsFillPercent, &n.events, func(k, v []byte) ([]byte, error) {
			var ev engine.Event
			if err := from.event(v, &ev); err != nil {
				return nil, corrupt(path, err, "schema %d event %s", version, eventKey(k))
			}
			return reencoded(path, "event "+eventKey(k))(codec.MarshalEvent(&ev))
		}},
	}
	for _, b := range buckets {
		var kvs [][2][]byte
		err := tx.Bucket(b.name).ForEach(func(k, v []byte) error {
			if v == nil {
				return corrupt(path, nil, "bucket %q holds a bucket %q", b.name, k)
			}
			nv, err := b.convert(k, v)
			if err != nil {
				return err
			}
			kvs = append(kvs, [2][]byte{append([]byte(nil), k...), nv})
			return nil
		})
		if err != nil {
			return n, err
		}
		if err := tx.DeleteBucket(b.name); err != nil {
			return n, err
		}
		nb, err := tx.CreateBucket(b.name)
		if err != nil {
			return n, err
		}
		nb.FillPercent = b.fill
		for _, kv := range kvs {
			if err := nb.Put(kv[0], kv[1]); err != nil {
				return n, err
			}
		}
		*b.count = len(kvs)
	}
	return n, tx.Bucket(bucketMeta).Put(keySchema, u64(SchemaVersion))
}

// reencoded passes on the result of a codec Marshal of what, naming the
// file and the value in an error.
func reencoded(path, what string) func([]byte, error) ([]byte, error) {
	return func(b []byte, err error) ([]byte, error) {
		if err != nil {
			return nil, fmt.Errorf("%s: upgrade to schema %d: %s: %w", path, SchemaVersion, what, err)
		}
		return b, nil
	}
}

// eventKey renders an events key for errors: the revision, or the bytes.
func eventKey(k []byte) string {
	if len(k) == 8 {
		return fmt.Sprint(binary.BigEndian.Uint64(k))
	}
	return fmt.Sprintf("key %x", k)
}
