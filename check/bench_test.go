package check_test

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

// cpuTime is this process's user + system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCheck measures one check of each kind against targets served
// by another process: ns/op is the round trip, cpu-µs/op what this
// process spent on it (the checker, the kernel's work for its socket, the
// GC).
//
//	go test -run '^$' -bench Check -benchtime 2000x ./check
func BenchmarkCheck(b *testing.B) {
	r := startRemote(b)
	for _, tt := range r.kinds(b) {
		b.Run(tt.name, func(b *testing.B) {
			c, err := check.New(tt.opts).Open("target", probe.Readiness, tt.handler())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			benchChecks(b, func(ctx context.Context) bool { return c.Check(ctx).Result == probe.Success })
		})
	}
}

// benchChecks runs check b.N times, failing b on a failed check, and
// reports the process's CPU per check.
func benchChecks(b *testing.B, check func(context.Context) bool) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !check(ctx) { // warm: a kept connection is open
		b.Fatal("check failed")
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	for range b.N {
		if !check(ctx) {
			b.Fatal("check failed")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}

// BenchmarkIdleGRPCChannels measures what a kept gRPC connection costs
// while idle (after one check): goroutines and bytes of heap and stacks
// per connection. Each of the checkers has a Set of its own, so that
// each keeps a connection (the checkers of one Set share one per
// address). With a channel per check a checker holds none of it.
//
//	go test -run '^$' -bench IdleGRPC -benchtime 1x ./check
func BenchmarkIdleGRPCChannels(b *testing.B) {
	r := startRemote(b)
	host, port := hostPort(b, r.GRPC)
	const conns = 1000
	for range b.N {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		g0 := runtime.NumGoroutine()
		cs := make([]engine.Checker, conns)
		for i := range cs {
			c, err := check.New(check.Options{}).Open("target", probe.Readiness, probe.Handler{GRPC: &probe.GRPC{Host: host, Port: port}})
			if err != nil {
				b.Fatal(err)
			}
			cs[i] = c
			if out := c.Check(context.Background()); out.Result != probe.Success {
				b.Fatalf("check %d: %q", i, out.Message)
			}
		}
		// Settle: each connection's background goroutines (the transport's
		// reader, keepalive) start asynchronously and signal nothing; a
		// second is far more than they take, and this is a benchmark's
		// figure, not an assertion.
		time.Sleep(time.Second)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		g1 := runtime.NumGoroutine()
		b.ReportMetric(float64(g1-g0)/conns, "goroutines/conn")
		b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/conns, "heap-B/conn")
		b.ReportMetric(float64(int64(m1.StackInuse)-int64(m0.StackInuse))/conns, "stack-B/conn")
		for _, c := range cs {
			c.Close()
		}
	}
}
