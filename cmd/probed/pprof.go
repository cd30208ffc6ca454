package main

import (
	"net/http"
	"net/http/pprof"
)

// pprofPath is where --pprof serves the Go runtime's profiles, on the
// metrics listener.
const pprofPath = "/debug/pprof/"

// handlePprof serves net/http/pprof under pprofPath on mux, every handler
// wrapped by protect (the API's authentication, as /metrics is): the index
// and the named profiles (heap, allocs, goroutine, threadcreate, block,
// mutex), a CPU profile (profile?seconds=N), an execution trace
// (trace?seconds=N), the command line and symbol lookup. Block and mutex
// profiles stay empty: their sampling rates are left at 0, which costs
// nothing.
func handlePprof(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	handlers := map[string]http.HandlerFunc{
		"":        pprof.Index, // also serves the named profiles
		"cmdline": pprof.Cmdline,
		"profile": pprof.Profile,
		"symbol":  pprof.Symbol,
		"trace":   pprof.Trace,
	}
	for name, h := range handlers {
		mux.Handle(pprofPath+name, protect(h))
	}
}
