package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"time"
)

// schedChildCommand is the hidden subcommand that runs one model of the
// sched benchmark and reports it as one JSON line.
const schedChildCommand = "sched-child"

// modelResult is what a child measures over its window, after the warm-up.
type modelResult struct {
	// WindowSeconds is the measured window as it happened: longer than
	// --duration when the model delays the timer that ends it.
	WindowSeconds  float64 `json:"window_seconds"`
	FiresExpected  int64   `json:"fires_expected"` // probes × whole periods in the window
	FiresDelivered int64   `json:"fires_delivered"`
	CPUSeconds     float64 `json:"cpu_seconds"` // user + sys of the whole child over the window
	SysSeconds     float64 `json:"sys_seconds"` // the sys part of CPUSeconds
	CPUNsPerFire   float64 `json:"cpu_ns_per_fire"`
	RSSBytes       int64   `json:"rss_bytes"`  // peak over the child's life
	Goroutines     int     `json:"goroutines"` // peak, sampled over the window
	LatenessMs     latency `json:"lateness_ms"`
	// StateBytesPerProbe is the growth of heap and goroutine stacks from
	// before the probes were created to the end of the warm-up, per probe.
	StateBytesPerProbe float64 `json:"state_bytes_per_probe"`
}

// latency summarises a Histogram in milliseconds.
type latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90,omitempty"` // set by percentiles only
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func (r modelResult) deliveredRatio() float64 {
	return ratio(float64(r.FiresDelivered), float64(r.FiresExpected))
}

// runSchedChild is the hidden child subcommand.
func runSchedChild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(schedChildCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg schedConfig
	cfg.register(fs)
	model := fs.String("model", "", fmt.Sprintf("model to run: one of %v", allModels()))
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured window to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.metrics && *model != "wheel" {
		return errMetricsModel
	}
	var profile io.Writer
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		profile = f
	}
	res, _, err := measureModel(ctx, *model, cfg, profile)
	if err != nil {
		return err
	}
	// The model is left running: this process exits as soon as the line is
	// out, and waiting for the baseline's 100,000 goroutines to stop, while
	// they keep every thread busy, can take minutes.
	return writeJSONLine(stdout, res)
}

// measureModel runs the named model with cfg in this process and measures
// it over cfg.duration after cfg.warmup, with a CPU profile of that window
// if profile is not nil. The model keeps running until the caller calls
// stop, which waits for everything the model started; on error, it is
// already stopped.
func measureModel(ctx context.Context, model string, cfg schedConfig, profile io.Writer) (_ modelResult, stop func(), err error) {
	m, ok := models[model]
	if !ok {
		return modelResult{}, nil, fmt.Errorf("unknown model %q, want one of %v", model, allModels())
	}
	rec := newRecorder()
	runtime.GC() // nothing runs yet: collect, so that base counts only live memory
	base := stateBytes()

	runCtx, cancel := context.WithCancel(ctx)
	wait, err := m.start(runCtx, cfg, rec)
	if err != nil {
		cancel()
		return modelResult{}, nil, err
	}
	stop = func() { cancel(); wait() }
	defer func() {
		if err != nil {
			stop()
		}
	}()

	if err := sleep(ctx, cfg.warmup); err != nil {
		return modelResult{}, nil, err
	}
	if !m.overloads {
		runtime.GC() // drop what setting up left behind
	}
	state := float64(stateBytes()-base) / float64(cfg.probes)

	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return modelResult{}, nil, err
		}
	}
	before, err := ReadUsage()
	if err != nil {
		return modelResult{}, nil, err
	}
	peakGoroutines, stopSampling := samplePeak(50*time.Millisecond, func() int64 { return int64(runtime.NumGoroutine()) })
	stopModel := stop
	stop = func() { stopSampling(); stopModel() }
	begin := time.Now()
	rec.on.Store(true)
	sleepErr := sleep(ctx, cfg.duration)
	rec.on.Store(false)
	window := time.Since(begin) // longer than cfg.duration when timers run late
	after, err := ReadUsage()
	// From here on, nothing may wait for another goroutine: under the
	// baseline's overload a woken goroutine can wait minutes for a thread.
	goroutines := peakGoroutines()
	if profile != nil {
		pprof.StopCPUProfile()
	}
	if sleepErr != nil {
		return modelResult{}, nil, sleepErr
	}
	if err != nil {
		return modelResult{}, nil, err
	}

	lateness := rec.merged()
	delivered := int64(lateness.Count())
	cpu := after.CPUSince(before)
	res := modelResult{
		WindowSeconds:  window.Seconds(),
		FiresExpected:  int64(cfg.probes) * int64(window/cfg.period),
		FiresDelivered: delivered,
		CPUSeconds:     cpu.Seconds(),
		SysSeconds:     (after.System - before.System).Seconds(),
		RSSBytes:       after.MaxRSS,
		Goroutines:     int(goroutines),
		LatenessMs: latency{
			P50: ms(lateness.Quantile(0.50)),
			P99: ms(lateness.Quantile(0.99)),
			Max: ms(lateness.Max()),
		},
		StateBytesPerProbe: state,
	}
	if delivered > 0 {
		res.CPUNsPerFire = float64(cpu.Nanoseconds()) / float64(delivered)
	}
	return res, stop, nil
}

// allModels returns the names of every model, sorted.
func allModels() []string {
	var names []string
	for name := range models {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// stateBytes returns the bytes of heap and goroutine stacks in use. It does
// not collect garbage first: under the baseline's overload, runtime.GC's
// sweep loop yields to the scheduler and can wait minutes to run again.
func stateBytes() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// recorder is the no-op probe body: it records the lateness of each fire
// while on is set. It is striped by probe id (a power of two of stripes, at
// least GOMAXPROCS) so that probes on different threads rarely share a
// cache line.
type recorder struct {
	on      atomic.Bool
	stripes []*Histogram
}

func newRecorder() *recorder {
	n := 1 << bits.Len(uint(runtime.GOMAXPROCS(0)-1))
	r := &recorder{stripes: make([]*Histogram, n)}
	for i := range r.stripes {
		r.stripes[i] = newLatenessHistogram()
	}
	return r
}

// newLatenessHistogram returns a histogram with 8.192µs resolution up to
// 2.1ms and 0.8% above, up to a minute.
func newLatenessHistogram() *Histogram { return NewHistogram(10*time.Microsecond, time.Minute) }

// record records one fire of probe id, late by late.
func (r *recorder) record(id int, late time.Duration) {
	if r.on.Load() {
		r.stripes[id&(len(r.stripes)-1)].Record(late)
	}
}

// merged returns all stripes merged into one histogram.
func (r *recorder) merged() *Histogram {
	h := newLatenessHistogram()
	for _, s := range r.stripes {
		h.Merge(s)
	}
	return h
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
