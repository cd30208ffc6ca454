package wheel

import "sync/atomic"

// A busySet is the set of items of a shard that have fired and wait for
// Done: a bitmap in pages allocated as the shard grows. Pages are only ever
// added, so Done clears a bit with one atomic operation and no lock.
type busySet struct {
	pages [busyPages]atomic.Pointer[busyPage]
}

const (
	busyPageBits = 16                           // ids per page: 1<<busyPageBits
	busyPages    = int(MaxID)>>busyPageBits + 1 // enough pages for every valid id
	busyWords    = 1 << busyPageBits / 64       // uint64 words per page
)

type busyPage [busyWords]atomic.Uint64

// grow makes room for item i. The caller holds the shard's mutex.
func (b *busySet) grow(i int32) {
	if p := &b.pages[i>>busyPageBits]; p.Load() == nil {
		p.Store(new(busyPage))
	}
}

// word returns the word and bit of item i, or nil if i has no page yet.
func (b *busySet) word(i int32) (*atomic.Uint64, uint64) {
	p := b.pages[i>>busyPageBits].Load()
	if p == nil {
		return nil, 0
	}
	return &p[(i>>6)&(busyWords-1)], 1 << (i & 63)
}

// mark marks item i busy and reports whether it was already busy. The
// caller holds the shard's mutex, and i has a page.
func (b *busySet) mark(i int32) (wasBusy bool) {
	w, bit := b.word(i)
	if w.Load()&bit != 0 {
		return true
	}
	w.Or(bit)
	return false
}

// clear marks item i not busy. It is safe without the shard's mutex.
func (b *busySet) clear(i int32) {
	if w, bit := b.word(i); w != nil {
		w.And(^bit)
	}
}
