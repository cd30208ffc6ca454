package main

import (
	"runtime/debug"
	"sync"
)

// startupGCFactor multiplies GOGC while probed starts.
const startupGCFactor = 4

// startupGC makes the garbage collector run startupGCFactor times less
// often (GOGC × 4, 400 by default) and returns the function that puts GOGC
// back, which may be called more than once. A restart decodes every stored
// target and event and opens a checker for each: the live heap grows from
// nothing to its working size (~250 MB at 100,000 targets), and with the
// default GOGC the collector marks it again each time it has doubled,
// about a quarter of the CPU of a restart. GOGC=off (negative) is left
// as it is; GOMEMLIMIT still applies.
func startupGC() (end func()) {
	old := debug.SetGCPercent(-1)
	if old < 0 {
		return func() {}
	}
	debug.SetGCPercent(old * startupGCFactor)
	return sync.OnceFunc(func() { debug.SetGCPercent(old) })
}

// releaseStartupHeap collects the garbage of the start and returns the
// free heap to the operating system at once (debug.FreeOSMemory): a
// restart decodes ~2 KB per target it does not keep, and with GOGC × 4
// the heap peaks at several times its working size (510–600 MiB at
// 100,000 targets, for ~150 MB live). The runtime's background scavenger
// gives such pages back at ~1% of a CPU, so minutes after a restart
// probed still held ~100 MB more than after registering the same targets.
// Call it once the start is over (after the end of startupGC); it costs
// one collection of the live heap.
func releaseStartupHeap() { debug.FreeOSMemory() }
