package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/check"
	"github.com/probed/probed/engine"
	"github.com/probed/probed/engine/target"
	"github.com/probed/probed/store/bolt"
)

// BenchmarkCreateOverBolt measures the engine's whole write path on one
// node: Creates from 64 goroutines at once, each returning once its
// target is durable in bbolt (group commit: one fsync per batch) and
// published. One op is one Create; it reports creates/s and the mean
// latency of a Create (ms/create).
func BenchmarkCreateOverBolt(b *testing.B) {
	store, err := bolt.Open(filepath.Join(b.TempDir(), "data"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, engine.Options{
		Clock:    clockwork.NewFakeClock(),
		Store:    store,
		Checkers: check.New(check.Options{}),
		Shards:   1,
	})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	<-eng.Running()
	var n, waited atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("bench-%d", n.Add(1))
			start := time.Now()
			if _, err := eng.Create(ctx, &target.Spec{Name: name}); err != nil {
				b.Error(err)
				return
			}
			waited.Add(int64(time.Since(start)))
		}
	})
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "creates/s")
	b.ReportMetric(float64(waited.Load())/float64(n.Load())/1e6, "ms/create")
}
