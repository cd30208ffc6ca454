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
	"testing"
	"time"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/bolt"
)

// BenchmarkHeapPerTarget measures the live heap an engine holds per
// registered target (after a GC), in the mix of probed-bench scale without
// its kept-alive connections: half TCP, half HTTP (disableKeepAlive), one
// readiness probe each, every 60 s, on a bbolt store as probed runs it.
// Each target is probed once (a transition to SUCCESS: the view holds the
// transition's target and the history the CREATED one) before the heap is
// measured. The sizes are 1,000 and 10,000 targets, or those of
// PROBED_HEAP_TARGETS (comma separated, e.g. 100000); run it with
// -benchtime=1x. PROBED_HEAP_PROFILE=PREFIX writes a heap profile of the
// engine holding them to PREFIX-N.pb.gz (-test.memprofilerate=4096 for a
// finer one). It reports heap-B/target (HeapAlloc) and
// inuse-B/target (HeapInuse).
func BenchmarkHeapPerTarget(b *testing.B) {
	for _, n := range targetCounts(b, "PROBED_HEAP_TARGETS") {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			for range b.N {
				alloc, inuse := heapPerTarget(b, n)
				b.ReportMetric(alloc, "heap-B/target")
				b.ReportMetric(inuse, "inuse-B/target")
			}
		})
	}
}

// heapPerTarget runs an engine with n targets and returns the heap
// allocated and in use per target, above the engine's before any target.
func heapPerTarget(b *testing.B, n int) (alloc, inuse float64) {
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

	st, err := bolt.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eng, err := engine.Open(ctx, engine.Options{Store: st, Checkers: check.New(check.Options{})})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	before := heapNow()
	b.ResetTimer()
	for i := range n {
		h := probe.Handler{TCPSocket: &probe.TCPSocket{Host: "127.0.0.1", Port: tcpPort}}
		if i%2 == 1 {
			h = probe.Handler{HTTPGet: &probe.HTTPGet{Host: "127.0.0.1", Port: int32(httpPort), Path: "/healthz", DisableKeepAlive: true}}
		}
		spec := &target.Spec{Name: fmt.Sprintf("target-%06d", i), ReadinessProbe: &probe.Spec{Handler: h, PeriodSeconds: 60, TimeoutSeconds: 10}}
		if _, err := eng.Create(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	// Every target's first probe publishes its transition to SUCCESS.
	deadline := time.Now().Add(time.Duration(n/100+30) * time.Second)
	for {
		ready, after := 0, ""
		for {
			ts, more, err := eng.List(ctx, engine.ListOptions{After: after, Limit: 1000})
			if err != nil {
				b.Fatal(err)
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
		if ready == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d targets ready", ready, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	after := heapNow()
	if path := os.Getenv("PROBED_HEAP_PROFILE"); path != "" {
		writeHeapProfile(b, fmt.Sprintf("%s-%d.pb.gz", path, n))
	}
	runtime.KeepAlive(eng)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n), float64(after.HeapInuse-before.HeapInuse) / float64(n)
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
