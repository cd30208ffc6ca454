package engine_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/poll"
	"github.com/probed/probed/store/bolt"
)

// BenchmarkHeapPerTarget measures the live heap an engine holds per
// registered target (after a GC), in the mix of probed-bench scale without
// its kept-alive connections: half TCP, half HTTP (disableKeepAlive), one
// readiness probe each, every 60 s, on a bbolt store as probed runs it
// (PROBED_HEAP_TCP=1: every target TCP). Each target is probed once (a
// transition to SUCCESS: the view holds the transition's target and the
// history the CREATED one) before the heap is measured; then the engine
// is stopped and another one opened on the same store (a restart), and the
// heap is measured again once it has taken every target in hand. The
// sizes are 1,000 and 10,000 targets, or those of PROBED_HEAP_TARGETS
// (comma separated, e.g. 100000); run it with -benchtime=1x.
// PROBED_HEAP_PROFILE=PREFIX writes heap profiles of the engine holding
// them to PREFIX-N.pb.gz and, after the restart, PREFIX-N-restarted.pb.gz
// (-test.memprofilerate=4096 for finer ones). It reports heap-B/target
// (HeapAlloc) and inuse-B/target (HeapInuse), and the same after the
// restart (restarted-heap-B/target, restarted-inuse-B/target).
func BenchmarkHeapPerTarget(b *testing.B) {
	for _, n := range targetCounts(b, "PROBED_HEAP_TARGETS") {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			for range b.N {
				fresh, restarted := heapPerTarget(b, n, os.Getenv("PROBED_HEAP_TCP") == "1")
				b.ReportMetric(fresh.alloc, "heap-B/target")
				b.ReportMetric(fresh.inuse, "inuse-B/target")
				b.ReportMetric(restarted.alloc, "restarted-heap-B/target")
				b.ReportMetric(restarted.inuse, "restarted-inuse-B/target")
			}
		})
	}
}

// heapUse is the heap allocated and in use per target.
type heapUse struct{ alloc, inuse float64 }

// heapPerTarget runs an engine with n targets (every one TCP when tcpOnly)
// and returns the heap per target above the engine's before any target,
// then the same of another engine opened on the same store.
func heapPerTarget(b *testing.B, n int, tcpOnly bool) (fresh, restarted heapUse) {
	b.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer tcp.Close()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	tcpPort := int32(tcp.Addr().(*net.TCPAddr).Port)
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	httpPort, _ := strconv.Atoi(p)

	dir := b.TempDir()
	before := heapNow()
	b.ResetTimer()
	ctx := context.Background()
	eng, stop := runHeapEngine(b, dir)
	// 64 creates at a time, as probed-bench scale registers (the
	// committer writes them in batches: one fsync each).
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, 1)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				h := probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: tcpPort}}
				if i%2 == 1 && !tcpOnly {
					h = probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: int32(httpPort), Path: "/healthz", DisableKeepAlive: true}}
				}
				spec := &target.Spec{Name: fmt.Sprintf("target-%06d", i), ReadinessProbe: &probe.Spec{Handler: h, PeriodSeconds: 60, TimeoutSeconds: 10}}
				if _, err := eng.Create(ctx, spec); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	// Every target's first probe publishes its transition to SUCCESS.
	awaitReady(b, eng, n)
	b.StopTimer()
	fresh = heapAbove(before, heapNow(), n)
	if path := os.Getenv("PROBED_HEAP_PROFILE"); path != "" {
		writeHeapProfile(b, fmt.Sprintf("%s-%d.pb.gz", path, n))
	}
	runtime.KeepAlive(eng)
	stop()
	eng = nil

	before = heapNow()
	b.StartTimer()
	eng, stop = runHeapEngine(b, dir)
	defer stop()
	<-eng.Running()
	awaitReady(b, eng, n)
	b.StopTimer()
	restarted = heapAbove(before, heapNow(), n)
	if path := os.Getenv("PROBED_HEAP_PROFILE"); path != "" {
		writeHeapProfile(b, fmt.Sprintf("%s-%d-restarted.pb.gz", path, n))
	}
	runtime.KeepAlive(eng)
	return fresh, restarted
}

// runHeapEngine opens a bbolt store in dir and runs an engine on it; stop
// stops both.
func runHeapEngine(b *testing.B, dir string) (eng *engine.Engine, stop func()) {
	b.Helper()
	st, err := bolt.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	eng, err = engine.Open(ctx, engine.Options{Store: st, Checkers: check.New(check.Options{})})
	if err != nil {
		cancel()
		st.Close()
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	return eng, func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		if err := st.Close(); err != nil {
			b.Error(err)
		}
	}
}

// awaitReady waits until eng's n targets are ready and no probe is in
// progress (what a run holds is not the targets').
func awaitReady(b *testing.B, eng *engine.Engine, n int) {
	b.Helper()
	ctx := context.Background()
	// Every target's first probe publishes its transition to SUCCESS.
	poll.Every(100*time.Millisecond).UntilMet(b, "every target ready", time.Duration(n/100+30)*time.Second, func() string {
		ready, after := 0, ""
		for {
			ts, more, err := eng.List(ctx, engine.ListOptions{After: after, Limit: 1000})
			if err != nil {
				return err.Error()
			}
			for _, t := range ts {
				if t.Status.Ready() {
					ready++
				}
				after = t.Spec.Name
			}
			if !more {
				break
			}
		}
		if ready < n {
			return fmt.Sprintf("%d of %d targets ready", ready, n)
		}
		if in := eng.Stats().Inflight; in > 0 {
			return fmt.Sprintf("%d probes in progress", in)
		}
		return ""
	})
}

// heapAbove returns the heap of after above before, per target of n.
func heapAbove(before, after runtime.MemStats, n int) heapUse {
	return heapUse{
		alloc: (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n),
		inuse: (float64(after.HeapInuse) - float64(before.HeapInuse)) / float64(n),
	}
}

// writeHeapProfile writes the heap profile (as of the last GC) to path.
func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// targetCounts are the sizes a benchmark runs at: 1,000 and 10,000
// targets, or those of the environment variable env (comma separated,
// e.g. 100000).
func targetCounts(b *testing.B, env string) []int {
	b.Helper()
	s := os.Getenv(env)
	if s == "" {
		return []int{1000, 10_000}
	}
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			b.Fatalf("%s: %v", env, err)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// heapNow returns the memory statistics after a full collection.
func heapNow() runtime.MemStats {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m
}
