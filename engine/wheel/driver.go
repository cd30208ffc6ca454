package wheel

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// idleSleep is how long the driver sleeps when nothing is scheduled;
// inserting an item wakes it earlier.
const idleSleep = time.Hour

// notArmed is driver.wakeAt when every insert must take the driver's lock:
// the driver is in a pass, not running, or not sleeping on its timer.
const notArmed = math.MaxInt64

// driver is the state of the wheel's one driver goroutine: the clock timer
// it sleeps on and what it was armed for. One driver serves every shard, so
// a tick with work costs one wake-up however many shards there are.
type driver struct {
	wake chan struct{} // one slot: an earlier item was inserted
	idle int64         // idleSleep in ticks

	// wakeAt is armedTick while the driver sleeps on its timer, else
	// notArmed. An insert due at or after it needs nothing from the driver
	// and reads it without the lock: the driver stores notArmed (under mu)
	// before a pass visits any shard, and an insert holds its shard's lock,
	// so either that pass sees the insert or the insert sees notArmed.
	wakeAt atomic.Int64
	// wakes counts the times the driver woke up: its timer fired, or an
	// insert before the tick it slept until woke it (Stats.Wakes).
	wakes atomic.Uint64

	mu        sync.Mutex
	timer     clockwork.Timer // guarded by mu; written only by the driver, nil when it is not running
	armed     bool            // guarded by mu; timer is set for armedTick and has not fired
	armedTick int64           // guarded by mu
	passing   bool            // guarded by mu; the driver is in a pass and re-arms at its end
}

func (d *driver) init(tick time.Duration) {
	d.wake = make(chan struct{}, 1)
	d.idle = max(1, int64(idleSleep/tick))
	d.wakeAt.Store(notArmed)
}

// drive is the driver: it handles what is due in every shard, sleeps until
// the next tick with work in any shard (or a wake-up), and repeats until
// ctx is done.
func (w *Wheel) drive(ctx context.Context) {
	d := &w.drv
	defer w.stopDriver()
	select { // a wake-up sent before Run is stale: the first pass sees all
	case <-d.wake:
	default:
	}
	fired := false
	for {
		for w.pass(fired) { // behind: the next tick is already due
			fired = false
			if ctx.Err() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.timer.Chan():
			fired = true
		case <-d.wake:
			fired = false
		}
		d.wakes.Add(1)
	}
}

// stopDriver releases the driver's timer.
func (w *Wheel) stopDriver() {
	d := &w.drv
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wakeAt.Store(notArmed)
	if d.timer != nil {
		d.timer.Stop()
		d.timer, d.armed = nil, false
	}
	d.passing = false
}

