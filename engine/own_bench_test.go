package engine_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/memory"
)

// BenchmarkTakeover measures what a replica does when its store's log
// brings a claim of shards holding n targets: the follow loop applies the
// new ownership (the registry scanned for the shards' targets, each taken
// over: checker opened, runner made, first probe spread over one period)
// and only then publishes anything after it. Its time per op is the
// Watch delay a takeover of n targets causes: from the claim's entry in
// the log (memory.Shared's Assign) until the engine's view has reached
// the next entry (Sync). The targets have a TCP readiness probe every 60 s; between ops
// the shard is assigned away again (not timed). Sizes 1,000 and 10,000,
// or PROBED_TAKEOVER_TARGETS (comma separated, e.g. 100000). It reports
// ns/target.
func BenchmarkTakeover(b *testing.B) {
	for _, n := range targetCounts(b, "PROBED_TAKEOVER_TARGETS") {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			eng, shared := takeoverEngine(b, n)
			ctx := b.Context()
			b.ResetTimer()
			for range b.N {
				// The view reaches the claim's position, then the
				// engine takes the targets over: the next position's
				// delivery (a marker) waits for that.
				shared.Assign("bench", 0)
				if err := eng.Sync(ctx, shared.Assign("")); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if st := eng.Stats(); st.Wheel.Scheduled != n {
					b.Fatalf("%d probes scheduled after the takeover, want %d", st.Wheel.Scheduled, n)
				}
				shared.Assign("", 0)
				if err := eng.Sync(ctx, shared.Assign("")); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/target")
		})
	}
}

// takeoverEngine runs an engine over a shared store in memory with n
// registered targets in its one shard, which nobody owns yet: as a
// replica holds the targets of shards it may gain.
func takeoverEngine(b *testing.B, n int) (*engine.Engine, *memory.Shared) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	shared := memory.NewShared(1, 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, engine.Options{Store: shared.Replica("bench"), Checkers: check.New(check.Options{})})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	actx, acancel := context.WithTimeout(ctx, time.Duration(n/1000+30)*time.Second)
	defer acancel()
	const perSet = 20_000 // Apply's bound
	for first := 0; first < n; first += perSet {
		set := engine.ApplySet{Owner: fmt.Sprintf("bench-%d", first/perSet)}
		for i := first; i < min(first+perSet, n); i++ {
			set.Targets = append(set.Targets, &target.Spec{Name: fmt.Sprintf("target-%06d", i), ReadinessProbe: &probe.Spec{
				Handler:       probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: port}},
				PeriodSeconds: 60, TimeoutSeconds: 10,
			}})
		}
		if _, err := eng.Apply(actx, set); err != nil {
			b.Fatal(err)
		}
	}
	if st := eng.Stats(); st.Targets != n || st.Wheel.Scheduled != 0 {
		b.Fatalf("%d targets, %d probes scheduled; want %d targets, none probed", st.Targets, st.Wheel.Scheduled, n)
	}
	return eng, shared
}
