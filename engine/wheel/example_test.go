package wheel_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/wheel"
)

// A probing engine hands each fire to a worker and calls Done when the
// probe has run; a fake clock makes the schedule visible step by step.
func Example() {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()
	runs := make(chan wheel.Fire, 16) // the engine's work queue
	w := wheel.New(clock, func(fires []wheel.Fire) {
		for _, f := range fires {
			runs <- f // must not block: the queue has room
		}
	}, wheel.WithShards(1))

	if err := w.Schedule(42, 0, start.Add(10*time.Millisecond), 100*time.Millisecond); err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()

	for range 3 {
		_ = clock.BlockUntilContext(ctx, 1) // the driver sleeps on its one timer
		clock.Advance(50 * time.Millisecond)
		_ = clock.BlockUntilContext(ctx, 1) // and has delivered
		for len(runs) > 0 {
			f := <-runs
			fmt.Printf("probe %d due at +%v, run at +%v\n", f.ID, f.Due.Sub(start), clock.Since(start))
		}
	}
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// probe 42 due at +10ms, run at +50ms
	// probe 42 due at +110ms, run at +150ms
	// Run: <nil>
}
