package cluster

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/probed/probed/internal/keyspace"
)

// testView is a view of members (id → joined) whose shards are owned as
// owners says ("" free), each member on lease 1+its index.
func testView(t *testing.T, shards int, joined map[string]time.Time, owners []string) *view {
	t.Helper()
	v := newView(keyspace.New("/p/", shards))
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range joined {
			if !yield(id) {
				return
			}
		}
	})
	for i, id := range ids {
		v.members[id] = &member{id: id, addr: id + ":1", joined: joined[id], lease: clientv3.LeaseID(i + 1)}
	}
	for s, id := range owners {
		if id == "" {
			continue
		}
		m, ok := v.members[id]
		if !ok {
			t.Fatalf("owner %q of shard %d is not a member", id, s)
		}
		v.setOwner(s, owner{id: id, lease: m.lease, rev: 1})
	}
	return v
}

func TestAssign(t *testing.T) {
	const shards = 4096
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	settle := 10 * time.Second
	abc := Desired([]string{"a", "b", "c"}, shards)
	abcd := Desired([]string{"a", "b", "c", "d"}, shards)
	ab := Desired([]string{"a", "b"}, shards)
	free := make([]string, shards)
	tests := []struct {
		name   string
		joined map[string]time.Time
		owners []string
		me     string
		now    time.Time
		// want: the owners once every member has carried out its plan
		// (claims of free shards, releases, then claims again).
		want []string
		wake time.Time
	}{
		{
			name:   "a starting cluster spreads over every member at once",
			joined: map[string]time.Time{"a": t0, "b": t0.Add(time.Second), "c": t0.Add(2 * time.Second)},
			owners: free, now: t0.Add(3 * time.Second),
			want: abc, wake: t0.Add(settle),
		},
		{
			name:   "a member that owns shards keeps them when the others settle first",
			joined: map[string]time.Time{"a": t0, "b": t0.Add(time.Second), "c": t0.Add(2 * time.Second)},
			owners: abc, now: t0.Add(settle),
			want: abc, wake: t0.Add(settle + time.Second),
		},
		{
			name:   "a newcomer takes nothing before it settles",
			joined: map[string]time.Time{"a": t0, "b": t0, "c": t0, "d": t0.Add(time.Minute)},
			owners: abc, now: t0.Add(time.Minute + settle - time.Nanosecond),
			want: abc, wake: t0.Add(time.Minute + settle),
		},
		{
			name:   "a settled newcomer takes the shards it wins",
			joined: map[string]time.Time{"a": t0, "b": t0, "c": t0, "d": t0.Add(time.Minute)},
			owners: abc, now: t0.Add(time.Minute + settle),
			want: abcd,
		},
		{
			name:   "the shards of a member that died go to the survivors at once",
			joined: map[string]time.Time{"a": t0, "b": t0, "d": t0.Add(time.Minute)},
			owners: withoutOwner(abc, "c"), now: t0.Add(time.Minute),
			want: ab, wake: t0.Add(time.Minute + settle),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := testView(t, shards, tt.joined, tt.owners)
			ids := slices.Sorted(func(yield func(string) bool) {
				for id := range tt.joined {
					if !yield(id) {
						return
					}
				}
			})
			for round := range 2 { // releases free shards that the next round claims
				for _, id := range ids {
					m := v.members[id]
					p := v.assign(id, m.lease, tt.now, settle)
					if round == 0 && !p.wake.Equal(tt.wake) {
						t.Errorf("%s: wake %v, want %v", id, p.wake, tt.wake)
					}
					for _, s := range p.release {
						v.setOwner(s, owner{rev: 2})
					}
					for _, s := range p.claim {
						if v.owners[s].id != "" {
							t.Fatalf("%s claims shard %d owned by %s", id, s, v.owners[s].id)
						}
						v.setOwner(s, owner{id: id, lease: m.lease, rev: 2})
					}
				}
			}
			got := make([]string, shards)
			for s, o := range v.owners {
				got[s] = o.id
			}
			if diff := OwnersDiff(got, tt.want); diff != "" {
				t.Errorf("owners: %s", diff)
			}
		})
	}
}

// TestAssignMovesOnlyWhatItMust: with rendezvous hashing a newcomer wins
// about 1/N of the shards, all from the others, and a member that leaves
// gives only its own.
func TestAssignMovesOnlyWhatItMust(t *testing.T) {
	const shards = 4096
	ids := []string{"probed-0:50051", "probed-1:50051", "probed-2:50051"}
	before := Desired(ids, shards)
	after := Desired(append(slices.Clone(ids), "probed-3:50051"), shards)
	moved := 0
	for s := range before {
		if before[s] != after[s] {
			moved++
			if after[s] != "probed-3:50051" {
				t.Fatalf("shard %d moved from %s to %s, not to the newcomer", s, before[s], after[s])
			}
		}
	}
	if frac := float64(moved) / shards; frac < 0.22 || frac > 0.28 {
		t.Errorf("a fourth member took %d shards (%.3f), want about a quarter", moved, frac)
	}
	without := Desired(ids[1:], shards)
	for s := range before {
		if before[s] != ids[0] && without[s] != before[s] {
			t.Fatalf("shard %d of %s moved to %s when %s left", s, before[s], without[s], ids[0])
		}
	}
}

func TestAssignSpreadsEvenly(t *testing.T) {
	const shards = 4096
	for n := 2; n <= 8; n++ {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("10.0.0.%d:50051", i+1)
		}
		counts := map[string]int{}
		for _, id := range Desired(ids, shards) {
			counts[id]++
		}
		mean := float64(shards) / float64(n)
		for id, got := range counts {
			if math.Abs(float64(got)-mean) > 0.1*mean {
				t.Errorf("%d members: %s owns %d shards, want %.0f ± 10%%", n, id, got, mean)
			}
		}
	}
}

func withoutOwner(owners []string, id string) []string {
	out := slices.Clone(owners)
	for s := range out {
		if out[s] == id {
			out[s] = ""
		}
	}
	return out
}
