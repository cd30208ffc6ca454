package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/client"
	"github.com/probed/probed/internal/poll"
	probev1 "github.com/probed/probed/proto/probe/v1"
)

// TestXDSRollingRestart measures a drain: a rolling restart of a
// 100-endpoint service (PROBED_XDS_BENCH_ENDPOINTS) under about 1,000
// RPC/s (PROBED_XDS_BENCH_RATE) through a real grpc-go xds:/// client.
// Ten at a time, as a Deployment with maxSurge 10 would: ten new backends
// start and their targets are created (a 50 ms gRPC probe); once the
// client sends RPCs to all ten, the ten oldest targets are deleted, each
// going through a 2 s preStop sleep; the moment a deleted target is gone
// (its preStop over: the Watch's DELETED event) its backend stops at once,
// failing any RPC still in flight on it, as a pod killed after its preStop.
// No RPC may fail; it reports the time from each deletion to the last RPC
// that backend served (it must be well inside the preStop), and the
// rollout's length.
func TestXDSRollingRestart(t *testing.T) {
	if os.Getenv(xdsBenchEnv) == "" {
		t.Skipf("a benchmark: set %s=1 (BENCHMARKS.md)", xdsBenchEnv)
	}
	endpoints, rate := benchInt("PROBED_XDS_BENCH_ENDPOINTS", 100), benchInt("PROBED_XDS_BENCH_RATE", 1000)
	const (
		surge   = 10
		preStop = 2 // seconds
	)
	bin := buildProbed(t)
	p := startXDSProbed(t, bin, t.TempDir(), "--log-level", "warn")
	b := startGRPCBackends(t, endpoints)
	c := dialProbedClient(t, p.addr())
	ctx := t.Context()
	create := func(i int) {
		t.Helper()
		tg := b.target("ns", "svc", i, 50*time.Millisecond)
		tg.Lifecycle.PreStop.Action = &probev1.LifecycleHandler_Sleep{Sleep: &probev1.SleepAction{Seconds: preStop}}
		if _, err := c.Create(ctx, tg); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, endpoints)
	for i := range endpoints {
		create(i)
		names[i] = "b" + strconv.Itoa(i)
	}
	x := startXDSClient(t, p.xdsAddr, "xds:///svc.ns", rate)
	start := time.Now()
	x.waitServed(t, start, names...)

	// A deleted target's backend stops the moment the target is gone.
	var mu sync.Mutex
	deletedAt := map[int]time.Time{}
	gone := map[int]time.Time{}
	var watching sync.WaitGroup
	defer watching.Wait()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events := c.Watch(wctx, client.WithKinds(probev1.EventKind_EVENT_KIND_DELETED))
	watching.Go(func() {
		for resp := range events {
			for _, ev := range resp.Events {
				i, err := strconv.Atoi(strings.TrimPrefix(ev.GetName(), "ns/svc-"))
				if err != nil || resp.Snapshot {
					continue
				}
				b.stop(i)
				mu.Lock()
				gone[i] = time.Now()
				mu.Unlock()
			}
		}
	})

	measured := time.Now()
	for first := 0; first < endpoints; first += surge {
		var fresh []string
		for range surge {
			i := b.add()
			create(i)
			fresh = append(fresh, "b"+strconv.Itoa(i))
		}
		x.waitServed(t, time.Now(), fresh...)
		for i := first; i < min(first+surge, endpoints); i++ {
			mu.Lock()
			deletedAt[i] = time.Now()
			mu.Unlock()
			if _, err := c.Delete(ctx, fmt.Sprintf("ns/svc-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll.UntilMet(t, "every old target gone and its backend stopped", time.Minute, func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(gone) < endpoints {
			return fmt.Sprintf("%d of %d", len(gone), endpoints)
		}
		return ""
	})
	rollout := time.Since(measured)
	time.Sleep(time.Second) // RPCs still in flight to the last stopped backends end (a benchmark's pacing)
	stopWatch()

	rpcs := x.since(measured)
	last := map[string]time.Time{}
	for _, r := range rpcs {
		last[r.backend] = r.at
	}
	var lag, drained []time.Duration
	mu.Lock()
	for i := range endpoints {
		lag = append(lag, max(last["b"+strconv.Itoa(i)].Sub(deletedAt[i]), 0))
		drained = append(drained, gone[i].Sub(deletedAt[i]))
	}
	mu.Unlock()
	failed := x.failed(start)
	t.Logf("rolling restart of %d endpoints, %d at a time: %v", endpoints, surge, rollout.Round(time.Millisecond))
	t.Logf("deletion -> the last RPC its backend served: %s", percentiles(lag))
	t.Logf("deletion -> target gone, backend stopped (its %d s preStop): %s", preStop, percentiles(drained))
	t.Logf("%d RPCs in %v (%.0f/s), %d failed", len(rpcs), rollout.Round(time.Millisecond), float64(len(rpcs))/rollout.Seconds(), len(failed))
	if len(failed) > 0 {
		t.Errorf("%d RPCs failed, first %+v", len(failed), failed[0])
	}
	x.stop(t)
	x.checkXDSStates(t)
}
