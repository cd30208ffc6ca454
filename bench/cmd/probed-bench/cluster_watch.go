package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/probed/probed/client"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// watchEvent is a readiness transition as one Watch client received it.
type watchEvent struct {
	ready bool
	at    time.Time
}

// eventLog records the transitions a Watch client receives, by target.
type eventLog struct {
	mu     sync.Mutex
	events map[string][]watchEvent
}

// follow watches c until ctx is done; synced is called once the initial
// snapshot is complete, or when follow returns before (it must be safe to
// call twice).
func (l *eventLog) follow(ctx context.Context, c *client.Client, synced func()) {
	defer synced()
	for resp := range c.Watch(ctx, client.WithLabels(clusterLabel), client.WithKinds(probev1.EventKind_EVENT_KIND_TRANSITION)) {
		at := time.Now()
		l.mu.Lock()
		for _, ev := range resp.Events {
			if ev.GetKind() == probev1.EventKind_EVENT_KIND_TRANSITION {
				l.events[ev.GetName()] = append(l.events[ev.GetName()], watchEvent{ready: ev.GetReady(), at: at})
			}
		}
		l.mu.Unlock()
		if resp.SnapshotComplete {
			synced()
		}
	}
}

// after returns when the first transition of name to ready after t
// arrived.
func (l *eventLog) after(name string, ready bool, t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.events[name] {
		if ev.ready == ready && ev.at.After(t) {
			return ev.at, true
		}
	}
	return time.Time{}, false
}

// flipRecord is one flip of a target's answer.
type flipRecord struct {
	target int
	ready  bool
	at     time.Time // when the backend flipped
	probed time.Time // the first probe that saw the new answer (zero if none)
}

// watchSamples are the delays of one path (the process that probes the
// target → the process a Watch client is connected to).
type watchSamples struct {
	flip, detect []time.Duration
	missed       int
}

// Paths of the Watch delay measurement.
const (
	pathSingle       = "single process"
	pathSameReplica  = "same replica (the owner)"
	pathOtherReplica = "other replica"
)

// measureWatchDelay flips the answer of cfg.watchTargets targets in turn
// and times the transition at Watch clients: on a single bbolt probed, and
// on every replica of a three-replica cluster, where the delay is split
// by whether the client's replica is the target's owner.
func measureWatchDelay(ctx context.Context, e *clusterEnv, r *clusterReport) error {
	for _, name := range []string{setupBolt, setupThreeEtcd} {
		res, err := e.watchDelay(ctx, name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, w := range res {
			e.logf("watch: %s, %s: flip p50 %.1f ms, probe → event p50 %.2f ms p99 %.2f ms (%d flips, %d missed)",
				w.Setup, w.Path, w.FlipMs.P50, w.DetectMs.P50, w.DetectMs.P99, w.Flips, w.Missed)
		}
		r.Watch = append(r.Watch, res...)
	}
	return nil
}

func (e *clusterEnv) watchDelay(ctx context.Context, name string) ([]watchDelayResult, error) {
	n, period := e.cfg.watchTargets, e.cfg.watchPeriod
	b, err := startBackend(n, backendUp)
	if err != nil {
		return nil, err
	}
	defer func() { _ = b.close() }()
	s, err := e.start(ctx, name, "watch", period)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	if err := registerSpread(ctx, s.clients(), n, e.cfg.workers, func(i int) *probev1.Target {
		return b.target(clusterName(i), i, period, clusterLabel)
	}); err != nil {
		return nil, err
	}
	owner := make([]string, n)
	if s.cluster != nil {
		owners, err := s.cluster.owners(ctx, clusterLabel)
		if err != nil {
			return nil, err
		}
		for i := range owner {
			owner[i] = owners[clusterName(i)]
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	logs := make([]*eventLog, len(s.procs))
	var synced sync.WaitGroup
	for i, p := range s.procs {
		logs[i] = &eventLog{events: map[string][]watchEvent{}}
		synced.Add(1)
		wg.Go(func() { logs[i].follow(wctx, p.client, sync.OnceFunc(synced.Done)) })
	}
	synced.Wait() // or ctx is done, which the sleep reports
	if err := sleep(ctx, e.cfg.warmup); err != nil {
		return nil, err
	}

	// Flip the targets in turn, each every watchFlipEvery or a little more.
	var flips []flipRecord
	last := make([]int, n) // index+1 in flips of each target's latest flip
	// A random fraction of the period between flips keeps them off the
	// targets' probe grid (a fixed interval would flip each target at the
	// same phase of its period every time).
	interval := e.cfg.watchFlipEvery / time.Duration(n)
	end := time.Now().Add(e.cfg.duration)
	ready := make([]bool, n)
	for i := range ready {
		ready[i] = true
	}
	closeFlip := func(i int) {
		if k := last[i]; k > 0 {
			if at, ok := b.firstSince(i); ok {
				flips[k-1].probed = at
			}
		}
	}
	for k := 0; time.Now().Before(end); k++ {
		if err := sleep(ctx, interval+rand.N(period)); err != nil {
			return nil, err
		}
		i := k % n
		closeFlip(i)
		ready[i] = !ready[i]
		mode := backendDown
		if ready[i] {
			mode = backendUp
		}
		flips = append(flips, flipRecord{target: i, ready: ready[i], at: b.flip(i, mode)})
		last[i] = len(flips)
	}
	if err := sleep(ctx, 2*period+time.Second); err != nil {
		return nil, err
	}
	for i := range n {
		closeFlip(i)
	}
	cancel()

	paths := map[string]*watchSamples{}
	for wi := range s.procs {
		for _, f := range flips {
			path := pathSingle
			if s.cluster != nil {
				path = pathOtherReplica
				if owner[f.target] == s.ids[wi] {
					path = pathSameReplica
				}
			}
			ps := paths[path]
			if ps == nil {
				ps = &watchSamples{}
				paths[path] = ps
			}
			at, ok := logs[wi].after(clusterName(f.target), f.ready, f.at)
			if !ok || f.probed.IsZero() {
				ps.missed++
				continue
			}
			ps.flip = append(ps.flip, at.Sub(f.at))
			ps.detect = append(ps.detect, at.Sub(f.probed))
		}
	}
	var out []watchDelayResult
	for _, path := range []string{pathSingle, pathSameReplica, pathOtherReplica} {
		ps := paths[path]
		if ps == nil {
			continue
		}
		out = append(out, watchDelayResult{Setup: name, Path: path, PeriodMs: ms(period), Flips: len(ps.flip), Missed: ps.missed,
			FlipMs: percentiles(ps.flip), DetectMs: percentiles(ps.detect)})
	}
	return out, nil
}
