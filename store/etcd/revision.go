package etcd

// An event's revision is etcd's revision of its transaction shifted left
// by indexBits, plus its index in the transaction (see the package doc).
const (
	indexBits = 10
	// MaxBatch is the most changes one transaction may carry.
	MaxBatch = 1 << indexBits
)

// revision is the revision of the i-th change of the transaction at etcd
// revision rev.
func revision(rev int64, i int) uint64 { return uint64(rev)<<indexBits | uint64(i) }

// Position is the store's revision at the end of etcd revision rev: what
// the engine's Sync waits for to have caught up with an etcd revision (a
// shard claim's, cluster.Options.Gain).
func Position(rev int64) uint64 { return revision(rev, MaxBatch-1) }

// etcdRevision is the etcd revision of the transaction of revision r.
func etcdRevision(r uint64) int64 { return int64(r >> indexBits) }

// EtcdRevision is the etcd revision a store revision r (an event's, the
// engine's position) belongs to: the inverse of Position.
func EtcdRevision(r uint64) int64 { return etcdRevision(r) }

// compactedBelow is Stored.Compacted after an etcd compaction at rev:
// the events of every revision below rev are gone.
func compactedBelow(rev int64) uint64 {
	if rev <= 0 {
		return 0
	}
	return uint64(rev)<<indexBits - 1
}
