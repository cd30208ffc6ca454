package main

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/wheel"
)

// model starts cfg.probes probes that fire every cfg.period and report each
// fire's lateness to rec, until ctx is done. It returns once every probe is
// set up; wait blocks until everything it started has stopped.
type model func(ctx context.Context, cfg schedConfig, rec *recorder) (wait func(), err error)

// models are the contestants of the sched benchmark.
var models = map[string]model{
	"wheel":    startWheel,
	"baseline": startBaseline,
}

// modelNames lists the models in the order the parent runs them.
var modelNames = []string{"wheel", "baseline"}

// startWheel runs the probes on one engine/wheel, with the real clock. Each
// fire is handled in Dispatch: record now - Due, then Done.
func startWheel(ctx context.Context, cfg schedConfig, rec *recorder) (func(), error) {
	clock := clockwork.NewRealClock()
	var w *wheel.Wheel
	w = wheel.New(clock, func(fires []wheel.Fire) {
		now := clock.Now()
		for _, f := range fires {
			rec.record(int(f.ID), now.Sub(f.Due))
			w.Done(f.ID)
		}
	}, wheelOptions(cfg)...)
	start := clock.Now()
	for id := range cfg.probes {
		if err := w.Spread(wheel.ID(id), start, cfg.period); err != nil {
			return nil, err
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	return wg.Wait, nil
}

// wheelOptions returns the wheel options that cfg asks for.
func wheelOptions(cfg schedConfig) []wheel.Option {
	opts := []wheel.Option{wheel.WithTick(cfg.tick)}
	if cfg.shards > 0 {
		opts = append(opts, wheel.WithShards(cfg.shards))
	}
	return opts
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
