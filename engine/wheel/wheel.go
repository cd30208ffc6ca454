package wheel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// ID identifies a scheduled item. IDs are dense indexes chosen by the caller
// (the engine allocates them from a free list): each shard's slab grows to
// the highest ID it has seen, so sparse IDs waste memory.
type ID uint32

// MaxID is the largest ID the wheel accepts.
const MaxID ID = 1<<22 - 1

// MaxPeriod is the longest period the wheel accepts (about 68 years): 2^31
// seconds, so that every probe period (an int32 of seconds plus less than
// a second of milliseconds) fits.
const MaxPeriod = (math.MaxInt32 + 1) * time.Second

// maxOffset bounds due times, in ns from the epoch either way (about 146
// years), so that due + period never overflows.
const maxOffset = 1 << 62

// Errors returned by the wheel; they are wrapped with details, so test them
// with errors.Is.
var (
	ErrInvalidID     = errors.New("wheel: id out of range")
	ErrInvalidPeriod = errors.New("wheel: period out of range")
	ErrInvalidTime   = errors.New("wheel: time out of range")
	ErrNotScheduled  = errors.New("wheel: id not scheduled")
	ErrRunning       = errors.New("wheel: already running")
)

// Fire is one due fire of an item.
type Fire struct {
	ID ID
	// Gen is the generation the item was given by the Schedule (or
	// Spread) that made the schedule this fire is on; Reschedule and
	// Update keep it. A caller that reuses IDs tells a fire of an ID's
	// previous schedule, collected before that schedule was replaced or
	// cancelled, from a fire of the current one by giving every schedule
	// a new generation and comparing.
	Gen uint32
	Due time.Time // the scheduled time of this fire, on the item's grid
}

// Dispatch receives the due fires of one tick of one shard, on the wheel's
// driver goroutine, with no wheel lock held. (A driver more than a level-0
// revolution behind, 4s at the defaults, delivers everything due in a shard
// in one call.) It must not block (it should hand the work off), and it must not
// keep the slice, which is reused after it returns. It may call any Wheel
// method, including Done and Cancel. A fire already in the slice is
// delivered even if its item is cancelled meanwhile.
type Dispatch func(fires []Fire)

// Wheel schedules periodic items and one-shot timers. Its methods are safe
// for concurrent use, including from inside Dispatch and timer functions.
// All of them except Run and Stats are O(1).
type Wheel struct {
	clock    clockwork.Clock
	epoch    time.Time // tick 0
	tick     int64     // ns per tick
	dispatch Dispatch
	shards   []*shard
	nshards  uint32
	divM     uint64        // ceil(2^64 / nshards): divides ids by nshards without a division
	next     atomic.Uint32 // round robin of After over the shards
	running  atomic.Bool
	drv      driver
}

// New returns a wheel that reads time from clock and hands due fires to
// dispatch. Its epoch (tick 0) is clock.Now(). Items can be scheduled before
// Run; nothing fires until Run.
func New(clock clockwork.Clock, dispatch Dispatch, opts ...Option) *Wheel {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	w := &Wheel{
		clock:    clock,
		epoch:    clock.Now(),
		tick:     int64(o.tick),
		dispatch: dispatch,
		shards:   make([]*shard, o.shards),
		nshards:  uint32(o.shards),
		divM:     ^uint64(0)/uint64(o.shards) + 1,
	}
	w.drv.init(o.tick)
	for i := range w.shards {
		w.shards[i] = newShard(w, uint32(i), o.slots)
	}
	return w
}

// Shards returns the number of shards (locks and slabs the items are
// spread over). However many there are, one driver serves them all, and
// Run holds one clock timer while it waits.
func (w *Wheel) Shards() int { return len(w.shards) }

// Run drives the wheel on the calling goroutine until ctx is done: it hands
// due fires to Dispatch and runs due timers. When ctx is done it returns
// nil, after any running Dispatch call has returned. It returns ErrRunning
// if the wheel is already running. The wheel may be run again after Run
// returns; fires that fell due meanwhile are handled as late.
func (w *Wheel) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer w.running.Store(false)
	w.drive(ctx)
	return nil
}

