package engine

import "sort"

// history is the retained event log: a ring of the last events, bounded by
// count and by (estimated) bytes. Revisions in it are strictly increasing.
// Not safe for concurrent use; the feed's lock guards it.
type history struct {
	buf   []Event // ring; grows to maxCount; Target always nil
	sizes []int32 // Event.size of buf's events, computed once on append
	// records are the targets of buf's events (nil for probe events), in
	// the compact form: the record the view holds when it is the same.
	records []*record
	// ends marks the events that end their delivery (a publish: one
	// store commit), so that a catch-up cuts its batches between
	// deliveries (readWhole). Events restored from the store each end
	// one: their grouping is not stored.
	ends       []bool
	start, n   int
	bytes      int
	maxCount   int
	maxBytes   int
	compacted  uint64 // revision of the newest event dropped; 0 if none
	compaction uint64 // events dropped since the store was last compacted
}

func newHistory(maxCount, maxBytes int) history {
	return history{maxCount: max(maxCount, 1), maxBytes: maxBytes}
}

// reserve makes room for n events (at most the count bound) in an empty
// history, so that a restore appending them allocates once.
func (h *history) reserve(n int) {
	if h.n > 0 || len(h.buf) > 0 {
		return
	}
	n = min(n, h.maxCount)
	h.buf, h.sizes, h.records, h.ends = make([]Event, 0, n), make([]int32, 0, n), make([]*record, 0, n), make([]bool, 0, n)
}

func (h *history) at(i int) *Event {
	return &h.buf[(h.start+i)%len(h.buf)]
}

// append adds ev (whose revision is greater than every retained one) and
// drops the oldest events beyond the bounds. size is ev.size(); rec is
// the record of ev.Target (nil without one), kept instead of it. ev ends
// its delivery unless joinNext follows.
func (h *history) append(ev Event, rec *record, size int) {
	ev.Target = nil
	for h.n > 0 && (h.n >= h.maxCount || (h.maxBytes > 0 && h.bytes+size > h.maxBytes)) {
		h.dropOldest()
	}
	if h.n == len(h.buf) && (h.start == 0 || len(h.buf) == 0) && len(h.buf) < h.maxCount {
		// Full but unwrapped and below its bound: grow.
		h.buf = append(h.buf, ev)
		h.sizes = append(h.sizes, int32(size))
		h.records = append(h.records, rec)
		h.ends = append(h.ends, true)
	} else {
		if h.n == len(h.buf) {
			// Full and wrapped (only reachable via the byte bound): make room.
			h.dropOldest()
		}
		i := (h.start + h.n) % len(h.buf)
		h.buf[i], h.sizes[i], h.records[i], h.ends[i] = ev, int32(size), rec, true
	}
	h.n++
	h.bytes += size
}

// joinNext makes the newest event not the end of its delivery: the next
// one appended belongs to the same.
func (h *history) joinNext() {
	if h.n > 0 {
		h.ends[(h.start+h.n-1)%len(h.buf)] = false
	}
}

func (h *history) dropOldest() {
	old := h.at(0)
	h.compacted = old.Revision
	h.bytes -= int(h.sizes[h.start])
	*old = Event{} // release what it points to
	h.records[h.start] = nil
	h.start = (h.start + 1) % len(h.buf)
	h.n--
	h.compaction++
}

// oldest is the revision of the oldest retained event, or next when none
// is retained.
func (h *history) oldest(next uint64) uint64 {
	if h.n == 0 {
		return next
	}
	return h.at(0).Revision
}

// search returns the index of the first retained event with Revision >= rev
// (h.n when there is none).
func (h *history) search(rev uint64) int {
	return sort.Search(h.n, func(i int) bool { return h.at(i).Revision >= rev })
}

// readWhole is read, except that a batch cut by limit ends where a
// delivery ends, when one ends in it (a delivery larger than limit is
// cut, as a watcher takes one larger than half its buffer in parts);
// more reports whether newer events remain.
func (h *history) readWhole(dst []Event, recs []*record, rev uint64, limit int) (_ []Event, _ []*record, more bool) {
	from, n := len(dst), 0
	i := h.search(rev)
	for ; i < h.n && n < limit; i++ {
		dst = append(dst, *h.at(i))
		recs = append(recs, h.records[(h.start+i)%len(h.buf)])
		n++
	}
	if i == h.n {
		return dst, recs, false
	}
	for k := n; k > 0; k-- { // the last event read that ends a delivery
		if h.ends[(h.start+i-n+k-1)%len(h.buf)] {
			clear(dst[from+k:])
			clear(recs[from+k:])
			return dst[:from+k], recs[:from+k], true
		}
	}
	return dst, recs, true
}

// read appends to dst the retained events with Revision >= rev, at most
// limit of them, without their Target, and to recs their records.
func (h *history) read(dst []Event, recs []*record, rev uint64, limit int) ([]Event, []*record) {
	for i := h.search(rev); i < h.n && limit > 0; i++ {
		dst = append(dst, *h.at(i))
		recs = append(recs, h.records[(h.start+i)%len(h.buf)])
		limit--
	}
	return dst, recs
}
