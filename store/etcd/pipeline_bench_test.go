package etcd_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/internal/etcdtest"
	"github.com/probed/probed/store/etcd"
)

// BenchmarkCommitsInFlight measures an engine's writes over a real etcd
// (one member, on this host), fsyncing as production etcd does (fsync),
// the same reached with 2 ms more per request (fsync+rtt=2ms: an etcd
// across a network), and not fsyncing (nofsync, as the tests run it), with one Commit in flight at a
// time and with several (engine.Options.CommitsInFlight), side by side:
// Creates from 256 goroutines at once (each returning once its target is
// published: creates/s), and readiness transitions, each of 256
// goroutines triggering the probe of a target of its own whose endpoint
// answers 200 and 500 in turn, so that each run is a transition written
// and published before the trigger returns (transitions/s). 256 callers
// keep about four of etcd's batches (63 changes) pending.
func BenchmarkCommitsInFlight(b *testing.B) {
	runs := 0
	fsyncing := startEtcd(b)
	for _, env := range []string{"fsync", "fsync+rtt=2ms", "nofsync"} {
		cli := fsyncing
		switch env {
		case "fsync+rtt=2ms":
			cli = delayedClient(b, fsyncing.Endpoints(), time.Millisecond)
		case "nofsync":
			cli = etcdtest.Start(b).Client(b)
		}
		name := env
		for _, kind := range []string{"creates", "transitions"} {
			for _, inFlight := range []int{1, engine.DefaultCommitsInFlight} {
				b.Run(fmt.Sprintf("%s/%s/in-flight=%d", name, kind, inFlight), func(b *testing.B) {
					runs++ // a prefix per run: -count runs again on the same etcd
					eng := benchEngine(b, cli, fmt.Sprintf("/bench-%d/", runs), inFlight)
					if kind == "creates" {
						benchCreates(b, eng)
					} else {
						benchTransitions(b, eng)
					}
				})
			}
		}
	}
}

// delayedClient is a client of endpoints whose every request waits
// delay before it is sent and after it is answered: a round trip of 2 ×
// delay to an etcd elsewhere on the network (the watch is not delayed).
func delayedClient(b *testing.B, endpoints []string, delay time.Duration) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				time.Sleep(delay) // the network's latency, simulated: real time is the point
				err := invoker(ctx, method, req, reply, cc, opts...)
				time.Sleep(delay)
				return err
			}),
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

// callers is how many goroutines call the engine at once.
const callers = 256

// benchEngine runs an engine over an etcd store under prefix until b ends.
func benchEngine(b *testing.B, cli *clientv3.Client, prefix string, inFlight int) *engine.Engine {
	s := open(b, cli, etcd.Options{Prefix: prefix, ReplicaID: "bench"})
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, engine.Options{
		Clock: clockwork.NewFakeClock(), Store: s, Checkers: check.New(check.Options{}),
		Shards: 1, CommitsInFlight: inFlight,
		// No probe runs on its own (their endpoints are not there);
		// triggers still run.
		MayProbe: func() bool { return false },
	})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	<-eng.Running()
	return eng
}

func benchCreates(b *testing.B, eng *engine.Engine) {
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := eng.Create(ctx, typicalSpec(fmt.Sprintf("bench-%d", n.Add(1)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "creates/s")
	reportBatches(b, eng)
}

func benchTransitions(b *testing.B, eng *engine.Engine) {
	ctx := context.Background()
	var mu sync.Mutex
	answered := make(map[string]int) // requests per path; guarded by mu
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		answered[r.URL.Path]++
		n := answered[r.URL.Path]
		mu.Unlock()
		if n%2 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	b.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	targets := max(1, callers/runtime.GOMAXPROCS(0)) * runtime.GOMAXPROCS(0)
	for i := range targets {
		name := fmt.Sprintf("flip-%03d", i)
		spec := &target.Spec{Name: name, ReadinessProbe: &probe.Spec{
			Handler:       probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: int32(p), Path: "/" + name}},
			PeriodSeconds: 3600, FailureThreshold: 1,
		}}
		if _, err := eng.Create(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	before := eng.Stats().Changes
	b.SetParallelism(targets / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprintf("flip-%03d", (next.Add(1)-1)%int64(targets))
		for pb.Next() {
			if _, _, err := eng.Trigger(ctx, name, probe.Readiness); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(eng.Stats().Changes-before)/b.Elapsed().Seconds(), "transitions/s")
	reportBatches(b, eng)
}

// reportBatches reports the changes per Commit.
func reportBatches(b *testing.B, eng *engine.Engine) {
	st := eng.Stats()
	b.ReportMetric(float64(st.Changes)/float64(max(st.Commits, 1)), "changes/commit")
}
