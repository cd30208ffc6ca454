package wheel

import (
	"math/bits"
	"runtime"
	"time"
)

// Defaults and limits of the options.
const (
	DefaultTick  = time.Millisecond
	MinTick      = 10 * time.Microsecond
	DefaultSlots = 4096
	MinSlots     = 64
	MaxSlots     = 1 << 20
)

// Option configures a Wheel in New.
type Option func(*options)

type options struct {
	tick   time.Duration
	shards int
	slots  int
}

func defaultOptions() options {
	return options{tick: DefaultTick, shards: runtime.GOMAXPROCS(0), slots: DefaultSlots}
}

// WithTick sets the resolution of the wheel (default DefaultTick): fires
// happen on tick boundaries, at most one tick after they are due. A tick
// below MinTick is raised to MinTick; a non-positive one keeps the default.
func WithTick(d time.Duration) Option {
	return func(o *options) {
		switch {
		case d <= 0:
			o.tick = DefaultTick
		case d < MinTick:
			o.tick = MinTick
		default:
			o.tick = d
		}
	}
}

// WithShards sets the number of shards, each with its own lock and driver
// goroutine. It is clamped to [1, GOMAXPROCS]; the default is GOMAXPROCS.
func WithShards(n int) Option {
	return func(o *options) {
		o.shards = min(max(n, 1), runtime.GOMAXPROCS(0))
	}
}

// WithSlots sets the number of slots per level of each shard's wheel
// (default DefaultSlots), rounded up to a power of two within
// [MinSlots, MaxSlots]. Level 0 then spans slots ticks and level 1 spans
// slots*slots ticks; periods up to slots ticks never leave level 0.
func WithSlots(n int) Option {
	return func(o *options) {
		n = min(max(n, MinSlots), MaxSlots)
		o.slots = 1 << bits.Len(uint(n-1))
	}
}
