package wheel

import "math/bits"

// nilIndex ends a slot list and marks a node that is in no slot.
const nilIndex = -1

// lanes is the number of lists per slot: node i is in lane i%lanes. Walking
// the lanes of a slot side by side keeps that many independent loads in
// flight; a single list would wait for one cache miss per node.
const lanes = 8

// node is the scheduler state of one item: 32 bytes, kept in a slab.
type node struct {
	next, prev int32 // neighbours in the slot list, or nilIndex
	slot       int32 // index into ring.heads while linked, nilIndex otherwise
	busy       bool  // fired and Done not yet called (items only)
	due        int64 // next fire, in ns since the epoch
	period     int64 // ns between fires; 0 for one-shot timers
}

// ring is the two-level wheel of one shard: a slab of nodes and the slot
// lists that link them. It is not safe for concurrent use; the shard's mutex
// guards it.
//
// Invariant: a node linked in level 0 fires at tick t with
// cur <= t < cur+n0, in slot t&mask0, so every node of the slot of tick cur
// is due at cur. A node linked in level 1 fires at a tick t >= cur+n0 (when
// it was linked) and sits in slot n0 + (t>>shift)&mask1; that slot is
// cascaded into level 0 when cur reaches the start of revolution t>>shift.
type ring struct {
	nodes []node
	heads []int32  // lanes list heads per slot: level-0 slots, then level-1 slots
	bits  []uint64 // bit s set <=> slot s is not empty

	tick   int64 // ns per tick
	n0     int64 // slots per level, a power of two
	shift  uint  // log2(n0)
	mask   int64 // n0 - 1
	cur    int64 // next tick to process
	linked int   // nodes currently linked

	scratch []int32 // for cascade and sweep, reused
}

// newRing returns an empty ring of two levels of slots slots each (a power
// of two, at least 64), whose next tick to process is cur.
func newRing(tick int64, slots int, cur int64) *ring {
	r := &ring{
		heads: make([]int32, 2*slots*lanes),
		bits:  make([]uint64, 2*slots/64),
		tick:  tick,
		n0:    int64(slots),
		shift: uint(bits.TrailingZeros(uint(slots))),
		mask:  int64(slots - 1),
		cur:   cur,
	}
	for i := range r.heads {
		r.heads[i] = nilIndex
	}
	return r
}

// grow makes r.nodes[i] addressable; new nodes are unlinked.
func (r *ring) grow(i int32) {
	n := len(r.nodes)
	if int(i) < n {
		return
	}
	r.nodes = append(r.nodes, make([]node, int(i)+1-n)...)
	r.nodes = r.nodes[:cap(r.nodes)]
	for j := n; j < len(r.nodes); j++ {
		r.nodes[j] = node{next: nilIndex, prev: nilIndex, slot: nilIndex}
	}
}

// fireTick is the tick at which a fire due at ns fires: the first tick
// boundary at or after it, but never before cur.
func (r *ring) fireTick(due int64) int64 {
	t := ceilDiv(due, r.tick)
	if t < r.cur {
		t = r.cur
	}
	return t
}

// link links the unlinked node i according to its due time and returns the
// tick at which it fires.
func (r *ring) link(i int32) int64 {
	t := r.fireTick(r.nodes[i].due)
	var slot int64
	if t-r.cur < r.n0 {
		slot = t & r.mask
	} else {
		slot = r.n0 + (t>>r.shift)&r.mask
	}
	r.push(i, int32(slot))
	return t
}

// push links node i at the head of its lane of slot.
func (r *ring) push(i, slot int32) {
	n := &r.nodes[i]
	h := slot*lanes + i%lanes
	head := r.heads[h]
	n.slot, n.prev, n.next = slot, nilIndex, head
	if head != nilIndex {
		r.nodes[head].prev = i
	}
	r.heads[h] = i
	r.bits[slot>>6] |= 1 << (slot & 63)
	r.linked++
}

// unlink removes node i from its slot; it reports false if i was not linked.
func (r *ring) unlink(i int32) bool {
	n := &r.nodes[i]
	if n.slot == nilIndex {
		return false
	}
	if n.prev != nilIndex {
		r.nodes[n.prev].next = n.next
	} else {
		r.heads[n.slot*lanes+i%lanes] = n.next
		if n.next == nilIndex && r.emptySlot(n.slot) {
			r.bits[n.slot>>6] &^= 1 << (n.slot & 63)
		}
	}
	if n.next != nilIndex {
		r.nodes[n.next].prev = n.prev
	}
	n.slot, n.prev, n.next = nilIndex, nilIndex, nilIndex
	r.linked--
	return true
}

