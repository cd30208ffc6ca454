package check_test

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/probed/probed/check"
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
	// What a probe kept its gRPC channel for, before: one health call on a
	// ready channel (the dial-time options of the checker).
	b.Run("gRPC kept channel", func(b *testing.B) {
		conn, err := grpc.NewClient(r.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		h := healthpb.NewHealthClient(conn)
		benchChecks(b, func(ctx context.Context) bool {
			resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
			return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
		})
	})
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

// BenchmarkIdleGRPCChannels measures what keeping a gRPC channel per
// target costs while idle (after one health call each): goroutines and
// bytes of heap and stacks per target. A checker that opens its channel
// per check holds none of it.
//
//	go test -run '^$' -bench IdleGRPC -benchtime 1x ./check
func BenchmarkIdleGRPCChannels(b *testing.B) {
	r := startRemote(b)
	const targets = 200
	for range b.N {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		g0 := runtime.NumGoroutine()
		conns := make([]*grpc.ClientConn, targets)
		for i := range conns {
			conn, err := grpc.NewClient(r.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
			if err != nil {
				b.Fatal(err)
			}
			conns[i] = conn
			if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(time.Second) // settle
		runtime.GC()
		runtime.ReadMemStats(&m1)
		g1 := runtime.NumGoroutine()
		b.ReportMetric(float64(g1-g0)/targets, "goroutines/target")
		b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/targets, "heap-B/target")
		b.ReportMetric(float64(int64(m1.StackInuse)-int64(m0.StackInuse))/targets, "stack-B/target")
		for _, c := range conns {
			_ = c.Close()
		}
	}
}
