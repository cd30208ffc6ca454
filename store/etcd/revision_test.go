package etcd

import "testing"

func TestRevisions(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"FirstOfRevision", revision(5, 0), 5 << 10},
		{"LastOfRevision", revision(5, MaxBatch-1), 5<<10 | 1023},
		{"Position", Position(5), 5<<10 | 1023},
		{"PositionBeforeNext", Position(5) + 1, revision(6, 0)},
		{"CompactedBelow", compactedBelow(6), Position(5)},
		{"NeverCompacted", compactedBelow(0), 0},
		{"EtcdRevision", uint64(etcdRevision(revision(7, 12))), 7},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
