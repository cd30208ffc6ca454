package etcd

// CountNothing makes s count no targets (P/usage/), as a probed from
// before the counts did (63 changes a transaction, whatever they are):
// the baseline of BenchmarkCountedCreates, and the drift
// TestLoadRepairsCounts repairs. Call it before Load and Commit.
func CountNothing(s *Store) { s.usage.off = true }
