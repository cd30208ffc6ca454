package wheel

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

func TestNodeSize(t *testing.T) {
	if got := unsafe.Sizeof(node{}); got != 32 {
		t.Errorf("unsafe.Sizeof(node{}) = %d, want 32", got)
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

// TestRingMatchesModel drives a ring with random links, unlinks and
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
		model := map[int32]int64{} // linked node -> due
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
				i := rng.Int32N(items)
				if _, ok := model[i]; ok {
					r.unlink(i)
				}
				r.nodes[i].due = randomDue(now)
				r.link(i)
				model[i] = r.nodes[i].due
			case op < 5:
				i := rng.Int32N(items)
				_, want := model[i]
				if got := r.unlink(i); got != want {
					t.Fatalf("seed %d step %d: unlink(%d) = %v, want %v", seed, step, i, got, want)
				}
				delete(model, i)
			default:
				// Mostly short steps, sometimes beyond one revolution.
				to := now + 1 + rng.Int64N(8)
				if rng.IntN(20) == 0 {
					to = now + rng.Int64N(3*slots*slots)
				}
				if next, ok := r.next(); ok {
					for i, due := range model {
						if ft := max(ceilDiv(due, tick), r.cur); ft < next {
							t.Fatalf("seed %d step %d: next() = %d, but node %d fires at %d", seed, step, next, i, ft)
						}
					}
				} else if len(model) != 0 {
					t.Fatalf("seed %d step %d: next() found nothing with %d linked", seed, step, len(model))
				}
				got := r.advance(to, nil)
				var want []int32
				for i, due := range model {
					if ceilDiv(due, tick) <= to {
						want = append(want, i)
					}
				}
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d step %d: advance(%d) = %v, want %v", seed, step, to, got, want)
				}
				now = to
				for _, i := range got { // relink as a periodic item would be
					r.nodes[i].due = (now+1)*tick + rng.Int64N(2*slots*tick)
					r.link(i)
					model[i] = r.nodes[i].due
				}
			}
			if r.linked != len(model) {
				t.Fatalf("seed %d step %d: linked = %d, want %d", seed, step, r.linked, len(model))
			}
		}
	}
}
