package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	probev1 "github.com/probed/probed/proto/probe/v1"
	"github.com/probed/probed/server"
	"github.com/probed/probed/store/bolt"
)

// BenchmarkCalls measures what the server spends per call of GetTarget
// (a random registered target), ListTargets (a page of 100 from the middle
// of the registry) and CreateTarget (50 at a time, as ghz -c 50 calls):
// the handler, the engine and the encoding of the response (its generated
// MarshalVT, as the server's codec does), on a bbolt store, without the transport (which
// `probed-bench api` measures with it). The registry holds 2,000 targets
// (PROBED_API_TARGETS to change), each with one TCP readiness probe whose
// initial delay outlasts the benchmark. Besides ns/op it reports
// cpu-µs/op, the process's CPU time (getrusage: every goroutine, the
// committer's and the collector's included) per call.
//
//	go test -run '^$' -bench Calls -benchtime 20000x ./server
func BenchmarkCalls(b *testing.B) {
	n := 2000
	if s := os.Getenv("PROBED_API_TARGETS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 200 {
			b.Fatalf("PROBED_API_TARGETS=%q: want a number of at least 200", s)
		}
	}
	srv := benchServer(b, n)
	ctx := context.Background()
	b.Run("GetTarget", func(b *testing.B) {
		reqs := make([]*probev1.GetTargetRequest, 1024)
		for i := range reqs {
			reqs[i] = &probev1.GetTargetRequest{Name: benchTarget(i * 7919 % n).GetName()}
		}
		cpu := startCPU(b)
		i := 0
		for b.Loop() {
			resp, err := srv.GetTarget(ctx, reqs[i%len(reqs)])
			if err != nil {
				b.Fatal(err)
			}
			encode(b, resp)
			i++
		}
		cpu.report(b)
	})
	b.Run("ListTargets", func(b *testing.B) {
		token := base64.RawURLEncoding.EncodeToString([]byte("after:" + benchTarget(n/2-1).GetName()))
		req := &probev1.ListTargetsRequest{PageSize: 100, PageToken: token}
		cpu := startCPU(b)
		for b.Loop() {
			resp, err := srv.ListTargets(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if len(resp.GetTargets()) != 100 {
				b.Fatalf("a page of %d targets, want 100", len(resp.GetTargets()))
			}
			encode(b, resp)
		}
		cpu.report(b)
	})
	var next atomic.Int64 // names stay new across the runs of the sub-benchmark
	b.Run("CreateTarget", func(b *testing.B) {
		b.SetParallelism(max(1, 50/runtime.GOMAXPROCS(0)))
		cpu := startCPU(b)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1)
				t := benchTarget(int(i))
				t.Name = fmt.Sprintf("new-%08d", i)
				resp, err := srv.CreateTarget(ctx, &probev1.CreateTargetRequest{Target: t})
				if err != nil {
					b.Fatal(err)
				}
				encode(b, resp)
			}
		})
		cpu.report(b)
	})
}

// benchServer returns a server over an engine on a bbolt store holding n
// targets (benchTarget).
func benchServer(b *testing.B, n int) *server.Server {
	b.Helper()
	st, err := bolt.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, engine.Options{Store: st, Checkers: check.New(check.Options{})})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		if err := st.Close(); err != nil {
			b.Error(err)
		}
	})
	srv := server.New(eng, server.Options{})
	var wg sync.WaitGroup
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				if _, err := srv.CreateTarget(ctx, &probev1.CreateTargetRequest{Target: benchTarget(i)}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return srv
}

// benchTarget is the i-th target of the benchmark's registry: labelled,
// with one TCP readiness probe that does not run for an hour.
func benchTarget(i int) *probev1.Target {
	return &probev1.Target{Name: fmt.Sprintf("api-%06d", i), Labels: map[string]string{"app": "api-bench"}, ReadinessProbe: &probev1.Probe{
		Handler:             &probev1.Probe_TcpSocket{TcpSocket: &probev1.TCPSocketAction{Host: "127.0.0.1", Port: 1}},
		InitialDelaySeconds: 3600, PeriodSeconds: 10,
	}}
}

// encode encodes m as the server's codec does: by its generated code
// (every probe.v1 message has it).
func encode(b *testing.B, m proto.Message) {
	g, ok := m.(interface{ MarshalVT() ([]byte, error) })
	if !ok {
		b.Fatalf("%T has no generated marshalling code", m)
	}
	if _, err := g.MarshalVT(); err != nil {
		b.Fatal(err)
	}
}

// cpuTimer reports the process's CPU time per operation.
type cpuTimer struct{ start time.Duration }

func startCPU(b *testing.B) *cpuTimer {
	b.Helper()
	return &cpuTimer{start: processCPU(b)}
}

func (c *cpuTimer) report(b *testing.B) {
	b.Helper()
	if b.N > 0 {
		b.ReportMetric(float64((processCPU(b)-c.start).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

// processCPU returns the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
