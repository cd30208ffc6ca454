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
	"github.com/probed/probed/store/bolt"
)

// BenchmarkTakeover measures what a replica does when the stream brings a
// claim of shards holding n targets (replica.Binding's gain, on the
// store's follow goroutine, which publishes nothing else meanwhile): the
// registry scanned for the shards' names (Names), then Own of every one
// (checkers opened, first probes scheduled, spread over one period). Its
// time per op is the Watch delay a takeover of n targets causes. The
// targets have a TCP readiness probe every 60 s; between ops they are
// disowned (not timed). Sizes 1,000 and 10,000, or PROBED_TAKEOVER_TARGETS
// (comma separated, e.g. 100000). It reports ns/target.
func BenchmarkTakeover(b *testing.B) {
	for _, n := range targetCounts(b, "PROBED_TAKEOVER_TARGETS") {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			eng, names := takeoverEngine(b, n)
			ctx := b.Context()
			all := func(string) bool { return true }
			b.ResetTimer()
			for range b.N {
				if err := eng.Own(ctx, eng.Names(all)...); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := eng.Disown(ctx, names...); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/target")
		})
	}
}

// takeoverEngine runs an engine over bbolt with n registered targets it
// does not own (its Owns says no: another replica's), as a replica holds
// the targets of shards it may gain.
func takeoverEngine(b *testing.B, n int) (*engine.Engine, []string) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	st, err := bolt.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, engine.Options{
		Store: st, Checkers: check.New(check.Options{}),
		Owns: func(string) bool { return false },
	})
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
	names := make([]string, n)
	const perSet = 20_000 // Apply's bound
	for first := 0; first < n; first += perSet {
		set := engine.ApplySet{Owner: fmt.Sprintf("bench-%d", first/perSet)}
		for i := first; i < min(first+perSet, n); i++ {
			names[i] = fmt.Sprintf("target-%06d", i)
			set.Targets = append(set.Targets, &target.Spec{Name: names[i], ReadinessProbe: &probe.Spec{
				Handler:       probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: port}},
				PeriodSeconds: 60, TimeoutSeconds: 10,
			}})
		}
		if _, err := eng.Apply(actx, set); err != nil {
			b.Fatal(err)
		}
	}
	if err := eng.Disown(actx, names...); err != nil {
		b.Fatal(err)
	}
	return eng, names
}
