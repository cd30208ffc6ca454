package etcd

import (
	"github.com/probed/probed/engine"
	"github.com/probed/probed/store/codec"
)

// Batch limits (BatchLimits). A change takes at most two operations (its
// spec and its status, put or deleted) and one compare; a transaction adds
// the puts of P/events and P/writers/<id> and the compare of the latter.
// So etcd's default --max-txn-ops of 128 allows 63 changes. The bytes
// leave a third of etcd's default --max-request-bytes (1.5 MiB) for what
// ChangeBytes does not count.
const (
	opsPerChange = 2
	maxChanges   = (etcdMaxTxnOps - 2) / opsPerChange
	maxBytes     = etcdMaxRequestBytes * 2 / 3
)

// BatchLimits returns the most changes (63) and bytes (1 MiB) one Commit
// takes with etcd's default --max-txn-ops and --max-request-bytes. An etcd
// configured lower refuses larger transactions: Commit then refuses their
// changes (engine.ErrResourceExhausted).
func (s *Store) BatchLimits() (changes, bytes int) {
	return maxChanges, maxBytes
}

// ChangeBytes is what c adds to a transaction: its spec and status
// (encoded) and their keys, its share of P/events, and the compare that
// guards it.
func (s *Store) ChangeBytes(c *engine.Change) int {
	n := len(s.keys.spec(c.Name)) + opOverhead // its compare
	if c.Delete {
		n += 2 * (len(s.keys.spec(c.Name)) + opOverhead)
	} else if c.Target != nil {
		st := c.Target.Status
		st.Revision = MaxBatch - 1 // the stored revision is an index: at most 2 bytes
		n += len(s.keys.status(c.Name)) + encodedSize(codec.MarshalStatus(&st)) + opOverhead
		if c.SpecChanged && c.Target.Spec != nil {
			n += len(s.keys.spec(c.Name)) + encodedSize(codec.MarshalSpec(c.Target.Spec)) + opOverhead
		}
	}
	return n + encodedSize(codec.MarshalBatch([]*engine.Change{c}))
}

// encodedSize is len(b), or more than a batch may hold when the value
// cannot be encoded (Commit then says why).
func encodedSize(b []byte, err error) int {
	if err != nil {
		return maxBytes + 1
	}
	return len(b)
}
