// Package wheel is the probing engine's scheduler: a sharded, hierarchical,
// hashed timing wheel that fires periodic items (probes) and one-shot timers
// without a goroutine, timer, channel or allocation per item.
//
// # Ticks and slots
//
// Time is cut into ticks (WithTick, 1ms by default) counted from the epoch,
// the clock reading taken by New. An item whose next fire is due at Due is
// linked into the slot of the first tick boundary at or after Due, so it
// fires at most one tick (plus the wake-up latency of the driver) late and
// never early. Internally every time is an int64 count of nanoseconds since
// the epoch; time.Time only appears at the API.
//
// Each shard keeps two levels of slots (WithSlots, 4096 per level by
// default). Level 0 has one slot per tick and holds the items due within one
// revolution (4.096s at the defaults). Level 1 has one slot per revolution of
// level 0 and holds the items due later; when level 0 starts a revolution the
// matching level-1 slot is cascaded into it. An item due further out than one
// revolution of level 1 (4.66h at the defaults) stays in its level-1 slot for
// as many rounds as it needs, so any period up to MaxPeriod (about 68 years)
// works, and each item is touched at most once per level-1 round.
//
// A slot is a singly linked list of blocks of 16 entries of 24 bytes (due
// time, period, id, generation), taken from a per-shard slab with a free list; a
// per-shard slice indexed by id locates each item's entry, so inserting,
// removing and firing are O(1), and a bit per slot marks the non-empty ones
// so the driver finds the next due slot by scanning a few words. Firing a
// slot streams through its blocks and appends each entry to the block of
// its next slot. At 100,000 items the state no longer fits in the CPU
// caches, and an intrusive list per slot, which waits for one cache miss per
// item, measured about 2.5 times slower per fire (BenchmarkPass).
//
// # Sharding and the driver
//
// An item with ID id lives in shard id % shards, at index id / shards of that
// shard's slab. Each shard has its own mutex, so that calls on different
// shards do not contend (at most GOMAXPROCS shards). One driver, the
// goroutine that calls Run, serves every shard: it sleeps on one reused
// clock timer until the earliest non-empty slot of any shard (or an hour
// when the wheel is empty), so a sparse wheel sleeps across the empty ticks;
// inserting an earlier item wakes it through a one-slot channel, and
// removing the work it sleeps until (a timer stopped, an item cancelled or
// moved) re-arms its timer for the earliest work left, so that it does not
// wake up for nothing (each shard keeps its earliest tick with work in an
// atomic for that). When it
// wakes it visits the shards in turn, and in each handles every tick that
// has passed, one at a time: under the shard's lock it collects the tick's
// due items and advances their schedules, then it releases the lock and
// hands the batch to Dispatch. A dense wheel thus costs one wake-up per tick
// with work, not one per shard: on a virtual machine a wake-up costs tens
// of microseconds, more than the work of hundreds of fires. Nothing is
// allocated per item or per fire: the batches are reused.
//
// Schedules are fixed rate: the n-th fire of an item is due at
// firstAt + n*period exactly, with no drift. When the driver falls behind by
// more than a period, the item fires once, late, and its next fire moves to
// the first point of its grid after the current tick; the points passed over
// are counted in Stats.Missed.
//
// # Overlap
//
// The wheel fires every due item, whether or not the work it started last
// time has finished: deciding that a run still in progress means "skip"
// is the caller's (the engine's executor keeps one busy flag per probe and
// counts the skips). Either way the schedule advances on its grid, so a
// slow probe never builds a backlog.
//
// # Phase spreading
//
// Spread starts an item at start + hash(id) mod period, where hash is a fixed
// mixing function of the id. Items registered together (a mass create, a
// restart with 100,000 items) are spread uniformly over their period instead
// of firing in the same tick, and an item keeps its phase across restarts.
//
// # Testing
//
// All time comes from the clockwork.Clock given to New. While it waits, the
// driver holds exactly one timer of that clock, whatever the number of
// shards, and it re-arms that timer only after every Dispatch of the pass
// has returned; a Schedule that needs an earlier wake-up stops the timer
// before it wakes the driver. So with a fake clock, BlockUntilContext(ctx, 1)
// (plus the test's own timers) returns once the driver is parked and has
// delivered every fire due so far: Advance, then BlockUntilContext again,
// and the fires are in.
package wheel