// pass handles everything due in every shard, shard after shard (see
// shard.pass), then re-arms the timer for the earliest next tick with work
// in any shard. fired says that the timer has fired. pass reports true,
// without arming the timer, when that next tick is already due; the driver
// then passes again at once.
//
// The timer is re-armed only after every Dispatch has returned, so with a
// fake clock the driver counts as parked only once it has delivered
// everything due.
func (w *Wheel) pass(fired bool) (again bool) {
	d := &w.drv
	d.mu.Lock()
	if fired {
		d.armed = false
	}
	d.wakeAt.Store(notArmed)
	d.passing = true
	// A wake-up sent since the driver last woke is stale: it was sent for an
	// insert made before this lock, which this pass sees. Left in the
	// channel, it would wake the driver for a pass while its timer is armed,
	// and a fake clock would count the driver as parked during that pass.
	select {
	case <-d.wake:
	default:
	}
	d.mu.Unlock()

	nowNs := int64(w.clock.Since(w.epoch))
	now := nowNs / w.tick
	for _, s := range w.shards {
		s.pass(now, nowNs)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	// The shards' earliest work, read under mu: an insert during the pass
	// lowered its shard's earliest before it took mu (wakeFor), an insert
	// after this read waits for mu and then finds the timer armed, and a
	// timer stopped or an item moved during the pass raised it again.
	next := now + d.idle
	for _, s := range w.shards {
		next = min(next, s.earliest.Load())
	}
	// Not passing once armed: set before the timer is, since a fake clock
	// counts the driver as parked as soon as its timer is set, and a
	// removal then must find it parked (Wheel.removed).
	d.passing = false
	if !w.armLocked(next) {
		// Still passing: inserts until the next pass visits their shard
		// are seen by that visit.
		d.passing = true
		return true
	}
	return false
}

// armLocked sets the timer for tick next, unless it is already set for it.
// It reports false, leaving the timer as it was, if that tick has already
// begun. The caller holds drv.mu.
//
// A timer counts its duration from the clock's time when it is set, not
// when the duration was computed: if the clock moved by a tick or more in
// between (the driver stalled on a loaded machine, or a test advanced a
// fake clock right then), the timer would fire that much late — with a
// fake clock that then stands still, never. So the clock is read again
// once the timer is set, and the timer set again from that reading if it
// moved; if next has begun by then, the timer is stopped and the driver
// woken instead (and armLocked reports false). Until that second reading,
// a fake clock counts the driver as parked on the timer set from the
// first, though work may be due: a test that moves the clock while the
// driver arms waits for the work's effect, not for the driver to park.
func (w *Wheel) armLocked(next int64) bool {
	d := &w.drv
	if d.armed && next == d.armedTick {
		d.wakeAt.Store(next)
		return true
	}
	for set := false; ; set = true {
		before := w.clock.Since(w.epoch)
		dur := time.Duration(next*w.tick - int64(before))
		if dur <= 0 {
			if set {
				w.disarmLocked()
				select {
				case d.wake <- struct{}{}:
				default:
				}
			}
			return false
		}
		// The state first, the timer last: a fake clock counts the driver as
		// parked once its timer is set, and what then reads the state without
		// the lock (wakeFor, removed) must find it armed.
		d.armed, d.armedTick = true, next
		d.wakeAt.Store(next)
		if d.timer == nil {
			d.timer = w.clock.NewTimer(dur)
		} else {
			if !d.timer.Stop() {
				// Drop a value sent before the Stop, so that it cannot wake the
				// driver for a deadline that no longer holds.
				select {
				case <-d.timer.Chan():
				default:
				}
			}
			d.timer.Reset(dur)
		}
		if w.clock.Since(w.epoch)-before < time.Duration(w.tick) {
			return true
		}
	}
}

// disarmLocked stops the timer and drops what it may have sent. The caller
// holds drv.mu.
func (w *Wheel) disarmLocked() {
	d := &w.drv
	if !d.timer.Stop() {
		select {
		case <-d.timer.Chan():
		default:
		}
	}
	d.armed = false
	d.wakeAt.Store(notArmed)
}

// wakeFor wakes the driver if something now fires at tick t, before the
// timer it sleeps on; a driver in a pass takes t into account when it
// re-arms at the end of the pass. It stops that timer first, so that a fake
// clock sees the driver as busy until it has re-armed. The caller holds the
// lock of the shard t was inserted in, and has lowered that shard's
// earliest to t.
//
// (Re-arming the driver's timer here instead, so that the driver sleeps
// on, measured more CPU, not less: the Go runtime then wakes its network
// poller to shorten its sleep, which costs more than waking the driver.)
func (w *Wheel) wakeFor(t int64) {
	d := &w.drv
	if t >= d.wakeAt.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.passing: // the pass re-arms for the shards' earliest
		return
	case d.armed && t >= d.armedTick:
		return
	case d.armed:
		d.timer.Stop()
		d.armed = false
		d.wakeAt.Store(notArmed)
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// removed re-arms the driver's timer when the work it sleeps until, at
// tick t, was removed (a timer stopped, an item cancelled or moved): it
// then sleeps until the earliest work left in any shard instead of waking
// up for nothing. The caller holds the lock of the shard t was removed
// from, and has set that shard's earliest.
//
// Another shard's insert before tick t cannot be missed: the insert lowers
// its shard's earliest before it reads wakeAt, and removed stores notArmed
// in wakeAt before it reads the shards' earliest, so either it sees that
// shard's new earliest or the insert sees notArmed and waits for drv.mu.
func (w *Wheel) removed(t int64) {
	d := &w.drv
	if t != d.wakeAt.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.armed || d.passing || t != d.armedTick {
		return
	}
	d.wakeAt.Store(notArmed)
	next := int64(w.clock.Since(w.epoch))/w.tick + d.idle
	for _, s := range w.shards {
		next = min(next, s.earliest.Load())
	}
	if (next <= t || !w.armLocked(next)) && d.armed {
		d.wakeAt.Store(d.armedTick)
	}
}