// emptySlot reports whether every lane of slot is empty.
func (r *ring) emptySlot(slot int32) bool {
	for _, h := range r.heads[slot*lanes : (slot+1)*lanes] {
		if h != nilIndex {
			return false
		}
	}
	return true
}

// take empties slot and appends its nodes, unlinked, to due.
func (r *ring) take(slot int64, due []int32) []int32 {
	var cursor [lanes]int32
	heads := r.heads[slot*lanes : (slot+1)*lanes]
	copy(cursor[:], heads)
	for k := range heads {
		heads[k] = nilIndex
	}
	r.bits[slot>>6] &^= 1 << (slot & 63)
	n0 := len(due)
	for more := true; more; {
		more = false
		for k, i := range cursor {
			if i == nilIndex {
				continue
			}
			more = true
			n := &r.nodes[i]
			due = append(due, i)
			cursor[k] = n.next
			n.slot, n.prev, n.next = nilIndex, nilIndex, nilIndex
		}
	}
	r.linked -= len(due) - n0
	return due
}

// cascade relinks the nodes of the level-1 slot of revolution rev, which
// starts at cur: those due in this revolution move to level 0, the others
// (due a level-1 round or more later) go back to their level-1 slot.
func (r *ring) cascade(rev int64) {
	slot := r.n0 + rev&r.mask
	if r.bits[slot>>6]&(1<<(slot&63)) == 0 {
		return
	}
	r.scratch = r.take(slot, r.scratch[:0])
	for _, i := range r.scratch {
		r.link(i)
	}
}

// advance processes every tick from cur through now: it unlinks the nodes
// due by tick now, appends their indexes to due and sets cur to now+1. The
// caller relinks the periodic ones after updating their due times.
func (r *ring) advance(now int64, due []int32) []int32 {
	if now < r.cur {
		return due
	}
	if now-r.cur >= r.n0 {
		return r.sweep(now, due)
	}
	level0 := r.bits[:r.n0/64]
	for r.cur <= now {
		if r.cur&r.mask == 0 {
			r.cascade(r.cur >> r.shift)
		}
		end := min(now, r.cur|r.mask) // the last tick of this revolution
		d := nextSet(level0, r.cur&r.mask)
		if d < 0 || r.cur+d > end {
			r.cur = end + 1
			continue
		}
		r.cur += d
		due = r.take(r.cur&r.mask, due)
		r.cur++
	}
	return due
}

// sweep is advance for a driver more than a revolution behind: it visits
// every linked node once instead of every passed tick.
func (r *ring) sweep(now int64, due []int32) []int32 {
	all := r.scratch[:0]
	for w, word := range r.bits {
		for word != 0 {
			all = r.take(int64(w*64+bits.TrailingZeros64(word)), all)
			word &= word - 1
		}
	}
	r.cur = now + 1
	for _, i := range all {
		if ceilDiv(r.nodes[i].due, r.tick) <= now {
			due = append(due, i)
		} else {
			r.link(i)
		}
	}
	r.scratch = all[:0]
	return due
}

// next returns the next tick at which advance has work to do (a non-empty
// level-0 slot or a cascade of a non-empty level-1 slot); ok is false when
// the ring is empty.
func (r *ring) next() (tick int64, ok bool) {
	if r.linked == 0 {
		return 0, false
	}
	k := r.n0 / 64
	tick = -1
	if d := nextSet(r.bits[:k], r.cur&r.mask); d >= 0 {
		tick = r.cur + d
	}
	rev := ceilDiv(r.cur, r.n0) // the next revolution to cascade
	if d := nextSet(r.bits[k:], rev&r.mask); d >= 0 {
		if t := (rev + d) << r.shift; tick < 0 || t < tick {
			tick = t
		}
	}
	return tick, tick >= 0
}

// nextSet returns the distance, going up from bit from and wrapping around,
// to the first set bit of words, or -1 when none is set.
func nextSet(words []uint64, from int64) int64 {
	n := int64(len(words))
	w := from >> 6
	if word := words[w] >> (from & 63); word != 0 {
		return int64(bits.TrailingZeros64(word))
	}
	for k := int64(1); k <= n; k++ {
		j := (w + k) % n
		if word := words[j]; word != 0 {
			return (k*64 + int64(bits.TrailingZeros64(word)) - from&63 + n*64) % (n * 64)
		}
	}
	return -1
}

// ceilDiv returns a/b rounded up, for b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b > 0 {
		q++
	}
	return q
}