// Schedule schedules id periodically at a fixed rate: its n-th fire is due at
// firstAt + n*period exactly, and carries gen (Fire.Gen). It replaces any
// existing schedule of id. A firstAt in the past fires on the next tick,
// late.
func (w *Wheel) Schedule(id ID, gen uint32, firstAt time.Time, period time.Duration) error {
	if err := checkItem(id, period); err != nil {
		return err
	}
	due, err := w.offset(firstAt)
	if err != nil {
		return err
	}
	s, i := w.locate(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.growLocked(i)
	e := entry{due: due, period: int64(period), id: i, gen: gen}
	if old, ok := s.items.remove(i); ok {
		s.moveLocked(old, e)
	} else {
		s.insertLocked(e)
	}
	return nil
}

// Reschedule moves the schedule of id: its next fire is due at nextAt, then
// every period; its generation is kept. It returns ErrNotScheduled if id is
// not scheduled.
func (w *Wheel) Reschedule(id ID, nextAt time.Time, period time.Duration) error {
	if err := checkItem(id, period); err != nil {
		return err
	}
	due, err := w.offset(nextAt)
	if err != nil {
		return err
	}
	s, i := w.locate(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items.remove(i)
	if !ok {
		return fmt.Errorf("%w: %d", ErrNotScheduled, id)
	}
	old := e
	e.due, e.period = due, int64(period)
	s.moveLocked(old, e)
	return nil
}

// Update changes the period of id keeping its phase: the next fire is due at
// the previous grid point plus the new period, or, if that is in the past,
// at the first point of the new grid that is not. Its generation is kept.
// It returns ErrNotScheduled if id is not scheduled.
func (w *Wheel) Update(id ID, period time.Duration) error {
	if err := checkItem(id, period); err != nil {
		return err
	}
	now := int64(w.clock.Since(w.epoch))
	s, i := w.locate(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items.remove(i)
	if !ok {
		return fmt.Errorf("%w: %d", ErrNotScheduled, id)
	}
	old := e
	p := int64(period)
	prev := e.due - e.period
	due := prev + p
	if due < now {
		due = prev + ceilDiv(now-prev, p)*p
	}
	e.due, e.period = due, p
	s.moveLocked(old, e)
	return nil
}

// Cancel removes the schedule of id. It reports whether id was scheduled.
// A fire of id already collected by the driver may still be delivered.
func (w *Wheel) Cancel(id ID) bool {
	if id > MaxID {
		return false
	}
	s, i := w.locate(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items.remove(i)
	if ok {
		s.removedLocked(s.items, e)
	}
	return ok
}

// locate returns the shard of id and its index in that shard's slab:
// id % nshards and id / nshards, computed with multiplications (Lemire's
// fastmod; exact for 32-bit ids) because Done calls it once per fire.
func (w *Wheel) locate(id ID) (*shard, int32) {
	if w.nshards == 1 {
		return w.shards[0], int32(id)
	}
	q, _ := bits.Mul64(w.divM, uint64(id))
	r, _ := bits.Mul64(w.divM*uint64(id), uint64(w.nshards))
	return w.shards[r], int32(q)
}

// offset converts t to ns since the epoch.
func (w *Wheel) offset(t time.Time) (int64, error) {
	d := int64(t.Sub(w.epoch))
	if d > maxOffset || d < -maxOffset {
		return 0, fmt.Errorf("%w: %v", ErrInvalidTime, t)
	}
	return d, nil
}

func checkItem(id ID, period time.Duration) error {
	if id > MaxID {
		return fmt.Errorf("%w: %d > MaxID %d", ErrInvalidID, id, MaxID)
	}
	if period <= 0 || period > MaxPeriod {
		return fmt.Errorf("%w: %v", ErrInvalidPeriod, period)
	}
	return nil
}
