//go:build unix

package wheel_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/probed/probed/engine/wheel"
)

// BenchmarkTimeoutPerFire is a probe's use of the wheel on the real clock:
// one item fires every 5ms, and each fire arms a one-shot timer of 1ms
// (the probe's timeout, due before the next fire) on another goroutine,
// which stops it at once (the probe returned). An op is one fire, so
// -benchtime 200x runs for about a second. It reports the process's CPU
// per fire (user + sys) and the driver's wake-ups per fire.
func BenchmarkTimeoutPerFire(b *testing.B) {
	var (
		fired  atomic.Int64
		target atomic.Int64
		done   = make(chan struct{})
		once   sync.Once
		runs   = make(chan struct{}, 1024)
		warm   = make(chan struct{}) // closed at the tenth fire: warmed up
	)
	target.Store(math.MaxInt64)
	w := wheel.New(clockwork.NewRealClock(), func(fs []wheel.Fire) {
		for range fs {
			n := fired.Add(1)
			if n == 10 {
				close(warm)
			}
			if n >= target.Load() {
				once.Do(func() { close(done) })
			}
			select {
			case runs <- struct{}{}:
			default:
			}
		}
	}, wheel.WithShards(1))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { _ = w.Run(ctx) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-runs:
				w.After(time.Millisecond, func() {}).Stop()
			}
		}
	})
	if err := w.Schedule(0, 0, time.Now(), 5*time.Millisecond); err != nil {
		b.Fatal(err)
	}
	<-warm
	s0, c0, f0 := w.Stats(), cpuTime(b), fired.Load()
	b.ResetTimer()
	target.Store(f0 + int64(b.N))
	<-done
	b.StopTimer()
	s1, c1, f1 := w.Stats(), cpuTime(b), fired.Load()
	fires := float64(f1 - f0)
	b.ReportMetric(float64((c1-c0).Nanoseconds())/fires/1e3, "cpu-µs/fire")
	b.ReportMetric(float64(s1.Wakes-s0.Wakes)/fires, "wakes/fire")
}

// cpuTime returns the CPU time (user + sys) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
