package check_test

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZGRPCCost(t *testing.T) {
	addr := os.Getenv("GRPC_COST_ADDR")
	if addr == "" {
		t.Skip()
	}
	host, port := hostPort(t, addr)
	const n = 1000
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	g0 := runtime.NumGoroutine()
	set := check.New(check.Options{})
	cs := make([]engine.Checker, n)
	for i := range cs {
		c, err := set.Open("t", probe.Readiness, probe.Handler{GRPC: &probe.GRPC{Host: host, Port: port}})
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	check1 := func() {
		for _, c := range cs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			out := c.Check(ctx)
			cancel()
			if out.Result != probe.Success {
				t.Fatal(out.Message)
			}
		}
	}
	check1()
	time.Sleep(2 * time.Second)
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	g1 := runtime.NumGoroutine()
	t.Logf("idle after one check each: goroutines %d -> %d (%.2f per target), heap %+.1f KB per target, stacks %+.1f KB per target",
		g0, g1, float64(g1-g0)/n, float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/n/1024, float64(int64(ms1.StackInuse)-int64(ms0.StackInuse))/n/1024)
	c0 := cpuNow()
	const rounds = 5
	for range rounds {
		check1()
	}
	c1 := cpuNow()
	t.Logf("CPU per check (sequential, %d checks): %.1f µs", rounds*n, float64((c1-c0).Microseconds())/rounds/n)
	for _, c := range cs {
		c.Close()
	}
}
