package main

import (
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
