package etcd

import "github.com/probed/probed/internal/keyspace"

// MaxBatch is the most changes one transaction may carry (the width of an
// event's index in its revision: internal/keyspace).
const MaxBatch = keyspace.MaxBatch
