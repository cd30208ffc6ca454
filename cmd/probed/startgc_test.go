package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestStartupGC(t *testing.T) { // not parallel: GOGC is the process's
	for _, tt := range []struct {
		name       string
		gogc, want int // want: GOGC while starting
	}{
		{"default", 100, 400},
		{"set", 50, 200},
		{"off", -1, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer debug.SetGCPercent(debug.SetGCPercent(tt.gogc))
			end := startupGC()
			if got := debug.SetGCPercent(tt.want); got != tt.want {
				t.Errorf("GOGC while starting = %d, want %d", got, tt.want)
			}
			end()
			end() // a second call changes nothing
			if got := debug.SetGCPercent(tt.gogc); got != tt.gogc {
				t.Errorf("GOGC after the start = %d, want %d back", got, tt.gogc)
			}
		})
	}
}

// TestStartupHeapReleased checks that the garbage of a start is returned
// to the operating system once it is over, not left to the background
// scavenger: the heap the process retains (in use or idle, not released)
// is back near its live size.
func TestStartupHeapReleased(t *testing.T) { // not parallel: GOGC and the heap are the process's
	end := startupGC()
	garbage := make([][]byte, 0, 256)
	for range cap(garbage) {
		garbage = append(garbage, make([]byte, 256<<10)) // 64 MiB in all
	}
	runtime.KeepAlive(garbage) // garbage is dead from here: the start's garbage
	end()
	releaseStartupHeap()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if retained := m.HeapInuse + m.HeapIdle - m.HeapReleased; retained > 32<<20 {
		t.Errorf("after the start, the heap retains %d MiB (in use %d MiB, idle %d MiB, released %d MiB), want less than 32 MiB of the 64 MiB of garbage",
			retained>>20, m.HeapInuse>>20, m.HeapIdle>>20, m.HeapReleased>>20)
	}
}
