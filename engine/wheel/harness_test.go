package wheel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/probed/probed/engine/wheel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// epoch is the fake clock's start in every test: deliberately not aligned to
// a millisecond.
var epoch = time.Date(2026, 11, 21, 12, 0, 0, 123_456, time.UTC)

// waitLimit bounds every wait of a test on an asynchronous effect; it only
// matters when a test is about to fail.
const waitLimit = 10 * time.Second

// harness runs a wheel on a fake clock and records its fires.
type harness struct {
	t     *testing.T
	clock *clockwork.FakeClock
	w     *wheel.Wheel
	fires chan wheel.Fire
	// onFire, when set, is called by Dispatch for each fire after it is
	// recorded. Set it before start.
	onFire func(wheel.Fire)
	// stop stops the wheel and waits for Run to return; it is idempotent.
	stop func()
}

// newHarness returns a harness whose wheel is not running yet.
func newHarness(t *testing.T, opts ...wheel.Option) *harness {
	t.Helper()
	fake := clockwork.NewFakeClockAt(epoch)
	return newHarnessOn(t, fake, fake, opts...)
}

// newHarnessOn is newHarness with the wheel reading clock, which reads
// (or is) fake, the clock the harness moves.
func newHarnessOn(t *testing.T, fake *clockwork.FakeClock, clock clockwork.Clock, opts ...wheel.Option) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		clock: fake,
		fires: make(chan wheel.Fire, 100_000),
	}
	h.w = wheel.New(clock, func(fires []wheel.Fire) {
		for _, f := range fires {
			h.fires <- f
			if h.onFire != nil {
				h.onFire(f)
			}
		}
	}, opts...)
	return h
}

// start runs the wheel until the test ends and waits until its driver is
// parked.
func (h *harness) start() *harness {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.w.Run(ctx) }()
	h.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-errc; err != nil {
			h.t.Errorf("Run() = %v, want nil", err)
		}
	})
	h.t.Cleanup(h.stop)
	h.park()
	return h
}

// park waits until the driver sleeps on its one timer, which implies that
// it has delivered everything that was due in every shard.
func (h *harness) park() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		h.t.Fatalf("driver not parked: %v", err)
	}
}

// advance moves the clock by d once the driver is parked, then waits
// until they have handled it.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.park()
	h.clock.Advance(d)
	h.park()
}

// advanceTo advances the clock to t (if it is in the future).
func (h *harness) advanceTo(t time.Time) {
	h.t.Helper()
	if d := t.Sub(h.clock.Now()); d > 0 {
		h.advance(d)
	}
}

// drain returns the fires recorded so far.
func (h *harness) drain() []wheel.Fire {
	var got []wheel.Fire
	for {
		select {
		case f := <-h.fires:
			got = append(got, f)
		default:
			return got
		}
	}
}

// next returns the next fire, failing the test if none comes.
func (h *harness) next() wheel.Fire {
	h.t.Helper()
	select {
	case f := <-h.fires:
		return f
	case <-time.After(waitLimit):
		h.t.Fatal("no fire")
		return wheel.Fire{}
	}
}

// at returns the fake clock's start plus d.
func at(d time.Duration) time.Time { return epoch.Add(d) }

// dueOffsets returns the Due times of fires, as offsets from epoch.
func dueOffsets(fires []wheel.Fire) []time.Duration {
	var out []time.Duration
	for _, f := range fires {
		out = append(out, f.Due.Sub(epoch))
	}
	return out
}

// ceilTick rounds t up to the next tick boundary of the wheel (ticks count
// from epoch).
func ceilTick(t time.Time, tick time.Duration) time.Time {
	d := t.Sub(epoch)
	if r := d % tick; r > 0 {
		d += tick - r
	}
	return epoch.Add(d)
}
