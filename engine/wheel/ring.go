package wheel

import "math/bits"

// nilIndex ends a block list and marks an id that is not in the ring.
const nilIndex = -1

// blockSize is the number of entries per block.
const blockSize = 16

// entry is the scheduler state of one item or timer: 24 bytes, stored in
// the slot where it fires next and moved on each fire.
type entry struct {
	due    int64  // next fire, in ns since the epoch
	period int64  // ns between fires; 0 for one-shot timers
	id     int32  // index of the item (or timer) in the shard
	gen    uint32 // the item's generation (Fire.Gen); 0 for timers
}

// block is the header of blockSize consecutive entries of ring.entries.
type block struct {
	n    int32 // entries in use, at the start of the block
	next int32 // next block of the same slot (or of the free list)
	slot int32 // slot the block belongs to
}

// ring is the two-level wheel of one shard. It is not safe for concurrent
// use; the shard's mutex guards it.
//
// A slot is a singly linked list of blocks of entries; only the first block
// of a slot may be partly filled. Firing a slot reads its entries in
// sequence and appends them, one by one, to the first block of the slot of
// their next fire, so the hot path streams through memory instead of
// chasing one pointer per item, which costs a cache (and, under
// virtualisation, TLB) miss each. loc maps an id to its entry, which makes
// removal O(1): the last entry of the slot's first block takes the removed
// entry's place.
//
// Invariant: an entry in level 0 fires at tick t with cur <= t < cur+n0, in
// slot t&mask, so every entry of the slot of tick cur is due at cur. An entry
// in level 1 fires at a tick t >= cur+n0 (when it was inserted) and sits in
// slot n0 + (t>>shift)&mask; that slot is cascaded into level 0 when cur
// reaches the start of revolution t>>shift.
type ring struct {
	entries []entry // block b holds entries[b*blockSize:][:blocks[b].n]
	blocks  []block
	free    int32    // first unused block, linked through block.next
	loc     []int32  // per id: index into entries, or nilIndex
	heads   []int32  // per slot (level 0, then level 1): first block, or nilIndex
	bits    []uint64 // bit s set <=> slot s is not empty

	tick   int64 // ns per tick
	n0     int64 // slots per level, a power of two
	shift  uint  // log2(n0)
	mask   int64 // n0 - 1
	cur    int64 // next tick to process
	linked int   // entries in the ring

	scratch []entry // for cascade and sweep, reused
}

