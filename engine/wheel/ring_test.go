package wheel

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got != 24 {
		t.Errorf("unsafe.Sizeof(entry{}) = %d, want 24", got)
	}
}

func TestCeilDiv(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{0, 10, 0}, {1, 10, 1}, {10, 10, 1}, {11, 10, 2}, {-1, 10, 0}, {-10, 10, -1}, {-11, 10, -1},
	}
	for _, tt := range tests {
		if got := ceilDiv(tt.a, tt.b); got != tt.want {
			t.Errorf("ceilDiv(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestNextSet(t *testing.T) {
	tests := []struct {
		name string
		set  []int64
		from int64
		want int64
	}{
		{name: "empty", from: 5, want: -1},
		{name: "at from", set: []int64{5}, from: 5, want: 0},
		{name: "same word", set: []int64{9}, from: 5, want: 4},
		{name: "later word", set: []int64{130}, from: 5, want: 125},
		{name: "wraps to an earlier word", set: []int64{3}, from: 200, want: 59},
		{name: "wraps within the word of from", set: []int64{65}, from: 70, want: 251},
		{name: "nearest of many", set: []int64{1, 100, 180, 250}, from: 181, want: 69},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			words := make([]uint64, 4) // 256 bits
			for _, b := range tt.set {
				words[b/64] |= 1 << (b % 64)
			}
			if got := nextSet(words, tt.from); got != tt.want {
				t.Errorf("nextSet(%v, %d) = %d, want %d", tt.set, tt.from, got, tt.want)
			}
		})
	}
}

// TestRingMatchesModel drives a ring with random inserts, removals and
// advances of every size and checks each step against a plain map.
func TestRingMatchesModel(t *testing.T) {
	const (
		tick  = 1000
		slots = 64 // level 0: 64 ticks, level 1: 4096 ticks
		items = 300
	)
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 42))
		r := newRing(tick, slots, 0)
		r.grow(items - 1)
		model := map[int32]entry{} // the entries in the ring
		randomDue := func(now int64) int64 {
			switch rng.IntN(4) {
			case 0: // level 0
				return now*tick + rng.Int64N(slots*tick)
			case 1: // level 1
				return now*tick + rng.Int64N(slots*slots*tick)
			case 2: // rounds beyond level 1
				return now*tick + rng.Int64N(5*slots*slots*tick)
			default: // in the past
				return now*tick - rng.Int64N(10*tick)
			}
		}
		now := int64(0)
		for step := range 3000 {
			switch op := rng.IntN(10); {
			case op < 4:
				id := rng.Int32N(items)
				want, in := model[id]
				if got, ok := r.remove(id); ok != in || got != want {
					t.Fatalf("seed %d step %d: remove(%d) = %v, %v, want %v, %v", seed, step, id, got, ok, want, in)
				}
				e := entry{due: randomDue(now), period: rng.Int64N(1000), id: id}
				r.insert(e)
				model[id] = e
			case op < 5:
				id := rng.Int32N(items)
				want, in := model[id]
				if got, ok := r.remove(id); ok != in || got != want {
					t.Fatalf("seed %d step %d: remove(%d) = %v, %v, want %v, %v", seed, step, id, got, ok, want, in)
				}
				delete(model, id)
			default:
				// Mostly short steps, sometimes beyond one revolution.
				to := now + 1 + rng.Int64N(8)
				if rng.IntN(20) == 0 {
					to = now + rng.Int64N(3*slots*slots)
				}
				if next, ok := r.next(); ok {
					for id, e := range model {
						if ft := max(ceilDiv(e.due, tick), r.cur); ft < next {
							t.Fatalf("seed %d step %d: next() = %d, but %d fires at %d", seed, step, next, id, ft)
						}
					}
				} else if len(model) != 0 {
					t.Fatalf("seed %d step %d: next() found nothing with %d entries", seed, step, len(model))
				}
				var got []entry
				for more := true; more; {
					got, more = r.advance(to, got)
				}
				var want []entry
				for _, e := range model {
					if ceilDiv(e.due, tick) <= to {
						want = append(want, e)
					}
				}
				byID := func(a, b entry) int { return int(a.id - b.id) }
				slices.SortFunc(got, byID)
				slices.SortFunc(want, byID)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d step %d: advance(%d) = %v, want %v", seed, step, to, got, want)
				}
				now = to
				for _, e := range got { // reinsert as a periodic item would be
					delete(model, e.id)
					if e.id%5 == 0 {
						continue // and some are one-shot
					}
					e.due = (now+1)*tick + rng.Int64N(2*slots*tick)
					r.insert(e)
					model[e.id] = e
				}
			}
			if r.linked != len(model) {
				t.Fatalf("seed %d step %d: linked = %d, want %d", seed, step, r.linked, len(model))
			}
			for id := range int32(items) {
				_, in := model[id]
				if r.has(id) != in {
					t.Fatalf("seed %d step %d: has(%d) = %v, want %v", seed, step, id, r.has(id), in)
				}
				if in && r.get(id) != model[id] {
					t.Fatalf("seed %d step %d: get(%d) = %v, want %v", seed, step, id, r.get(id), model[id])
				}
			}
		}
	}
}

func TestLocate(t *testing.T) {
	for shards := 1; shards <= 7; shards++ {
		w := &Wheel{shards: make([]*shard, shards), nshards: uint32(shards), divM: ^uint64(0)/uint64(shards) + 1}
		for i := range w.shards {
			w.shards[i] = &shard{index: uint32(i)}
		}
		for _, id := range []ID{0, 1, 2, 3, 5, 6, 7, 1000, 65535, 65536, MaxID - 1, MaxID, 1<<32 - 1} {
			s, i := w.locate(id)
			if s.index != uint32(id)%uint32(shards) || i != int32(uint32(id)/uint32(shards)) {
				t.Errorf("%d shards: locate(%d) = shard %d index %d, want %d %d",
					shards, id, s.index, i, uint32(id)%uint32(shards), uint32(id)/uint32(shards))
			}
		}
	}
}

// TestSweepDoesNotKeepItsBatch checks that a ring that caught up with a
// sweep (more than a revolution behind) does not keep a batch of every
// entry afterwards.
func TestSweepDoesNotKeepItsBatch(t *testing.T) {
	const n = 10 * retainBatch
	r := newRing(1000, MinSlots, 0)
	r.grow(n - 1)
	for id := range int32(n) {
		r.insert(entry{due: int64(id) * 1000, period: 1000, id: id})
	}
	due, more := r.advance(10*MinSlots*MinSlots, nil)
	if len(due) != n || more {
		t.Fatalf("advance far ahead = %d entries, more %v; want all %d in one batch", len(due), more, n)
	}
	if cap(r.scratch) > retainBatch {
		t.Errorf("after the sweep the ring keeps a batch of %d entries, want at most %d", cap(r.scratch), retainBatch)
	}
}
