package etcd_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/probe"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/etcd"
)

// BenchmarkCommitsInFlight measures an engine's writes over a real etcd
// that fsyncs (one member, on this host) with one Commit in flight at a
// time and with several (engine.Options.CommitsInFlight), side by side:
// Creates from 64 goroutines at once (each returning once its target is
// published: creates/s), and readiness transitions, each of 64 goroutines
// triggering the probe of a target of its own whose endpoint answers 200
// and 500 in turn, so that each run is a transition written and published
// before the trigger returns (transitions/s).
func BenchmarkCommitsInFlight(b *testing.B) {
	cli := startEtcd(b)
	runs := 0
	for _, kind := range []string{"creates", "transitions"} {
		for _, inFlight := range []int{1, engine.DefaultCommitsInFlight} {
			b.Run(fmt.Sprintf("%s/in-flight=%d", kind, inFlight), func(b *testing.B) {
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

// benchEngine runs an engine over an etcd store under prefix until b ends.
func benchEngine(b *testing.B, cli *clientv3.Client, prefix string, inFlight int) *engine.Engine {
	s := open(b, cli, etcd.Options{Prefix: prefix, ReplicaID: "bench"})
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, engine.Options{
		Clock: clockwork.NewFakeClock(), Store: s, Checkers: check.New(check.Options{}),
		Shards: 1, CommitsInFlight: inFlight,
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
	b.SetParallelism(32)
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
	const targets = 64
	hour := int32(3_600_000)
	for i := range targets {
		name := fmt.Sprintf("flip-%02d", i)
		spec := &target.Spec{Name: name, ReadinessProbe: &probe.Spec{
			Handler:            probe.Handler{HTTPGet: &probe.HTTPGet{Host: host, Port: int32(p), Path: "/" + name}},
			PeriodMilliseconds: &hour, FailureThreshold: 1,
		}}
		if _, err := eng.Create(ctx, spec); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	before := eng.Stats().Changes
	b.SetParallelism(targets / 2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprintf("flip-%02d", (next.Add(1)-1)%targets)
		for pb.Next() {
			if _, _, err := eng.Trigger(ctx, name, probe.Readiness); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(eng.Stats().Changes-before)/b.Elapsed().Seconds(), "transitions/s")
}