// newRing returns an empty ring of two levels of slots slots each (a power
// of two, at least 64), whose next tick to process is cur.
func newRing(tick int64, slots int, cur int64) *ring {
	r := &ring{
		free:  nilIndex,
		heads: make([]int32, 2*slots),
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

// grow makes id addressable.
func (r *ring) grow(id int32) {
	n := len(r.loc)
	if int(id) < n {
		return
	}
	r.loc = append(r.loc, make([]int32, int(id)+1-n)...)
	r.loc = r.loc[:cap(r.loc)]
	for i := n; i < len(r.loc); i++ {
		r.loc[i] = nilIndex
	}
}

// has reports whether id is in the ring.
func (r *ring) has(id int32) bool {
	return int(id) < len(r.loc) && r.loc[id] != nilIndex
}

// get returns the entry of id, which must be in the ring.
func (r *ring) get(id int32) entry { return r.entries[r.loc[id]] }

// fireTick is the tick at which a fire due at ns fires: the first tick
// boundary at or after it, but never before cur.
func (r *ring) fireTick(due int64) int64 {
	t := ceilDiv(due, r.tick)
	if t < r.cur {
		t = r.cur
	}
	return t
}

// insert adds e (whose id is addressable and not in the ring) in the slot
// of its next fire, and returns the tick of that fire.
func (r *ring) insert(e entry) int64 {
	t := r.fireTick(e.due)
	var slot int64
	if t-r.cur < r.n0 {
		slot = t & r.mask
	} else {
		slot = r.n0 + (t>>r.shift)&r.mask
	}
	b := r.heads[slot]
	if b == nilIndex || r.blocks[b].n == blockSize {
		nb := r.newBlock()
		r.blocks[nb] = block{next: b, slot: int32(slot)}
		r.heads[slot] = nb
		if b == nilIndex {
			r.bits[slot>>6] |= 1 << (slot & 63)
		}
		b = nb
	}
	i := b*blockSize + r.blocks[b].n
	r.blocks[b].n++
	r.entries[i] = e
	r.loc[e.id] = i
	r.linked++
	return t
}

// newBlock returns an unused block.
func (r *ring) newBlock() int32 {
	if b := r.free; b != nilIndex {
		r.free = r.blocks[b].next
		return b
	}
	r.blocks = append(r.blocks, block{})
	r.entries = append(r.entries, make([]entry, blockSize)...)
	return int32(len(r.blocks) - 1)
}

// freeBlock returns block b, which is in no slot, to the free list.
func (r *ring) freeBlock(b int32) {
	r.blocks[b] = block{next: r.free, slot: nilIndex}
	r.free = b
}

// remove removes id from the ring and returns its entry; ok is false if id
// was not in the ring.
func (r *ring) remove(id int32) (e entry, ok bool) {
	if !r.has(id) {
		return entry{}, false
	}
	i := r.loc[id]
	e = r.entries[i]
	slot := r.blocks[i/blockSize].slot
	head := r.heads[slot]
	last := head*blockSize + r.blocks[head].n - 1
	if last != i {
		moved := r.entries[last]
		r.entries[i] = moved
		r.loc[moved.id] = i
	}
	if r.blocks[head].n--; r.blocks[head].n == 0 {
		r.heads[slot] = r.blocks[head].next
		r.freeBlock(head)
		if r.heads[slot] == nilIndex {
			r.bits[slot>>6] &^= 1 << (slot & 63)
		}
	}
	r.loc[id] = nilIndex
	r.linked--
	return e, true
}

// take empties slot and appends its entries to due; their ids leave the
// ring.
func (r *ring) take(slot int64, due []entry) []entry {
	start := len(due)
	for b := r.heads[slot]; b != nilIndex; {
		i := b * blockSize
		due = append(due, r.entries[i:i+r.blocks[b].n]...)
		next := r.blocks[b].next
		r.freeBlock(b)
		b = next
	}
	r.heads[slot] = nilIndex
	r.bits[slot>>6] &^= 1 << (slot & 63)
	for _, e := range due[start:] {
		r.loc[e.id] = nilIndex
	}
	r.linked -= len(due) - start
	return due
}

// cascade reinserts the entries of the level-1 slot of revolution rev,
// which starts at cur: those due in this revolution move to level 0, the
// others (due a level-1 round or more later) go back to their level-1 slot.
func (r *ring) cascade(rev int64) {
	slot := r.n0 + rev&r.mask
	if r.bits[slot>>6]&(1<<(slot&63)) == 0 {
		return
	}
	r.scratch = r.take(slot, r.scratch[:0])
	for _, e := range r.scratch {
		r.insert(e)
	}
}

// advance processes the ticks from cur through now up to the first one
// with entries: it removes that tick's entries, appends them to due, and
// moves cur past it. more reports whether ticks up to now remain, so
// calling advance until more is false handles every tick through now, one
// tick at a time. A ring more than a revolution behind is swept instead:
// every entry due by now, in one batch. The caller reinserts the periodic
// entries after updating their due times.
func (r *ring) advance(now int64, due []entry) (_ []entry, more bool) {
	if now < r.cur {
		return due, false
	}
	if now-r.cur >= r.n0 {
		return r.sweep(now, due), false
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
		return due, r.cur <= now
	}
	return due, false
}

// sweep is advance for a driver more than a revolution behind: it visits
// every entry once instead of every passed tick.
func (r *ring) sweep(now int64, due []entry) []entry {
	all := r.scratch[:0]
	for w, word := range r.bits {
		for word != 0 {
			all = r.take(int64(w*64+bits.TrailingZeros64(word)), all)
			word &= word - 1
		}
	}
	r.cur = now + 1
	for _, e := range all {
		if ceilDiv(e.due, r.tick) <= now {
			due = append(due, e)
		} else {
			r.insert(e)
		}
	}
	r.scratch = shrink(all[:0]) // a sweep is rare: do not keep a batch of every entry
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
