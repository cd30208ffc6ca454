package keyspace

// An event's revision is etcd's revision of its transaction shifted left
// by IndexBits, plus its index in the transaction: strictly increasing,
// not contiguous, the same on every replica. A position — how far a
// follower of the log has got — is the revision of the last index of an
// etcd revision: everything up to that etcd revision.
const (
	// IndexBits is the width of an event's index in its transaction.
	IndexBits = 10
	// MaxBatch is the most changes one transaction may carry.
	MaxBatch = 1 << IndexBits
)

// Revision is the revision of the i-th change of the transaction at etcd
// revision rev.
func Revision(rev int64, i int) uint64 { return uint64(rev)<<IndexBits | uint64(i) }

// Position is the position at the end of etcd revision rev: what a
// follower that has seen everything up to rev has reached.
func Position(rev int64) uint64 { return Revision(rev, MaxBatch-1) }

// EtcdRevision is the etcd revision a revision or a position r belongs to:
// the inverse of Revision and Position.
func EtcdRevision(r uint64) int64 { return int64(r >> IndexBits) }

// CompactedBelow is the newest revision an etcd compaction at rev deleted
// (the events of every etcd revision below rev): 0 for none.
func CompactedBelow(rev int64) uint64 {
	if rev <= 0 {
		return 0
	}
	return uint64(rev)<<IndexBits - 1
}
