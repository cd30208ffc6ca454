package main

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Usage is a snapshot of the resources this process has used so far.
type Usage struct {
	User, System time.Duration // CPU time
	MaxRSS       int64         // peak resident set size, in bytes
}

// ReadUsage returns the resource usage of this process (getrusage
// RUSAGE_SELF: every thread, including the Go runtime's).
func ReadUsage() (Usage, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Usage{}, err
	}
	maxRSS := ru.Maxrss * 1024 // kilobytes on Linux
	if runtime.GOOS == "darwin" {
		maxRSS = ru.Maxrss // bytes
	}
	return Usage{
		User:   time.Duration(ru.Utime.Nano()),
		System: time.Duration(ru.Stime.Nano()),
		MaxRSS: maxRSS,
	}, nil
}

// CPU returns the total CPU time, user plus system.
func (u Usage) CPU() time.Duration { return u.User + u.System }

// CPUSince returns the CPU time used between the snapshot before and u.
func (u Usage) CPUSince(before Usage) time.Duration { return u.CPU() - before.CPU() }

// samplePeak calls f every interval until stop is called. peak returns the
// largest value seen so far (f is also called once at the start and once by
// each call of peak) without waiting for the sampler, which matters in an
// overloaded process where a goroutine can wait seconds for a thread; stop
// ends the sampler and waits for it.
func samplePeak(interval time.Duration, f func() int64) (peak func() int64, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var max atomic.Int64
	observe := func() int64 {
		v := f()
		for {
			m := max.Load()
			if v <= m || max.CompareAndSwap(m, v) {
				return max.Load()
			}
		}
	}
	observe()
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				observe()
			}
		}
	})
	return observe, func() { cancel(); wg.Wait() }
}
