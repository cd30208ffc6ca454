package main

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/wheel"
)

// model is a contestant of the sched benchmark.
type model struct {
	// start starts cfg.probes probes that fire every cfg.period and report
	// each fire's lateness to rec, until ctx is done. It returns once every
	// probe is set up; wait blocks until everything it started has stopped.
	start func(ctx context.Context, cfg schedConfig, rec *recorder) (wait func(), err error)
	// overloads says that the model may keep every thread busy, so that a
	// goroutine that yields (as runtime.GC does) can wait minutes to run.
	overloads bool
}

// models are the contestants of the sched benchmark. The parent runs
// modelNames; "timers" is a diagnostic for the sched-child command.
var models = map[string]model{
	"wheel":    {start: startWheel},
	"baseline": {start: startBaseline, overloads: true},
	"timers":   {start: startTimers},
}

// modelNames lists the models the parent runs, in order.
var modelNames = []string{"wheel", "baseline"}

// startWheel runs the probes on one engine/wheel, with the real clock. Each
// fire is handled in Dispatch: record now - Due.
func startWheel(ctx context.Context, cfg schedConfig, rec *recorder) (func(), error) {
	clock := clockwork.NewRealClock()
	w := wheel.New(clock, func(fires []wheel.Fire) {
		now := clock.Now()
		for _, f := range fires {
			rec.record(int(f.ID), now.Sub(f.Due))
		}
	}, wheelOptions(cfg)...)
	start := clock.Now()
	for id := range cfg.probes {
		if err := w.Spread(wheel.ID(id), 0, start, cfg.period); err != nil {
			return nil, err
		}
	}
	stopMetrics := func() {}
	if cfg.metrics {
		_, stop, err := startSchedMetrics(ctx, w)
		if err != nil {
			return nil, err
		}
		stopMetrics = stop
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	return func() { wg.Wait(); stopMetrics() }, nil
}

// wheelOptions returns the wheel options that cfg asks for.
func wheelOptions(cfg schedConfig) []wheel.Option {
	opts := []wheel.Option{wheel.WithTick(cfg.tick)}
	if cfg.shards > 0 {
		opts = append(opts, wheel.WithShards(cfg.shards))
	}
	return opts
}

// startTimers is a diagnostic: each probe is a goroutine that re-arms one
// time.Timer for the next point of its grid (start + n*period) and does
// nothing else. With --probes=1 and --period set to the wheel's tick (as
// the sched command's wake-up floor runs it), it measures the floor under
// the wheel's driver: the cost and the lateness of waking a goroutine at
// every tick.
func startTimers(ctx context.Context, cfg schedConfig, rec *recorder) (func(), error) {
	start := time.Now()
	var wg sync.WaitGroup
	for id := range cfg.probes {
		wg.Go(func() {
			next := cfg.period // offset of the next grid point from start
			t := time.NewTimer(next)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					now := time.Since(start)
					rec.record(id, now-next)
					next = (now/cfg.period + 1) * cfg.period
					t.Reset(next - now)
				}
			}
		})
	}
	return wg.Wait, nil
}

// startBaseline runs the kubelet model: one goroutine and one time.Ticker
// per probe, started at the same phase the wheel would spread it to. Each
// tick records its lateness against the ticker's own fixed-rate grid (the
// time a tick carries is the grid point it was sent for).
func startBaseline(ctx context.Context, cfg schedConfig, rec *recorder) (func(), error) {
	var wg sync.WaitGroup
	for id := range cfg.probes {
		wg.Go(func() {
			if sleep(ctx, wheel.Phase(wheel.ID(id), cfg.period)) != nil {
				return
			}
			t := time.NewTicker(cfg.period)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case due := <-t.C:
					rec.record(id, time.Since(due))
				}
			}
		})
	}
	return wg.Wait, nil
}
