package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	probev1 "github.com/probed/probed/proto/probe/v1"
)

// killGrace: a probe that reaches the backend within this time of the
// SIGKILL was sent by the killed replica before it died (no other replica
// can own its shards before its lease expires, seconds later), so it does
// not count as the first probe after the failover.
const killGrace = 100 * time.Millisecond

// measureFailover kills one of three replicas with SIGKILL, cfg.kills
// times per lease TTL (restarting it and waiting for the shards to
// rebalance in between), and times, for every target the killed replica
// owned, the kill → the target's next probe at the backend.
func measureFailover(ctx context.Context, e *clusterEnv, r *clusterReport) error {
	for _, ttl := range e.cfg.leaseTTLs {
		res, err := e.failover(ctx, ttl)
		if err != nil {
			return fmt.Errorf("lease TTL %v: %w", ttl, err)
		}
		e.logf("failover: lease TTL %v: %d targets over %d kills: p50 %.0f ms, p99 %.0f ms, max %.0f ms, %d not probed again",
			ttl, res.Targets, res.Kills, res.Ms.P50, res.Ms.P99, res.Ms.Max, res.NotProbed)
		r.Failover = append(r.Failover, res)
	}
	return nil
}

func (e *clusterEnv) failover(ctx context.Context, ttl time.Duration) (failoverResult, error) {
	n, period := e.cfg.failTargets, e.cfg.failPeriod
	b, err := startBackend(n, backendUp)
	if err != nil {
		return failoverResult{}, err
	}
	defer func() { _ = b.close() }()
	// --settle is 1s, as in the other measurements: it delays only the
	// handover to a (re)started replica, which is not what is timed, and
	// the benchmark waits for it between kills.
	o := e.clusterOptions("failover", ttl, period)
	e.logf("failover: starting 3 replicas, lease TTL %v", ttl)
	c, err := startCluster(ctx, o, 3, e.stderr)
	if err != nil {
		return failoverResult{}, err
	}
	defer c.stop()
	if err := registerSpread(ctx, c.clients(), n, e.cfg.workers, func(i int) *probev1.Target {
		return b.target(clusterName(i), i, period, clusterLabel)
	}); err != nil {
		return failoverResult{}, err
	}
	index := make(map[string]int, n)
	for i := range n {
		index[clusterName(i)] = i
	}
	res := failoverResult{LeaseTTLSeconds: ttl.Seconds(), PeriodMs: ms(period), Kills: e.cfg.kills}
	var all []time.Duration
	for k := range e.cfg.kills {
		if err := waitProbed(ctx, b, n, 2*period+10*time.Second); err != nil {
			return failoverResult{}, err
		}
		owners, err := c.owners(ctx, clusterLabel)
		if err != nil {
			return failoverResult{}, err
		}
		victim := k % len(c.ids)
		var moved []int
		for name, id := range owners {
			if id == c.ids[victim] {
				moved = append(moved, index[name])
			}
		}
		at, err := c.kill(victim)
		if err != nil {
			return failoverResult{}, err
		}
		for _, i := range moved {
			b.markFrom(i, at.Add(killGrace))
		}
		limit := time.Now().Add(3*ttl + 10*time.Second)
		var got []time.Duration
		for {
			got = got[:0]
			for _, i := range moved {
				if t, ok := b.firstSince(i); ok {
					got = append(got, t.Sub(at))
				}
			}
			if len(got) == len(moved) || time.Now().After(limit) {
				break
			}
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return failoverResult{}, err
			}
		}
		p := percentiles(got)
		e.logf("failover: kill %d of %s (%d targets): p50 %.0f ms, max %.0f ms, %d not probed again within %v",
			k+1, c.ids[victim], len(moved), p.P50, p.Max, len(moved)-len(got), 3*ttl+10*time.Second)
		res.PerKill = append(res.PerKill, failoverKill{Replica: c.ids[victim], Targets: len(moved), Ms: p})
		res.Targets += len(moved)
		res.NotProbed += len(moved) - len(got)
		all = append(all, got...)
		if k+1 < e.cfg.kills {
			if err := c.start(ctx, victim, e.stderr); err != nil {
				return failoverResult{}, err
			}
			if err := c.waitBalanced(ctx, 4*ttl+30*time.Second); err != nil {
				return failoverResult{}, err
			}
		}
	}
	res.Ms = percentiles(all)
	if len(all) > 0 {
		res.MinMs = ms(slices.Min(all))
	}
	return res, nil
}

// waitProbed waits until each of the n targets of b has had a request
// since now.
func waitProbed(ctx context.Context, b *backend, n int, limit time.Duration) error {
	now := time.Now()
	for i := range n {
		b.markFrom(i, now)
	}
	deadline := now.Add(limit)
	for {
		missing := 0
		for i := range n {
			if _, ok := b.firstSince(i); !ok {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d targets not probed within %v", missing, n, limit)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}
