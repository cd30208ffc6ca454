package bolt

import (
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout version this package writes. Open upgrades
// a data file of an older version in place (upgrade.go) and refuses one
// with a greater version (ErrSchemaVersion) rather than guess.
//
// Version 2, the layout:
//
//	meta      "schema"    → SchemaVersion, big-endian uint64
//	          "revision"  → the last revision assigned, big-endian uint64
//	          "compacted" → the newest revision Compact deleted (absent: none)
//	specs     name → store/codec.MarshalSpec
//	statuses  name → store/codec.MarshalStatus (the durable fields)
//	events    big-endian uint64 revision → store/codec.MarshalEvent
//
// Every target in specs has a status; events are in revision order (the
// keys sort as the numbers do); the meta revision is at least every
// event's, so a restart never reuses one, even when the events are
// compacted away. The values are the versioned, compact encoding of
// store/codec (protobuf messages private to the stores, pinned by golden
// files), not the engine's types: a change of a domain type changes the
// file only through a deliberate change of the codec.
//
// Version 1 had the same buckets and keys; its values were the engine
// types encoded with encoding/json (schema1.go reads them).
const SchemaVersion = 2

var (
	bucketMeta     = []byte("meta")
	bucketSpecs    = []byte("specs")
	bucketStatuses = []byte("statuses")
	bucketEvents   = []byte("events")

	keySchema   = []byte("schema")
	keyRevision = []byte("revision")
	// keyCompacted holds the revision of the newest event Compact deleted
	// (absent: none).
	keyCompacted = []byte("compacted")
)

// eventsFillPercent packs event pages full: events are only appended (at
// the highest key) and deleted from the front, so a page split never
// needs room for a later insert in the middle.
const eventsFillPercent = 1.0

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func readU64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// initLayout creates the buckets of an empty data file.
func initLayout(tx *bbolt.Tx) error {
	meta, err := tx.CreateBucket(bucketMeta)
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketSpecs, bucketStatuses, bucketEvents} {
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	if err := meta.Put(keySchema, u64(SchemaVersion)); err != nil {
		return err
	}
	return meta.Put(keyRevision, u64(0))
}

// checkLayout verifies the buckets and the schema version, and returns
// the version: SchemaVersion or an older one Open upgrades. path names the
// file in the error.
func checkLayout(tx *bbolt.Tx, path string) (uint64, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, corrupt(path, nil, "no %q bucket: not a probed data file", bucketMeta)
	}
	v, ok := readU64(meta.Get(keySchema))
	if !ok || v == 0 {
		return 0, corrupt(path, nil, "missing or malformed schema version %x", meta.Get(keySchema))
	}
	if v > SchemaVersion {
		return 0, fmt.Errorf("%s: %w: the file has schema version %d, this probed knows up to %d: "+
			"it was written by a newer probed; run that version (or newer) on this data dir", path, ErrSchemaVersion, v, SchemaVersion)
	}
	if _, ok := readU64(meta.Get(keyRevision)); !ok {
		return 0, corrupt(path, nil, "missing or malformed revision %x", meta.Get(keyRevision))
	}
	for _, name := range [][]byte{bucketSpecs, bucketStatuses, bucketEvents} {
		if tx.Bucket(name) == nil {
			return 0, corrupt(path, nil, "no %q bucket", name)
		}
	}
	return v, nil
}

// checkCurrent is checkLayout for a file that must be of SchemaVersion
// (Open has upgraded it).
func checkCurrent(tx *bbolt.Tx, path string) error {
	v, err := checkLayout(tx, path)
	if err == nil && v != SchemaVersion {
		err = fmt.Errorf("%s: %w: the file has schema version %d, want %d (Open upgrades it)", path, ErrSchemaVersion, v, SchemaVersion)
	}
	return err
}
