package etcd

import (
	"github.com/probed/probed/engine"
	"github.com/probed/probed/store/codec"
)

// Batch limits (BatchLimits). A change takes at most two operations (its
// spec and its status, put or deleted) and one compare; a create or a
// removal one more of each (the count of its client's targets: usage.go);
// a transaction adds the puts of P/events, P/writers/<id> and the total
// count, and the compares of the latter two. So etcd's default
// --max-txn-ops of 128 allows 125 operations of changes
// (engine.BatchCoster): 62 changes, 41 creates or removals. The bytes
// leave a third of etcd's default --max-request-bytes (1.5 MiB) for what
// ChangeBytes does not count.
const (
	opsPerChange = 2
	opsPerTxn    = 3
	maxChanges   = etcdMaxTxnOps - opsPerTxn
	maxBytes     = etcdMaxRequestBytes * 2 / 3
)

// BatchLimits returns the most operations of changes (125, of their
// ChangeCost: 62 changes, 41 creates or removals) and bytes (1 MiB) one
// Commit takes with etcd's default --max-txn-ops and --max-request-bytes.
// An etcd configured lower refuses larger transactions: Commit then
// refuses their changes (engine.ErrResourceExhausted).
func (s *Store) BatchLimits() (changes, bytes int) {
	if s.usage.off {
		return etcdMaxTxnOps - 2, maxBytes // no total count: 63 changes
	}
	return maxChanges, maxBytes
}

// ChangeBytes is what c adds to a transaction: its spec and status
// (encoded) and their keys, its share of P/events, and the compare that
// guards it. It is called under the engine's committer lock, so it
// encodes nothing: c's entry in P/events is sized (codec.BatchChangeSize)
// and, as that entry holds c's status and spec, it also bounds their
// values (valueOverhead: their version bytes and the status's revision).
func (s *Store) ChangeBytes(c *engine.Change) int {
	entry := encodedSize(codec.BatchChangeSize(c))
	n := len(s.keys.Spec(c.Name)) + opOverhead // its compare
	if c.Delete {
		n += 2 * (len(s.keys.Spec(c.Name)) + opOverhead)
	} else if c.Target != nil {
		n += len(s.keys.Status(c.Name)) + opOverhead + entry + valueOverhead
		if c.SpecChanged && c.Target.Spec != nil {
			n += len(s.keys.Spec(c.Name)) + opOverhead
		}
	}
	return n + entry
}

// valueOverhead is what a change's status and spec values hold beyond
// its entry in P/events: a version byte each, and the status's revision
// (an index below MaxBatch: a tag and at most 2 bytes).
const valueOverhead = 2 + 3

// encodedSize is n, or more than a batch may hold when the value cannot
// be encoded (Commit then says why).
func encodedSize(n int, err error) int {
	if err != nil {
		return maxBytes + 1
	}
	return n
}
